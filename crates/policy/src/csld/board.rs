//! `CostBoard`: CSLD's circular cost board (CCB_k or DCB_k) — fixed-length slots of work
//! (ns) on an absolute time axis, a window of `slots` slots that slides forward as periods
//! end, work that overflows a slot spilling into the following ones, and period sums.

/// A circular array of slots, each holding at most `slot_ns` of work except the last slot
/// of the window, which takes whatever lies past the horizon. Absolute slot `s` covers
/// `[s·slot_ns, (s+1)·slot_ns)` and is stored at `s mod slots`.
#[derive(Clone, Debug)]
pub(crate) struct CostBoard {
    cells: Box<[u64]>,
    slot_ns: u64,
    /// Absolute index of the window's first slot; the window is `[start, start + slots)`.
    start: u64,
    /// Sum of every cell.
    total: u64,
}

impl CostBoard {
    /// An empty board of `slots` slots of `slot_ns` each (both at least 1).
    pub(crate) fn new(slots: usize, slot_ns: u64) -> CostBoard {
        assert!(slots > 0 && slot_ns > 0, "a cost board needs slots of non-zero length");
        CostBoard { cells: vec![0; slots].into_boxed_slice(), slot_ns, start: 0, total: 0 }
    }

    /// The absolute slot holding time `t` (ns).
    pub(crate) fn slot_of(&self, t: u64) -> u64 {
        t / self.slot_ns
    }

    fn len(&self) -> u64 {
        self.cells.len() as u64
    }

    fn cell(&mut self, slot: u64) -> &mut u64 {
        let n = self.len();
        &mut self.cells[(slot % n) as usize]
    }

    /// The window's last absolute slot (the horizon).
    pub(crate) fn last_slot(&self) -> u64 {
        self.start.saturating_add(self.len() - 1)
    }

    /// Record `cost` ns of work starting at time `t`: fill t's slot up to `slot_ns`, spill
    /// the rest into the following slots; work before the window starts at its first slot,
    /// work past the horizon lands in the last slot.
    pub(crate) fn add(&mut self, t: u64, cost: u64) {
        let last = self.last_slot();
        let mut slot = self.slot_of(t).clamp(self.start, last);
        let mut left = cost;
        self.total = self.total.saturating_add(cost);
        let slot_ns = self.slot_ns;
        while left > 0 {
            let cell = self.cell(slot);
            if slot == last {
                *cell = cell.saturating_add(left);
                return;
            }
            let put = left.min(slot_ns.saturating_sub(*cell));
            *cell += put;
            left -= put;
            slot += 1;
        }
    }

    /// Slide the window to begin at absolute slot `start`, zeroing (recycling) the slots it
    /// leaves behind. A window never slides back.
    pub(crate) fn advance_to(&mut self, start: u64) {
        if start <= self.start {
            return;
        }
        if start - self.start >= self.len() {
            self.cells.fill(0);
            self.total = 0;
        } else {
            self.clear(self.start, start);
        }
        self.start = start;
    }

    /// Zero the slots `[from, to)` that lie in the window.
    pub(crate) fn clear(&mut self, from: u64, to: u64) {
        let (from, to) = (from.max(self.start), to.min(self.last_slot().saturating_add(1)));
        for slot in from..to.max(from) {
            let cell = self.cell(slot);
            let v = std::mem::take(cell);
            self.total = self.total.saturating_sub(v);
        }
    }

    /// Work recorded in the slots `[from, to)` that lie in the window.
    pub(crate) fn sum(&self, from: u64, to: u64) -> u64 {
        let (from, to) = (from.max(self.start), to.min(self.last_slot().saturating_add(1)));
        let n = self.len();
        (from..to.max(from)).map(|s| self.cells[(s % n) as usize]).fold(0, u64::saturating_add)
    }

    /// Work recorded from absolute slot `from` to the horizon.
    pub(crate) fn sum_from(&self, from: u64) -> u64 {
        if from <= self.start {
            return self.total;
        }
        self.total.saturating_sub(self.sum(self.start, from))
    }

    /// Empty the board and start its window at absolute slot `start`.
    pub(crate) fn reset(&mut self, start: u64) {
        self.cells.fill(0);
        self.total = 0;
        self.start = start;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    #[test]
    fn cost_spills_into_next_slot_when_slot_is_full() {
        let mut b = CostBoard::new(10, 50 * MS);
        b.add(10 * MS, 30 * MS);
        b.add(20 * MS, 45 * MS);
        assert_eq!(b.sum(0, 1), 50 * MS);
        assert_eq!(b.sum(1, 2), 25 * MS);
        // A cost of three slots from an empty slot fills three slots exactly.
        b.add(200 * MS, 150 * MS);
        assert_eq!((b.sum(4, 5), b.sum(5, 6), b.sum(6, 7), b.sum(7, 8)), (50 * MS, 50 * MS, 50 * MS, 0));
        assert_eq!(b.sum_from(0), 75 * MS + 150 * MS);
    }

    #[test]
    fn costs_past_the_horizon_land_in_the_last_slot() {
        let mut b = CostBoard::new(4, 10);
        b.add(1_000, 7);
        b.add(25, 100);
        assert_eq!(b.last_slot(), 3);
        assert_eq!(b.sum(2, 3), 10, "slot 2 filled up to its length");
        assert_eq!(b.sum(3, 4), 7 + 90, "the rest and the far-future cost sit in the last slot");
        assert_eq!(b.sum_from(0), 107);
    }

    #[test]
    fn zeroing_a_period_recycles_its_slots() {
        let mut b = CostBoard::new(4, 10);
        b.add(0, 40);
        assert_eq!(b.sum_from(0), 40);
        b.advance_to(2);
        assert_eq!(b.sum_from(0), 20, "slots 0 and 1 were recycled");
        // Absolute slots 4 and 5 reuse the cells of slots 0 and 1, which start empty.
        b.add(40, 15);
        assert_eq!((b.sum(4, 5), b.sum(5, 6)), (10, 5));
        assert_eq!(b.sum(2, 4), 20);
        b.clear(2, 4);
        assert_eq!(b.sum_from(2), 15);
        // Work before the window starts at its first slot.
        b.add(0, 3);
        assert_eq!(b.sum(2, 3), 3);
        b.advance_to(100);
        assert_eq!(b.sum_from(0), 0);
        b.add(1005, 1);
        assert_eq!(b.sum(100, 101), 1);
    }

    #[test]
    fn board_saturates_instead_of_overflowing() {
        let mut b = CostBoard::new(3, 10);
        b.add(u64::MAX, u64::MAX);
        b.add(0, u64::MAX);
        assert_eq!(b.sum_from(0), u64::MAX);
        b.reset(7);
        assert_eq!(b.sum_from(0), 0);
    }
}
