//! `InFlightWork`: the CPU work the sniffer expects of the requests each node holds right now
//! (assigned, not yet completed), kept by cost, so that a request-level pick can ask how much
//! a new request of cost `x` would share a node's processor with: Σ min(c_i, x) over the
//! requests in flight — for small `x` that is x × their number (least connections), for large
//! `x` the work they have left (least work).

use std::collections::{BTreeMap, HashMap};

/// One node's requests in flight: their expected costs, and which cost each target was given.
#[derive(Clone, Debug, Default)]
struct NodeWork {
    /// Expected cost (ns) → requests in flight with that cost.
    by_cost: BTreeMap<u64, u32>,
    /// Target hash → the costs its requests in flight were given (usually one).
    by_target: HashMap<u64, Vec<u64>>,
    count: u32,
}

impl NodeWork {
    fn add(&mut self, target_hash: u64, cost: u64) {
        *self.by_cost.entry(cost).or_insert(0) += 1;
        self.by_target.entry(target_hash).or_default().push(cost);
        self.count += 1;
    }

    fn remove(&mut self, target_hash: u64) {
        let Some(costs) = self.by_target.get_mut(&target_hash) else { return };
        let Some(cost) = costs.pop() else { return };
        if costs.is_empty() {
            self.by_target.remove(&target_hash);
        }
        if let Some(n) = self.by_cost.get_mut(&cost) {
            *n -= 1;
            if *n == 0 {
                self.by_cost.remove(&cost);
            }
        }
        self.count = self.count.saturating_sub(1);
    }

    fn shared_with(&self, x: u64) -> u128 {
        self.by_cost.iter().map(|(&c, &n)| c.min(x) as u128 * n as u128).sum()
    }
}

/// Every node's requests in flight, by expected cost.
#[derive(Clone, Debug, Default)]
pub(crate) struct InFlightWork {
    nodes: Vec<NodeWork>,
}

impl InFlightWork {
    pub(crate) fn new(node_count: usize) -> InFlightWork {
        InFlightWork { nodes: vec![NodeWork::default(); node_count] }
    }

    /// A request for `target_hash` of expected cost `cost` ns went to `node`.
    pub(crate) fn add(&mut self, node: usize, target_hash: u64, cost: u64) {
        if let Some(n) = self.nodes.get_mut(node) {
            n.add(target_hash, cost);
        }
    }

    /// A request for `target_hash` completed on `node` (one not known is ignored).
    pub(crate) fn remove(&mut self, node: usize, target_hash: u64) {
        if let Some(n) = self.nodes.get_mut(node) {
            n.remove(target_hash);
        }
    }

    /// Forget `node`'s requests (it went down, or its load says it holds none).
    pub(crate) fn clear(&mut self, node: usize) {
        if let Some(n) = self.nodes.get_mut(node) {
            *n = NodeWork::default();
        }
    }

    /// Requests in flight on `node`.
    pub(crate) fn count(&self, node: usize) -> u32 {
        self.nodes.get(node).map_or(0, |n| n.count)
    }

    /// Σ min(c_i, x) over `node`'s requests in flight, ns: how much a new request of cost
    /// `x` would be slowed by them on a processor they share.
    pub(crate) fn shared_with(&self, node: usize, x: u64) -> u128 {
        self.nodes.get(node).map_or(0, |n| n.shared_with(x))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_small_request_counts_requests_and_a_large_one_counts_work() {
        let mut w = InFlightWork::new(2);
        // Node 0: three cheap requests; node 1: one 100 ms request.
        for t in 0..3 {
            w.add(0, t, 200_000);
        }
        w.add(1, 9, 100_000_000);
        // A cheap request shares less with node 1 (one request in flight)...
        assert!(w.shared_with(1, 200_000) < w.shared_with(0, 200_000));
        // ...a 50 ms one shares less with node 0 (0.6 ms of work in flight).
        assert!(w.shared_with(0, 50_000_000) < w.shared_with(1, 50_000_000));
        assert_eq!(w.shared_with(0, 50_000_000), 600_000);
        w.remove(1, 9);
        assert_eq!((w.count(1), w.shared_with(1, 1)), (0, 0));
        w.remove(1, 9);
        assert_eq!(w.count(1), 0, "an unknown completion is ignored");
        w.clear(0);
        assert_eq!(w.count(0), 0);
    }

    proptest! {
        #[test]
        fn removing_what_was_added_leaves_nothing_in_flight(
            ops in proptest::collection::vec((0usize..3, 0u64..5, 1u64..1_000), 0..60)
        ) {
            let mut w = InFlightWork::new(3);
            for &(node, target, cost) in &ops {
                w.add(node, target, cost);
            }
            let total: u128 = (0..3).map(|n| w.shared_with(n, u64::MAX)).sum();
            prop_assert_eq!(total, ops.iter().map(|o| o.2 as u128).sum::<u128>());
            for &(node, target, _) in ops.iter().rev() {
                w.remove(node, target);
            }
            for n in 0..3 {
                prop_assert_eq!((w.count(n), w.shared_with(n, u64::MAX)), (0, 0));
            }
        }
    }
}
