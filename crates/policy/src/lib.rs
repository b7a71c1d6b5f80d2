//! Request distribution policies behind one pure trait, shared by the live switch and the
//! simulator. A `Policy` sees the request and the nodes' status, is told when a request is
//! assigned and completed, and never reads a clock, a global RNG or does I/O: time comes in
//! as `Time`, randomness from a seed given at construction. `Cluster` keeps the load counts.
//! Content sniffers and metric-fed policies also hear of every forwarded request and every
//! node report.

mod bounded;
mod cap;
mod cluster;
mod config;
mod csld;
mod estimates;
mod hash;
mod inputs;
mod lard;
mod lard_r;
mod lc;
mod maglev;
mod p2c;
mod ring;
mod rr;
#[cfg(test)]
mod test_nodes;
mod wrr;
mod wrr_metrics;
mod wrr_variant;

pub use bounded::BoundedLoadPolicy;
pub use cap::CapPolicy;
pub use cluster::{Cluster, Reconfigured};
pub use config::{ChashKind, PolicyConfig, PolicyConfigError, build, build_with};
pub use csld::{CsldParams, CsldPick, CsldPolicy};
pub use estimates::LoadEstimates;
pub use hash::StaticHashPolicy;
pub use inputs::{FileInfo, FileTable, PolicyInputs};
pub use lard::LardPolicy;
pub use lard_r::{LardRPolicy, MAX_REPLICAS};
pub use lc::LeastConnectionsPolicy;
pub use locus_core::{ClassCost, Method, NodeId, NodeReport, NodeStatus, RequestInfo, ResourceKind, Time};
pub use maglev::{MaglevPolicy, MaglevTable};
pub use p2c::PowerOfTwoPolicy;
pub use ring::{HashRing, RingPolicy};
pub use rr::RoundRobinPolicy;
pub use wrr::WeightedRoundRobinPolicy;
pub use wrr_metrics::WrrMetricsPolicy;
pub use wrr_variant::WrrVariant;

use std::time::Duration;

/// A request-distribution policy.
///
/// The caller (the switch or the simulator, through [`Cluster`]) keeps `NodeStatus::load`
/// current: it increments the chosen node's load right after `pick` returns it and before
/// `on_assign`, and decrements it before `on_complete`. `nodes[i].id == NodeId(i)`.
pub trait Policy: Send {
    /// The policy's name as used in configuration (`"lard-r"`, `"chash"`, ...).
    fn name(&self) -> &'static str;

    /// Choose a node for `req` among the nodes that are `up`; `None` when none is up.
    fn pick(&mut self, req: &RequestInfo<'_>, nodes: &[NodeStatus], now: Time) -> Option<NodeId>;

    /// The request was dispatched to `node` (its load already counts it).
    fn on_assign(&mut self, _node: NodeId, _req: &RequestInfo<'_>, _nodes: &[NodeStatus], _now: Time) {}

    /// A request for the target with hash `target_hash` completed on `node` (its load no
    /// longer counts it).
    fn on_complete(&mut self, _node: NodeId, _target_hash: u64, _nodes: &[NodeStatus], _now: Time) {}

    /// `node` left the view (failed or drained); its state (e.g. LARD targets) must go.
    fn on_node_down(&mut self, _node: NodeId, _nodes: &[NodeStatus], _now: Time) {}

    /// `node` came back into the view.
    fn on_node_up(&mut self, _node: NodeId, _nodes: &[NodeStatus], _now: Time) {}

    /// A reload changed the node table: `nodes` may hold more slots than before (nodes
    /// added; a removed node keeps its slot, down) and other weights. `true` when the policy
    /// took the change in place, keeping what it learned of the surviving nodes; `false`
    /// (the default) has [`Cluster::reconfigure`] build a new policy instead.
    fn adapt_to_nodes(&mut self, _nodes: &[NodeStatus], _now: Time) -> bool {
        false
    }

    /// A reload set new parameters of this same policy: `true` when they were applied in
    /// place (state kept); `false` (the default) has a new policy built with them.
    fn set_params(&mut self, _config: &PolicyConfig) -> bool {
        false
    }

    /// Most requests the front-end may have outstanding at once given the nodes' status,
    /// or `None` for no limit (LARD/R's admission limit S; the rest wait in a FIFO queue).
    fn admission_limit(&self, _nodes: &[NodeStatus]) -> Option<usize> {
        None
    }

    /// Entries in the policy's target-to-node mapping (0 for mapping-free policies).
    fn mapping_len(&self) -> usize {
        0
    }

    /// A request `req` was forwarded to `node` over a connection whose client round-trip
    /// time is `rtt` (a content sniffer's view: called for every request the switch sees,
    /// including later requests on a connection `pick` placed once).
    fn on_request(&mut self, _node: NodeId, _req: &RequestInfo<'_>, _rtt: Duration, _now: Time) {}

    /// Whether `on_request` does anything: callers skip building the sniffer's view (and
    /// taking locks for it) for policies that do not read it.
    fn observes_requests(&self) -> bool {
        false
    }

    /// `node` reported its own load (a metrics poll completed).
    fn on_report(&mut self, _node: NodeId, _report: &NodeReport, _now: Time) {}

    /// How often the policy wants every node's report (`on_report`), if it reads reports.
    fn report_period(&self) -> Option<Duration> {
        None
    }

    /// Per-node weights an L4 forwarder should split new connections by, if the policy
    /// computes them (CSLD); indexed like `nodes`, recomputed as `now` passes its periods.
    fn l4_weights(&mut self, _nodes: &[NodeStatus], _now: Time) -> Option<Vec<f64>> {
        None
    }

    /// The policy's current load indices and weights, if it estimates load (CSLD and the
    /// metric-fed WRR).
    fn load_estimates(&self) -> Option<LoadEstimates> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Every policy, with parameters small enough that thresholds, replication, eviction
    /// and replica expiry all happen within a short random run.
    fn every_policy() -> Vec<PolicyConfig> {
        let mut configs: Vec<PolicyConfig> =
            PolicyConfig::canonical_names().map(|n| PolicyConfig::from_name(n).unwrap()).collect();
        configs.push(PolicyConfig::Chash { kind: ChashKind::Maglev, vnodes: 1, table_size: 1009 });
        configs.push(PolicyConfig::Chash { kind: ChashKind::Ring, vnodes: 3, table_size: 1009 });
        configs.push(PolicyConfig::ChashBounded { vnodes: 4, balance_factor: 100 });
        configs.push(PolicyConfig::Lard { t_low: 1, t_high: 3, max_targets: 5 });
        configs.push(PolicyConfig::csld(CsldParams {
            slots: 8,
            stats_periods: 2,
            history_secs: 1,
            max_files: 3,
            ..CsldParams::default()
        }));
        for variant in [WrrVariant::I, WrrVariant::P] {
            configs.push(PolicyConfig::wrr_metrics(variant));
        }
        configs.push(PolicyConfig::LardR {
            t_low: 1,
            t_high: 3,
            k_secs: 0.5,
            admission_limit: None,
            max_targets: 5,
        });
        configs
    }

    #[derive(Debug, Clone)]
    enum Op {
        Assign(u8),
        Complete(u16),
        SetUp(u8, bool),
        Advance(u16),
        /// A reload adding this many nodes (0 to 2) and re-weighting node `.1`.
        Reload(u8, u8),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => any::<u8>().prop_map(Op::Assign),
            2 => any::<u16>().prop_map(Op::Complete),
            1 => (any::<u8>(), any::<bool>()).prop_map(|(n, up)| Op::SetUp(n, up)),
            1 => (0u16..2000).prop_map(Op::Advance),
            1 => (0u8..3, any::<u8>()).prop_map(|(grow, n)| Op::Reload(grow, n)),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]
        #[test]
        fn down_nodes_are_never_picked_across_reloads(
            start_weights in prop::collection::vec(1u32..4, 1..6),
            ops in prop::collection::vec(op(), 1..150),
        ) {
            let targets: Vec<String> = (0..16).map(|i| format!("/d/{i}")).collect();
            for config in every_policy() {
                let mut weights = start_weights.clone();
                let policy = build(&config, &weights).unwrap();
                let mut c = Cluster::new(policy, &weights, Duration::from_secs(1));
                let mut now = Time::ZERO;
                let mut outstanding: Vec<(NodeId, u64)> = Vec::new();
                for op in &ops {
                    match *op {
                        Op::Assign(t) => {
                            let req = RequestInfo::get(&targets[t as usize % targets.len()]);
                            let any_up = c.nodes().iter().any(|n| n.up);
                            match c.assign(&req, now) {
                                Some(node) => {
                                    prop_assert!(c.nodes()[node.index()].up,
                                        "{} picked {} which is down", config.name(), node);
                                    outstanding.push((node, req.target_hash));
                                }
                                None => prop_assert!(!any_up,
                                    "{} picked nothing with a node up", config.name()),
                            }
                        }
                        Op::Complete(i) if !outstanding.is_empty() => {
                            let (node, h) = outstanding.swap_remove(i as usize % outstanding.len());
                            c.complete(node, h, now);
                        }
                        Op::Complete(_) => {}
                        Op::SetUp(n, up) => c.set_up(NodeId(n as u32 % weights.len() as u32), up, now),
                        Op::Advance(ms) => now = now + Duration::from_millis(ms as u64),
                        Op::Reload(grow, n) => {
                            // At most 10 nodes: the maglev table of 1009 slots fits 10.
                            let grow = (grow as usize).min(10 - weights.len().min(10));
                            weights.extend((0..grow).map(|i| 1 + (n as u32 + i as u32) % 3));
                            let i = n as usize % weights.len();
                            weights[i] = weights[i] % 3 + 1;
                            c.reconfigure(&config, false, &weights, |w| build(&config, w), now).unwrap();
                            prop_assert_eq!(c.nodes().len(), weights.len());
                        }
                    }
                }
            }
        }
    }
}
