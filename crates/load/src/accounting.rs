//! `RequestAccounting`: where every measured request ended — sent, then answered, failed
//! (timeouts among them) or outstanding when the measured window closed — and, in open loop,
//! the arrivals scheduled in the window and those never sent (`NotSentCounts`, by reason).

use serde::{Serialize, Serializer};

/// Why an open-loop arrival due in the measured window never went out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NotSentReason {
    /// No connection was free to take it before the window ended (all busy, or ended).
    NoFreeConnection,
    /// A connection took it, but the window ended before it was written (a connection was
    /// still being opened, or its time came as the window closed).
    WindowEnded,
    /// The workload had no request left to send (a trace that ended).
    WorkloadEnded,
}

impl NotSentReason {
    /// All reasons, in report order.
    pub const ALL: [NotSentReason; 3] =
        [NotSentReason::NoFreeConnection, NotSentReason::WindowEnded, NotSentReason::WorkloadEnded];

    /// The key used in reports.
    pub fn name(self) -> &'static str {
        match self {
            NotSentReason::NoFreeConnection => "no_free_connection",
            NotSentReason::WindowEnded => "window_ended",
            NotSentReason::WorkloadEnded => "workload_ended",
        }
    }
}

/// Arrivals not sent, by reason.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NotSentCounts([u64; 3]);

impl NotSentCounts {
    /// Count `n` arrivals not sent for `reason`.
    pub fn add(&mut self, reason: NotSentReason, n: u64) {
        self.0[reason as usize] += n;
    }

    /// Arrivals not sent for `reason`.
    pub fn get(&self, reason: NotSentReason) -> u64 {
        self.0[reason as usize]
    }

    /// All arrivals not sent.
    pub fn total(&self) -> u64 {
        self.0.iter().sum()
    }

    fn merge(&mut self, other: &NotSentCounts) {
        for (a, b) in self.0.iter_mut().zip(other.0) {
            *a += b;
        }
    }
}

impl Serialize for NotSentCounts {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_map(NotSentReason::ALL.iter().map(|r| (r.name(), self.get(*r))))
    }
}

/// The fate of a run's measured requests (answers are counted in `ThreadStats::requests`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RequestAccounting {
    /// Open loop: arrivals due in the measured window (with sessions, plus the later
    /// requests of their sessions as they are sent).
    pub scheduled: u64,
    /// Measured requests written, or for which a connection failed.
    pub sent: u64,
    /// Of those, the ones that got no usable response (connect, closed, timeout, framing;
    /// over HTTP/2 also reset, goaway, protocol).
    pub failed: u64,
    /// Of the failed, those that timed out.
    pub timeouts: u64,
    /// Sent and still unanswered when the measured window ended (their latencies, in the
    /// histogram, are censored: the time they had waited then).
    pub outstanding: u64,
    /// Open loop: arrivals due in the window that never went out.
    pub not_sent: NotSentCounts,
}

impl RequestAccounting {
    /// Add another thread's counts.
    pub fn merge(&mut self, other: &RequestAccounting) {
        self.scheduled += other.scheduled;
        self.sent += other.sent;
        self.failed += other.failed;
        self.timeouts += other.timeouts;
        self.outstanding += other.outstanding;
        self.not_sent.merge(&other.not_sent);
    }

    /// Sent requests not accounted for by `completed` answers, failures and outstanding ones
    /// (negative: counted more than once); 0 when the closed-loop books balance.
    pub fn unaccounted_sent(&self, completed: u64) -> i128 {
        i128::from(self.sent) - i128::from(completed) - i128::from(self.failed) - i128::from(self.outstanding)
    }

    /// Open loop: scheduled arrivals not accounted for by `completed` answers, failures,
    /// outstanding and unsent ones; 0 when the open-loop books balance.
    pub fn unaccounted_scheduled(&self, completed: u64) -> i128 {
        i128::from(self.scheduled)
            - i128::from(completed)
            - i128::from(self.failed)
            - i128::from(self.outstanding)
            - i128::from(self.not_sent.total())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merged_accounting_is_the_sum_of_the_threads_and_keeps_both_balances() {
        let a = RequestAccounting {
            scheduled: 10,
            sent: 8,
            failed: 2,
            timeouts: 1,
            outstanding: 1,
            not_sent: NotSentCounts([2, 0, 0]),
        };
        let mut b = RequestAccounting { scheduled: 7, sent: 7, failed: 1, timeouts: 1, ..Default::default() };
        b.not_sent.add(NotSentReason::WindowEnded, 0);
        let mut merged = RequestAccounting::default();
        merged.merge(&a);
        merged.merge(&b);
        assert_eq!((merged.scheduled, merged.sent, merged.failed), (17, 15, 3));
        assert_eq!((merged.timeouts, merged.outstanding, merged.not_sent.total()), (2, 1, 2));
        // Thread a answered 5, thread b 6: each balances, and so does the sum.
        assert_eq!((a.unaccounted_sent(5), b.unaccounted_sent(6)), (0, 0));
        assert_eq!((a.unaccounted_scheduled(5), b.unaccounted_scheduled(6)), (0, 0));
        assert_eq!((merged.unaccounted_sent(11), merged.unaccounted_scheduled(11)), (0, 0));
        assert_eq!(merged.unaccounted_sent(12), -1, "an answer counted twice shows");
        assert_eq!(merged.unaccounted_scheduled(10), 1, "a lost arrival shows");
    }

    #[test]
    fn not_sent_counts_serialize_every_reason_by_name() {
        let mut n = NotSentCounts::default();
        n.add(NotSentReason::NoFreeConnection, 3);
        n.add(NotSentReason::WorkloadEnded, 1);
        let json = serde_json::to_value(n).unwrap();
        assert_eq!(json.as_object().unwrap().len(), 3);
        assert_eq!(json["no_free_connection"], 3);
        assert_eq!(json["window_ended"], 0);
        assert_eq!(json["workload_ended"], 1);
        assert_eq!(n.total(), 4);
    }
}
