//! `GlobalCachePolicy`: the LARD paper's idealised LB/GC, a `Policy` that is given the
//! cache directory: a request goes to a node whose cache holds (or is fetching) its target;
//! otherwise to the node holding the globally oldest content, so that the miss evicts it.

use std::sync::Arc;

use locus_core::{NodeId, NodeStatus, RequestInfo, Time};
use locus_policy::{Policy, StaticHashPolicy};

use crate::directory::CacheDirectory;

/// LB/GC, precisely:
///
/// 1. nodes up that cache the target or are already fetching it: the least loaded of them
///    (ties: lowest index);
/// 2. else, if the target can never be cached (over the object limit) or is unknown: the
///    LB hash home (`StaticHashPolicy`, the switch's `hash`);
/// 3. else, a node up with room for the target in its cache (the LB home if it has room,
///    else the one with most room);
/// 4. else the node whose cache holds the globally oldest content — the smallest GDS
///    inflation value L (the priority of its last victim), or under LRU/LFU the oldest last
///    use of its last victim — ties to the LB home, then the lowest index.
///
/// Load plays no part beyond step 1: like LB, LB/GC aims only at locality.
pub struct GlobalCachePolicy {
    directory: Arc<CacheDirectory>,
    lb: StaticHashPolicy,
}

impl GlobalCachePolicy {
    pub fn new(directory: Arc<CacheDirectory>) -> GlobalCachePolicy {
        GlobalCachePolicy { directory, lb: StaticHashPolicy::new() }
    }
}

impl Policy for GlobalCachePolicy {
    fn name(&self) -> &'static str {
        "lb-gc"
    }

    fn pick(&mut self, req: &RequestInfo<'_>, nodes: &[NodeStatus], now: Time) -> Option<NodeId> {
        let d = &self.directory;
        let up: u64 = nodes.iter().filter(|n| n.up && n.id.index() < 64).fold(0, |m, n| m | 1 << n.id.0);
        if up == 0 {
            return None;
        }
        let Some(doc) = d.doc_of(req.target_hash) else { return self.lb.pick(req, nodes, now) };
        let holding = (d.holders(doc) | d.fetching(doc)) & up;
        if holding != 0 {
            let mut best: Option<(usize, f64)> = None;
            for (i, n) in nodes.iter().enumerate() {
                if holding & (1 << i) != 0 && best.is_none_or(|(_, l)| n.ramped_load() < l) {
                    best = Some((i, n.ramped_load()));
                }
            }
            return best.map(|(i, _)| NodeId(i as u32));
        }
        let home = self.lb.pick(req, nodes, now)?;
        if !d.cacheable(doc) {
            return Some(home);
        }
        d.oldest_node(up, d.size(doc), Some(home.index())).map(|i| NodeId(i as u32))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lb_gc_sends_to_a_holder_else_to_room_else_to_the_oldest_cache() {
        let req = RequestInfo::get("/x");
        let other = RequestInfo::get("/y");
        let dir =
            Arc::new(CacheDirectory::new(3, 100, 100, &[(req.target_hash, 30), (other.target_hash, 200)]));
        let mut p = GlobalCachePolicy::new(dir.clone());
        let mut nodes: Vec<NodeStatus> = (0..3).map(|i| NodeStatus::new(NodeId(i))).collect();
        let home = (req.target_hash % 3) as u32;
        // Empty caches: room everywhere, the LB home wins.
        assert_eq!(p.pick(&req, &nodes, Time::ZERO), Some(NodeId(home)));
        // Held by node 1 and fetching on node 2: the less loaded of the two.
        dir.set_held(0, 1, true);
        dir.set_fetching(0, 2, true);
        nodes[1].load = 5;
        assert_eq!(p.pick(&req, &nodes, Time::ZERO), Some(NodeId(2)));
        nodes[2].up = false;
        assert_eq!(p.pick(&req, &nodes, Time::ZERO), Some(NodeId(1)));
        nodes[2].up = true;
        // Nobody holds it and every cache is full: the smallest age floor.
        dir.set_held(0, 1, false);
        dir.set_fetching(0, 2, false);
        for i in 0..3 {
            dir.set_free_bytes(i, 0);
            dir.set_age_floor(i, 10 + i as u64);
        }
        dir.set_age_floor(2, 1);
        assert_eq!(p.pick(&req, &nodes, Time::ZERO), Some(NodeId(2)));
        // An uncacheable target goes to its LB home.
        let other_home = (other.target_hash % 3) as u32;
        assert_eq!(p.pick(&other, &nodes, Time::ZERO), Some(NodeId(other_home)));
    }
}
