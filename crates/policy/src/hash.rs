//! `hash`: the LARD paper's LB, a static partition of targets: node = target hash mod the
//! number of configured nodes; when that node is down the target is rehashed among the up
//! nodes. Also `mix64`, the integer mixer the hashing policies share.

use crate::Policy;
use locus_core::{NodeId, NodeStatus, RequestInfo, Time};

/// SplitMix64's finaliser: a fast bijective mix of 64 bits, stable across runs.
pub(crate) fn mix64(mut x: u64) -> u64 {
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// LB: a target's home is `target_hash mod n` over all configured nodes, whatever their
/// load or weight. If the home is down, the target goes to up node number
/// `mix64(target_hash) mod up_count` (counting up nodes in index order), so the same target
/// goes to the same node as long as the set of up nodes does not change.
#[derive(Debug, Default)]
pub struct StaticHashPolicy;

impl StaticHashPolicy {
    /// The static partition.
    pub fn new() -> StaticHashPolicy {
        StaticHashPolicy
    }
}

impl Policy for StaticHashPolicy {
    /// Reads the nodes' status afresh at every pick: nothing to adapt.
    fn adapt_to_nodes(&mut self, _nodes: &[NodeStatus], _now: Time) -> bool {
        true
    }

    fn name(&self) -> &'static str {
        "hash"
    }

    fn pick(&mut self, req: &RequestInfo<'_>, nodes: &[NodeStatus], _now: Time) -> Option<NodeId> {
        if nodes.is_empty() {
            return None;
        }
        let home = (req.target_hash % nodes.len() as u64) as usize;
        if nodes[home].up {
            return Some(NodeId(home as u32));
        }
        let up = nodes.iter().filter(|n| n.up).count();
        if up == 0 {
            return None;
        }
        let k = (mix64(req.target_hash) % up as u64) as usize;
        nodes.iter().filter(|n| n.up).nth(k).map(|n| n.id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lb_keeps_a_target_on_one_node() {
        let mut p = StaticHashPolicy::new();
        let mut ns: Vec<NodeStatus> = (0..5).map(|i| NodeStatus::new(NodeId(i))).collect();
        let targets: Vec<String> = (0..500).map(|i| format!("/doc/{i}.html")).collect();
        let first: Vec<NodeId> =
            targets.iter().map(|t| p.pick(&RequestInfo::get(t), &ns, Time::ZERO).unwrap()).collect();
        // Load does not move a target.
        ns[0].load = 1000;
        for (t, &n) in targets.iter().zip(&first) {
            assert_eq!(p.pick(&RequestInfo::get(t), &ns, Time::ZERO), Some(n));
            assert_eq!(n.index() as u64, RequestInfo::get(t).target_hash % 5);
        }
        // Every node gets a share of the targets.
        for i in 0..5 {
            assert!(first.iter().filter(|n| n.index() == i).count() > 60);
        }
        // With node 2 down its targets go elsewhere, consistently; the others stay.
        ns[2].up = false;
        for (t, &n) in targets.iter().zip(&first) {
            let a = p.pick(&RequestInfo::get(t), &ns, Time::ZERO).unwrap();
            let b = p.pick(&RequestInfo::get(t), &ns, Time::ZERO).unwrap();
            assert_eq!(a, b);
            assert_ne!(a, NodeId(2));
            if n != NodeId(2) {
                assert_eq!(a, n);
            }
        }
        for n in &mut ns {
            n.up = false;
        }
        assert_eq!(p.pick(&RequestInfo::get("/a"), &ns, Time::ZERO), None);
    }
}
