//! `lc` and `wlc`: least connections (fewest ramped active requests) and weighted least
//! connections (ramped load per unit of weight), with ties spread by a rotating start. Also
//! `least_loaded_by`, the scan LARD and LARD/R use to find the least loaded node.

use crate::Policy;
use locus_core::{NodeId, NodeStatus, RequestInfo, Time};

/// The up node with the smallest `key`, scanning from `start` (mod the node count) so that
/// among equally loaded nodes the one first reached from `start` wins. `None` when no node
/// is up.
pub(crate) fn least_loaded_by(
    nodes: &[NodeStatus],
    start: usize,
    key: impl Fn(&NodeStatus) -> f64,
) -> Option<NodeId> {
    let n = nodes.len();
    let mut best: Option<(usize, f64)> = None;
    for step in 0..n {
        let i = (start + step) % n;
        let node = &nodes[i];
        if !node.up {
            continue;
        }
        let k = key(node);
        if best.is_none_or(|(_, bk)| k < bk) {
            best = Some((i, k));
        }
    }
    best.map(|(i, _)| NodeId(i as u32))
}

/// Least connections: the up node with the smallest `ramped_load()` (or, weighted, the
/// smallest `weighted_load()`). Each pick starts its scan one node further, so ties rotate.
#[derive(Debug)]
pub struct LeastConnectionsPolicy {
    weighted: bool,
    start: usize,
}

impl LeastConnectionsPolicy {
    /// `lc`: least ramped load.
    pub fn unweighted() -> LeastConnectionsPolicy {
        LeastConnectionsPolicy { weighted: false, start: 0 }
    }

    /// `wlc`: least ramped load per unit of weight.
    pub fn weighted() -> LeastConnectionsPolicy {
        LeastConnectionsPolicy { weighted: true, start: 0 }
    }
}

impl Policy for LeastConnectionsPolicy {
    /// Reads the nodes' status afresh at every pick: nothing to adapt.
    fn adapt_to_nodes(&mut self, _nodes: &[NodeStatus], _now: Time) -> bool {
        true
    }

    fn name(&self) -> &'static str {
        if self.weighted { "wlc" } else { "lc" }
    }

    fn pick(&mut self, _req: &RequestInfo<'_>, nodes: &[NodeStatus], _now: Time) -> Option<NodeId> {
        let start = self.start;
        self.start = self.start.wrapping_add(1);
        if self.weighted {
            least_loaded_by(nodes, start, NodeStatus::weighted_load)
        } else {
            least_loaded_by(nodes, start, NodeStatus::ramped_load)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_nodes::loaded;

    #[test]
    fn lc_picks_least_loaded() {
        let mut p = LeastConnectionsPolicy::unweighted();
        let req = RequestInfo::get("/x");
        let mut ns = loaded(&[5, 3, 7, 4]);
        for _ in 0..4 {
            assert_eq!(p.pick(&req, &ns, Time::ZERO), Some(NodeId(1)));
        }
        // The ramp makes a warming node look busier: 3 / 0.5 = 6 > 4.
        ns[1].ramp = 0.5;
        assert_eq!(p.pick(&req, &ns, Time::ZERO), Some(NodeId(3)));
        ns[3].up = false;
        assert_eq!(p.pick(&req, &ns, Time::ZERO), Some(NodeId(0)));
    }

    #[test]
    fn lc_spreads_ties_across_equally_loaded_nodes() {
        let mut p = LeastConnectionsPolicy::unweighted();
        let req = RequestInfo::get("/x");
        let ns = loaded(&[2, 1, 1, 1]);
        let picks: Vec<u32> = (0..6).map(|_| p.pick(&req, &ns, Time::ZERO).unwrap().0).collect();
        assert_eq!(picks, [1, 1, 2, 3, 1, 1]);
    }

    #[test]
    fn wlc_picks_least_load_per_weight() {
        let mut p = LeastConnectionsPolicy::weighted();
        let req = RequestInfo::get("/x");
        let mut ns = loaded(&[4, 3, 10]);
        ns[2].weight = 4; // 10 / 4 = 2.5 < 3 < 4
        assert_eq!(p.pick(&req, &ns, Time::ZERO), Some(NodeId(2)));
        let mut lc = LeastConnectionsPolicy::unweighted();
        assert_eq!(lc.pick(&req, &ns, Time::ZERO), Some(NodeId(1)));
        assert_eq!(p.name(), "wlc");
        assert_eq!(lc.name(), "lc");
    }
}
