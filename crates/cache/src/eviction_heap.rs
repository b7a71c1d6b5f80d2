//! `EvictionHeap`: an indexed 4-ary min-heap of cache slots ordered by (rank, seq), i.e. the
//! order in which entries leave the cache. It tracks each slot's position, so a slot's rank
//! can change, or the slot can leave, in O(log n).

/// Children per node; 4 keeps the heap shallow and a node's children in one or two cache
/// lines.
const ARITY: usize = 4;
/// Position of a slot that is not in the heap.
const ABSENT: u32 = u32::MAX;

#[derive(Debug, Clone, Copy)]
struct HeapItem {
    /// Primary order: lower leaves first.
    rank: u64,
    /// Logical time of the slot's last use: among equal ranks the older leaves first.
    seq: u64,
    slot: u32,
}

impl HeapItem {
    /// `(rank, seq)` as one integer, so comparisons compile without branches.
    fn order(&self) -> u128 {
        (u128::from(self.rank) << 64) | u128::from(self.seq)
    }
}

/// Min-heap of slots by `(rank, seq)`. Callers keep `seq` unique, so the order is total.
#[derive(Debug, Default)]
pub(crate) struct EvictionHeap {
    items: Vec<HeapItem>,
    /// Index into `items` by slot number, `ABSENT` for slots not in the heap.
    position: Vec<u32>,
}

impl EvictionHeap {
    pub(crate) fn len(&self) -> usize {
        self.items.len()
    }

    pub(crate) fn push(&mut self, slot: u32, rank: u64, seq: u64) {
        let slot_index = slot as usize;
        if slot_index >= self.position.len() {
            self.position.resize(slot_index + 1, ABSENT);
        }
        debug_assert_eq!(self.position[slot_index], ABSENT, "slot {slot} pushed twice");
        self.items.push(HeapItem { rank, seq, slot });
        self.sift_up(self.items.len() - 1);
    }

    /// Removes and returns the slot with the lowest `(rank, seq)`, with its rank.
    pub(crate) fn pop_min(&mut self) -> Option<(u32, u64)> {
        let min = *self.items.first()?;
        self.take_at(0);
        Some((min.slot, min.rank))
    }

    /// Gives `slot`, which must be in the heap, a new rank and seq.
    pub(crate) fn update(&mut self, slot: u32, rank: u64, seq: u64) {
        let at = self.position[slot as usize] as usize;
        let item = &mut self.items[at];
        let old = item.order();
        item.rank = rank;
        item.seq = seq;
        if item.order() < old {
            self.sift_up(at);
        } else {
            self.sift_down(at);
        }
    }

    /// Takes `slot`, which must be in the heap, out of it.
    pub(crate) fn remove(&mut self, slot: u32) {
        let at = self.position[slot as usize];
        debug_assert_ne!(at, ABSENT, "slot {slot} is not in the heap");
        self.take_at(at as usize);
    }

    pub(crate) fn clear(&mut self) {
        self.items.clear();
        self.position.clear();
    }

    /// Removes the item at `at`, filling its place with the last item.
    fn take_at(&mut self, at: usize) {
        let removed = self.items.swap_remove(at);
        self.position[removed.slot as usize] = ABSENT;
        if at < self.items.len() {
            let moved = self.items[at];
            self.position[moved.slot as usize] = at as u32;
            if moved.order() < removed.order() {
                self.sift_up(at);
            } else {
                self.sift_down(at);
            }
        }
    }

    fn sift_up(&mut self, mut at: usize) {
        let item = self.items[at];
        while at > 0 {
            let parent = (at - 1) / ARITY;
            let above = self.items[parent];
            if above.order() <= item.order() {
                break;
            }
            self.items[at] = above;
            self.position[above.slot as usize] = at as u32;
            at = parent;
        }
        self.items[at] = item;
        self.position[item.slot as usize] = at as u32;
    }

    fn sift_down(&mut self, mut at: usize) {
        let item = self.items[at];
        let len = self.items.len();
        loop {
            let first = ARITY * at + 1;
            if first >= len {
                break;
            }
            let last = (first + ARITY).min(len);
            let mut least = first;
            for child in first + 1..last {
                if self.items[child].order() < self.items[least].order() {
                    least = child;
                }
            }
            let below = self.items[least];
            if below.order() >= item.order() {
                break;
            }
            self.items[at] = below;
            self.position[below.slot as usize] = at as u32;
            at = least;
        }
        self.items[at] = item;
        self.position[item.slot as usize] = at as u32;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn drain(heap: &mut EvictionHeap) -> Vec<u32> {
        std::iter::from_fn(|| heap.pop_min().map(|(slot, _)| slot)).collect()
    }

    #[test]
    fn pops_in_rank_then_seq_order() {
        let mut heap = EvictionHeap::default();
        // (slot, rank, seq)
        for (slot, rank, seq) in [(0, 5, 1), (1, 2, 2), (2, 5, 0), (3, 9, 3), (4, 2, 4)] {
            heap.push(slot, rank, seq);
        }
        assert_eq!(drain(&mut heap), vec![1, 4, 2, 0, 3]);
    }

    #[test]
    fn update_and_remove_keep_the_order() {
        let mut heap = EvictionHeap::default();
        for slot in 0..50u32 {
            heap.push(slot, u64::from(slot), u64::from(slot));
        }
        heap.update(0, 100, 50); // lowest becomes highest
        heap.update(49, 0, 51); // highest becomes lowest
        heap.remove(25);
        heap.remove(1);
        let mut expected: Vec<u32> = vec![49];
        expected.extend((2..49).filter(|&slot| slot != 25));
        expected.push(0);
        assert_eq!(drain(&mut heap), expected);
        assert_eq!(heap.len(), 0);
    }
}
