//! `CsldPolicy`: the CSLD front-end — the sniffer turns connections and forwarded requests
//! into tasks, the load estimator runs lazily whenever `now` crosses a period boundary, and
//! new connections go by smooth WRR over the weights it derives (the paper's pick), or each
//! request to the node whose requests in flight would share the least work with it.

use super::estimator::Estimator;
use super::inflight::InFlightWork;
use super::task::Task;
use super::weights::{SmoothWrr, weights_from_loads};
use super::{CsldParams, CsldPick};
use crate::{LoadEstimates, Policy, PolicyInputs};
use locus_core::{NodeId, NodeStatus, RequestInfo, Time};
use std::time::Duration;

/// Content-sniffing load estimation with smooth WRR over the estimated weights.
#[derive(Debug)]
pub struct CsldPolicy {
    params: CsldParams,
    inputs: PolicyInputs,
    estimator: Estimator,
    /// W_k after the latest period.
    weights: Vec<f64>,
    wrr: SmoothWrr,
    /// The requests each node holds now, by the sniffer's expected cost.
    inflight: InFlightWork,
    /// Where the next tie-break scan starts (rotates, so ties spread).
    cursor: usize,
    /// The target hash and expected cost of the request `pick` last costed, which `on_assign`
    /// of the same request reuses instead of costing it again.
    last_cost: Option<(u64, u64)>,
}

impl CsldPolicy {
    /// CSLD over `node_count` nodes; `params` must pass `CsldParams::check` (as `build`
    /// ensures).
    pub fn new(node_count: usize, params: &CsldParams, inputs: &PolicyInputs) -> CsldPolicy {
        CsldPolicy {
            params: *params,
            inputs: inputs.clone(),
            estimator: Estimator::new(node_count, params),
            weights: vec![0.0; node_count],
            wrr: SmoothWrr::default(),
            inflight: InFlightWork::new(node_count),
            cursor: 0,
            last_cost: None,
        }
    }

    /// The CPU work (ns) the sniffer expects of `req`: its class's CPU and disk time, or the
    /// basic cost plus the cost of sending the document.
    fn expected_ns(&self, req: &RequestInfo<'_>, now: Time) -> u64 {
        let t = Task::request(req, Duration::ZERO, now.as_nanos(), &self.params, &self.inputs);
        let send = t.size.div_ceil(512).saturating_mul(self.params.send_ns_per_512);
        t.ccost.saturating_add(t.dcost).saturating_add(send).max(1)
    }

    /// The up node whose requests in flight share the least work with a request of `x` ns,
    /// scaled by its slow-start ramp; ties go round the nodes. `None` when the cluster holds
    /// no request (then the period's weights split it).
    fn least_shared_work(&mut self, x: u64, nodes: &[NodeStatus]) -> Option<NodeId> {
        for (i, n) in nodes.iter().enumerate() {
            if n.load == 0 && self.inflight.count(i) > 0 {
                self.inflight.clear(i);
            }
        }
        if nodes.iter().all(|n| n.load == 0) {
            return None;
        }
        let len = nodes.len();
        let mut best: Option<(f64, usize)> = None;
        for step in 0..len {
            let i = (self.cursor + step) % len;
            let n = &nodes[i];
            if !n.up {
                continue;
            }
            let score = self.inflight.shared_with(i, x) as f64 / n.ramp.clamp(0.05, 1.0);
            if best.is_none_or(|(b, _)| score < b) {
                best = Some((score, i));
            }
        }
        let (_, i) = best?;
        self.cursor = (i + 1) % len;
        Some(nodes[i].id)
    }

    /// Run the estimator for every period boundary up to `now` and refresh the weights.
    fn tick(&mut self, now: Time) {
        if self.estimator.advance(now.as_nanos()) {
            let est = &self.estimator;
            weights_from_loads(est.loads(), |k| est.is_up(k), est.conns_per_period(), &mut self.weights);
        }
    }

    /// The parameters.
    pub fn params(&self) -> &CsldParams {
        &self.params
    }

    /// W_k after the latest period (all zero until connections were seen).
    pub fn weights(&self) -> &[f64] {
        &self.weights
    }

    /// L_k after the latest period.
    pub fn loads(&self) -> &[f64] {
        self.estimator.loads()
    }

    /// Static requests whose hit or miss was predicted so far.
    pub fn static_requests(&self) -> u64 {
        self.estimator.static_requests()
    }

    /// Of those, the ones predicted to miss.
    pub fn predicted_misses(&self) -> u64 {
        self.estimator.predicted_misses()
    }
}

impl Policy for CsldPolicy {
    fn name(&self) -> &'static str {
        "csld"
    }

    fn pick(&mut self, req: &RequestInfo<'_>, nodes: &[NodeStatus], now: Time) -> Option<NodeId> {
        self.tick(now);
        if self.params.pick == CsldPick::SharedWork {
            let x = self.expected_ns(req, now);
            self.last_cost = Some((req.target_hash, x));
            if let Some(node) = self.least_shared_work(x, nodes) {
                return Some(node);
            }
        }
        self.wrr.pick(&self.weights, nodes)
    }

    fn on_assign(&mut self, node: NodeId, req: &RequestInfo<'_>, _nodes: &[NodeStatus], now: Time) {
        self.tick(now);
        self.estimator.conn_opened(node.index(), now.as_nanos());
        if self.params.pick == CsldPick::SharedWork {
            let x = match self.last_cost.take() {
                Some((hash, x)) if hash == req.target_hash => x,
                _ => self.expected_ns(req, now),
            };
            self.inflight.add(node.index(), req.target_hash, x);
        }
    }

    fn on_complete(&mut self, node: NodeId, target_hash: u64, _nodes: &[NodeStatus], now: Time) {
        self.tick(now);
        self.estimator.push(node.index(), Task::conn(now.as_nanos(), &self.params));
        self.inflight.remove(node.index(), target_hash);
    }

    fn on_node_down(&mut self, node: NodeId, _nodes: &[NodeStatus], now: Time) {
        self.tick(now);
        self.estimator.set_up(node.index(), false);
        self.inflight.clear(node.index());
        if let Some(w) = self.weights.get_mut(node.index()) {
            *w = 0.0;
        }
        self.wrr.reset(node.index());
    }

    fn on_node_up(&mut self, node: NodeId, _nodes: &[NodeStatus], now: Time) {
        self.tick(now);
        self.estimator.set_up(node.index(), true);
        self.wrr.reset(node.index());
    }

    fn mapping_len(&self) -> usize {
        self.estimator.files()
    }

    fn observes_requests(&self) -> bool {
        true
    }

    fn on_request(&mut self, node: NodeId, req: &RequestInfo<'_>, rtt: Duration, now: Time) {
        self.tick(now);
        let task = Task::request(req, rtt, now.as_nanos(), &self.params, &self.inputs);
        self.estimator.push(node.index(), task);
    }

    /// W_k × ramp for the up nodes (0 for the others); before any estimate, the ramp alone
    /// (an even split).
    fn l4_weights(&mut self, nodes: &[NodeStatus], now: Time) -> Option<Vec<f64>> {
        self.tick(now);
        Some(effective_weights(&self.weights, nodes))
    }

    fn load_estimates(&self) -> Option<LoadEstimates> {
        Some(LoadEstimates {
            weights: self.weights.clone(),
            loads: self.loads().to_vec(),
            static_requests: self.static_requests(),
            predicted_misses: self.predicted_misses(),
        })
    }
}

/// `weights` scaled by each node's ramp, 0 for down nodes; the ramp alone for every up node
/// when no up node has a positive weight.
pub(crate) fn effective_weights(weights: &[f64], nodes: &[NodeStatus]) -> Vec<f64> {
    let ramp = |n: &NodeStatus| if n.up { n.ramp.clamp(0.0, 1.0) } else { 0.0 };
    let w: Vec<f64> =
        nodes.iter().enumerate().map(|(i, n)| weights.get(i).copied().unwrap_or(0.0) * ramp(n)).collect();
    if w.iter().any(|&x| x > 0.0) { w } else { nodes.iter().map(ramp).collect() }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Cluster;
    use locus_core::{ClassCost, ResourceKind};
    use proptest::prelude::*;
    use std::sync::Arc;

    const MS: u64 = 1_000_000;

    fn inputs() -> PolicyInputs {
        let class =
            |ms: u64| ClassCost { cpu_ns: ms * MS, disk_ns: 0, size: 2_000, resource: ResourceKind::Cpu };
        PolicyInputs { classes: vec![class(1), class(40)].into(), files: None }
    }

    fn cluster_picking(nodes: usize, pick: CsldPick) -> Cluster {
        let weights = vec![1; nodes];
        let params = CsldParams { pick, ..CsldParams::default() };
        let policy = CsldPolicy::new(nodes, &params, &inputs());
        Cluster::new(Box::new(policy), &weights, Duration::ZERO)
    }

    /// The paper's pick: smooth WRR over the period's weights.
    fn cluster(nodes: usize) -> Cluster {
        cluster_picking(nodes, CsldPick::Wrr)
    }

    fn of_class(target: &str, class: u16) -> RequestInfo<'_> {
        let mut req = RequestInfo::get(target);
        req.class = Some(class);
        req
    }

    #[test]
    fn shared_work_sends_a_light_request_away_from_a_crowd_and_a_heavy_one_away_from_heavy_work() {
        let mut c = cluster_picking(2, CsldPick::SharedWork);
        let now = Time(MS);
        // Node 0 holds one 40 ms request, node 1 three 1 ms requests.
        c.assign_to(NodeId(0), &of_class("/heavy?id=0", 1), now);
        for i in 0..3 {
            c.assign_to(NodeId(1), &of_class(&format!("/light?id={i}"), 0), now);
        }
        // A 1 ms request shares 1 ms with node 0 and 3 ms with node 1.
        let light = of_class("/light?id=9", 0);
        assert_eq!(c.assign(&light, now), Some(NodeId(0)));
        c.complete(NodeId(0), light.target_hash, now);
        // A 40 ms request shares 40 ms with node 0 and 3 ms with node 1.
        let heavy = of_class("/heavy?id=9", 1);
        assert_eq!(c.assign(&heavy, now), Some(NodeId(1)));
        c.complete(NodeId(1), heavy.target_hash, now);
        // Once the heavy request completes, node 0 holds nothing and takes the heavy one.
        c.complete(NodeId(0), RequestInfo::get("/heavy?id=0").target_hash, now);
        assert_eq!(c.assign(&heavy, now), Some(NodeId(0)));
    }

    #[test]
    fn csld_sends_fewer_new_connections_to_a_node_it_was_told_got_heavy_dynamic_work() {
        let mut c = cluster(4);
        let rtt = Duration::from_millis(100);
        // Period 0: 40 connections, each with a light dynamic request; node 0 also gets
        // heavy ones (400 ms of CPU in all).
        for i in 0..40u64 {
            let now = Time(i * 4 * MS);
            let mut req = RequestInfo::get("/light");
            req.class = Some(0);
            let node = c.assign(&req, now).unwrap();
            c.observe(node, &req, rtt, now);
        }
        let mut heavy = RequestInfo::get("/heavy");
        heavy.class = Some(1);
        for i in 0..10 {
            c.observe(NodeId(0), &heavy, rtt, Time(i * MS));
        }
        // Period 1: the weights now steer new connections away from node 0.
        let mut counts = [0u32; 4];
        for i in 0..40u64 {
            let node = c.assign(&RequestInfo::get("/x"), Time(200 * MS + i * MS)).unwrap();
            counts[node.index()] += 1;
        }
        assert!(counts[0] * 2 < counts[1].min(counts[2]).min(counts[3]), "{counts:?}");
        let est = c.policy().load_estimates().unwrap();
        assert!(est.loads[0] > est.loads[1], "{est:?}");
        assert!((est.weights.iter().sum::<f64>() - 40.0).abs() < 1e-9, "weights sum to N_r: {est:?}");
    }

    #[test]
    fn l4_weights_split_evenly_before_any_estimate_and_follow_w_after() {
        let mut c = cluster(2);
        assert_eq!(c.l4_weights(Time::ZERO), Some(vec![1.0, 1.0]));
        let mut heavy = RequestInfo::get("/heavy");
        heavy.class = Some(1);
        for i in 0..10 {
            let node = c.assign(&RequestInfo::get("/x"), Time(i * MS)).unwrap();
            c.observe(NodeId(0), &heavy, Duration::ZERO, Time(i * MS));
            c.complete(node, 0, Time(i * MS + 1));
        }
        let w = c.l4_weights(Time(250 * MS)).unwrap();
        assert!(w[0] < w[1], "{w:?}");
        c.set_up(NodeId(1), false, Time(250 * MS));
        assert_eq!(c.l4_weights(Time(250 * MS)).unwrap()[1], 0.0);
    }

    #[derive(Debug, Clone)]
    enum Op {
        Assign { class: Option<u16>, hint: Option<u64>, ims: Option<u64> },
        Observe { node: u8, class: Option<u16>, hint: Option<u64>, ims: Option<u64>, rtt_ms: u64 },
        Complete,
        SetUp(u8, bool),
        Advance(u64),
        Weights,
    }

    fn op() -> impl Strategy<Value = Op> {
        let class = prop::option::of(0u16..4);
        let hint = prop::option::of(prop_oneof![0u64..100_000, Just(u64::MAX)]);
        let ims = prop::option::of(any::<u64>());
        prop_oneof![
            3 => (class.clone(), hint.clone(), ims.clone()).prop_map(|(class, hint, ims)| Op::Assign { class, hint, ims }),
            3 => (any::<u8>(), class, hint, ims, prop_oneof![0u64..500, Just(u64::MAX / MS)])
                .prop_map(|(node, class, hint, ims, rtt_ms)| Op::Observe { node, class, hint, ims, rtt_ms }),
            2 => Just(Op::Complete),
            1 => (any::<u8>(), any::<bool>()).prop_map(|(n, up)| Op::SetUp(n, up)),
            2 => prop_oneof![0u64..400 * MS, Just(u64::MAX / 4), Just(u64::MAX)].prop_map(Op::Advance),
            1 => Just(Op::Weights),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn csld_never_panics_on_arbitrary_request_and_time_sequences(
            nodes in 1usize..5,
            ops in prop::collection::vec(op(), 1..200),
        ) {
            let files: crate::FileTable =
                (0..4).map(|i| (locus_core::target_hash(&format!("/f{i}")), crate::FileInfo { size: i * 50_000, mtime: 10 })).collect();
            let inputs = PolicyInputs { files: Some(Arc::new(files)), ..inputs() };
            let params = CsldParams { slots: 8, stats_periods: 3, history_secs: 2, max_files: 3, ..CsldParams::default() };
            let mut c = Cluster::new(Box::new(CsldPolicy::new(nodes, &params, &inputs)), &vec![1; nodes], Duration::from_secs(1));
            let targets = ["/f0", "/f1", "/f2", "/f3", "/nope"];
            let mut now = Time::ZERO;
            let mut outstanding = Vec::new();
            for (i, op) in ops.iter().enumerate() {
                let mut req = RequestInfo::get(targets[i % targets.len()]);
                match *op {
                    Op::Assign { class, hint, ims } => {
                        (req.class, req.size_hint, req.if_modified_since) = (class, hint, ims);
                        if let Some(node) = c.assign(&req, now) {
                            prop_assert!(c.nodes()[node.index()].up);
                            outstanding.push(node);
                        }
                    }
                    Op::Observe { node, class, hint, ims, rtt_ms } => {
                        (req.class, req.size_hint, req.if_modified_since) = (class, hint, ims);
                        let rtt = Duration::from_millis(rtt_ms);
                        c.observe(NodeId(node as u32 % nodes as u32), &req, rtt, now);
                    }
                    Op::Complete => {
                        if let Some(node) = outstanding.pop() {
                            c.complete(node, 0, now);
                        }
                    }
                    Op::SetUp(n, up) => c.set_up(NodeId(n as u32 % nodes as u32), up, now),
                    Op::Advance(ns) => now = Time(now.0.saturating_add(ns)),
                    Op::Weights => {
                        let w = c.l4_weights(now).unwrap();
                        prop_assert!(w.iter().all(|x| x.is_finite() && *x >= 0.0), "{w:?}");
                    }
                }
            }
            prop_assert!(c.policy().mapping_len() <= 3);
        }
    }
}
