//! `RecencyList`: a doubly linked list of cache slots threaded through a vector by slot
//! number, least recently used at the front. It gives LRU O(1) updates where the
//! `EvictionHeap` would sift on every hit.

/// Link value meaning "no slot" (list end, or a slot not in the list).
const NONE: u32 = u32::MAX;

#[derive(Debug, Clone, Copy)]
struct Link {
    prev: u32,
    next: u32,
}

const UNLINKED: Link = Link { prev: NONE, next: NONE };

/// Slots from least to most recently used.
#[derive(Debug)]
pub(crate) struct RecencyList {
    /// Neighbours by slot number.
    links: Vec<Link>,
    /// Least recently used slot, or `NONE`.
    front: u32,
    /// Most recently used slot, or `NONE`.
    back: u32,
    len: usize,
}

impl Default for RecencyList {
    fn default() -> Self {
        RecencyList { links: Vec::new(), front: NONE, back: NONE, len: 0 }
    }
}

impl RecencyList {
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Appends `slot`, which must not be in the list, as the most recently used.
    pub(crate) fn push_back(&mut self, slot: u32) {
        let slot_index = slot as usize;
        if slot_index >= self.links.len() {
            self.links.resize(slot_index + 1, UNLINKED);
        }
        self.links[slot_index] = Link { prev: self.back, next: NONE };
        match self.back {
            NONE => self.front = slot,
            back => self.links[back as usize].next = slot,
        }
        self.back = slot;
        self.len += 1;
    }

    /// Makes `slot`, which must be in the list, the most recently used.
    pub(crate) fn move_to_back(&mut self, slot: u32) {
        if self.back != slot {
            self.remove(slot);
            self.push_back(slot);
        }
    }

    /// Removes and returns the least recently used slot.
    pub(crate) fn pop_front(&mut self) -> Option<u32> {
        let front = self.front;
        if front == NONE {
            return None;
        }
        self.remove(front);
        Some(front)
    }

    /// Takes `slot`, which must be in the list, out of it.
    pub(crate) fn remove(&mut self, slot: u32) {
        let Link { prev, next } = self.links[slot as usize];
        match prev {
            NONE => self.front = next,
            prev => self.links[prev as usize].next = next,
        }
        match next {
            NONE => self.back = prev,
            next => self.links[next as usize].prev = prev,
        }
        self.links[slot as usize] = UNLINKED;
        self.len -= 1;
    }

    pub(crate) fn clear(&mut self) {
        *self = RecencyList::default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn drain(list: &mut RecencyList) -> Vec<u32> {
        std::iter::from_fn(|| list.pop_front()).collect()
    }

    #[test]
    fn pops_least_recently_used_first_after_moves_and_removals() {
        let mut list = RecencyList::default();
        for slot in 0..6 {
            list.push_back(slot);
        }
        list.move_to_back(0); // front moves
        list.move_to_back(3); // middle moves
        list.move_to_back(3); // already at the back
        list.remove(5); // the old back, now in the middle
        list.remove(1); // the front
        assert_eq!(list.len(), 4);
        assert_eq!(drain(&mut list), vec![2, 4, 0, 3]);
        assert_eq!(list.len(), 0);
        list.push_back(7);
        assert_eq!(drain(&mut list), vec![7]);
    }
}
