//! Rate-limited warnings for one failing source: the first failure, a different error, or the
//! same one again after `WARN_EVERY` is logged (with how many were held back); a success ends
//! the run of failures, so the next one is logged at once.

use std::time::{Duration, Instant};

/// The same warning about a source is logged at most this often.
pub const WARN_EVERY: Duration = Duration::from_secs(60);

/// One source's warning state.
#[derive(Default)]
pub struct WarnGate {
    /// The last warning logged, and when.
    last: Option<(Instant, String)>,
    /// Warnings held back since.
    held_back: u64,
}

impl WarnGate {
    /// Log `why` about `source` unless the same was logged less than `WARN_EVERY` ago.
    pub fn warn(&mut self, source: &str, why: &str) {
        let now = Instant::now();
        let due = match &self.last {
            Some((at, last)) => last != why || now.duration_since(*at) >= WARN_EVERY,
            None => true,
        };
        if due {
            tracing::warn!(source, held_back = self.held_back, "discovery: {why}; its last good nodes stay");
            self.last = Some((now, why.to_string()));
            self.held_back = 0;
        } else {
            self.held_back += 1;
        }
    }

    /// The source gave a good list: whether it had been failing (then the next failure is
    /// logged at once).
    pub fn recovered(&mut self) -> bool {
        self.held_back = 0;
        self.last.take().is_some()
    }

    /// Whether a warning was logged since the last success.
    #[cfg(test)]
    fn failing(&self) -> bool {
        self.last.is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_warning_is_held_back_and_a_new_one_or_a_recovery_resets() {
        let mut gate = WarnGate::default();
        gate.warn("dns:a", "timed out");
        gate.warn("dns:a", "timed out");
        gate.warn("dns:a", "timed out");
        assert_eq!(gate.held_back, 2);
        gate.warn("dns:a", "NXDOMAIN");
        assert_eq!(gate.held_back, 0, "a different error is logged at once");
        assert!(gate.failing() && gate.recovered() && !gate.failing());
        assert!(!gate.recovered(), "recovered once");
    }
}
