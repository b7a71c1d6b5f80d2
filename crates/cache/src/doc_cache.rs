//! `DocCache`: the byte-bounded cache itself, generic over key and value, with one code path
//! for all four replacement policies and a `resize` that evicts down to new limits; and
//! `InsertOutcome`, what an insertion did. Entries live in a slab of slots, found through a
//! `KeyIndex` and ordered for eviction by an `EvictionOrder`.

use std::borrow::Borrow;
use std::fmt;
use std::hash::{BuildHasher, Hash, RandomState};

use crate::eviction_order::EvictionOrder;
use crate::key_index::{KeyIndex, tag_of};
use crate::replacement::Replacement;
use crate::stats::CacheStats;

/// What `DocCache::insert` did with an object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InsertOutcome<K, V> {
    /// The object is in the cache. `evicted` holds the objects that left to make room, in
    /// eviction order (always empty from `insert_with_evictions`, which reports them as it
    /// goes). An object replaced under the same key is not listed.
    Stored { evicted: Vec<(K, V)> },
    /// The object was over `max_object_bytes` or the capacity and was not stored; here is the
    /// value back. Any older object under the same key has been removed.
    TooLarge(V),
}

impl<K, V> InsertOutcome<K, V> {
    pub fn is_stored(&self) -> bool {
        matches!(self, InsertOutcome::Stored { .. })
    }
}

/// One cached object, stored once in its slot.
struct Entry<K, V> {
    key: K,
    value: V,
    size: u64,
    /// Miss cost for GDS/GDSF, clamped to `[0, f64::MAX]`.
    cost: f64,
    /// Uses while cached: the insertion counts as one, and so does each hit or replacement.
    freq: u64,
    /// `tag_of` the key's hash, to find the entry in the `KeyIndex` without rehashing.
    tag: u32,
}

/// A cache of at most `capacity_bytes` bytes of objects, each at most `max_object_bytes`,
/// that evicts by the chosen `Replacement` policy.
///
/// The caller states each object's size; the cache never measures values. Recency is a
/// logical clock that every `get` hit and `insert` advances; the cache reads no real clock.
/// Keys are hashed with `S` (by default std's DoS-resistant `RandomState`; a trusted
/// workload such as a simulator may pass a faster one to `with_hasher`).
pub struct DocCache<K, V, S = RandomState> {
    /// Entries by slot number; `None` for free slots, which `free_slots` lists.
    slots: Vec<Option<Entry<K, V>>>,
    free_slots: Vec<u32>,
    index: KeyIndex,
    order: EvictionOrder,
    hasher: S,
    replacement: Replacement,
    capacity_bytes: u64,
    max_object_bytes: u64,
    used_bytes: u64,
    /// Logical time: advanced by every use, it orders entries of equal rank (and all of them
    /// under LRU).
    clock: u64,
    /// The GDS/GDSF inflation value `L`: the priority of the last evicted object.
    inflation: f64,
    stats: CacheStats,
}

impl<K: Hash + Eq, V> DocCache<K, V> {
    /// An empty cache. Objects over `max_object_bytes` or over `capacity_bytes` are never
    /// stored.
    pub fn new(capacity_bytes: u64, max_object_bytes: u64, replacement: Replacement) -> Self {
        Self::with_hasher(capacity_bytes, max_object_bytes, replacement, RandomState::new())
    }
}

impl<K: Hash + Eq, V, S: BuildHasher> DocCache<K, V, S> {
    /// Like `new`, hashing keys with `hasher`.
    pub fn with_hasher(
        capacity_bytes: u64,
        max_object_bytes: u64,
        replacement: Replacement,
        hasher: S,
    ) -> Self {
        DocCache {
            slots: Vec::new(),
            free_slots: Vec::new(),
            index: KeyIndex::default(),
            order: EvictionOrder::for_replacement(replacement),
            hasher,
            replacement,
            capacity_bytes,
            max_object_bytes,
            used_bytes: 0,
            clock: 0,
            inflation: 0.0,
            stats: CacheStats::default(),
        }
    }

    /// The value under `key`, counting a hit (and a use for the replacement policy) or a miss.
    pub fn get<Q>(&mut self, key: &Q) -> Option<&V>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let Some(slot) = self.find(key) else {
            self.stats.misses += 1;
            return None;
        };
        self.stats.hits += 1;
        Some(self.use_slot(slot))
    }

    /// Record a use of the object in `slot` for the replacement policy.
    fn use_slot(&mut self, slot: u32) -> &V {
        self.clock += 1;
        let entry = occupied_mut(&mut self.slots, slot);
        entry.freq = entry.freq.saturating_add(1);
        let rank = rank_of(self.replacement, self.inflation, entry);
        self.order.update(slot, rank, self.clock);
        &occupied(&self.slots, slot).value
    }

    /// The value under `key`, counted as a use for the replacement policy but not as a hit or
    /// miss (a copy handed to another cache: its popularity, not this cache's hit ratio).
    pub fn touch<Q>(&mut self, key: &Q) -> Option<&V>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let slot = self.find(key)?;
        Some(self.use_slot(slot))
    }

    /// The value under `key`, without counting anything or changing any priority.
    pub fn peek<Q>(&self, key: &Q) -> Option<&V>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.find(key).map(|slot| &occupied(&self.slots, slot).value)
    }

    /// Whether `key` is cached, without counting anything or changing any priority.
    pub fn contains<Q>(&self, key: &Q) -> bool
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.find(key).is_some()
    }

    /// Inserts `value` of `size` bytes whose miss costs `cost` (used by GDS and GDSF; pass
    /// 1.0 to aim GDS at hit ratio, or e.g. the fetch time to aim it at latency). A negative
    /// or NaN cost counts as 0. A size-0 object is allowed and is ranked as if it were 1 byte.
    ///
    /// Reinserting a cached key replaces its value and size, keeps its use count, and counts
    /// as a use. Objects are evicted by the policy until the new one fits; they are returned
    /// in the outcome. An object over `max_object_bytes` or the capacity is not stored, and
    /// removes any older object under the same key.
    pub fn insert(&mut self, key: K, value: V, size: u64, cost: f64) -> InsertOutcome<K, V> {
        let mut evicted = Vec::new();
        match self.insert_with_evictions(key, value, size, cost, |key, value| {
            evicted.push((key, value));
        }) {
            InsertOutcome::Stored { .. } => InsertOutcome::Stored { evicted },
            too_large => too_large,
        }
    }

    /// Like `insert`, but hands each evicted object to `on_evicted` as it leaves instead of
    /// collecting them, so a full cache can take insertions without allocating. The returned
    /// `Stored` outcome's list is always empty.
    pub fn insert_with_evictions(
        &mut self,
        key: K,
        value: V,
        size: u64,
        cost: f64,
        mut on_evicted: impl FnMut(K, V),
    ) -> InsertOutcome<K, V> {
        let tag = tag_of(self.hasher.hash_one(&key));
        let mut freq = 0;
        if let Some(slot) = self.find_tagged(tag, &key) {
            freq = self.remove_slot(slot).freq;
        }
        if size > self.max_object_bytes || size > self.capacity_bytes {
            self.stats.rejected_too_large += 1;
            return InsertOutcome::TooLarge(value);
        }
        while size > self.capacity_bytes - self.used_bytes {
            let entry = self.evict_first();
            on_evicted(entry.key, entry.value);
        }

        self.clock += 1;
        let entry = Entry {
            key,
            value,
            size,
            cost: if cost > 0.0 { cost.min(f64::MAX) } else { 0.0 },
            freq: freq.saturating_add(1),
            tag,
        };
        let rank = rank_of(self.replacement, self.inflation, &entry);
        let slot = match self.free_slots.pop() {
            Some(slot) => {
                self.slots[slot as usize] = Some(entry);
                slot
            }
            None => {
                let slot = u32::try_from(self.slots.len())
                    .ok()
                    .filter(|&slot| slot != u32::MAX)
                    .expect("DocCache holds fewer than 2^32 - 1 objects");
                self.slots.push(Some(entry));
                slot
            }
        };
        self.order.push(slot, rank, self.clock);
        self.index.insert(tag, slot);
        self.used_bytes += size;
        self.stats.insertions += 1;
        debug_assert_eq!(self.order.len(), self.index.len());
        InsertOutcome::Stored { evicted: Vec::new() }
    }

    /// Changes the capacity and the per-object limit in place (a node's configuration
    /// reloaded). Cached objects over the new per-object limit leave first, in no particular
    /// order; then the policy evicts, in its order, until the rest fits the new capacity. Each
    /// leaving object is handed to `on_evicted` and counted as an eviction. Growing evicts
    /// nothing and just lets more in; everything left keeps its rank and use count.
    pub fn resize(&mut self, capacity_bytes: u64, max_object_bytes: u64, mut on_evicted: impl FnMut(K, V)) {
        self.capacity_bytes = capacity_bytes;
        self.max_object_bytes = max_object_bytes;
        let oversized: Vec<u32> = (self.slots.iter().enumerate())
            .filter_map(|(slot, entry)| {
                entry.as_ref().filter(|e| e.size > max_object_bytes).map(|_| slot as u32)
            })
            .collect();
        for slot in oversized {
            let entry = self.remove_slot(slot);
            self.stats.evictions += 1;
            self.stats.evicted_bytes += entry.size;
            on_evicted(entry.key, entry.value);
        }
        while self.used_bytes > self.capacity_bytes {
            let entry = self.evict_first();
            on_evicted(entry.key, entry.value);
        }
        debug_assert_eq!(self.order.len(), self.index.len());
    }

    /// Takes out the entry the policy evicts next, raising the GDS/GDSF inflation value to
    /// its priority, and counts the eviction.
    fn evict_first(&mut self) -> Entry<K, V> {
        let (slot, rank) = self.order.pop_first().expect("bytes in use mean some entry is cached");
        if matches!(self.replacement, Replacement::Gds | Replacement::Gdsf) {
            self.inflation = self.inflation.max(f64::from_bits(rank));
        }
        let entry = self.detach_slot(slot);
        self.stats.evictions += 1;
        self.stats.evicted_bytes += entry.size;
        entry
    }

    /// Removes `key`, returning its value. This is not counted as an eviction.
    pub fn remove<Q>(&mut self, key: &Q) -> Option<V>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let slot = self.find(key)?;
        Some(self.remove_slot(slot).value)
    }

    /// Removes every object and restarts the logical clock and the inflation value. The
    /// statistics are kept.
    pub fn clear(&mut self) {
        self.slots.clear();
        self.free_slots.clear();
        self.index.clear();
        self.order.clear();
        self.used_bytes = 0;
        self.clock = 0;
        self.inflation = 0.0;
    }

    /// Zeroes the statistics.
    pub fn reset_stats(&mut self) {
        self.stats = CacheStats::default();
    }

    /// Number of cached objects.
    pub fn len(&self) -> usize {
        self.index.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Sum of the sizes of the cached objects; never over `capacity_bytes`.
    pub fn used_bytes(&self) -> u64 {
        self.used_bytes
    }

    pub fn capacity_bytes(&self) -> u64 {
        self.capacity_bytes
    }

    pub fn max_object_bytes(&self) -> u64 {
        self.max_object_bytes
    }

    pub fn replacement(&self) -> Replacement {
        self.replacement
    }

    pub fn stats(&self) -> &CacheStats {
        &self.stats
    }

    /// The GDS/GDSF inflation value `L` (the priority of the last evicted object); 0 under
    /// LRU and LFU.
    pub fn inflation(&self) -> f64 {
        self.inflation
    }

    /// The cached objects as `(key, value, size)`, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = (&K, &V, u64)> {
        self.slots.iter().flatten().map(|entry| (&entry.key, &entry.value, entry.size))
    }

    fn find<Q>(&self, key: &Q) -> Option<u32>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.find_tagged(tag_of(self.hasher.hash_one(key)), key)
    }

    fn find_tagged<Q>(&self, tag: u32, key: &Q) -> Option<u32>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.index.find(tag, |slot| occupied(&self.slots, slot).key.borrow() == key)
    }

    /// Takes the entry in `slot` out of the eviction order, the index and the slab.
    fn remove_slot(&mut self, slot: u32) -> Entry<K, V> {
        self.order.remove(slot);
        self.detach_slot(slot)
    }

    /// Takes the entry in `slot`, already out of the eviction order, out of the index and the
    /// slab.
    fn detach_slot(&mut self, slot: u32) -> Entry<K, V> {
        let entry = self.slots[slot as usize].take().expect("slot being removed is occupied");
        self.free_slots.push(slot);
        self.index.remove(entry.tag, slot);
        self.used_bytes -= entry.size;
        entry
    }
}

fn occupied<K, V>(slots: &[Option<Entry<K, V>>], slot: u32) -> &Entry<K, V> {
    slots[slot as usize].as_ref().expect("indexed slot is occupied")
}

fn occupied_mut<K, V>(slots: &mut [Option<Entry<K, V>>], slot: u32) -> &mut Entry<K, V> {
    slots[slot as usize].as_mut().expect("indexed slot is occupied")
}

/// The entry's eviction rank: lower leaves first, ties going to the least recently used.
/// GDS and GDSF priorities are non-negative `f64`s, whose bit patterns order like the values.
fn rank_of<K, V>(replacement: Replacement, inflation: f64, entry: &Entry<K, V>) -> u64 {
    let size = entry.size.max(1) as f64;
    match replacement {
        Replacement::Lru => 0,
        Replacement::Lfu => entry.freq,
        Replacement::Gds => (inflation + entry.cost / size).to_bits(),
        Replacement::Gdsf => (inflation + entry.freq as f64 * entry.cost / size).to_bits(),
    }
}

impl<K, V, S> fmt::Debug for DocCache<K, V, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DocCache")
            .field("replacement", &self.replacement)
            .field("len", &(self.slots.len() - self.free_slots.len()))
            .field("used_bytes", &self.used_bytes)
            .field("capacity_bytes", &self.capacity_bytes)
            .field("max_object_bytes", &self.max_object_bytes)
            .field("inflation", &self.inflation)
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use std::hash::{BuildHasherDefault, Hasher};

    use proptest::prelude::*;

    use super::*;

    fn evicted_keys<K: Clone, V>(outcome: &InsertOutcome<K, V>) -> Vec<K> {
        match outcome {
            InsertOutcome::Stored { evicted } => evicted.iter().map(|(key, _)| key.clone()).collect(),
            InsertOutcome::TooLarge(_) => panic!("expected the object to be stored"),
        }
    }

    fn cached_keys<V, S: BuildHasher>(cache: &DocCache<&'static str, V, S>) -> Vec<&'static str> {
        let mut keys: Vec<_> = cache.iter().map(|(key, _, _)| *key).collect();
        keys.sort_unstable();
        keys
    }

    #[test]
    fn touch_protects_an_object_from_lru_eviction_without_counting_a_hit_or_miss() {
        let mut cache: DocCache<&str, ()> = DocCache::new(20, 20, Replacement::Lru);
        cache.insert("a", (), 10, 1.0);
        cache.insert("b", (), 10, 1.0);
        assert!(cache.touch("a").is_some() && cache.touch("z").is_none());
        assert_eq!((cache.stats().hits, cache.stats().misses), (0, 0));
        cache.insert("c", (), 10, 1.0);
        assert!(cache.contains("a") && !cache.contains("b"), "b, not the touched a, was least recent");
    }

    #[test]
    fn lru_evicts_least_recently_used() {
        let mut cache = DocCache::new(30, 30, Replacement::Lru);
        for key in ["a", "b", "c"] {
            assert!(evicted_keys(&cache.insert(key, (), 10, 1.0)).is_empty());
        }
        assert!(cache.get("a").is_some());
        assert_eq!(evicted_keys(&cache.insert("d", (), 10, 1.0)), vec!["b"]);
        // Reinserting counts as a use too: "c" is now the oldest.
        cache.insert("a", (), 10, 1.0);
        assert_eq!(evicted_keys(&cache.insert("e", (), 10, 1.0)), vec!["c"]);
        // Making room for a big object takes the oldest first, as many as needed.
        assert_eq!(evicted_keys(&cache.insert("f", (), 25, 1.0)), vec!["d", "a", "e"]);
        assert_eq!(cached_keys(&cache), vec!["f"]);
    }

    #[test]
    fn lfu_evicts_least_frequently_used_and_breaks_ties_by_recency() {
        let mut cache = DocCache::new(30, 30, Replacement::Lfu);
        for key in ["a", "b", "c"] {
            cache.insert(key, (), 10, 1.0);
        }
        cache.get("a");
        cache.get("a"); // a: 3 uses
        cache.get("c");
        cache.get("b"); // b and c: 2 uses each, c used less recently
        assert_eq!(evicted_keys(&cache.insert("d", (), 10, 1.0)), vec!["c"]);
        // The newcomer has the fewest uses.
        assert_eq!(evicted_keys(&cache.insert("e", (), 10, 1.0)), vec!["d"]);
        // An evicted object comes back with its count reset to one.
        assert_eq!(evicted_keys(&cache.insert("c", (), 10, 1.0)), vec!["e"]);
        assert_eq!(evicted_keys(&cache.insert("f", (), 10, 1.0)), vec!["c"]);
        assert_eq!(cached_keys(&cache), vec!["a", "b", "f"]);
    }

    #[test]
    fn gds_prefers_evicting_large_cheap_objects() {
        let mut cache = DocCache::new(100, 100, Replacement::Gds);
        cache.insert("small", (), 10, 1.0); // H = 0.1
        cache.insert("large_costly", (), 40, 20.0); // H = 0.5
        cache.insert("large_cheap", (), 40, 1.0); // H = 0.025, the most recently used
        assert!(cache.get("small").is_some());
        assert_eq!(evicted_keys(&cache.insert("new", (), 30, 1.0)), vec!["large_cheap"]);
        assert_eq!(cache.inflation(), 1.0 / 40.0);
        // Under LRU the same sequence evicts the least recently used instead.
        let mut lru = DocCache::new(100, 100, Replacement::Lru);
        lru.insert("small", (), 10, 1.0);
        lru.insert("large_costly", (), 40, 20.0);
        lru.insert("large_cheap", (), 40, 1.0);
        lru.get("small");
        assert_eq!(evicted_keys(&lru.insert("new", (), 30, 1.0)), vec!["large_costly"]);
    }

    #[test]
    fn gds_inflation_value_rises_on_eviction() {
        let mut cache = DocCache::new(101, 101, Replacement::Gds);
        // H = 1: fifty times the priority of each large object, but never used again.
        cache.insert(0u64, (), 1, 1.0);
        let mut last_inflation = 0.0;
        let mut evicted_after = None;
        for (n, key) in (1..=500u64).enumerate() {
            let evicted = evicted_keys(&cache.insert(key, (), 50, 1.0));
            assert!(cache.inflation() >= last_inflation, "L never falls");
            last_inflation = cache.inflation();
            if evicted.contains(&0) {
                evicted_after = Some(n);
                break;
            }
        }
        let evicted_after = evicted_after.expect("the idle small object is eventually evicted");
        // Two large objects fit beside the small one, so each large object's priority is that
        // of the one inserted two before it plus 1/50: L reaches 1 after about 100 insertions.
        assert!((90..=110).contains(&evicted_after), "{evicted_after}");
        assert!(cache.inflation() >= 1.0);
    }

    #[test]
    fn gdsf_keeps_frequently_hit_objects() {
        let run = |replacement| {
            let mut cache = DocCache::new(100, 100, replacement);
            cache.insert(0u64, (), 10, 1.0);
            for _ in 0..20 {
                cache.get(&0);
            }
            for key in 1..=100u64 {
                cache.insert(key, (), 10, 1.0);
            }
            cache.contains(&0)
        };
        assert!(run(Replacement::Gdsf), "GDSF keeps the hot object");
        assert!(!run(Replacement::Gds), "GDS alone does not");
    }

    #[test]
    fn objects_over_max_object_bytes_bypass_the_cache() {
        let mut cache = DocCache::new(100, 50, Replacement::Lru);
        cache.insert("a", 1, 40, 1.0);
        cache.insert("b", 2, 40, 1.0);
        assert_eq!(cache.insert("big", 3, 51, 1.0), InsertOutcome::TooLarge(3));
        // Over the capacity is refused too, even with a larger per-object limit.
        let mut roomy = DocCache::new(100, 1000, Replacement::Lru);
        assert_eq!(roomy.insert("huge", 4, 101, 1.0), InsertOutcome::TooLarge(4));
        assert!(roomy.is_empty());
        // Nothing was evicted for the refused object.
        assert_eq!(cached_keys(&cache), vec!["a", "b"]);
        assert_eq!(cache.used_bytes(), 80);
        assert_eq!(cache.stats().rejected_too_large, 1);
        assert_eq!(cache.stats().evictions, 0);
        // A too-large new version removes the stale one.
        assert_eq!(cache.insert("a", 5, 60, 1.0), InsertOutcome::TooLarge(5));
        assert_eq!(cached_keys(&cache), vec!["b"]);
        assert_eq!(cache.used_bytes(), 40);
        // Exactly the limit fits.
        assert!(cache.insert("c", 6, 50, 1.0).is_stored());
    }

    #[test]
    fn reinsert_replaces_and_adjusts_bytes() {
        let mut cache = DocCache::new(100, 100, Replacement::Lru);
        cache.insert("a", "v1", 30, 1.0);
        cache.insert("b", "v1", 30, 1.0);
        assert_eq!(evicted_keys(&cache.insert("a", "v2", 50, 1.0)), Vec::<&str>::new());
        assert_eq!(cache.peek("a"), Some(&"v2"));
        assert_eq!(cache.len(), 2);
        assert_eq!(cache.used_bytes(), 80);
        // Growing past the capacity evicts others, never the object being replaced.
        assert_eq!(evicted_keys(&cache.insert("a", "v3", 90, 1.0)), vec!["b"]);
        assert_eq!(cache.used_bytes(), 90);
        assert_eq!(cache.insert("a", "v4", 5, 1.0), InsertOutcome::Stored { evicted: vec![] });
        assert_eq!(cache.used_bytes(), 5);
        assert_eq!(cache.len(), 1);
        assert_eq!(cache.stats().evictions, 1);
        assert_eq!(cache.stats().insertions, 5);
    }

    #[test]
    fn reinsert_keeps_the_use_count() {
        let mut cache = DocCache::new(20, 20, Replacement::Lfu);
        cache.insert("a", (), 10, 1.0);
        cache.get("a"); // 2 uses
        cache.insert("b", (), 10, 1.0);
        cache.get("b"); // 2 uses, more recent
        cache.insert("a", (), 10, 1.0); // 3 uses
        cache.insert("c", (), 10, 1.0);
        assert_eq!(cached_keys(&cache), vec!["a", "c"]);
    }

    #[test]
    fn stats_count_hits_misses_evictions() {
        let mut cache = DocCache::new(20, 20, Replacement::Lru);
        assert!(cache.get("a").is_none());
        cache.insert("a", (), 10, 1.0);
        cache.insert("b", (), 10, 1.0);
        assert!(cache.get("a").is_some());
        assert!(cache.get("a").is_some());
        cache.insert("c", (), 15, 1.0); // evicts b, then a
        cache.insert("d", (), 30, 1.0); // too large
        // Neither peek, contains nor remove counts.
        assert!(cache.peek("c").is_some());
        assert!(!cache.contains("a"));
        assert_eq!(cache.remove("c"), Some(()));
        assert_eq!(
            *cache.stats(),
            CacheStats {
                hits: 2,
                misses: 1,
                insertions: 3,
                evictions: 2,
                evicted_bytes: 20,
                rejected_too_large: 1,
            }
        );
        cache.clear();
        assert_eq!(cache.stats().hits, 2, "clear keeps the statistics");
        cache.reset_stats();
        assert_eq!(*cache.stats(), CacheStats::default());
    }

    #[test]
    fn size_zero_objects_are_stored_and_ranked_as_one_byte() {
        let mut cache = DocCache::new(0, 0, Replacement::Gds);
        assert!(cache.insert("empty", (), 0, 1.0).is_stored());
        assert!(cache.insert("also_empty", (), 0, 0.0).is_stored());
        assert_eq!(cache.len(), 2);
        assert_eq!(cache.used_bytes(), 0);
        assert_eq!(cache.insert("one", (), 1, 1.0), InsertOutcome::TooLarge(()));
    }

    #[test]
    fn string_keys_are_looked_up_by_str() {
        let mut cache: DocCache<String, Vec<u8>> = DocCache::new(1000, 1000, Replacement::Gdsf);
        cache.insert("/index.html".to_owned(), b"<html>".to_vec(), 6, 1.0);
        assert_eq!(cache.get("/index.html").map(Vec::len), Some(6));
        assert!(cache.contains("/index.html"));
        assert_eq!(cache.remove("/index.html"), Some(b"<html>".to_vec()));
        assert!(cache.get("/index.html").is_none());
        assert!(cache.is_empty());
    }

    #[test]
    fn insert_with_evictions_reports_each_evicted_object() {
        let mut cache = DocCache::new(30, 30, Replacement::Lru);
        let mut evicted = Vec::new();
        for key in 0..5u32 {
            let outcome = cache.insert_with_evictions(key, key * 10, 10, 1.0, |key, value| {
                evicted.push((key, value));
            });
            assert_eq!(outcome, InsertOutcome::Stored { evicted: vec![] });
        }
        assert_eq!(evicted, vec![(0, 0), (1, 10)]);
    }

    #[test]
    fn clear_empties_and_restarts_inflation() {
        let mut cache = DocCache::new(10, 10, Replacement::Gdsf);
        for key in 0..5u8 {
            cache.insert(key, (), 10, 1.0);
        }
        assert!(cache.inflation() > 0.0);
        cache.clear();
        assert!(cache.is_empty());
        assert_eq!(cache.used_bytes(), 0);
        assert_eq!(cache.inflation(), 0.0);
        assert!(cache.insert(9, (), 10, 1.0).is_stored());
        assert_eq!(cache.peek(&9), Some(&()));
    }

    #[test]
    fn shrinking_evicts_in_policy_order_down_to_the_new_capacity_and_counts_it() {
        let mut cache = DocCache::new(40, 40, Replacement::Lru);
        for key in ["a", "b", "c", "d"] {
            cache.insert(key, (), 10, 1.0);
        }
        cache.get("a");
        let mut evicted = Vec::new();
        cache.resize(20, 40, |key, ()| evicted.push(key));
        assert_eq!(evicted, vec!["b", "c"], "the least recently used leave first");
        assert_eq!((cache.used_bytes(), cache.capacity_bytes()), (20, 20));
        assert_eq!(cached_keys(&cache), vec!["a", "d"]);
        assert_eq!((cache.stats().evictions, cache.stats().evicted_bytes), (2, 20));
        // The new capacity holds for insertions too.
        assert_eq!(evicted_keys(&cache.insert("e", (), 10, 1.0)), vec!["d"]);
    }

    #[test]
    fn growing_evicts_nothing_and_lets_more_in() {
        let mut cache = DocCache::new(20, 20, Replacement::Gds);
        cache.insert("a", (), 10, 1.0);
        cache.insert("b", (), 10, 1.0);
        cache.resize(50, 30, |_, ()| panic!("growing evicts nothing"));
        assert!(evicted_keys(&cache.insert("c", (), 30, 1.0)).is_empty());
        assert_eq!((cache.len(), cache.used_bytes(), cache.stats().evictions), (3, 50, 0));
    }

    #[test]
    fn a_lower_object_limit_removes_the_objects_over_it() {
        let mut cache = DocCache::new(100, 100, Replacement::Lfu);
        cache.insert("small", (), 10, 1.0);
        cache.insert("large", (), 60, 1.0);
        cache.get("large");
        let mut evicted = Vec::new();
        cache.resize(100, 50, |key, ()| evicted.push(key));
        assert_eq!(evicted, vec!["large"], "over the limit, however popular");
        assert_eq!(cached_keys(&cache), vec!["small"]);
        assert_eq!(cache.insert("large", (), 60, 1.0), InsertOutcome::TooLarge(()));
    }

    #[test]
    fn caches_of_sendable_values_can_be_shared_behind_a_mutex() {
        fn assert_send_sync<T: Send + Sync>() {}
        assert_send_sync::<DocCache<String, Vec<u8>>>();
        assert_send_sync::<std::sync::Mutex<DocCache<String, std::sync::Arc<[u8]>>>>();
    }

    /// A hasher that sends every key to the same hash, so every lookup probes a collision run.
    #[derive(Default)]
    struct ConstantHasher;

    impl Hasher for ConstantHasher {
        fn finish(&self) -> u64 {
            0x5555_5555_5555_5555
        }

        fn write(&mut self, _bytes: &[u8]) {}
    }

    /// A reference cache that does everything by linear scans, to check `DocCache` against.
    struct ModelCache {
        /// (key, value, size, cost, freq, rank, seq)
        entries: Vec<ModelEntry>,
        capacity_bytes: u64,
        max_object_bytes: u64,
        replacement: Replacement,
        clock: u64,
        inflation: f64,
        stats: CacheStats,
    }

    struct ModelEntry {
        key: u8,
        value: u32,
        size: u64,
        cost: f64,
        freq: u64,
        priority: f64,
        seq: u64,
    }

    impl ModelCache {
        fn priority(&self, entry: &ModelEntry) -> f64 {
            let size = entry.size.max(1) as f64;
            match self.replacement {
                Replacement::Lru => 0.0,
                Replacement::Lfu => entry.freq as f64,
                Replacement::Gds => self.inflation + entry.cost / size,
                Replacement::Gdsf => self.inflation + entry.freq as f64 * entry.cost / size,
            }
        }

        fn position(&self, key: u8) -> Option<usize> {
            self.entries.iter().position(|entry| entry.key == key)
        }

        /// Take out the entry of lowest priority (the oldest of equals), counted as evicted.
        fn evict_lowest(&mut self) -> (u8, u32) {
            let victim = (0..self.entries.len())
                .min_by(|&a, &b| {
                    let (a, b) = (&self.entries[a], &self.entries[b]);
                    a.priority.total_cmp(&b.priority).then(a.seq.cmp(&b.seq))
                })
                .expect("an entry to evict");
            let victim = self.entries.remove(victim);
            if matches!(self.replacement, Replacement::Gds | Replacement::Gdsf) {
                self.inflation = victim.priority;
            }
            self.stats.evictions += 1;
            self.stats.evicted_bytes += victim.size;
            (victim.key, victim.value)
        }

        fn used_bytes(&self) -> u64 {
            self.entries.iter().map(|entry| entry.size).sum()
        }

        fn get(&mut self, key: u8) -> Option<u32> {
            let Some(at) = self.position(key) else {
                self.stats.misses += 1;
                return None;
            };
            self.stats.hits += 1;
            self.clock += 1;
            self.entries[at].freq += 1;
            self.entries[at].seq = self.clock;
            self.entries[at].priority = self.priority(&self.entries[at]);
            Some(self.entries[at].value)
        }

        fn insert(&mut self, key: u8, value: u32, size: u64, cost: f64) -> Option<Vec<(u8, u32)>> {
            let freq = self.position(key).map_or(0, |at| self.entries.remove(at).freq);
            if size > self.max_object_bytes || size > self.capacity_bytes {
                self.stats.rejected_too_large += 1;
                return None;
            }
            let mut evicted = Vec::new();
            while self.used_bytes() + size > self.capacity_bytes {
                evicted.push(self.evict_lowest());
            }
            self.clock += 1;
            let mut entry = ModelEntry {
                key,
                value,
                size,
                cost: cost.max(0.0),
                freq: freq + 1,
                priority: 0.0,
                seq: self.clock,
            };
            entry.priority = self.priority(&entry);
            self.entries.push(entry);
            self.stats.insertions += 1;
            Some(evicted)
        }
    }

    impl ModelCache {
        /// The new limits; the objects over the per-object limit leave, then the lowest
        /// priority ones until the rest fits. The objects that left, sorted.
        fn resize(&mut self, capacity_bytes: u64, max_object_bytes: u64) -> Vec<(u8, u32)> {
            self.capacity_bytes = capacity_bytes;
            self.max_object_bytes = max_object_bytes;
            let (oversized, kept) = std::mem::take(&mut self.entries)
                .into_iter()
                .partition::<Vec<ModelEntry>, _>(|entry| entry.size > max_object_bytes);
            self.entries = kept;
            let mut evicted: Vec<(u8, u32)> = Vec::new();
            for entry in oversized {
                self.stats.evictions += 1;
                self.stats.evicted_bytes += entry.size;
                evicted.push((entry.key, entry.value));
            }
            while self.used_bytes() > self.capacity_bytes {
                evicted.push(self.evict_lowest());
            }
            evicted.sort_unstable();
            evicted
        }
    }

    #[derive(Debug, Clone)]
    enum Op {
        Get(u8),
        Peek(u8),
        Insert { key: u8, size: u64, cost: f64 },
        Remove(u8),
        Resize { capacity: u64, max_object: u64 },
    }

    fn op() -> impl Strategy<Value = Op> {
        let key = 0..12u8;
        prop_oneof![
            4 => key.clone().prop_map(Op::Get),
            1 => key.clone().prop_map(Op::Peek),
            4 => (key.clone(), prop_oneof![0..=60u64, 0..=130u64], prop::sample::select(vec![-1.0, 0.0, 0.5, 1.0, 4.0]))
                .prop_map(|(key, size, cost)| Op::Insert { key, size, cost }),
            1 => key.prop_map(Op::Remove),
            1 => (0..=130u64, 0..=130u64).prop_map(|(capacity, max_object)| Op::Resize { capacity, max_object }),
        ]
    }

    fn replacement() -> impl Strategy<Value = Replacement> {
        prop::sample::select(Replacement::ALL.to_vec())
    }

    /// Runs `ops` on a `DocCache` and on the model, checking they agree after every step.
    fn check_against_model<S: BuildHasher>(
        mut cache: DocCache<u8, u32, S>,
        ops: &[Op],
    ) -> Result<(), TestCaseError> {
        let mut model = ModelCache {
            entries: Vec::new(),
            capacity_bytes: cache.capacity_bytes(),
            max_object_bytes: cache.max_object_bytes(),
            replacement: cache.replacement(),
            clock: 0,
            inflation: 0.0,
            stats: CacheStats::default(),
        };
        for (value, op) in (0u32..).zip(ops) {
            match *op {
                Op::Get(key) => prop_assert_eq!(cache.get(&key).copied(), model.get(key)),
                Op::Peek(key) => prop_assert_eq!(
                    cache.peek(&key).copied(),
                    model.position(key).map(|at| model.entries[at].value)
                ),
                Op::Insert { key, size, cost } => {
                    let expected = model.insert(key, value, size, cost);
                    match cache.insert(key, value, size, cost) {
                        InsertOutcome::Stored { evicted } => {
                            prop_assert_eq!(Some(evicted), expected)
                        }
                        InsertOutcome::TooLarge(back) => {
                            prop_assert_eq!(back, value);
                            prop_assert_eq!(None, expected);
                        }
                    }
                }
                Op::Remove(key) => prop_assert_eq!(
                    cache.remove(&key),
                    model.position(key).map(|at| model.entries.remove(at).value)
                ),
                Op::Resize { capacity, max_object } => {
                    let mut evicted = Vec::new();
                    cache.resize(capacity, max_object, |key, value| evicted.push((key, value)));
                    evicted.sort_unstable();
                    prop_assert_eq!(evicted, model.resize(capacity, max_object));
                    prop_assert_eq!(
                        (cache.capacity_bytes(), cache.max_object_bytes()),
                        (capacity, max_object)
                    );
                }
            }
            prop_assert!(cache.used_bytes() <= cache.capacity_bytes());
            prop_assert_eq!(cache.used_bytes(), model.used_bytes());
            let stored: u64 = cache.iter().map(|(_, _, size)| size).sum();
            prop_assert_eq!(cache.used_bytes(), stored);
            prop_assert_eq!(cache.len(), model.entries.len());
            prop_assert_eq!(cache.iter().count(), cache.len());
            prop_assert_eq!(cache.is_empty(), model.entries.is_empty());
            prop_assert_eq!(cache.stats(), &model.stats);
            prop_assert_eq!(cache.inflation(), model.inflation);
            for key in 0..12u8 {
                prop_assert_eq!(cache.contains(&key), model.position(key).is_some());
            }
        }
        Ok(())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        #[test]
        fn used_bytes_never_exceeds_capacity(
            replacement in replacement(),
            ops in prop::collection::vec(op(), 1..200),
        ) {
            check_against_model(DocCache::new(100, 80, replacement), &ops)?;
        }

        #[test]
        fn used_bytes_never_exceeds_capacity_when_every_hash_collides(
            replacement in replacement(),
            ops in prop::collection::vec(op(), 1..200),
        ) {
            let cache = DocCache::with_hasher(
                100,
                80,
                replacement,
                BuildHasherDefault::<ConstantHasher>::default(),
            );
            check_against_model(cache, &ops)?;
        }
    }
}
