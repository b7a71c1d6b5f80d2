//! `NodeTable`: selection tables for the l4 path (`Forwarder::set_selection`) — slots holding node
//! indices, read by the program with a per-CPU rotating index (rr, wrr, lc) or a hash of the
//! 4-tuple. Weighted tables interleave nodes (smooth weighted round robin) rather than run them
//! in blocks; least-connections is a table rewritten from node-reported connection counts.

use crate::maps::MAX_SELECTION;

/// A selection table: `slots()[i]` is the node slot (index into `set_nodes`) of table slot `i`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NodeTable {
    slots: Vec<u32>,
}

impl NodeTable {
    /// Every node once, in order: round robin.
    pub fn round_robin(nodes: usize) -> NodeTable {
        NodeTable { slots: (0..nodes.min(MAX_SELECTION) as u32).collect() }
    }

    /// Node `i` appears `weights[i]` times (scaled down proportionally, but at least once for a
    /// positive weight, when the sum exceeds the table's capacity), interleaved by smooth weighted
    /// round robin so that a heavy node's slots are spread out. Weight 0 leaves a node out.
    pub fn weighted(weights: &[u32]) -> NodeTable {
        let weights = fit_weights(weights, MAX_SELECTION as u64);
        let total: i64 = weights.iter().map(|&w| i64::from(w)).sum();
        let mut current = vec![0i64; weights.len()];
        let mut slots = Vec::with_capacity(total as usize);
        for _ in 0..total {
            let mut best = 0;
            for (i, &w) in weights.iter().enumerate() {
                current[i] += i64::from(w);
                if current[i] > current[best] {
                    best = i;
                }
            }
            current[best] -= total;
            slots.push(best as u32);
        }
        NodeTable { slots }
    }

    /// Least connections as a table: node `i` gets a share of `len` slots proportional to
    /// `weights[i] / (1 + connections[i])`, so new connections lean towards the least loaded
    /// nodes until the next rewrite. Rewrite it whenever the nodes report their counts.
    pub fn least_connections(connections: &[u64], weights: &[u32], len: usize) -> NodeTable {
        let len = len.clamp(1, MAX_SELECTION);
        let shares: Vec<f64> = weights
            .iter()
            .enumerate()
            .map(|(i, &w)| f64::from(w) / (1.0 + connections.get(i).copied().unwrap_or(0) as f64))
            .collect();
        let sum: f64 = shares.iter().sum();
        if sum <= 0.0 {
            return NodeTable::default();
        }
        let scaled: Vec<u32> = shares
            .iter()
            .map(|s| if *s > 0.0 { ((s / sum) * len as f64).round().max(1.0) as u32 } else { 0 })
            .collect();
        NodeTable::weighted(&scaled)
    }

    /// A table of explicit slots.
    pub fn from_slots(slots: Vec<u32>) -> NodeTable {
        NodeTable { slots }
    }

    /// The slots, for `Forwarder::set_selection`.
    pub fn slots(&self) -> &[u32] {
        &self.slots
    }

    /// How many slots a node has.
    pub fn count(&self, node: u32) -> usize {
        self.slots.iter().filter(|&&s| s == node).count()
    }
}

/// Weights whose sum fits `capacity`: unchanged when they fit, else divided by their common
/// divisor and then scaled down proportionally (positive weights stay at least 1).
fn fit_weights(weights: &[u32], capacity: u64) -> Vec<u32> {
    let sum: u64 = weights.iter().map(|&w| u64::from(w)).sum();
    if sum <= capacity {
        return weights.to_vec();
    }
    let g = weights.iter().fold(0u32, |g, &w| gcd(g, w)).max(1);
    let reduced: Vec<u32> = weights.iter().map(|w| w / g).collect();
    let sum: u64 = reduced.iter().map(|&w| u64::from(w)).sum();
    if sum <= capacity {
        return reduced;
    }
    let positive = reduced.iter().filter(|&&w| w > 0).count() as u64;
    let room = capacity.saturating_sub(positive);
    reduced.iter().map(|&w| if w == 0 { 0 } else { 1 + (u64::from(w) * room / sum) as u32 }).collect()
}

fn gcd(a: u32, b: u32) -> u32 {
    if b == 0 { a } else { gcd(b, a % b) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn round_robin_lists_every_node_once() {
        assert_eq!(NodeTable::round_robin(3).slots(), &[0, 1, 2]);
    }

    #[test]
    fn weighted_interleaves_a_heavy_node() {
        let t = NodeTable::weighted(&[5, 1, 1]);
        assert_eq!(t.slots(), &[0, 0, 1, 0, 2, 0, 0]);
    }

    #[test]
    fn weighted_runs_a_heavy_node_between_equal_light_ones_at_most_six_times() {
        // The case CI's proptest found: the two light nodes come out together once per cycle.
        let t = NodeTable::weighted(&[2, 16, 2]);
        assert_eq!(t.slots(), &[1, 1, 1, 0, 1, 1, 2, 1, 1, 1, 1, 1, 1, 0, 1, 1, 2, 1, 1, 1]);
    }

    #[test]
    fn least_connections_favours_the_idle_node() {
        let t = NodeTable::least_connections(&[99, 0], &[1, 1], 100);
        assert!(t.count(1) > 90 && t.count(0) >= 1, "{:?}", (t.count(0), t.count(1)));
        assert!(NodeTable::least_connections(&[1, 1], &[0, 0], 10).slots().is_empty());
    }

    proptest! {
        #[test]
        fn weighted_gives_each_node_its_weight_and_spreads_it(weights in prop::collection::vec(0u32..20, 1..8)) {
            let t = NodeTable::weighted(&weights);
            for (i, &w) in weights.iter().enumerate() {
                prop_assert_eq!(t.count(i as u32), w as usize);
            }
            // Smooth WRR spreads a node with share s of the table into runs no longer than
            // ceil(s/(1-s)) + 2. Not + 1: light nodes of equal weight come out side by side, so
            // [2, 16, 2] runs the heavy node 6 times where 5 would be even. The + 2 bound holds for
            // every weight vector of up to 4 nodes with weights below 20 (checked exhaustively).
            let total: u32 = weights.iter().sum();
            for (i, &w) in weights.iter().enumerate() {
                if w == 0 || w == total { continue; }
                let longest = t.slots().chunk_by(|a, b| a == b).filter(|r| r[0] == i as u32).map(|r| r.len()).max().unwrap_or(0);
                let bound = (f64::from(w) / f64::from(total - w)).ceil() as usize + 2;
                prop_assert!(longest <= bound, "node {} runs {} > {}", i, longest, bound);
            }
        }

        #[test]
        fn oversized_weights_fit_the_table_and_keep_every_node(weights in prop::collection::vec(1u32..1_000_000, 1..6)) {
            let t = NodeTable::weighted(&weights);
            prop_assert!(t.slots().len() <= MAX_SELECTION);
            for i in 0..weights.len() {
                prop_assert!(t.count(i as u32) >= 1);
            }
        }
    }
}
