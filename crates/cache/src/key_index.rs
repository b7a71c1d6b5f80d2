//! `KeyIndex`: an open-addressing hash table (linear probing, backward-shift deletion) from a
//! key's hash to the cache slot that holds the entry. It stores only slot numbers and 32-bit
//! hash tags, so each key is stored once, in its slot, and never cloned.

/// Marks a bucket that holds no slot.
const EMPTY: u32 = u32::MAX;
/// Bucket count of the first allocation.
const MIN_BUCKETS: usize = 8;

/// The top 32 bits of a key's hash: they pick the home bucket and filter key comparisons.
pub(crate) fn tag_of(hash: u64) -> u32 {
    (hash >> 32) as u32
}

#[derive(Debug, Clone, Copy)]
struct Bucket {
    slot: u32,
    tag: u32,
}

const VACANT: Bucket = Bucket { slot: EMPTY, tag: 0 };

/// Slot numbers by hash tag. The table never compares keys itself: `find` asks the caller
/// whether a candidate slot holds the key, and `remove` finds a slot by its number.
#[derive(Debug, Default)]
pub(crate) struct KeyIndex {
    /// A power-of-two number of buckets (or none before the first insert), at most 3/4 full.
    buckets: Vec<Bucket>,
    /// `32 - log2(buckets.len())`: a tag shifted right by this is its home bucket.
    shift: u32,
    len: usize,
}

impl KeyIndex {
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    fn mask(&self) -> usize {
        self.buckets.len() - 1
    }

    fn home(&self, tag: u32) -> usize {
        (tag >> self.shift) as usize
    }

    /// The slot whose tag is `tag` and for which `holds_key` is true, if any.
    pub(crate) fn find(&self, tag: u32, mut holds_key: impl FnMut(u32) -> bool) -> Option<u32> {
        if self.buckets.is_empty() {
            return None;
        }
        let mask = self.mask();
        let mut i = self.home(tag);
        loop {
            let bucket = self.buckets[i];
            if bucket.slot == EMPTY {
                return None;
            }
            if bucket.tag == tag && holds_key(bucket.slot) {
                return Some(bucket.slot);
            }
            i = (i + 1) & mask;
        }
    }

    /// Adds `slot` under `tag`. The caller guarantees the key is not already indexed.
    pub(crate) fn insert(&mut self, tag: u32, slot: u32) {
        debug_assert_ne!(slot, EMPTY);
        if (self.len + 1) * 4 > self.buckets.len() * 3 {
            self.grow();
        }
        self.place(Bucket { slot, tag });
        self.len += 1;
    }

    /// Puts `bucket` in the first free bucket from its home on.
    fn place(&mut self, bucket: Bucket) {
        let mask = self.mask();
        let mut i = self.home(bucket.tag);
        while self.buckets[i].slot != EMPTY {
            i = (i + 1) & mask;
        }
        self.buckets[i] = bucket;
    }

    fn grow(&mut self) {
        let new_len = (self.buckets.len() * 2).max(MIN_BUCKETS);
        assert!(new_len <= 1 << 32, "KeyIndex cannot hold more than 3 * 2^30 entries");
        let old = std::mem::replace(&mut self.buckets, vec![VACANT; new_len]);
        self.shift = 32 - new_len.trailing_zeros();
        for bucket in old.into_iter().filter(|bucket| bucket.slot != EMPTY) {
            self.place(bucket);
        }
    }

    /// Removes `slot`, which the caller guarantees is indexed under `tag`.
    pub(crate) fn remove(&mut self, tag: u32, slot: u32) {
        let mask = self.mask();
        let mut hole = self.home(tag);
        while self.buckets[hole].slot != slot {
            debug_assert_ne!(self.buckets[hole].slot, EMPTY, "slot {slot} is not indexed");
            hole = (hole + 1) & mask;
        }
        // Backward-shift deletion: pull later members of the probe run into the hole when the
        // hole lies between their home and where they sit, so no run has a gap.
        let mut next = (hole + 1) & mask;
        loop {
            let bucket = self.buckets[next];
            if bucket.slot == EMPTY {
                break;
            }
            let home = self.home(bucket.tag);
            if next.wrapping_sub(home) & mask >= next.wrapping_sub(hole) & mask {
                self.buckets[hole] = bucket;
                hole = next;
            }
            next = (next + 1) & mask;
        }
        self.buckets[hole] = VACANT;
        self.len -= 1;
    }

    /// Forgets every slot, keeping the allocation.
    pub(crate) fn clear(&mut self) {
        self.buckets.fill(VACANT);
        self.len = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Checks that every stored slot is reachable from its home without crossing a vacant
    /// bucket, which is what `find` relies on.
    fn assert_runs_have_no_gaps(index: &KeyIndex) {
        let mask = index.mask();
        let mut stored = 0;
        for (i, bucket) in index.buckets.iter().enumerate() {
            if bucket.slot == EMPTY {
                continue;
            }
            stored += 1;
            let mut j = index.home(bucket.tag);
            while j != i {
                assert_ne!(index.buckets[j].slot, EMPTY, "gap before bucket {i}");
                j = (j + 1) & mask;
            }
        }
        assert_eq!(stored, index.len());
    }

    #[test]
    fn colliding_tags_are_found_and_removed_without_losing_neighbours() {
        let mut index = KeyIndex::default();
        // Slots 0..6 all share one tag, so they form one probe run; slot 6 has another tag
        // whose home is inside that run.
        let shared = 0x1000_0000;
        for slot in 0..6 {
            index.insert(shared, slot);
        }
        let late = 0x2000_0000;
        index.insert(late, 6);
        assert_runs_have_no_gaps(&index);
        for removed in [0, 3, 5] {
            index.remove(shared, removed);
            assert_runs_have_no_gaps(&index);
            assert_eq!(index.find(shared, |slot| slot == removed), None);
        }
        for kept in [1, 2, 4] {
            assert_eq!(index.find(shared, |slot| slot == kept), Some(kept));
        }
        assert_eq!(index.find(late, |slot| slot == 6), Some(6));
        assert_eq!(index.len(), 4);
    }

    #[test]
    fn runs_that_wrap_around_the_end_stay_reachable() {
        let mut index = KeyIndex::default();
        let last_home = u32::MAX; // home is the last bucket at every table size
        for slot in 0..5 {
            index.insert(last_home, slot);
        }
        index.insert(0, 5);
        assert_runs_have_no_gaps(&index);
        index.remove(last_home, 1);
        assert_runs_have_no_gaps(&index);
        for slot in [0, 2, 3, 4] {
            assert_eq!(index.find(last_home, |s| s == slot), Some(slot));
        }
        assert_eq!(index.find(0, |s| s == 5), Some(5));
    }

    #[test]
    fn growing_keeps_every_slot_findable() {
        let mut index = KeyIndex::default();
        let tag = |slot: u32| slot.wrapping_mul(0x9E37_79B9);
        for slot in 0..1000 {
            index.insert(tag(slot), slot);
        }
        assert!(index.buckets.len() * 3 >= index.len() * 4);
        assert_runs_have_no_gaps(&index);
        for slot in 0..1000 {
            assert_eq!(index.find(tag(slot), |s| s == slot), Some(slot));
        }
        index.clear();
        assert_eq!(index.len(), 0);
        assert_eq!(index.find(tag(7), |_| true), None);
    }
}
