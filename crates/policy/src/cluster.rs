//! `Cluster`: a policy plus the nodes' status. It counts load where it changes (assign and
//! complete, never by scanning), tracks which nodes are up, and ramps a recovered node's
//! weight over the slow-start period. Pure: the caller passes `now` into every call.

use crate::Policy;
use locus_core::{NodeId, NodeReport, NodeStatus, RequestInfo, Time};
use std::time::Duration;

/// What [`Cluster::reconfigure`] did with the running policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reconfigured {
    /// Kept it, with its state (LARD's targets stay where they were).
    Kept,
    /// Built a new one: what the old one had learned is gone.
    Rebuilt,
}

/// Node status, load counts and a policy; the one place the switch and simulator ask "where
/// does this request go?".
pub struct Cluster {
    nodes: Vec<NodeStatus>,
    up_since: Vec<Option<Time>>,
    policy: Box<dyn Policy>,
    slow_start: Duration,
    in_flight: usize,
    /// Nodes still in slow start (`up_since` is `Some`), so `assign` skips the ramp update
    /// when there are none.
    warming: usize,
    /// Requests the policy was told of (`on_assign` calls), since the start.
    assignments: u64,
}

impl Cluster {
    /// `n` nodes with the given weights (missing weights default to 1), all up and idle.
    /// A node coming back after `set_up(.., false)` ramps up over `slow_start`.
    pub fn new(policy: Box<dyn Policy>, weights: &[u32], slow_start: Duration) -> Cluster {
        let nodes = weights
            .iter()
            .enumerate()
            .map(|(i, &w)| {
                let mut s = NodeStatus::new(NodeId(i as u32));
                s.weight = w.max(1);
                s
            })
            .collect::<Vec<_>>();
        let up_since = vec![None; nodes.len()];
        Cluster { nodes, up_since, policy, slow_start, in_flight: 0, warming: 0, assignments: 0 }
    }

    /// The nodes' status.
    pub fn nodes(&self) -> &[NodeStatus] {
        &self.nodes
    }

    /// The policy.
    pub fn policy(&self) -> &dyn Policy {
        self.policy.as_ref()
    }

    /// Requests assigned and not yet completed, over all nodes.
    pub fn in_flight(&self) -> usize {
        self.in_flight
    }

    /// How many requests the policy was told of (`on_assign`) since the start: one per
    /// dispatched request, whichever way the request is then served.
    pub fn assignments(&self) -> u64 {
        self.assignments
    }

    /// Whether one more request may be dispatched now under the policy's admission limit.
    pub fn can_admit(&self) -> bool {
        match self.policy.admission_limit(&self.nodes) {
            Some(limit) => self.in_flight < limit,
            None => true,
        }
    }

    /// The policy's admission limit for the current view, if it has one.
    pub fn admission_limit(&self) -> Option<usize> {
        self.policy.admission_limit(&self.nodes)
    }

    /// Pick a node for `req` and count the request against it. `None` when no node is up.
    pub fn assign(&mut self, req: &RequestInfo<'_>, now: Time) -> Option<NodeId> {
        self.refresh_ramps(now);
        let node = self.policy.pick(req, &self.nodes, now)?;
        debug_assert!(self.nodes[node.index()].up, "policy picked a node that is down");
        self.nodes[node.index()].load += 1;
        self.in_flight += 1;
        self.assignments += 1;
        self.policy.on_assign(node, req, &self.nodes, now);
        Some(node)
    }

    /// Count a request as assigned to `node` without asking the policy (e.g. a retry the
    /// caller routed itself). The policy is still told through `on_assign`.
    pub fn assign_to(&mut self, node: NodeId, req: &RequestInfo<'_>, now: Time) {
        self.nodes[node.index()].load += 1;
        self.in_flight += 1;
        self.assignments += 1;
        self.policy.on_assign(node, req, &self.nodes, now);
    }

    /// A request assigned to `node` completed (successfully or not).
    pub fn complete(&mut self, node: NodeId, target_hash: u64, now: Time) {
        let n = &mut self.nodes[node.index()];
        debug_assert!(n.load > 0, "complete without assign on {node}");
        n.load = n.load.saturating_sub(1);
        self.in_flight = self.in_flight.saturating_sub(1);
        self.policy.on_complete(node, target_hash, &self.nodes, now);
    }

    /// Put `node` in or out of the view. Coming back starts its slow start.
    pub fn set_up(&mut self, node: NodeId, up: bool, now: Time) {
        let i = node.index();
        if self.nodes[i].up == up {
            return;
        }
        self.nodes[i].up = up;
        if up {
            if self.up_since[i].replace(now).is_none() {
                self.warming += 1;
            }
            self.refresh_ramps(now);
            self.policy.on_node_up(node, &self.nodes, now);
        } else {
            if self.up_since[i].take().is_some() {
                self.warming -= 1;
            }
            self.nodes[i].ramp = 1.0;
            self.policy.on_node_down(node, &self.nodes, now);
        }
    }

    /// Apply a reload: grow to `weights.len()` slots (a new node joins up, in slow start; a
    /// removed node keeps its slot, which the caller puts down), set every slot's weight, and
    /// run `config`. The running policy stays, with what it learned of the surviving nodes,
    /// when it takes the change in place (same policy; `Policy::set_params` when
    /// `params_changed`, `Policy::adapt_to_nodes` when the nodes changed); otherwise
    /// `rebuild` makes a new one, told which nodes are down. When `rebuild` fails nothing
    /// changed (but parameters a kept policy already took; only LARD/R past 65,536 nodes
    /// takes them and then refuses the nodes).
    pub fn reconfigure<E>(
        &mut self,
        config: &crate::PolicyConfig,
        params_changed: bool,
        weights: &[u32],
        rebuild: impl FnOnce(&[u32]) -> Result<Box<dyn Policy>, E>,
        now: Time,
    ) -> Result<Reconfigured, E> {
        let grew = weights.len() > self.nodes.len();
        let mut nodes = self.nodes.clone();
        nodes.extend((nodes.len()..weights.len()).map(|i| NodeStatus::new(NodeId(i as u32))));
        let mut reweighted = false;
        for (n, &w) in nodes.iter_mut().zip(weights) {
            reweighted |= n.weight != w.max(1);
            n.weight = w.max(1);
        }
        let kept = self.policy.name() == config.name()
            && (!params_changed || self.policy.set_params(config))
            && (!(grew || reweighted) || self.policy.adapt_to_nodes(&nodes, now));
        if !kept {
            let mut policy = rebuild(weights)?;
            for n in nodes.iter().filter(|n| !n.up) {
                policy.on_node_down(n.id, &nodes, now);
            }
            self.policy = policy;
        }
        // New slots join up, in slow start.
        self.up_since.resize(nodes.len(), Some(now));
        self.warming += nodes.len() - self.nodes.len();
        self.nodes = nodes;
        self.refresh_ramps(now);
        Ok(if kept { Reconfigured::Kept } else { Reconfigured::Rebuilt })
    }

    /// A request was forwarded to `node` (the sniffer's view; see `Policy::on_request`).
    pub fn observe(&mut self, node: NodeId, req: &RequestInfo<'_>, rtt: Duration, now: Time) {
        self.policy.on_request(node, req, rtt, now);
    }

    /// `node` reported its own load.
    pub fn report(&mut self, node: NodeId, report: &NodeReport, now: Time) {
        self.policy.on_report(node, report, now);
    }

    /// How often the policy wants node reports, if it reads them.
    pub fn report_period(&self) -> Option<Duration> {
        self.policy.report_period()
    }

    /// The policy's per-node weights for an L4 forwarder, if it computes them.
    pub fn l4_weights(&mut self, now: Time) -> Option<Vec<f64>> {
        self.refresh_ramps(now);
        self.policy.l4_weights(&self.nodes, now)
    }

    /// Record a load figure reported by the node itself.
    pub fn set_reported_load(&mut self, node: NodeId, load: Option<f64>) {
        self.nodes[node.index()].reported_load = load;
    }

    fn refresh_ramps(&mut self, now: Time) {
        if self.warming == 0 {
            return;
        }
        for (i, since) in self.up_since.iter_mut().enumerate() {
            let Some(t0) = *since else { continue };
            let elapsed = now.since(t0);
            if self.slow_start.is_zero() || elapsed >= self.slow_start {
                self.nodes[i].ramp = 1.0;
                *since = None;
                self.warming -= 1;
            } else {
                let f = elapsed.as_secs_f64() / self.slow_start.as_secs_f64();
                self.nodes[i].ramp = f.clamp(0.05, 1.0);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{PolicyConfig, build};

    fn cluster(name: &str, slow_start: Duration) -> Cluster {
        let weights = [1, 1];
        Cluster::new(build(&PolicyConfig::from_name(name).unwrap(), &weights).unwrap(), &weights, slow_start)
    }

    /// Node 1 fails at t = 0 and recovers at t = 1 s; `requests` are assigned at `at`
    /// (without completing); returns node 1's share.
    fn recovered_share(name: &str, slow_start: Duration, at: Time, requests: usize) -> f64 {
        let mut c = cluster(name, slow_start);
        c.set_up(NodeId(1), false, Time::ZERO);
        c.set_up(NodeId(1), true, Time::from_secs(1));
        let targets: Vec<String> = (0..requests).map(|i| format!("/s/{i}")).collect();
        let mut on_recovered = 0;
        for t in &targets {
            if c.assign(&RequestInfo::get(t), at) == Some(NodeId(1)) {
                on_recovered += 1;
            }
        }
        assert_eq!(c.in_flight(), requests);
        on_recovered as f64 / requests as f64
    }

    #[test]
    fn cluster_slow_start_gives_a_recovered_node_a_smaller_share_at_first() {
        let ten = Duration::from_secs(10);
        for name in ["lc", "wlc", "wrr", "p2c", "lard", "lard-r", "csld", "wrr-metrics"] {
            // 2 s into a 10 s slow start the ramp is 0.2: about 1/6 of the requests.
            let early = recovered_share(name, ten, Time::from_secs(3), 600);
            assert!((0.10..0.25).contains(&early), "{name}: early share {early}");
            // After the slow start it is a full member again.
            let later = recovered_share(name, ten, Time::from_secs(12), 600);
            assert!((0.45..0.55).contains(&later), "{name}: later share {later}");
            // Without slow start it is a full member at once.
            let none = recovered_share(name, Duration::ZERO, Time::from_secs(1), 600);
            assert!((0.45..0.55).contains(&none), "{name}: share without slow start {none}");
        }
    }

    #[test]
    fn cluster_counts_load_and_in_flight() {
        let mut c = cluster("rr", Duration::ZERO);
        let a = c.assign(&RequestInfo::get("/a"), Time::ZERO).unwrap();
        let b = c.assign(&RequestInfo::get("/b"), Time::ZERO).unwrap();
        assert_ne!(a, b);
        c.assign_to(a, &RequestInfo::get("/c"), Time::ZERO);
        assert_eq!(c.nodes()[a.index()].load, 2);
        assert_eq!(c.in_flight(), 3);
        c.complete(a, 0, Time::ZERO);
        assert_eq!(c.nodes()[a.index()].load, 1);
        assert_eq!(c.in_flight(), 2);
        assert_eq!(c.admission_limit(), None);
        assert!(c.can_admit());
        c.set_up(a, false, Time::ZERO);
        c.set_up(b, false, Time::ZERO);
        assert_eq!(c.assign(&RequestInfo::get("/d"), Time::ZERO), None);
        assert_eq!(c.assignments(), 3, "the policy is told of each assigned request once");
    }

    /// Where each of `targets` goes now, each request completed at once.
    fn placement(c: &mut Cluster, targets: &[String], now: Time) -> Vec<NodeId> {
        targets
            .iter()
            .map(|t| {
                let req = RequestInfo::get(t);
                let node = c.assign(&req, now).expect("a node up");
                c.complete(node, req.target_hash, now);
                node
            })
            .collect()
    }

    #[test]
    fn reconfigure_keeps_lard_targets_on_surviving_nodes_and_moves_a_removed_nodes_targets() {
        let config = PolicyConfig::Lard { t_low: 25, t_high: 65, max_targets: 1000 };
        let mut c = Cluster::new(build(&config, &[1, 1, 1]).unwrap(), &[1, 1, 1], Duration::ZERO);
        let targets: Vec<String> = (0..30).map(|i| format!("/t/{i}")).collect();
        let before = placement(&mut c, &targets, Time::ZERO);
        assert!(before.contains(&NodeId(2)), "node 2 has targets to lose");
        // Node 2 removed (its slot down), node 3 added, new thresholds.
        c.set_up(NodeId(2), false, Time::ZERO);
        let changed = PolicyConfig::Lard { t_low: 20, t_high: 60, max_targets: 1000 };
        let rebuild = |w: &[u32]| build(&changed, w);
        let how = c.reconfigure(&changed, true, &[1, 1, 1, 1], rebuild, Time::ZERO).unwrap();
        assert_eq!(how, Reconfigured::Kept);
        assert_eq!(c.policy().mapping_len(), 30, "the mapping survived");
        let after = placement(&mut c, &targets, Time::ZERO);
        for (b, a) in before.iter().zip(&after) {
            if *b == NodeId(2) {
                assert_ne!(*a, NodeId(2), "a removed node's targets move");
            } else {
                assert_eq!(a, b, "a surviving node keeps its targets");
            }
        }
        let fresh: Vec<String> = (0..12).map(|i| format!("/new/{i}")).collect();
        assert!(placement(&mut c, &fresh, Time::ZERO).contains(&NodeId(3)), "the new node takes new targets");
    }

    #[test]
    fn reconfigure_to_another_policy_rebuilds_it_and_a_failed_build_changes_nothing() {
        let mut c = cluster("lard", Duration::ZERO);
        let chash = PolicyConfig::from_name("chash").unwrap();
        let how = c.reconfigure(&chash, true, &[1, 1], |w| build(&chash, w), Time::ZERO).unwrap();
        assert_eq!((how, c.policy().name()), (Reconfigured::Rebuilt, "chash"));
        let failed: Result<_, &str> = c.reconfigure(&chash, true, &[1, 1, 1], |_| Err("refused"), Time::ZERO);
        assert_eq!(failed, Err("refused"));
        assert_eq!(c.nodes().len(), 2, "no slot added by a refused reload");
    }

    #[test]
    fn reconfigure_adds_nodes_in_slow_start() {
        let mut c = cluster("lc", Duration::from_secs(10));
        let lc = PolicyConfig::from_name("lc").unwrap();
        c.reconfigure(&lc, false, &[1, 1, 2], |w| build(&lc, w), Time::ZERO).unwrap();
        let new = &c.nodes()[2];
        assert!(new.up && new.ramp < 0.1 && new.weight == 2, "{new:?}");
    }
}
