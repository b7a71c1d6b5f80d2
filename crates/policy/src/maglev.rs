//! `chash` (Maglev): Google Maglev's consistent hashing. `MaglevTable` is the lookup table
//! (a prime number of entries, filled from each up node's permutation in turns, weighted by
//! the node's weight); `MaglevPolicy` rebuilds it when a node leaves or joins the view.

use crate::Policy;
use crate::hash::mix64;
use locus_core::{NodeId, NodeStatus, RequestInfo, Time};

/// Marks an entry no node has claimed yet (only while populating).
const EMPTY: u32 = u32::MAX;

/// Seeds that make a node's permutation offset and skip independent of each other.
const OFFSET_SEED: u64 = 0x6d61_676c_6576_6f66; // "maglevof"
const SKIP_SEED: u64 = 0x6d61_676c_6576_736b; // "maglevsk"

/// Maglev's lookup table: `size` (a prime) entries, each naming a node. Node `i` walks its
/// permutation `offset_i + j·skip_i mod size` and claims the first free entry, `weight_i`
/// entries per round, round after round until the table is full; a target's node is
/// `entries[target_hash mod size]`.
#[derive(Debug, Clone)]
pub struct MaglevTable {
    entries: Vec<u32>,
}

impl MaglevTable {
    /// Populate a table of `size` entries (must be prime for the permutations to be full)
    /// over the nodes `i` for which `member(i)` holds, with weights `weights[i]` (0 counts as
    /// 1). With no member the table maps nothing.
    pub fn new(size: usize, weights: &[u32], member: impl Fn(usize) -> bool) -> MaglevTable {
        let mut table = MaglevTable { entries: Vec::new() };
        table.populate(size, weights, member);
        table
    }

    /// Refill the table in place (see [`MaglevTable::new`]).
    pub fn populate(&mut self, size: usize, weights: &[u32], member: impl Fn(usize) -> bool) {
        self.entries.clear();
        self.entries.resize(size, EMPTY);
        if size == 0 {
            return;
        }
        let m = size as u64;
        // (node, weight, next position, skip)
        let mut walkers: Vec<(u32, u32, u64, u64)> = weights
            .iter()
            .enumerate()
            .filter(|&(i, _)| member(i))
            .map(|(i, &w)| {
                let offset = mix64(i as u64 ^ OFFSET_SEED) % m;
                let skip = if m > 1 { mix64(i as u64 ^ SKIP_SEED) % (m - 1) + 1 } else { 1 };
                (i as u32, w.max(1), offset, skip)
            })
            .collect();
        if walkers.is_empty() {
            return;
        }
        let mut filled = 0usize;
        'rounds: loop {
            for (node, weight, pos, skip) in walkers.iter_mut() {
                for _ in 0..*weight {
                    while self.entries[*pos as usize] != EMPTY {
                        *pos = (*pos + *skip) % m;
                    }
                    self.entries[*pos as usize] = *node;
                    *pos = (*pos + *skip) % m;
                    filled += 1;
                    if filled == size {
                        break 'rounds;
                    }
                }
            }
        }
    }

    /// Entries in the table.
    pub fn size(&self) -> usize {
        self.entries.len()
    }

    /// The node for a target hash; `None` when the table was built with no member.
    pub fn lookup(&self, hash: u64) -> Option<NodeId> {
        if self.entries.is_empty() {
            return None;
        }
        let e = self.entries[(hash % self.entries.len() as u64) as usize];
        (e != EMPTY).then_some(NodeId(e))
    }

    /// How many entries each node owns (index = node), for checking balance.
    pub fn shares(&self, node_count: usize) -> Vec<usize> {
        let mut counts = vec![0; node_count];
        for &e in &self.entries {
            if let Some(c) = counts.get_mut(e as usize) {
                *c += 1;
            }
        }
        counts
    }
}

/// Consistent hashing with a Maglev table over the nodes in the view, rebuilt whenever a
/// node leaves or joins.
#[derive(Debug)]
pub struct MaglevPolicy {
    table: MaglevTable,
    weights: Vec<u32>,
    size: usize,
    /// Which nodes the table was built over.
    members: Vec<bool>,
}

impl MaglevPolicy {
    /// A policy over nodes with these weights, all up, with a table of `table_size`
    /// entries (a prime, much larger than the node count: 65537 by default).
    pub fn new(weights: &[u32], table_size: u32) -> MaglevPolicy {
        let size = table_size as usize;
        MaglevPolicy {
            table: MaglevTable::new(size, weights, |_| true),
            weights: weights.to_vec(),
            size,
            members: vec![true; weights.len()],
        }
    }

    /// The lookup table.
    pub fn table(&self) -> &MaglevTable {
        &self.table
    }

    fn rebuild(&mut self, nodes: &[NodeStatus]) {
        for (i, m) in self.members.iter_mut().enumerate() {
            *m = nodes.get(i).is_some_and(|n| n.up);
        }
        let members = &self.members;
        self.table.populate(self.size, &self.weights, |i| members[i]);
    }

    /// Whether the table was built over exactly the nodes that are up in `nodes`.
    fn is_current(&self, nodes: &[NodeStatus]) -> bool {
        self.members.iter().enumerate().all(|(i, &m)| nodes.get(i).is_some_and(|n| n.up) == m)
    }
}

impl Policy for MaglevPolicy {
    fn name(&self) -> &'static str {
        "maglev"
    }

    fn pick(&mut self, req: &RequestInfo<'_>, nodes: &[NodeStatus], _now: Time) -> Option<NodeId> {
        let node = self.table.lookup(req.target_hash);
        if node.is_some_and(|id| nodes.get(id.index()).is_some_and(|n| n.up)) {
            return node;
        }
        if self.is_current(nodes) {
            return None;
        }
        // The view changed without on_node_down/up: catch up, then the table holds only up
        // nodes.
        self.rebuild(nodes);
        self.table.lookup(req.target_hash).filter(|id| nodes.get(id.index()).is_some_and(|n| n.up))
    }

    fn on_node_down(&mut self, _node: NodeId, nodes: &[NodeStatus], _now: Time) {
        self.rebuild(nodes);
    }

    fn on_node_up(&mut self, _node: NodeId, nodes: &[NodeStatus], _now: Time) {
        self.rebuild(nodes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maglev_table_is_full_and_balanced() {
        let t = MaglevTable::new(65537, &[1; 7], |_| true);
        let shares = t.shares(7);
        assert_eq!(shares.iter().sum::<usize>(), 65537);
        let ideal = 65537.0 / 7.0;
        for s in shares {
            assert!((s as f64 - ideal).abs() / ideal < 0.02, "share {s} vs {ideal}");
        }
    }

    #[test]
    fn maglev_table_follows_weights_and_membership() {
        let t = MaglevTable::new(10007, &[1, 3, 1], |i| i != 2);
        let shares = t.shares(3);
        assert_eq!(shares[2], 0);
        assert!((shares[1] as f64 / shares[0] as f64 - 3.0).abs() < 0.05, "{shares:?}");
        let empty = MaglevTable::new(101, &[1, 1], |_| false);
        assert_eq!(empty.lookup(12345), None);
        assert_eq!(empty.size(), 101);
    }

    #[test]
    fn maglev_policy_catches_up_with_a_view_it_was_not_told_about() {
        let mut p = MaglevPolicy::new(&[1, 1, 1], 1009);
        let mut ns: Vec<NodeStatus> = (0..3).map(|i| NodeStatus::new(NodeId(i))).collect();
        ns[1].up = false;
        for i in 0..300 {
            let t = format!("/m/{i}");
            assert_ne!(p.pick(&RequestInfo::get(&t), &ns, Time::ZERO), Some(NodeId(1)));
        }
        ns.iter_mut().for_each(|n| n.up = false);
        assert_eq!(p.pick(&RequestInfo::get("/z"), &ns, Time::ZERO), None);
    }
}
