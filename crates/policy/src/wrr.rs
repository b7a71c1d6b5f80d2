//! `wrr`: smooth weighted round robin (as in nginx) over the nodes that are up, using each
//! node's effective weight (configured weight × slow-start ramp); and `SmoothWrr`, the same
//! selection over any per-node f64 weights, which CSLD and the metric-fed WRR dispatch by.

use crate::Policy;
use locus_core::{NodeId, NodeStatus, RequestInfo, Time};

/// Smooth weighted round robin: every pick adds each up node's effective weight to its
/// current weight, picks the node with the largest current weight and subtracts the total
/// from it. Over any window the picks follow the weights and are interleaved, not bursty.
#[derive(Debug)]
pub struct WeightedRoundRobinPolicy {
    wrr: SmoothWrr,
}

impl WeightedRoundRobinPolicy {
    /// A smooth weighted round robin over `node_count` nodes.
    pub fn new(node_count: usize) -> WeightedRoundRobinPolicy {
        WeightedRoundRobinPolicy { wrr: SmoothWrr { current: vec![0.0; node_count] } }
    }
}

impl Policy for WeightedRoundRobinPolicy {
    fn name(&self) -> &'static str {
        "wrr"
    }

    fn pick(&mut self, _req: &RequestInfo<'_>, nodes: &[NodeStatus], _now: Time) -> Option<NodeId> {
        // A zero ramp would starve the node for ever; the smallest weight still counts.
        self.wrr.pick_by(nodes, |_, node| node.effective_weight().max(1e-3))
    }

    fn on_node_down(&mut self, node: NodeId, _nodes: &[NodeStatus], _now: Time) {
        self.wrr.reset(node.index());
    }

    fn on_node_up(&mut self, node: NodeId, _nodes: &[NodeStatus], _now: Time) {
        self.wrr.reset(node.index());
    }
}

/// Smooth weighted round robin (nginx's) over per-node f64 weights scaled by each node's
/// slow-start ramp; when no up node has a positive weight, over the ramps alone (round
/// robin while every node is fully ramped).
#[derive(Debug, Default)]
pub(crate) struct SmoothWrr {
    current: Vec<f64>,
}

impl SmoothWrr {
    /// Pick an up node by `weights` (missing entries weigh 0).
    pub(crate) fn pick(&mut self, weights: &[f64], nodes: &[NodeStatus]) -> Option<NodeId> {
        let ramp = |n: &NodeStatus| n.ramp.clamp(0.0, 1.0);
        self.pick_by(nodes, |i, n| weights.get(i).copied().unwrap_or(0.0) * ramp(n))
            // A zero ramp would starve a node for ever; the smallest weight still counts.
            .or_else(|| self.pick_by(nodes, |_, n| ramp(n).max(1e-3)))
    }

    /// Pick an up node with a positive `weight(i, node)`, nginx's way.
    pub(crate) fn pick_by(
        &mut self,
        nodes: &[NodeStatus],
        weight: impl Fn(usize, &NodeStatus) -> f64,
    ) -> Option<NodeId> {
        if self.current.len() < nodes.len() {
            self.current.resize(nodes.len(), 0.0);
        }
        let mut total = 0.0;
        let mut best: Option<usize> = None;
        for (i, node) in nodes.iter().enumerate() {
            let w = weight(i, node);
            if !(node.up && w > 0.0 && w.is_finite()) {
                continue;
            }
            total += w;
            self.current[i] += w;
            if best.is_none_or(|b| self.current[i] > self.current[b]) {
                best = Some(i);
            }
        }
        let b = best?;
        self.current[b] -= total;
        Some(NodeId(b as u32))
    }

    /// Forget `node`'s accumulated credit (it left or rejoined the view).
    pub(crate) fn reset(&mut self, node: usize) {
        if let Some(c) = self.current.get_mut(node) {
            *c = 0.0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn weighted(weights: &[u32]) -> Vec<NodeStatus> {
        weights
            .iter()
            .enumerate()
            .map(|(i, &w)| {
                let mut s = NodeStatus::new(NodeId(i as u32));
                s.weight = w;
                s
            })
            .collect()
    }

    #[test]
    fn wrr_distributes_in_proportion_to_weights() {
        let ns = weighted(&[5, 1, 1]);
        let mut p = WeightedRoundRobinPolicy::new(ns.len());
        let req = RequestInfo::get("/x");
        // nginx's documented sequence for weights {5, 1, 1}: a a b a c a a.
        let seq: Vec<u32> = (0..7).map(|_| p.pick(&req, &ns, Time::ZERO).unwrap().0).collect();
        assert_eq!(seq, [0, 0, 1, 0, 2, 0, 0]);

        let ns = weighted(&[3, 2, 1]);
        let mut p = WeightedRoundRobinPolicy::new(ns.len());
        let mut counts = [0u32; 3];
        for _ in 0..600 {
            counts[p.pick(&req, &ns, Time::ZERO).unwrap().index()] += 1;
        }
        assert_eq!(counts, [300, 200, 100]);
    }

    #[test]
    fn wrr_follows_the_ramp_and_skips_down_nodes() {
        let mut ns = weighted(&[2, 2]);
        ns[1].ramp = 0.25; // effective weights 2 and 0.5
        let mut p = WeightedRoundRobinPolicy::new(ns.len());
        let req = RequestInfo::get("/x");
        let mut counts = [0u32; 2];
        for _ in 0..500 {
            counts[p.pick(&req, &ns, Time::ZERO).unwrap().index()] += 1;
        }
        assert_eq!(counts, [400, 100]);
        ns[0].up = false;
        assert!((0..10).all(|_| p.pick(&req, &ns, Time::ZERO) == Some(NodeId(1))));
        ns[1].up = false;
        assert_eq!(p.pick(&req, &ns, Time::ZERO), None);
    }
}
