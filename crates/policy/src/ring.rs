//! `chash` (ring): consistent hashing on a ring of virtual nodes. `HashRing` holds the
//! sorted points (`vnodes` per unit of weight, from a stable hash of node index and replica)
//! and finds a target's successors by binary search; `RingPolicy` sends a target to the
//! first up node clockwise from the target's hash.

use crate::Policy;
use locus_core::{NodeId, NodeStatus, RequestInfo, Time, target_hash};
use std::fmt::Write;

/// A ring of virtual nodes. Every configured node has `vnodes × weight` points; the live
/// ring holds the points of the nodes currently in the view.
#[derive(Debug, Clone)]
pub struct HashRing {
    /// Points of every configured node, sorted by (point, owner).
    all_points: Vec<u64>,
    all_owners: Vec<u32>,
    /// The points of the nodes in the view, sorted the same way.
    points: Vec<u64>,
    owners: Vec<u32>,
}

impl HashRing {
    /// A ring over nodes `0..weights.len()` with `vnodes` points per unit of weight (a
    /// weight of 0 counts as 1), all of them in the view.
    pub fn new(weights: &[u32], vnodes: u32) -> HashRing {
        let total: usize = weights.iter().map(|&w| w.max(1) as usize * vnodes as usize).sum();
        let mut pairs: Vec<(u64, u32)> = Vec::with_capacity(total);
        let mut label = String::with_capacity(32);
        for (i, &w) in weights.iter().enumerate() {
            for r in 0..w.max(1) as u64 * vnodes as u64 {
                label.clear();
                let _ = write!(label, "node{i}#{r}");
                pairs.push((target_hash(&label), i as u32));
            }
        }
        pairs.sort_unstable();
        let (all_points, all_owners): (Vec<u64>, Vec<u32>) = pairs.into_iter().unzip();
        HashRing { points: all_points.clone(), owners: all_owners.clone(), all_points, all_owners }
    }

    /// Rebuild the live ring from the nodes that are `up`.
    pub fn set_members(&mut self, nodes: &[NodeStatus]) {
        self.points.clear();
        self.owners.clear();
        for (&p, &o) in self.all_points.iter().zip(&self.all_owners) {
            if nodes.get(o as usize).is_some_and(|n| n.up) {
                self.points.push(p);
                self.owners.push(o);
            }
        }
    }

    /// Points on the live ring.
    pub fn len(&self) -> usize {
        self.points.len()
    }

    /// Whether the live ring has no points (no node in the view).
    pub fn is_empty(&self) -> bool {
        self.points.is_empty()
    }

    /// The owners of the live ring's points clockwise from `hash` (the first point at or
    /// after it, wrapping around), one per point: a node appears once per virtual node.
    pub fn successors(&self, hash: u64) -> impl Iterator<Item = NodeId> + '_ {
        let start = self.points.partition_point(|&p| p < hash);
        self.owners[start..].iter().chain(&self.owners[..start]).map(|&o| NodeId(o))
    }

    /// The first node clockwise from `hash` that is up in `nodes`.
    pub fn node_for(&self, hash: u64, nodes: &[NodeStatus]) -> Option<NodeId> {
        self.successors(hash).find(|id| nodes.get(id.index()).is_some_and(|n| n.up))
    }
}

/// Consistent hashing on a ring: a target goes to the first up node clockwise from its hash.
/// When a node leaves only its targets move; when it comes back they return.
#[derive(Debug)]
pub struct RingPolicy {
    ring: HashRing,
}

impl RingPolicy {
    /// A ring over nodes with these weights and `vnodes` points per unit of weight.
    pub fn new(weights: &[u32], vnodes: u32) -> RingPolicy {
        RingPolicy { ring: HashRing::new(weights, vnodes) }
    }

    /// The ring.
    pub fn ring(&self) -> &HashRing {
        &self.ring
    }
}

impl Policy for RingPolicy {
    fn name(&self) -> &'static str {
        "chash"
    }

    fn pick(&mut self, req: &RequestInfo<'_>, nodes: &[NodeStatus], _now: Time) -> Option<NodeId> {
        self.ring.node_for(req.target_hash, nodes)
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
    use crate::MaglevPolicy;

    fn up_nodes(n: u32) -> Vec<NodeStatus> {
        (0..n).map(|i| NodeStatus::new(NodeId(i))).collect()
    }

    /// Map `targets` with all `n` nodes up, then with node `gone` down; return the fraction
    /// of targets that moved and whether every target of a surviving node stayed put.
    fn remap(policy: &mut dyn Policy, n: u32, gone: u32, targets: &[String]) -> (f64, usize) {
        let mut ns = up_nodes(n);
        let now = Time::ZERO;
        let before: Vec<NodeId> =
            targets.iter().map(|t| policy.pick(&RequestInfo::get(t), &ns, now).unwrap()).collect();
        ns[gone as usize].up = false;
        policy.on_node_down(NodeId(gone), &ns, now);
        let mut moved = 0;
        let mut moved_from_survivors = 0;
        for (t, &b) in targets.iter().zip(&before) {
            let a = policy.pick(&RequestInfo::get(t), &ns, now).unwrap();
            assert_ne!(a, NodeId(gone));
            if a != b {
                moved += 1;
                if b != NodeId(gone) {
                    moved_from_survivors += 1;
                }
            }
        }
        // Coming back restores the original mapping.
        ns[gone as usize].up = true;
        policy.on_node_up(NodeId(gone), &ns, now);
        for (t, &b) in targets.iter().zip(&before) {
            assert_eq!(policy.pick(&RequestInfo::get(t), &ns, now), Some(b));
        }
        (moved as f64 / targets.len() as f64, moved_from_survivors)
    }

    #[test]
    fn ring_and_maglev_remap_about_one_nth_when_a_node_leaves() {
        let targets: Vec<String> = (0..20_000).map(|i| format!("/t/{i}")).collect();
        for n in [5u32, 8, 10] {
            let expected = 1.0 / n as f64;
            for gone in [0, n / 2, n - 1] {
                let mut ring = RingPolicy::new(&vec![1; n as usize], 160);
                let (frac, from_survivors) = remap(&mut ring, n, gone, &targets);
                assert_eq!(from_survivors, 0, "ring moved targets of surviving nodes");
                assert!(
                    (frac - expected).abs() < expected * 0.35,
                    "ring: n={n} moved {frac:.3}, expected about {expected:.3}"
                );

                let mut maglev = MaglevPolicy::new(&vec![1; n as usize], 65537);
                let (frac, from_survivors) = remap(&mut maglev, n, gone, &targets);
                // Maglev trades a little disruption for balance: a few percent of the
                // survivors' targets may move too.
                assert!(
                    (from_survivors as f64) < 0.03 * targets.len() as f64,
                    "maglev moved {from_survivors} targets of surviving nodes"
                );
                assert!(
                    (frac - expected).abs() < expected * 0.35,
                    "maglev: n={n} moved {frac:.3}, expected about {expected:.3}"
                );
            }
        }
    }

    #[test]
    fn ring_spreads_targets_by_weight() {
        let ns = up_nodes(3);
        let mut p = RingPolicy::new(&[1, 1, 2], 160);
        let mut counts = [0usize; 3];
        for i in 0..40_000 {
            let t = format!("/w/{i}");
            counts[p.pick(&RequestInfo::get(&t), &ns, Time::ZERO).unwrap().index()] += 1;
        }
        // Expected 10k, 10k, 20k; 160 vnodes keep each within about 15%.
        assert!((8_500..11_500).contains(&counts[0]), "{counts:?}");
        assert!((8_500..11_500).contains(&counts[1]), "{counts:?}");
        assert!((17_000..23_000).contains(&counts[2]), "{counts:?}");
        assert_eq!(p.ring().len(), 160 * 4);
    }
}
