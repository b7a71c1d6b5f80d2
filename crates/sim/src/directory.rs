//! `CacheDirectory`: the global view of every node's cache that the idealised baselines
//! assume — LB/GC's front-end and WRR/GMS's global memory — shared between the simulator
//! (which updates it on every insertion, eviction and fetch) and the LB/GC policy (which
//! reads it in `pick`). Also `IdHasher`, a fast hasher for trusted integer keys.

use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Most nodes a directory tracks (one bit per node per document).
pub const MAX_DIRECTORY_NODES: usize = 64;

/// A multiplicative hasher for trusted integer keys (dense target ids, target hashes). Not
/// DoS-resistant: for the simulator's own keys only.
#[derive(Clone, Copy, Debug, Default)]
pub struct IdHasher(u64);

impl Hasher for IdHasher {
    #[inline]
    fn finish(&self) -> u64 {
        let h = self.0.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        h ^ (h >> 29)
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ b as u64).wrapping_mul(0x0100_0000_01B3);
        }
    }

    #[inline]
    fn write_u32(&mut self, n: u32) {
        self.0 = (self.0 ^ n as u64).wrapping_mul(0xff51_afd7_ed55_8ccd);
    }

    #[inline]
    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0 ^ n).wrapping_mul(0xff51_afd7_ed55_8ccd);
    }

    #[inline]
    fn write_usize(&mut self, n: usize) {
        self.write_u64(n as u64);
    }
}

/// Builds `IdHasher`s.
#[derive(Clone, Copy, Debug, Default)]
pub struct BuildIdHasher;

impl BuildHasher for BuildIdHasher {
    type Hasher = IdHasher;
    #[inline]
    fn build_hasher(&self) -> IdHasher {
        IdHasher(0)
    }
}

/// Which node holds which document, which node is fetching which, and each node's free
/// cache bytes and "age floor" (how old the next victim of its cache is: GDS's inflation
/// value L, or for LRU/LFU the last use of the last object it evicted). Atomics with relaxed
/// ordering: a simulation runs on one thread; they only make the directory shareable with a
/// `Policy`, which must be `Send`. There is one writer (the simulation), so bits are set by
/// a plain load and store, not a locked read-modify-write.
#[derive(Debug)]
pub struct CacheDirectory {
    nodes: usize,
    holders: Vec<AtomicU64>,
    fetching: Vec<AtomicU64>,
    free_bytes: Vec<AtomicU64>,
    age_floor: Vec<AtomicU64>,
    ids: HashMap<u64, u32, BuildIdHasher>,
    sizes: Vec<u64>,
    max_object: u64,
}

impl CacheDirectory {
    /// A directory for `nodes` nodes (at most 64) of `capacity` bytes each over documents
    /// with these target hashes and sizes; objects over `max_object` are never cached.
    pub fn new(
        nodes: usize,
        capacity: u64,
        max_object: u64,
        hashes_and_sizes: &[(u64, u64)],
    ) -> CacheDirectory {
        assert!(nodes <= MAX_DIRECTORY_NODES, "a cache directory tracks at most 64 nodes");
        let mut ids = HashMap::with_capacity_and_hasher(hashes_and_sizes.len(), BuildIdHasher);
        for (i, &(h, _)) in hashes_and_sizes.iter().enumerate() {
            ids.entry(h).or_insert(i as u32);
        }
        let atomics = |n: usize, v: u64| (0..n).map(|_| AtomicU64::new(v)).collect::<Vec<_>>();
        CacheDirectory {
            nodes,
            holders: atomics(hashes_and_sizes.len(), 0),
            fetching: atomics(hashes_and_sizes.len(), 0),
            free_bytes: atomics(nodes, capacity),
            age_floor: atomics(nodes, 0),
            ids,
            sizes: hashes_and_sizes.iter().map(|&(_, s)| s).collect(),
            max_object: max_object.min(capacity),
        }
    }

    /// Nodes tracked.
    pub fn nodes(&self) -> usize {
        self.nodes
    }

    /// The document id of a target hash.
    #[inline]
    pub fn doc_of(&self, target_hash: u64) -> Option<u32> {
        self.ids.get(&target_hash).copied()
    }

    /// Size of a document.
    #[inline]
    pub fn size(&self, doc: u32) -> u64 {
        self.sizes[doc as usize]
    }

    /// Whether `doc` can be cached at all.
    #[inline]
    pub fn cacheable(&self, doc: u32) -> bool {
        self.sizes[doc as usize] <= self.max_object
    }

    /// Bit mask of the nodes whose cache holds `doc`.
    #[inline]
    pub fn holders(&self, doc: u32) -> u64 {
        self.holders[doc as usize].load(Relaxed)
    }

    /// Bit mask of the nodes that have been sent `doc` and do not yet have it in memory.
    #[inline]
    pub fn fetching(&self, doc: u32) -> u64 {
        self.fetching[doc as usize].load(Relaxed)
    }

    #[inline]
    pub fn set_held(&self, doc: u32, node: usize, held: bool) {
        set_bit(&self.holders[doc as usize], node, held);
    }

    #[inline]
    pub fn set_fetching(&self, doc: u32, node: usize, fetching: bool) {
        set_bit(&self.fetching[doc as usize], node, fetching);
    }

    /// Free bytes in `node`'s cache.
    #[inline]
    pub fn free_bytes(&self, node: usize) -> u64 {
        self.free_bytes[node].load(Relaxed)
    }

    #[inline]
    pub fn set_free_bytes(&self, node: usize, bytes: u64) {
        self.free_bytes[node].store(bytes, Relaxed);
    }

    /// `node`'s age floor (smaller: its next victim is older).
    #[inline]
    pub fn age_floor(&self, node: usize) -> u64 {
        self.age_floor[node].load(Relaxed)
    }

    #[inline]
    pub fn set_age_floor(&self, node: usize, floor: u64) {
        self.age_floor[node].store(floor, Relaxed);
    }

    /// The node, among those in `allowed` (a bit mask), whose cache holds the globally
    /// oldest content: a node with room for `size` more bytes first (most room wins),
    /// else the smallest age floor; ties go to `prefer` if it is among them, then to the
    /// lowest index. `None` if `allowed` is empty.
    pub fn oldest_node(&self, allowed: u64, size: u64, prefer: Option<usize>) -> Option<usize> {
        let members = (0..self.nodes).filter(|&i| allowed & (1 << i) != 0);
        let any_room = members.clone().any(|i| self.free_bytes(i) >= size);
        // Score each candidate so that the best is the smallest: most room, or oldest floor.
        let score = |i: usize| -> Option<u64> {
            if any_room {
                let free = self.free_bytes(i);
                (free >= size).then_some(u64::MAX - free)
            } else {
                Some(self.age_floor(i))
            }
        };
        let mut best: Option<(usize, u64)> = None;
        for i in members {
            if let Some(s) = score(i)
                && best.is_none_or(|(_, b)| s < b)
            {
                best = Some((i, s));
            }
        }
        let (first, best_score) = best?;
        match prefer {
            Some(p) if p < self.nodes && allowed & (1 << p) != 0 && score(p) == Some(best_score) => Some(p),
            _ => Some(first),
        }
    }
}

/// Set or clear one bit; the directory has a single writer (see `CacheDirectory`).
#[inline]
fn set_bit(word: &AtomicU64, bit: usize, on: bool) {
    let old = word.load(Relaxed);
    let new = if on { old | 1 << bit } else { old & !(1 << bit) };
    if new != old {
        word.store(new, Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn oldest_node_prefers_room_then_the_smallest_age_floor() {
        let d = CacheDirectory::new(3, 100, 100, &[(11, 40), (22, 70)]);
        assert_eq!(d.doc_of(22), Some(1));
        assert_eq!(d.doc_of(33), None);
        // All empty: room everywhere, equal; the preferred node wins, else the lowest index.
        assert_eq!(d.oldest_node(0b111, 40, Some(2)), Some(2));
        assert_eq!(d.oldest_node(0b111, 40, None), Some(0));
        d.set_free_bytes(0, 10);
        d.set_free_bytes(1, 50);
        d.set_free_bytes(2, 60);
        // Most room among those with room.
        assert_eq!(d.oldest_node(0b111, 40, Some(1)), Some(2));
        // No room anywhere: the smallest age floor.
        d.set_free_bytes(2, 0);
        d.set_free_bytes(1, 0);
        d.set_age_floor(0, 9);
        d.set_age_floor(1, 3);
        d.set_age_floor(2, 5);
        assert_eq!(d.oldest_node(0b111, 40, Some(0)), Some(1));
        assert_eq!(d.oldest_node(0b101, 40, Some(0)), Some(2));
        assert_eq!(d.oldest_node(0, 40, None), None);
        d.set_held(1, 2, true);
        d.set_held(1, 0, true);
        d.set_held(1, 2, false);
        assert_eq!(d.holders(1), 0b001);
    }
}
