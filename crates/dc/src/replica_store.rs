//! A co-op's materialised replicas: `ReplicaStore<V>` keeps copies of other homes' documents
//! (values are bodies on the node, `()` in the simulator) within one byte quota over all homes,
//! evicting least recently used copies and reporting them so the caller can send deletion
//! notices; each copy carries its `CopyMeta` (version, size, last check, last use).

use std::collections::HashMap;

use locus_cache::{DocCache, InsertOutcome, Replacement};
use serde::{Deserialize, Serialize};

use crate::replica_map::DocKey;

/// What a co-op knows about one copy. Times are ns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct CopyMeta {
    /// The original's modification time in whole seconds when the copy was fetched.
    pub version: u64,
    pub size: u64,
    /// When the copy was fetched or last validated with its home.
    pub last_check: u64,
    /// When the copy was last served.
    pub last_use: u64,
}

/// What `ReplicaStore::insert` did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Insertion {
    /// Stored; these copies were evicted to make room (send a deletion notice for each).
    Stored { evicted: Vec<DocKey> },
    /// The copy is larger than the whole quota and was not stored; an older copy under the same
    /// key, if `dropped_older`, was removed (send a notice for it too).
    TooLarge { size: u64, quota: u64, dropped_older: bool },
}

/// Copies of other homes' documents within `quota` bytes, least recently used evicted first.
#[derive(Debug)]
pub struct ReplicaStore<V> {
    copies: DocCache<DocKey, V>,
    meta: HashMap<DocKey, CopyMeta>,
}

impl<V> ReplicaStore<V> {
    /// An empty store of at most `quota` bytes.
    pub fn new(quota: u64) -> ReplicaStore<V> {
        ReplicaStore { copies: DocCache::new(quota, quota, Replacement::Lru), meta: HashMap::new() }
    }

    /// Stores a copy fetched (or re-fetched) at `now`, replacing any older one under `key`.
    pub fn insert(&mut self, key: DocKey, version: u64, size: u64, value: V, now: u64) -> Insertion {
        let mut evicted = Vec::new();
        let meta = CopyMeta { version, size, last_check: now, last_use: now };
        let had_older = self.meta.remove(&key).is_some();
        let outcome = self.copies.insert_with_evictions(key.clone(), value, size, 1.0, |gone, _| {
            evicted.push(gone);
        });
        for gone in &evicted {
            self.meta.remove(gone);
        }
        match outcome {
            InsertOutcome::Stored { .. } => {
                self.meta.insert(key, meta);
                Insertion::Stored { evicted }
            }
            InsertOutcome::TooLarge(_) => {
                Insertion::TooLarge { size, quota: self.quota(), dropped_older: had_older }
            }
        }
    }

    /// The copy under `key`, marking it used at `now` (for LRU and `last_use`).
    pub fn get(&mut self, key: &DocKey, now: u64) -> Option<(&CopyMeta, &V)> {
        let meta = self.meta.get_mut(key)?;
        meta.last_use = now;
        let value = self.copies.touch(key)?;
        Some((&*meta, value))
    }

    /// The copy's metadata, without marking a use.
    pub fn meta(&self, key: &DocKey) -> Option<&CopyMeta> {
        self.meta.get(key)
    }

    /// Records a successful validation (304) at `now`; false if there is no such copy.
    pub fn mark_checked(&mut self, key: &DocKey, now: u64) -> bool {
        self.meta.get_mut(key).map(|m| m.last_check = now).is_some()
    }

    /// Drops the copy under `key` (explicit notification, or a failed fetch).
    pub fn remove(&mut self, key: &DocKey) -> Option<V> {
        self.meta.remove(key);
        self.copies.remove(key)
    }

    /// Bytes of all copies.
    pub fn used_bytes(&self) -> u64 {
        self.copies.used_bytes()
    }

    /// The byte quota Q.
    pub fn quota(&self) -> u64 {
        self.copies.capacity_bytes()
    }

    /// Bytes left before evictions start.
    pub fn free_bytes(&self) -> u64 {
        self.quota() - self.used_bytes()
    }

    /// Number of copies.
    pub fn len(&self) -> usize {
        self.copies.len()
    }

    pub fn is_empty(&self) -> bool {
        self.copies.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ServerId;

    fn key(path: &str) -> DocKey {
        DocKey::new(ServerId(0), path)
    }

    #[test]
    fn store_evicts_least_recently_used_copies_to_stay_within_quota() {
        let mut st = ReplicaStore::new(100);
        assert_eq!(st.insert(key("/a"), 1, 40, (), 0), Insertion::Stored { evicted: vec![] });
        st.insert(key("/b"), 1, 40, (), 1);
        assert!(st.get(&key("/a"), 2).is_some());
        let out = st.insert(key("/c"), 1, 40, (), 3);
        assert_eq!(out, Insertion::Stored { evicted: vec![key("/b")] });
        assert_eq!((st.used_bytes(), st.len(), st.free_bytes()), (80, 2, 20));
        assert!(st.meta(&key("/b")).is_none());
        assert_eq!(st.meta(&key("/a")).unwrap().last_use, 2);
    }

    #[test]
    fn copy_larger_than_quota_is_not_stored_and_drops_the_older_one() {
        let mut st = ReplicaStore::new(100);
        st.insert(key("/a"), 1, 50, (), 0);
        let out = st.insert(key("/a"), 2, 101, (), 1);
        assert_eq!(out, Insertion::TooLarge { size: 101, quota: 100, dropped_older: true });
        assert!(st.is_empty());
        assert_eq!(st.used_bytes(), 0);
    }

    #[test]
    fn replacing_a_copy_updates_version_and_size_without_eviction() {
        let mut st = ReplicaStore::new(100);
        st.insert(key("/a"), 1, 60, "old", 0);
        assert_eq!(st.insert(key("/a"), 2, 70, "new", 5), Insertion::Stored { evicted: vec![] });
        let (meta, body) = st.get(&key("/a"), 6).unwrap();
        assert_eq!((meta.version, meta.size, meta.last_check, *body), (2, 70, 5, "new"));
        assert!(st.mark_checked(&key("/a"), 9));
        assert_eq!(st.meta(&key("/a")).unwrap().last_check, 9);
        assert_eq!(st.remove(&key("/a")), Some("new"));
        assert!(!st.mark_checked(&key("/a"), 10));
    }

    #[test]
    fn zero_quota_stores_nothing_but_empty_copies() {
        let mut st: ReplicaStore<()> = ReplicaStore::new(0);
        assert!(matches!(st.insert(key("/a"), 1, 1, (), 0), Insertion::TooLarge { .. }));
        assert_eq!(st.len(), 0);
    }
}
