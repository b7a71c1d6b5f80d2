//! `CsldPolicy`: the CSLD front-end — the sniffer turns connections and forwarded requests
//! into tasks, the load estimator runs lazily whenever `now` crosses a period boundary, and
//! new connections go by smooth WRR over the weights it derives.

use super::CsldParams;
use super::estimator::Estimator;
use super::task::Task;
use super::weights::{SmoothWrr, weights_from_loads};
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
        }
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

    fn pick(&mut self, _req: &RequestInfo<'_>, nodes: &[NodeStatus], now: Time) -> Option<NodeId> {
        self.tick(now);
        self.wrr.pick(&self.weights, nodes)
    }

    fn on_assign(&mut self, node: NodeId, _req: &RequestInfo<'_>, _nodes: &[NodeStatus], now: Time) {
        self.tick(now);
        self.estimator.conn_opened(node.index(), now.as_nanos());
    }

    fn on_complete(&mut self, node: NodeId, _target_hash: u64, _nodes: &[NodeStatus], now: Time) {
        self.tick(now);
        self.estimator.push(node.index(), Task::conn(now.as_nanos(), &self.params));
    }

    fn on_node_down(&mut self, node: NodeId, _nodes: &[NodeStatus], now: Time) {
        self.tick(now);
        self.estimator.set_up(node.index(), false);
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
