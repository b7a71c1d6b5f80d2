//! `p2c`: the power of two random choices. Two distinct up nodes drawn from a seeded
//! `SmallRng`; the one with the lower ramped load gets the request.

use crate::Policy;
use locus_core::{NodeId, NodeStatus, RequestInfo, Time};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

/// Power of two choices with a seeded generator: the same seed and the same sequence of
/// calls give the same picks.
#[derive(Debug)]
pub struct PowerOfTwoPolicy {
    rng: SmallRng,
}

impl PowerOfTwoPolicy {
    /// A policy whose random draws come from `seed`.
    pub fn new(seed: u64) -> PowerOfTwoPolicy {
        PowerOfTwoPolicy { rng: SmallRng::seed_from_u64(seed) }
    }
}

/// The `k`-th up node (0-based), counting only nodes that are up.
fn nth_up(nodes: &[NodeStatus], k: usize) -> Option<usize> {
    nodes.iter().enumerate().filter(|(_, n)| n.up).nth(k).map(|(i, _)| i)
}

impl Policy for PowerOfTwoPolicy {
    /// Reads the nodes' status afresh at every pick: nothing to adapt.
    fn adapt_to_nodes(&mut self, _nodes: &[NodeStatus], _now: Time) -> bool {
        true
    }

    fn name(&self) -> &'static str {
        "p2c"
    }

    fn pick(&mut self, _req: &RequestInfo<'_>, nodes: &[NodeStatus], _now: Time) -> Option<NodeId> {
        let up = nodes.iter().filter(|n| n.up).count();
        match up {
            0 => None,
            1 => nth_up(nodes, 0).map(|i| NodeId(i as u32)),
            _ => {
                let a = self.rng.random_range(0..up);
                let mut b = self.rng.random_range(0..up - 1);
                if b >= a {
                    b += 1;
                }
                let a = nth_up(nodes, a)?;
                let b = nth_up(nodes, b)?;
                let pick = if nodes[b].ramped_load() < nodes[a].ramped_load() { b } else { a };
                Some(NodeId(pick as u32))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn picks(seed: u64, nodes: &[NodeStatus], count: usize) -> Vec<u32> {
        let mut p = PowerOfTwoPolicy::new(seed);
        let req = RequestInfo::get("/x");
        (0..count).map(|_| p.pick(&req, nodes, Time::ZERO).unwrap().0).collect()
    }

    #[test]
    fn p2c_is_deterministic_for_a_seed() {
        let ns: Vec<NodeStatus> = (0..8).map(|i| NodeStatus::new(NodeId(i))).collect();
        assert_eq!(picks(7, &ns, 200), picks(7, &ns, 200));
        assert_ne!(picks(7, &ns, 200), picks(8, &ns, 200));
    }

    #[test]
    fn p2c_never_picks_the_most_loaded_of_many_and_skips_down_nodes() {
        let mut ns: Vec<NodeStatus> = (0..4).map(|i| NodeStatus::new(NodeId(i))).collect();
        ns[2].load = 100;
        // Two distinct draws: the busiest node always loses its comparison.
        assert!(picks(1, &ns, 500).iter().all(|&i| i != 2));
        ns[0].up = false;
        ns[1].up = false;
        ns[3].up = false;
        assert!(picks(1, &ns, 20).iter().all(|&i| i == 2));
        ns[2].up = false;
        let mut p = PowerOfTwoPolicy::new(1);
        assert_eq!(p.pick(&RequestInfo::get("/x"), &ns, Time::ZERO), None);
    }
}
