//! `DiskHistory`: one node's estimated disk reads as a ring of one-second buckets of
//! cumulative bytes, so "bytes read since t" is one subtraction (O(1)) and references older
//! than the horizon are known to be forgotten.

const NS_PER_SEC: u64 = 1_000_000_000;

/// Bytes read from disk per second over the last `secs` seconds. Bucket `s mod (secs+1)`
/// holds the bytes read in seconds `≤ s` since the history began, for the latest second
/// `head` and the `secs` before it.
#[derive(Clone, Debug)]
pub(crate) struct DiskHistory {
    cumulative: Box<[u64]>,
    head: Option<u64>,
}

impl DiskHistory {
    /// An empty history reaching `secs` seconds back (at least 1).
    pub(crate) fn new(secs: u64) -> DiskHistory {
        let buckets = secs.max(1).saturating_add(1) as usize;
        DiskHistory { cumulative: vec![0; buckets].into_boxed_slice(), head: None }
    }

    fn secs(&self) -> u64 {
        self.cumulative.len() as u64 - 1
    }

    fn bucket(&self, sec: u64) -> usize {
        (sec % self.cumulative.len() as u64) as usize
    }

    /// Record `bytes` read at time `t` (ns). A time before the latest one recorded counts
    /// at the latest second (a node's disk frontier only moves forward).
    pub(crate) fn add(&mut self, t: u64, bytes: u64) {
        let sec = t / NS_PER_SEC;
        let head = match self.head {
            None => sec,
            Some(head) if sec > head => {
                let carried = self.cumulative[self.bucket(head)];
                let gap = (sec - head).min(self.cumulative.len() as u64);
                for s in sec + 1 - gap..=sec {
                    let b = self.bucket(s);
                    self.cumulative[b] = carried;
                }
                sec
            }
            Some(head) => head,
        };
        self.head = Some(head);
        let b = self.bucket(head);
        self.cumulative[b] = self.cumulative[b].saturating_add(bytes);
    }

    /// Bytes read from the start of the second holding `since` on, asked at time `now`
    /// (both ns); `None` when `since` lies beyond the history's reach.
    pub(crate) fn bytes_since(&self, since: u64, now: u64) -> Option<u64> {
        let Some(head) = self.head else { return Some(0) };
        let s0 = since / NS_PER_SEC;
        if head.max(now / NS_PER_SEC).saturating_sub(s0) >= self.secs() {
            return None;
        }
        if s0 > head {
            return Some(0);
        }
        let before = if s0 == 0 { 0 } else { self.cumulative[self.bucket(s0 - 1)] };
        Some(self.cumulative[self.bucket(head)].saturating_sub(before))
    }

    /// Forget everything.
    pub(crate) fn clear(&mut self) {
        self.cumulative.fill(0);
        self.head = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = NS_PER_SEC;

    #[test]
    fn history_answers_bytes_since_in_constant_time_from_cumulative_buckets() {
        let mut h = DiskHistory::new(100);
        assert_eq!(h.bytes_since(0, 0), Some(0));
        h.add(5 * S, 100);
        h.add(5 * S + 10, 20);
        h.add(9 * S, 1_000);
        h.add(12 * S, 7);
        assert_eq!(h.bytes_since(0, 12 * S), Some(1_127));
        assert_eq!(h.bytes_since(5 * S + 500, 12 * S), Some(1_127), "the whole second counts");
        assert_eq!(h.bytes_since(6 * S, 12 * S), Some(1_007));
        assert_eq!(h.bytes_since(10 * S, 12 * S), Some(7));
        assert_eq!(h.bytes_since(13 * S, 13 * S), Some(0));
        // A time before the head is charged at the head.
        h.add(3 * S, 3);
        assert_eq!(h.bytes_since(12 * S, 12 * S), Some(10));
    }

    #[test]
    fn history_forgets_past_its_horizon() {
        let mut h = DiskHistory::new(10);
        h.add(0, 50);
        h.add(5 * S, 5);
        assert_eq!(h.bytes_since(0, 5 * S), Some(55));
        // Asked later than the horizon allows, even with no reads since: forgotten.
        assert_eq!(h.bytes_since(0, 10 * S), None);
        assert_eq!(h.bytes_since(1, 9 * S), Some(55));
        // A long gap wraps the whole ring; the older seconds are gone, the new ones exact.
        h.add(1_000 * S, 1);
        assert_eq!(h.bytes_since(0, 1_000 * S), None);
        assert_eq!(h.bytes_since(995 * S, 1_000 * S), Some(1));
        assert_eq!(h.bytes_since(991 * S, 1_000 * S), Some(1));
        assert_eq!(h.bytes_since(990 * S, 1_000 * S), None);
        h.clear();
        assert_eq!(h.bytes_since(0, 1_000 * S), Some(0));
    }
}
