//! `lard-r`: LARD with replication (Pai et al., "LARD with Replication"). Each target has a
//! small server set; an overloaded set gains the least loaded node, and a set unchanged for
//! K seconds loses its most loaded member. Also the front-end admission limit S.

use crate::Policy;
use crate::lc::least_loaded_by;
use locus_core::{NodeId, NodeStatus, RequestInfo, Time};
use lru::LruCache;
use std::time::Duration;

/// Most nodes in one target's server set. When a full set must grow, the new node replaces
/// the set's most loaded member.
pub const MAX_REPLICAS: usize = 8;

/// One target's server set, stored inline (32 bytes) so that a mapping entry stays small.
#[derive(Debug, Clone, Copy, PartialEq)]
struct ServerSet {
    /// When the set last changed (`Time` nanoseconds): the paper's `lastMod`.
    last_mod: u64,
    /// The policy's down-count when the members were last checked against failures.
    checked: u32,
    members: [u16; MAX_REPLICAS],
    len: u8,
}

impl ServerSet {
    fn single(node: NodeId, now: Time, checked: u32) -> ServerSet {
        let mut members = [0; MAX_REPLICAS];
        members[0] = node.0 as u16;
        ServerSet { last_mod: now.as_nanos(), checked, members, len: 1 }
    }

    fn members(&self) -> &[u16] {
        &self.members[..self.len as usize]
    }

    fn contains(&self, node: NodeId) -> bool {
        self.members().iter().any(|&m| m as u32 == node.0)
    }

    fn remove(&mut self, node: NodeId) {
        let len = self.len as usize;
        if let Some(pos) = self.members[..len].iter().position(|&m| m as u32 == node.0) {
            self.members.copy_within(pos + 1..len, pos);
            self.len -= 1;
        }
    }

    fn push(&mut self, node: NodeId) {
        debug_assert!((self.len as usize) < MAX_REPLICAS);
        self.members[self.len as usize] = node.0 as u16;
        self.len += 1;
    }

    /// Keep only members that are up in `nodes` and have not gone down since the last check.
    fn drop_failed(&mut self, nodes: &[NodeStatus], down_at: &[u32], checked: u32) {
        let since = self.checked;
        let mut kept = 0;
        for i in 0..self.len as usize {
            let m = self.members[i] as usize;
            let alive = nodes.get(m).is_some_and(|n| n.up) && down_at.get(m).is_some_and(|&d| d <= since);
            if alive {
                self.members[kept] = self.members[i];
                kept += 1;
            }
        }
        self.len = kept as u8;
        self.checked = checked;
    }

    /// The least loaded member (first among equals) and the most loaded (last among equals).
    fn least_and_most_loaded(&self, nodes: &[NodeStatus]) -> (NodeId, NodeId) {
        let mut least = (self.members[0] as usize, f64::INFINITY);
        let mut most = (self.members[0] as usize, f64::NEG_INFINITY);
        for &m in self.members() {
            let load = nodes[m as usize].ramped_load();
            if load < least.1 {
                least = (m as usize, load);
            }
            if load >= most.1 {
                most = (m as usize, load);
            }
        }
        (NodeId(least.0 as u32), NodeId(most.0 as u32))
    }
}

/// LARD/R, following the paper's pseudo-code per request r:
///
/// ```text
/// if serverSet[r.target] is empty: n = least loaded node; serverSet[r.target] = {n}
/// else:
///   n = least loaded node in serverSet[r.target]
///   m = most loaded node in serverSet[r.target]
///   if (n.load > T_high && some node has load < T_low) || n.load >= 2*T_high:
///     p = least loaded node; add p to serverSet[r.target]; n = p
///   if |serverSet[r.target]| > 1 && now - serverSet[r.target].lastMod > K:
///     remove m from serverSet[r.target]
/// send r to n
/// if serverSet[r.target] changed: serverSet[r.target].lastMod = now
/// ```
///
/// Loads are ramped loads. Two guards the pseudo-code leaves implicit: `m` is not removed
/// when it is the node the request is sent to, and a set holds at most [`MAX_REPLICAS`]
/// nodes (a full set swaps its most loaded member for `p`). Sets live in an LRU of at most
/// `max_targets` entries keyed by target hash. A node that goes down leaves every set
/// (lazily, on the set's next use); a set left empty counts as a new target.
#[derive(Debug)]
pub struct LardRPolicy {
    map: LruCache<u64, ServerSet>,
    max_targets: usize,
    t_low: f64,
    t_high: f64,
    t_high_count: u32,
    t_low_count: u32,
    k: Duration,
    /// `None`: the paper's S for the nodes up; `Some(0)`: no limit; `Some(v)`: v.
    admission_limit: Option<usize>,
    /// Node-down events so far.
    downs: u32,
    /// Per node, the value of `downs` right after the node last went down.
    down_at: Vec<u32>,
    start: usize,
}

impl LardRPolicy {
    /// LARD/R for `node_count` nodes (at most 65536) with thresholds `t_low < t_high`,
    /// `k` before a replica may be dropped, an admission limit (see [`Policy::admission_limit`])
    /// and at most `max_targets` remembered targets.
    pub fn new(
        node_count: usize,
        t_low: u32,
        t_high: u32,
        k: Duration,
        admission_limit: Option<usize>,
        max_targets: usize,
    ) -> LardRPolicy {
        assert!(node_count <= u16::MAX as usize + 1, "LARD/R supports at most 65536 nodes");
        LardRPolicy {
            map: LruCache::unbounded(),
            max_targets: max_targets.max(1),
            t_low: t_low as f64,
            t_high: t_high as f64,
            t_high_count: t_high,
            t_low_count: t_low,
            k,
            admission_limit,
            downs: 0,
            down_at: vec![0; node_count],
            start: 0,
        }
    }

    /// The server set of `target_hash` (without counting as a use for the LRU), leaving out
    /// nodes that went down since the set was last used.
    pub fn server_set(&self, target_hash: u64) -> Vec<NodeId> {
        let Some(set) = self.map.peek(&target_hash) else { return Vec::new() };
        set.members()
            .iter()
            .filter(|&&m| self.down_at.get(m as usize).is_some_and(|&d| d <= set.checked))
            .map(|&m| NodeId(m as u32))
            .collect()
    }

    fn least_loaded(&mut self, nodes: &[NodeStatus]) -> Option<NodeId> {
        let start = self.start;
        self.start = self.start.wrapping_add(1);
        least_loaded_by(nodes, start, NodeStatus::ramped_load)
    }

    fn insert(&mut self, target_hash: u64, set: ServerSet) {
        self.map.put(target_hash, set);
        while self.map.len() > self.max_targets {
            self.map.pop_lru();
        }
    }
}

impl Policy for LardRPolicy {
    fn name(&self) -> &'static str {
        "lard-r"
    }

    fn pick(&mut self, req: &RequestInfo<'_>, nodes: &[NodeStatus], now: Time) -> Option<NodeId> {
        let h = req.target_hash;
        let existing = self.map.get(&h).copied();
        let mut set = match existing {
            Some(mut set) => {
                set.drop_failed(nodes, &self.down_at, self.downs);
                set
            }
            None => ServerSet::single(NodeId(0), now, self.downs),
        };
        if existing.is_none() || set.len == 0 {
            let n = self.least_loaded(nodes)?;
            self.insert(h, ServerSet::single(n, now, self.downs));
            return Some(n);
        }

        let (mut n, m) = set.least_and_most_loaded(nodes);
        let mut changed = false;
        let n_load = nodes[n.index()].ramped_load();
        if n_load > self.t_high {
            let p = self.least_loaded(nodes)?;
            if (nodes[p.index()].ramped_load() < self.t_low) || n_load >= 2.0 * self.t_high {
                if !set.contains(p) {
                    if set.len as usize == MAX_REPLICAS {
                        set.remove(m);
                    }
                    set.push(p);
                    changed = true;
                }
                n = p;
            }
        }
        if set.len > 1 && now.since(Time(set.last_mod)) > self.k && m != n && set.contains(m) {
            set.remove(m);
            changed = true;
        }
        if changed {
            set.last_mod = now.as_nanos();
        }
        if Some(set) != existing
            && let Some(slot) = self.map.get_mut(&h)
        {
            *slot = set;
        }
        Some(n)
    }

    fn on_node_down(&mut self, node: NodeId, _nodes: &[NodeStatus], _now: Time) {
        self.downs = self.downs.wrapping_add(1);
        if let Some(d) = self.down_at.get_mut(node.index()) {
            *d = self.downs;
        }
    }

    /// S = (n − 1)·T_high + T_low − 1 for the n nodes up (at least 1), unless configured.
    fn admission_limit(&self, nodes: &[NodeStatus]) -> Option<usize> {
        match self.admission_limit {
            Some(0) => None,
            Some(v) => Some(v),
            None => {
                let up = nodes.iter().filter(|n| n.up).count() as i64;
                let s = (up - 1) * self.t_high_count as i64 + self.t_low_count as i64 - 1;
                Some(s.max(1) as usize)
            }
        }
    }

    fn mapping_len(&self) -> usize {
        self.map.len()
    }

    /// New slots have never gone down and are in no server set; the sets stay.
    fn adapt_to_nodes(&mut self, nodes: &[NodeStatus], _now: Time) -> bool {
        if nodes.len() > u16::MAX as usize + 1 {
            return false;
        }
        if self.down_at.len() < nodes.len() {
            self.down_at.resize(nodes.len(), 0);
        }
        true
    }

    fn set_params(&mut self, config: &crate::PolicyConfig) -> bool {
        let crate::PolicyConfig::LardR { t_low, t_high, k_secs, admission_limit, max_targets } = *config
        else {
            return false;
        };
        (self.t_low, self.t_high, self.t_low_count, self.t_high_count) =
            (t_low as f64, t_high as f64, t_low, t_high);
        self.k = Duration::from_secs_f64(k_secs);
        self.admission_limit = admission_limit;
        self.max_targets = max_targets.max(1);
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
    use crate::{Cluster, PolicyConfig, build};

    fn policy(nodes: usize) -> LardRPolicy {
        LardRPolicy::new(nodes, 25, 65, Duration::from_secs(20), None, 1000)
    }

    #[test]
    fn lard_r_adds_a_replica_under_imbalance() {
        let req = RequestInfo::get("/t");
        let h = req.target_hash;
        let t = Time::from_secs(1);

        let mut p = policy(3);
        assert_eq!(p.pick(&req, &loaded(&[0, 50, 50]), t), Some(NodeId(0)));
        assert_eq!(p.server_set(h), [NodeId(0)]);
        // At T_high: no replica, even with idle nodes.
        assert_eq!(p.pick(&req, &loaded(&[65, 0, 0]), t), Some(NodeId(0)));
        // Past T_high but nobody under T_low: no replica.
        assert_eq!(p.pick(&req, &loaded(&[66, 25, 30]), t), Some(NodeId(0)));
        assert_eq!(p.server_set(h), [NodeId(0)]);
        // Past T_high with a node under T_low: that node joins and gets the request.
        assert_eq!(p.pick(&req, &loaded(&[66, 24, 30]), t), Some(NodeId(1)));
        assert_eq!(p.server_set(h), [NodeId(0), NodeId(1)]);
        // The least loaded member serves; at 2·T_high the least loaded node joins too.
        assert_eq!(p.pick(&req, &loaded(&[60, 40, 30]), t), Some(NodeId(1)));
        assert_eq!(p.pick(&req, &loaded(&[140, 130, 100]), t), Some(NodeId(2)));
        assert_eq!(p.server_set(h), [NodeId(0), NodeId(1), NodeId(2)]);
        assert_eq!(p.mapping_len(), 1);
    }

    #[test]
    fn lard_r_drops_a_replica_after_k_idle_seconds() {
        let req = RequestInfo::get("/t");
        let h = req.target_hash;
        let mut p = policy(3);
        assert_eq!(p.pick(&req, &loaded(&[0, 50, 50]), Time::from_secs(1)), Some(NodeId(0)));
        // Replica added at t = 10 s: lastMod = 10 s.
        assert_eq!(p.pick(&req, &loaded(&[70, 10, 30]), Time::from_secs(10)), Some(NodeId(1)));
        assert_eq!(p.server_set(h).len(), 2);
        // Unchanged for 15 s, then exactly K = 20 s: both replicas stay (requests that do
        // not change the set do not move lastMod).
        let calm = loaded(&[10, 20, 5]);
        assert_eq!(p.pick(&req, &calm, Time::from_secs(25)), Some(NodeId(0)));
        assert_eq!(p.pick(&req, &calm, Time::from_secs(30)), Some(NodeId(0)));
        assert_eq!(p.server_set(h), [NodeId(0), NodeId(1)]);
        // Past K: the most loaded member (node 1) leaves.
        assert_eq!(p.pick(&req, &calm, Time::from_millis(30_001)), Some(NodeId(0)));
        assert_eq!(p.server_set(h), [NodeId(0)]);
        // A single-node set never shrinks.
        assert_eq!(p.pick(&req, &calm, Time::from_secs(100)), Some(NodeId(0)));
        assert_eq!(p.server_set(h), [NodeId(0)]);
    }

    #[test]
    fn lard_r_admission_limit_is_s() {
        let mut ns = loaded(&[0, 0, 0, 0]);
        let p = policy(4);
        assert_eq!(p.admission_limit(&ns), Some(3 * 65 + 25 - 1));
        ns[3].up = false;
        assert_eq!(p.admission_limit(&ns), Some(2 * 65 + 25 - 1));
        ns.iter_mut().for_each(|n| n.up = false);
        assert_eq!(p.admission_limit(&ns), Some(1));
        let off = LardRPolicy::new(4, 25, 65, Duration::from_secs(20), Some(0), 10);
        assert_eq!(off.admission_limit(&ns), None);
        let fixed = LardRPolicy::new(4, 25, 65, Duration::from_secs(20), Some(7), 10);
        assert_eq!(fixed.admission_limit(&ns), Some(7));

        // Through the cluster: S requests are admitted, the next one waits.
        let cfg = PolicyConfig::from_name("lard-r").unwrap();
        let weights = [1; 3];
        let mut c = Cluster::new(build(&cfg, &weights).unwrap(), &weights, Duration::ZERO);
        let s = 2 * 65 + 25 - 1;
        assert_eq!(c.admission_limit(), Some(s));
        let targets: Vec<String> = (0..s).map(|i| format!("/{i}")).collect();
        for t in &targets {
            assert!(c.can_admit());
            c.assign(&RequestInfo::get(t), Time::ZERO).unwrap();
        }
        assert!(!c.can_admit());
    }

    #[test]
    fn lard_r_forgets_a_failed_node_in_every_set() {
        let req = RequestInfo::get("/t");
        let h = req.target_hash;
        let mut p = policy(3);
        let mut ns = loaded(&[0, 50, 50]);
        p.pick(&req, &ns, Time::ZERO);
        p.pick(&req, &loaded(&[70, 10, 30]), Time::ZERO);
        assert_eq!(p.server_set(h), [NodeId(0), NodeId(1)]);
        ns[1].up = false;
        p.on_node_down(NodeId(1), &ns, Time::ZERO);
        assert_eq!(p.server_set(h), [NodeId(0)]);
        // Node 1 back and idle: it is not in the set any more, node 0 serves.
        ns[1].up = true;
        ns[1].load = 0;
        ns[0].load = 30;
        assert_eq!(p.pick(&req, &ns, Time::from_secs(1)), Some(NodeId(0)));
        assert_eq!(p.server_set(h), [NodeId(0)]);
        // Every member down: the set is empty and the target is assigned afresh.
        ns[0].up = false;
        p.on_node_down(NodeId(0), &ns, Time::ZERO);
        assert_eq!(p.pick(&req, &ns, Time::from_secs(2)), Some(NodeId(1)));
        assert_eq!(p.server_set(h), [NodeId(1)]);
    }
}
