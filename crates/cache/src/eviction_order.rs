//! `EvictionOrder`: the order in which a cache's slots leave, kept either by a
//! `RecencyList` (LRU, O(1)) or by an `EvictionHeap` ordered by (rank, seq) (LFU, GDS,
//! GDSF, O(log n)). `DocCache` talks only to this type.

use crate::eviction_heap::EvictionHeap;
use crate::recency_list::RecencyList;
use crate::replacement::Replacement;

/// Slots in eviction order. Every `push` and `update` must come with a `seq` larger than
/// any before it, which makes list order and (0, seq) heap order the same thing.
#[derive(Debug)]
pub(crate) enum EvictionOrder {
    Recency(RecencyList),
    Ranked(EvictionHeap),
}

impl EvictionOrder {
    pub(crate) fn for_replacement(replacement: Replacement) -> Self {
        match replacement {
            Replacement::Lru => EvictionOrder::Recency(RecencyList::default()),
            Replacement::Lfu | Replacement::Gds | Replacement::Gdsf => {
                EvictionOrder::Ranked(EvictionHeap::default())
            }
        }
    }

    pub(crate) fn len(&self) -> usize {
        match self {
            EvictionOrder::Recency(list) => list.len(),
            EvictionOrder::Ranked(heap) => heap.len(),
        }
    }

    pub(crate) fn push(&mut self, slot: u32, rank: u64, seq: u64) {
        match self {
            EvictionOrder::Recency(list) => list.push_back(slot),
            EvictionOrder::Ranked(heap) => heap.push(slot, rank, seq),
        }
    }

    /// Records a use of `slot` that gave it `rank` at logical time `seq`.
    pub(crate) fn update(&mut self, slot: u32, rank: u64, seq: u64) {
        match self {
            EvictionOrder::Recency(list) => list.move_to_back(slot),
            EvictionOrder::Ranked(heap) => heap.update(slot, rank, seq),
        }
    }

    /// Removes and returns the next slot to evict, with its rank (0 under recency order).
    pub(crate) fn pop_first(&mut self) -> Option<(u32, u64)> {
        match self {
            EvictionOrder::Recency(list) => list.pop_front().map(|slot| (slot, 0)),
            EvictionOrder::Ranked(heap) => heap.pop_min(),
        }
    }

    pub(crate) fn remove(&mut self, slot: u32) {
        match self {
            EvictionOrder::Recency(list) => list.remove(slot),
            EvictionOrder::Ranked(heap) => heap.remove(slot),
        }
    }

    pub(crate) fn clear(&mut self) {
        match self {
            EvictionOrder::Recency(list) => list.clear(),
            EvictionOrder::Ranked(heap) => heap.clear(),
        }
    }
}
