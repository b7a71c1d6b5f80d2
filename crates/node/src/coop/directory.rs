//! Who holds which document, for cooperative caching. A hash-home directory: the members
//! (this node and its peers, sorted by their `host:port`, so every node that spells the
//! addresses alike sees the same list) each keep the holder set of the documents that hash
//! to them (`home`, FNV-1a of the cache key mod n: fixed, unlike `RandomState`). Holders
//! tell the home when they insert or evict; a lost notice costs a miss, never a wrong
//! answer, since every fetch is verified. Chosen over broadcasting (every node knowing every
//! holder) because a lookup then costs one round trip to one node, the home can answer
//! with the document itself when it holds it, and the notice traffic does not grow with n.
//! When a reload changes the members, the holder sets of the documents this node is still
//! home for are carried over (`absorb`).

use std::collections::HashMap;

use parking_lot::Mutex;

/// Holder sets kept beyond this many documents are not started (notices are best effort).
const MAX_DOCUMENTS: usize = 1 << 20;

/// FNV-1a, 64 bits.
pub fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// The members of a cooperative cluster, sorted by address, and which one is this node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Membership {
    /// `host:port` of every member, sorted.
    members: Vec<String>,
    me: usize,
}

impl Membership {
    /// Membership of `me` and `peers` (authorities, `host:port`).
    pub fn new(me: &str, peers: &[String]) -> Membership {
        let mut members: Vec<String> = peers.to_vec();
        members.push(me.to_string());
        members.sort();
        members.dedup();
        let me = members.iter().position(|m| m == me).unwrap_or(0);
        Membership { members, me }
    }

    pub fn len(&self) -> usize {
        self.members.len()
    }

    /// This node's index.
    pub fn me(&self) -> usize {
        self.me
    }

    /// Member `i`'s authority.
    pub fn authority(&self, i: usize) -> &str {
        &self.members[i]
    }

    /// The index of the member written `authority`.
    pub fn index_of(&self, authority: &str) -> Option<usize> {
        self.members.iter().position(|m| m == authority)
    }

    /// The member that keeps the holder set of `key`.
    pub fn home(&self, key: &str) -> usize {
        (fnv1a(key.as_bytes()) % self.members.len() as u64) as usize
    }

    /// `holders` in the order a requester tries them: the first after itself first, so
    /// that requesters spread over the holders of a popular document.
    pub fn try_order(&self, mut holders: Vec<usize>) -> Vec<usize> {
        let n = self.members.len();
        holders.retain(|&h| h != self.me && h < n);
        holders.sort_by_key(|&h| (h + n - self.me) % n);
        holders.dedup();
        holders
    }
}

/// The holder sets of the documents this node is home for.
#[derive(Default)]
pub struct HolderDirectory {
    holders: Mutex<HashMap<String, Vec<u16>>>,
}

impl HolderDirectory {
    /// Member `member` now holds `key`.
    pub fn insert(&self, key: &str, member: usize) {
        let member = member as u16;
        let mut map = self.holders.lock();
        if let Some(set) = map.get_mut(key) {
            if !set.contains(&member) {
                set.push(member);
            }
        } else if map.len() < MAX_DOCUMENTS {
            map.insert(key.to_string(), vec![member]);
        }
    }

    /// Member `member` no longer holds `key`.
    pub fn remove(&self, key: &str, member: usize) {
        let mut map = self.holders.lock();
        if let Some(set) = map.get_mut(key) {
            set.retain(|&m| m != member as u16);
            if set.is_empty() {
                map.remove(key);
            }
        }
    }

    /// The members holding `key`.
    pub fn holders(&self, key: &str) -> Vec<usize> {
        self.holders.lock().get(key).map(|s| s.iter().map(|&m| usize::from(m)).collect()).unwrap_or_default()
    }

    /// Take over the holder sets `old` kept under `old_members` for the documents this node
    /// is still home for under `new_members`, each holder renumbered by its `host:port` (the
    /// members that left are dropped).
    pub fn absorb(&self, old: &HolderDirectory, old_members: &Membership, new_members: &Membership) {
        let old_map = old.holders.lock();
        let mut map = self.holders.lock();
        for (key, set) in old_map.iter() {
            if new_members.home(key) != new_members.me() {
                continue;
            }
            let renumber = |&m: &u16| new_members.index_of(old_members.authority(usize::from(m)));
            let holders: Vec<u16> = set.iter().filter_map(renumber).map(|m| m as u16).collect();
            if !holders.is_empty() && (map.len() < MAX_DOCUMENTS || map.contains_key(key)) {
                let entry = map.entry(key.clone()).or_default();
                for h in holders {
                    if !entry.contains(&h) {
                        entry.push(h);
                    }
                }
            }
        }
    }

    /// Documents with a holder, and (document, holder) pairs.
    pub fn size(&self) -> (usize, usize) {
        let map = self.holders.lock();
        (map.len(), map.values().map(Vec::len).sum())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn membership_is_the_same_list_on_every_node_and_homes_agree() {
        let a = Membership::new("h:2", &["h:3".into(), "h:1".into()]);
        let b = Membership::new("h:1", &["h:2".into(), "h:3".into()]);
        assert_eq!(a.members, b.members);
        assert_eq!((a.me(), b.me()), (1, 0));
        for key in ["/a", "/b/c.html", "/ü", ""] {
            assert_eq!(a.home(key), b.home(key));
            assert!(a.home(key) < 3);
        }
        assert_eq!(a.index_of("h:3"), Some(2));
        assert_eq!(a.index_of("h:9"), None);
    }

    #[test]
    fn fnv1a_matches_the_published_test_vectors_and_homes_spread() {
        assert_eq!(fnv1a(b""), 0xcbf29ce484222325);
        assert_eq!(fnv1a(b"a"), 0xaf63dc4c8601ec8c);
        assert_eq!(fnv1a(b"foobar"), 0x85944171f73967e8);
        let m = Membership::new("n:0", &["n:1".into(), "n:2".into(), "n:3".into()]);
        let mut per_home = [0usize; 4];
        for i in 0..4000 {
            per_home[m.home(&format!("/doc/{i}.html"))] += 1;
        }
        assert!(per_home.iter().all(|&c| c > 700), "{per_home:?}");
    }

    #[test]
    fn try_order_starts_after_the_requester_and_leaves_it_out() {
        let m = Membership::new("n:2", &["n:0".into(), "n:1".into(), "n:3".into()]);
        assert_eq!(m.try_order(vec![0, 1, 2, 3, 3, 9]), vec![3, 0, 1]);
    }

    #[test]
    fn absorbing_keeps_the_holders_of_documents_still_homed_here_renumbered() {
        let old = Membership::new("n:1", &["n:2".into(), "n:3".into()]);
        let new = Membership::new("n:1", &["n:0".into(), "n:3".into()]);
        let (before, after) = (HolderDirectory::default(), HolderDirectory::default());
        let homed_here = (0..1000).map(|i| format!("/k{i}")).find(|k| new.home(k) == new.me()).unwrap();
        let homed_away = (0..1000).map(|i| format!("/k{i}")).find(|k| new.home(k) != new.me()).unwrap();
        for key in [&homed_here, &homed_away] {
            for member in ["n:2", "n:3"] {
                before.insert(key, old.index_of(member).unwrap());
            }
        }
        after.absorb(&before, &old, &new);
        assert_eq!(after.holders(&homed_here), vec![new.index_of("n:3").unwrap()], "n:2 left");
        assert!(after.holders(&homed_away).is_empty(), "another member is its home now");
        assert_eq!(after.size(), (1, 1));
    }

    #[test]
    fn directory_tracks_inserts_and_evictions_per_member() {
        let d = HolderDirectory::default();
        d.insert("/a", 1);
        d.insert("/a", 2);
        d.insert("/a", 1);
        d.insert("/b", 0);
        assert_eq!(d.holders("/a"), vec![1, 2]);
        assert_eq!(d.size(), (2, 3));
        d.remove("/a", 1);
        d.remove("/b", 0);
        d.remove("/c", 0);
        assert_eq!(d.holders("/a"), vec![2]);
        assert!(d.holders("/b").is_empty());
        assert_eq!(d.size(), (1, 1));
    }
}
