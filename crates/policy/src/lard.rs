//! `lard`: basic locality-aware request distribution (Pai et al.). Each target is mapped to
//! one node; the mapping is an LRU of bounded size keyed by the target's 64-bit hash. A
//! target moves to the least loaded node only when its node is overloaded.

use crate::Policy;
use crate::lc::least_loaded_by;
use locus_core::{NodeId, NodeStatus, RequestInfo, Time};
use lru::LruCache;

/// Where a target is mapped: the node and the node's down-count when the entry was made.
/// An entry made before the node last went down is stale: the target is unassigned.
#[derive(Debug, Clone, Copy)]
struct Assignment {
    node: u32,
    epoch: u32,
}

/// Basic LARD. For a target with no (valid) mapping, or whose node `n` has
/// `(n.load > T_high && some node has load < T_low) || n.load >= 2·T_high`, the target is
/// (re)assigned to the least loaded up node. Loads are ramped loads (equal to the active
/// request count once a node is past slow start). At most `max_targets` targets are
/// remembered; the least recently requested are forgotten first. When a node goes down its
/// targets count as unassigned (checked lazily, in O(1), by a per-node down-count).
#[derive(Debug)]
pub struct LardPolicy {
    map: LruCache<u64, Assignment>,
    max_targets: usize,
    t_low: f64,
    t_high: f64,
    /// How many times each node has gone down.
    epochs: Vec<u32>,
    /// Start of the next least-loaded scan, rotated so that ties spread.
    start: usize,
}

impl LardPolicy {
    /// LARD with thresholds `t_low < t_high` remembering at most `max_targets` targets
    /// (at least 1) for `node_count` nodes.
    pub fn new(node_count: usize, t_low: u32, t_high: u32, max_targets: usize) -> LardPolicy {
        LardPolicy {
            map: LruCache::unbounded(),
            max_targets: max_targets.max(1),
            t_low: t_low as f64,
            t_high: t_high as f64,
            epochs: vec![0; node_count],
            start: 0,
        }
    }

    /// The node `target_hash` is mapped to, if the mapping is still valid (does not count
    /// as a use for the LRU).
    pub fn assigned_node(&self, target_hash: u64) -> Option<NodeId> {
        self.map.peek(&target_hash).filter(|a| self.is_current(a)).map(|a| NodeId(a.node))
    }

    fn is_current(&self, a: &Assignment) -> bool {
        self.epochs.get(a.node as usize).is_some_and(|&e| e == a.epoch)
    }

    fn least_loaded(&mut self, nodes: &[NodeStatus]) -> Option<NodeId> {
        let start = self.start;
        self.start = self.start.wrapping_add(1);
        least_loaded_by(nodes, start, NodeStatus::ramped_load)
    }

    fn record(&mut self, target_hash: u64, node: NodeId) {
        let epoch = self.epochs.get(node.index()).copied().unwrap_or(0);
        self.map.put(target_hash, Assignment { node: node.0, epoch });
        while self.map.len() > self.max_targets {
            self.map.pop_lru();
        }
    }
}

impl Policy for LardPolicy {
    fn name(&self) -> &'static str {
        "lard"
    }

    fn pick(&mut self, req: &RequestInfo<'_>, nodes: &[NodeStatus], _now: Time) -> Option<NodeId> {
        let h = req.target_hash;
        let current = self
            .map
            .get(&h)
            .copied()
            .filter(|a| self.is_current(a) && nodes.get(a.node as usize).is_some_and(|n| n.up));
        if let Some(a) = current {
            let n = &nodes[a.node as usize];
            let load = n.ramped_load();
            if load <= self.t_high {
                return Some(NodeId(a.node));
            }
            let p = self.least_loaded(nodes)?;
            let p_load = nodes[p.index()].ramped_load();
            if p_load < self.t_low || load >= 2.0 * self.t_high {
                if p.0 != a.node {
                    self.record(h, p);
                }
                return Some(p);
            }
            return Some(NodeId(a.node));
        }
        let p = self.least_loaded(nodes)?;
        self.record(h, p);
        Some(p)
    }

    fn on_node_down(&mut self, node: NodeId, _nodes: &[NodeStatus], _now: Time) {
        if let Some(e) = self.epochs.get_mut(node.index()) {
            *e = e.wrapping_add(1);
        }
    }

    fn mapping_len(&self) -> usize {
        self.map.len()
    }

    /// New slots start with no targets; the mapping of the others stays.
    fn adapt_to_nodes(&mut self, nodes: &[NodeStatus], _now: Time) -> bool {
        if self.epochs.len() < nodes.len() {
            self.epochs.resize(nodes.len(), 0);
        }
        true
    }

    fn set_params(&mut self, config: &crate::PolicyConfig) -> bool {
        let crate::PolicyConfig::Lard { t_low, t_high, max_targets } = *config else { return false };
        (self.t_low, self.t_high, self.max_targets) = (t_low as f64, t_high as f64, max_targets.max(1));
        while self.map.len() > self.max_targets {
            self.map.pop_lru();
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_nodes::loaded;

    /// Map "/t" to node 0 (the only idle node), then ask again with `loads`.
    fn repick(loads: &[u32]) -> NodeId {
        let mut p = LardPolicy::new(loads.len(), 25, 65, 100);
        let req = RequestInfo::get("/t");
        let mut first = loaded(&vec![1000; loads.len()]);
        first[0].load = 0;
        assert_eq!(p.pick(&req, &first, Time::ZERO), Some(NodeId(0)));
        let got = p.pick(&req, &loaded(loads), Time::ZERO).unwrap();
        assert_eq!(p.assigned_node(req.target_hash), Some(got), "the mapping follows the pick");
        got
    }

    #[test]
    fn lard_moves_a_target_only_past_t_high_with_an_idle_node_or_past_twice_t_high() {
        // At T_high, even with an idle node: stays.
        assert_eq!(repick(&[65, 0, 40]), NodeId(0));
        // Past T_high but no node under T_low: stays.
        assert_eq!(repick(&[66, 25, 40]), NodeId(0));
        // Past T_high and a node under T_low: moves to the least loaded.
        assert_eq!(repick(&[66, 30, 24]), NodeId(2));
        // Just under 2·T_high with every other node at T_low or more: stays.
        assert_eq!(repick(&[129, 25, 100]), NodeId(0));
        // At 2·T_high: moves to the least loaded even though it is not under T_low.
        assert_eq!(repick(&[130, 90, 80]), NodeId(2));
    }

    #[test]
    fn lard_maps_a_new_target_to_the_least_loaded_node_and_keeps_it() {
        let mut p = LardPolicy::new(3, 25, 65, 100);
        let mut ns = loaded(&[5, 2, 9]);
        let req = RequestInfo::get("/a");
        assert_eq!(p.pick(&req, &ns, Time::ZERO), Some(NodeId(1)));
        ns[1].load = 50; // busier, but under T_high: locality wins
        assert_eq!(p.pick(&req, &ns, Time::ZERO), Some(NodeId(1)));
        assert_eq!(p.mapping_len(), 1);
    }

    #[test]
    fn lard_forgets_targets_of_a_node_that_went_down_and_bounds_its_mapping() {
        let mut p = LardPolicy::new(2, 25, 65, 3);
        let mut ns = loaded(&[0, 10]);
        let req = RequestInfo::get("/a");
        assert_eq!(p.pick(&req, &ns, Time::ZERO), Some(NodeId(0)));
        ns[0].up = false;
        p.on_node_down(NodeId(0), &ns, Time::ZERO);
        assert_eq!(p.assigned_node(req.target_hash), None);
        assert_eq!(p.pick(&req, &ns, Time::ZERO), Some(NodeId(1)));
        // Back up and idle: the target stays where it was remapped.
        ns[0].up = true;
        assert_eq!(p.pick(&req, &ns, Time::ZERO), Some(NodeId(1)));
        for t in ["/b", "/c", "/d", "/e"] {
            p.pick(&RequestInfo::get(t), &ns, Time::ZERO);
        }
        assert_eq!(p.mapping_len(), 3);
        assert_eq!(p.assigned_node(req.target_hash), None, "least recently used is forgotten");
    }
}
