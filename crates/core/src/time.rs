//! `Time`: a point on a caller-supplied clock, in nanoseconds since an arbitrary epoch.
//! The live switch feeds it from a monotonic clock, the simulator from its event queue.

use std::time::Duration;

/// A point in time, in nanoseconds since an epoch chosen by the caller.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Time(pub u64);

impl Time {
    /// The epoch.
    pub const ZERO: Time = Time(0);

    /// `secs` seconds after the epoch.
    pub fn from_secs(secs: u64) -> Time {
        Time(secs.saturating_mul(1_000_000_000))
    }

    /// `ms` milliseconds after the epoch.
    pub fn from_millis(ms: u64) -> Time {
        Time(ms.saturating_mul(1_000_000))
    }

    /// `secs` (fractional) seconds after the epoch; negative values clamp to the epoch.
    pub fn from_secs_f64(secs: f64) -> Time {
        Time((secs.max(0.0) * 1e9) as u64)
    }

    /// Nanoseconds since the epoch.
    pub fn as_nanos(self) -> u64 {
        self.0
    }

    /// Seconds since the epoch.
    pub fn as_secs_f64(self) -> f64 {
        self.0 as f64 / 1e9
    }

    /// Time elapsed from `earlier` to `self`, zero if `earlier` is later.
    pub fn since(self, earlier: Time) -> Duration {
        Duration::from_nanos(self.0.saturating_sub(earlier.0))
    }

    /// `self` moved forward by `d` (saturating).
    pub fn plus(self, d: Duration) -> Time {
        Time(self.0.saturating_add(d.as_nanos().min(u64::MAX as u128) as u64))
    }
}

impl std::ops::Add<Duration> for Time {
    type Output = Time;
    fn add(self, d: Duration) -> Time {
        self.plus(d)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn since_saturates_at_zero_when_earlier_is_later() {
        assert_eq!(Time(5).since(Time(10)), Duration::ZERO);
        assert_eq!(Time::from_secs(3).since(Time::from_secs(1)), Duration::from_secs(2));
    }

    #[test]
    fn add_and_conversions_round_trip() {
        let t = Time::from_millis(1500) + Duration::from_millis(500);
        assert_eq!(t, Time::from_secs(2));
        assert!((t.as_secs_f64() - 2.0).abs() < 1e-12);
        assert_eq!(Time::from_secs_f64(-1.0), Time::ZERO);
    }
}
