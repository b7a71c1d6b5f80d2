//! `ReplayGuard`: the nonces of the signed requests a node accepted lately, so that a request
//! captured on the cluster network and sent again is refused. A signature is good for
//! `MAX_SKEW_MS` either side of the receiver's clock, so a copy can arrive at most twice that
//! after the original: nonces are kept in two generations of that length each (the current
//! one and the one before), which always cover the last `2 × MAX_SKEW_MS`, at a bounded size.
//! Pure: the time is an argument.

use std::collections::HashSet;

/// Why a nonce was not taken.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unfresh {
    /// Seen before within the window: a replay.
    Replayed,
    /// The current generation is full (more signed requests than it holds in its time):
    /// refused rather than forgetting nonces early, which would let replays through.
    Full,
}

/// Nonces seen within the last two generations.
#[derive(Debug)]
pub struct ReplayGuard {
    /// Length of a generation (ms): twice the clock-skew window.
    generation_ms: u64,
    /// Most nonces one generation holds.
    capacity: usize,
    current: HashSet<u128>,
    previous: HashSet<u128>,
    /// When the current generation began (the receiver's clock, ms).
    current_since_ms: u64,
}

impl ReplayGuard {
    /// A guard for signatures good for `skew_ms` either side, holding at most `capacity`
    /// nonces a generation.
    pub fn new(skew_ms: u64, capacity: usize) -> ReplayGuard {
        ReplayGuard {
            generation_ms: 2 * skew_ms.max(1),
            capacity,
            current: HashSet::new(),
            previous: HashSet::new(),
            current_since_ms: 0,
        }
    }

    /// Take `nonce`, arriving at `now_ms`, unless it was taken within the window.
    pub fn take(&mut self, nonce: u128, now_ms: u64) -> Result<(), Unfresh> {
        if now_ms >= self.current_since_ms.saturating_add(self.generation_ms) {
            self.previous = std::mem::take(&mut self.current);
            self.current_since_ms = now_ms;
        }
        if self.current.contains(&nonce) || self.previous.contains(&nonce) {
            return Err(Unfresh::Replayed);
        }
        if self.current.len() >= self.capacity {
            return Err(Unfresh::Full);
        }
        self.current.insert(nonce);
        Ok(())
    }

    /// Nonces held now.
    pub fn len(&self) -> usize {
        self.current.len() + self.previous.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_nonce_is_taken_once_and_the_guard_refuses_rather_than_overflows() {
        let mut g = ReplayGuard::new(10, 2);
        assert_eq!(g.take(1, 1_000), Ok(()));
        assert_eq!(g.take(1, 1_001), Err(Unfresh::Replayed));
        assert_eq!(g.take(2, 1_002), Ok(()));
        assert_eq!(g.take(3, 1_003), Err(Unfresh::Full));
        // A new generation makes room; the old nonces are still remembered.
        assert_eq!(g.take(3, 1_020), Ok(()));
        assert_eq!(g.take(2, 1_021), Err(Unfresh::Replayed));
        // Two generations on, they are forgotten (their signatures are stale by then).
        assert_eq!(g.take(1, 1_100), Ok(()));
        assert_eq!(g.len(), 2);
    }

    proptest! {
        #[test]
        fn a_nonce_taken_is_refused_again_for_at_least_twice_the_skew(
            skew in 1u64..10_000,
            start in 0u64..1_000_000,
            steps in proptest::collection::vec((0u64..5_000, any::<u128>()), 1..60),
        ) {
            let mut g = ReplayGuard::new(skew, usize::MAX);
            let mut now = start;
            let mut taken: Vec<(u128, u64)> = Vec::new();
            for (gap, nonce) in steps {
                now += gap;
                // Everything taken within 2 × skew before now must be refused.
                for &(old, at) in &taken {
                    if now - at <= 2 * skew {
                        prop_assert_eq!(g.take(old, now), Err(Unfresh::Replayed));
                    }
                }
                if !taken.iter().any(|&(n, _)| n == nonce) && g.take(nonce, now).is_ok() {
                    taken.push((nonce, now));
                }
            }
        }
    }
}
