//! `chash-bounded`: consistent hashing with bounded loads (Mirrokni, Thorup, Zadimoghaddam;
//! HAProxy's `hash-balance-factor`). A target walks the ring from its hash to the first up
//! node whose load is under its cap, `ceil(factor × (total load + 1) × share of weight)`.

use crate::Policy;
use crate::lc::least_loaded_by;
use crate::ring::HashRing;
use locus_core::{NodeId, NodeStatus, RequestInfo, Time};

/// Consistent hashing with bounded loads. With `balance_factor` c (in percent: 150 means
/// 1.5), total load L over the up nodes and W the sum of their effective weights, node i
/// may take the request only if `load_i < ceil(c/100 · (L + 1) · w_i / W)`. The caps add up
/// to at least L + 1, so some up node always has room, and no node ever goes past its cap.
#[derive(Debug)]
pub struct BoundedLoadPolicy {
    ring: HashRing,
    balance_factor: u32,
}

impl BoundedLoadPolicy {
    /// A bounded-load ring over nodes with these weights, `vnodes` points per unit of weight
    /// and a balance factor in percent (at least 100).
    pub fn new(weights: &[u32], vnodes: u32, balance_factor: u32) -> BoundedLoadPolicy {
        BoundedLoadPolicy { ring: HashRing::new(weights, vnodes), balance_factor }
    }

    /// The balance factor in percent.
    pub fn balance_factor(&self) -> u32 {
        self.balance_factor
    }

    /// Node `node`'s cap for one more request, given the up nodes' total load and total
    /// effective weight. Computed as one division of exact products so that, with integer
    /// weights, a cap that is mathematically an integer is not rounded up past it.
    fn cap(&self, node: &NodeStatus, total_load: u64, total_weight: f64) -> f64 {
        let w = node.effective_weight().max(f64::MIN_POSITIVE);
        (self.balance_factor as f64 * (total_load + 1) as f64 * w / (100.0 * total_weight)).ceil()
    }
}

impl Policy for BoundedLoadPolicy {
    fn name(&self) -> &'static str {
        "chash-bounded"
    }

    fn pick(&mut self, req: &RequestInfo<'_>, nodes: &[NodeStatus], _now: Time) -> Option<NodeId> {
        let mut total_load = 0u64;
        let mut total_weight = 0.0;
        for n in nodes.iter().filter(|n| n.up) {
            total_load += n.load as u64;
            total_weight += n.effective_weight().max(f64::MIN_POSITIVE);
        }
        if total_weight == 0.0 {
            return None;
        }
        let found = self.ring.successors(req.target_hash).find(|id| {
            nodes
                .get(id.index())
                .is_some_and(|n| n.up && (n.load as f64) < self.cap(n, total_load, total_weight))
        });
        // Unreachable in exact arithmetic (the caps sum to at least L + 1); kept so that a
        // rounding corner case still yields an up node.
        found.or_else(|| least_loaded_by(nodes, 0, NodeStatus::weighted_load))
    }

    fn on_node_down(&mut self, _node: NodeId, nodes: &[NodeStatus], _now: Time) {
        self.ring.set_members(nodes);
    }

    fn on_node_up(&mut self, _node: NodeId, nodes: &[NodeStatus], _now: Time) {
        self.ring.set_members(nodes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Cluster;
    use proptest::prelude::*;
    use std::time::Duration;

    /// `load <= ceil(factor/100 · total · w / W)`, in exact integer arithmetic.
    fn within_cap(load: u32, factor: u32, total: u64, w: u32, weight_sum: u64) -> bool {
        let (load, factor, total, w, weight_sum) =
            (load as u128, factor as u128, total as u128, w as u128, weight_sum as u128);
        load == 0 || (load - 1) * 100 * weight_sum < factor * total * w
    }

    #[test]
    fn chash_bounded_sends_a_hot_target_elsewhere_once_its_node_is_full() {
        let weights = [1u32; 4];
        let mut c =
            Cluster::new(Box::new(BoundedLoadPolicy::new(&weights, 100, 125)), &weights, Duration::ZERO);
        let req = RequestInfo::get("/hot");
        let home = c.assign(&req, Time::ZERO).unwrap();
        let mut others = 0;
        for _ in 0..99 {
            if c.assign(&req, Time::ZERO).unwrap() != home {
                others += 1;
            }
        }
        // Plain consistent hashing would put all 100 on `home`; the cap is ceil(1.25·100/4).
        assert_eq!(c.nodes()[home.index()].load, 32);
        assert_eq!(others, 68);
        for n in c.nodes() {
            assert!(n.load <= 32);
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn chash_bounded_never_exceeds_its_factor(
            weights in prop::collection::vec(1u32..4, 2..7),
            factor in 100u32..300,
            ops in prop::collection::vec((0u8..4, 0u16..50), 1..400),
        ) {
            let policy = BoundedLoadPolicy::new(&weights, 40, factor);
            let mut c = Cluster::new(Box::new(policy), &weights, Duration::ZERO);
            let weight_sum: u64 = weights.iter().map(|&w| w as u64).sum();
            let mut outstanding: Vec<(NodeId, u64)> = Vec::new();
            let targets: Vec<String> = (0..50).map(|i| format!("/p/{i}")).collect();
            let mut completed_any = false;
            for (op, t) in ops {
                if op == 0 && !outstanding.is_empty() {
                    let (node, h) = outstanding.swap_remove(t as usize % outstanding.len());
                    c.complete(node, h, Time::ZERO);
                    completed_any = true;
                    continue;
                }
                let req = RequestInfo::get(&targets[t as usize]);
                let node = c.assign(&req, Time::ZERO).unwrap();
                outstanding.push((node, req.target_hash));
                let total: u64 = c.nodes().iter().map(|n| n.load as u64).sum();
                let n = &c.nodes()[node.index()];
                prop_assert!(within_cap(n.load, factor, total, n.weight, weight_sum),
                    "node {} load {} over cap (total {}, factor {})", node, n.load, total, factor);
                if !completed_any {
                    // Without completions the caps only grow, so every node is within the
                    // current cap.
                    for n in c.nodes() {
                        prop_assert!(within_cap(n.load, factor, total, n.weight, weight_sum));
                    }
                }
            }
        }
    }
}
