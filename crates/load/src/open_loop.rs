//! Open-loop arrivals: `OpenLoopSchedule` is a seeded Poisson process (exponential gaps at a
//! given rate) and `ArrivalQueue` hands its arrivals to connections as they become free. An
//! arrival taken after its scheduled time found every connection busy: it is `late`, and its
//! latency is measured from the scheduled time (no coordinated omission). Arrivals no
//! connection took before the end are counted at the end (`take_untaken`).

use std::time::{Duration, Instant};

use rand::SeedableRng;
use rand::rngs::SmallRng;
use rand_distr::{Distribution, Exp};

use crate::error::LoadError;

/// A seeded Poisson arrival process: times (offsets from the start) of successive arrivals.
#[derive(Clone, Debug)]
pub struct OpenLoopSchedule {
    rng: SmallRng,
    gap: Exp<f64>,
    next: f64,
}

impl OpenLoopSchedule {
    /// Arrivals at `rate` per second on average, the same for the same `seed`.
    pub fn new(rate: f64, seed: u64) -> Result<OpenLoopSchedule, LoadError> {
        if !(rate.is_finite() && rate > 0.0) {
            return Err(LoadError::config(format!("rate {rate} must be a positive number per second")));
        }
        let gap = Exp::new(rate).map_err(|e| LoadError::config(format!("rate {rate}: {e}")))?;
        let mut rng = SmallRng::seed_from_u64(seed);
        let next = gap.sample(&mut rng);
        Ok(OpenLoopSchedule { rng, gap, next })
    }

    /// Worker thread `worker`'s schedule in a run seeded with `run_seed`, at its share `rate`
    /// of the arrivals: each thread draws its own arrivals, repeatably.
    pub fn for_worker(rate: f64, run_seed: u64, worker: usize) -> Result<OpenLoopSchedule, LoadError> {
        OpenLoopSchedule::new(rate, run_seed ^ (worker as u64 + 1).wrapping_mul(0xD1B5_4A32_D192_ED03))
    }

    /// The next arrival's offset from the start, in seconds; advances the schedule.
    pub fn next_offset(&mut self) -> f64 {
        let t = self.next;
        self.next += self.gap.sample(&mut self.rng);
        t
    }

    /// The next arrival's offset without taking it.
    pub fn peek_offset(&self) -> f64 {
        self.next
    }
}

/// One arrival handed to a connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Arrival {
    /// When it was scheduled.
    pub scheduled: Instant,
    /// Whether it was taken after its scheduled time (no connection was free then).
    pub late: bool,
}

/// The arrivals of one worker thread, taken by its connections in order as each is free.
#[derive(Debug)]
pub struct ArrivalQueue {
    schedule: OpenLoopSchedule,
    start: Instant,
    /// Tolerance below which an arrival taken after its time is still on time: the time a
    /// free connection may take to come round to the queue.
    slack: Duration,
}

impl ArrivalQueue {
    /// Arrivals of `schedule` counted from `start`.
    pub fn new(schedule: OpenLoopSchedule, start: Instant) -> ArrivalQueue {
        ArrivalQueue { schedule, start, slack: Duration::from_micros(200) }
    }

    /// Take the next arrival; `now` is when the connection asking became free. It is late
    /// when `now` is past its scheduled time.
    pub fn take(&mut self, now: Instant) -> Arrival {
        let scheduled = self.start + Duration::from_secs_f64(self.schedule.next_offset());
        Arrival { scheduled, late: now > scheduled + self.slack }
    }

    /// When the next arrival is scheduled, without taking it.
    pub fn peek(&self) -> Instant {
        self.start + Duration::from_secs_f64(self.schedule.peek_offset())
    }

    /// At the end of a run, take the arrivals no connection took that were due before `end`,
    /// and count those due from `from` on that `admit` accepts (it is asked for each in
    /// turn; the first refusal stops the count).
    pub fn take_untaken(&mut self, from: Instant, end: Instant, mut admit: impl FnMut() -> bool) -> u64 {
        let mut n = 0;
        while self.peek() < end {
            let due = self.take(end).scheduled;
            if due >= from {
                if !admit() {
                    break;
                }
                n += 1;
            }
        }
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn offsets(rate: f64, seed: u64, n: usize) -> Vec<f64> {
        let mut s = OpenLoopSchedule::new(rate, seed).unwrap();
        (0..n).map(|_| s.next_offset()).collect()
    }

    #[test]
    fn poisson_schedule_is_seeded_repeatable_and_increasing() {
        let a = offsets(1000.0, 4, 5000);
        assert_eq!(a, offsets(1000.0, 4, 5000));
        assert_ne!(a, offsets(1000.0, 5, 5000));
        assert!(a.windows(2).all(|w| w[0] < w[1]));
        assert!(OpenLoopSchedule::new(0.0, 1).is_err() && OpenLoopSchedule::new(f64::NAN, 1).is_err());
    }

    #[test]
    fn poisson_schedule_mean_rate_is_within_two_percent_and_gaps_are_exponential() {
        for (rate, seed) in [(50.0, 1), (2000.0, 2), (123_456.0, 3)] {
            let n = 50_000;
            let t = offsets(rate, seed, n);
            let measured = n as f64 / t[n - 1];
            assert!((measured / rate - 1.0).abs() < 0.02, "rate {rate}: measured {measured}");
            let gaps: Vec<f64> = t.windows(2).map(|w| w[1] - w[0]).collect();
            let mean = gaps.iter().sum::<f64>() / gaps.len() as f64;
            let sd = (gaps.iter().map(|g| (g - mean).powi(2)).sum::<f64>() / gaps.len() as f64).sqrt();
            assert!((sd / mean - 1.0).abs() < 0.03, "cv {} for rate {rate}", sd / mean);
            // Memoryless: about e^-1 of the gaps exceed the mean.
            let over = gaps.iter().filter(|&&g| g > mean).count() as f64 / gaps.len() as f64;
            assert!((over - (-1.0f64).exp()).abs() < 0.01, "{over}");
        }
    }

    #[test]
    fn arrivals_taken_after_their_time_are_late_and_keep_their_scheduled_time() {
        let start = Instant::now();
        let mut q = ArrivalQueue::new(OpenLoopSchedule::new(1000.0, 7).unwrap(), start);
        let mut reference = OpenLoopSchedule::new(1000.0, 7).unwrap();
        // A connection free before each arrival: never late.
        for _ in 0..100 {
            let due = q.peek();
            let a = q.take(due - Duration::from_micros(10));
            assert_eq!(a.scheduled, start + Duration::from_secs_f64(reference.next_offset()));
            assert!(!a.late);
        }
        // Connections busy for 50 ms: every arrival due in that time is taken late, and
        // keeps its schedule so latency can be measured from it.
        let busy_until = q.peek() + Duration::from_millis(50);
        let mut late = 0;
        while q.peek() < busy_until {
            let a = q.take(busy_until);
            assert_eq!(a.scheduled, start + Duration::from_secs_f64(reference.next_offset()));
            assert!(a.late);
            late += 1;
        }
        assert!((30..=75).contains(&late), "{late} arrivals in 50 ms at 1000/s");
        let a = q.take(q.peek());
        assert!(!a.late, "taken exactly on time is not late");
    }

    #[test]
    fn untaken_arrivals_counted_are_exactly_those_due_in_the_window() {
        let start = Instant::now();
        let mut reference = OpenLoopSchedule::new(500.0, 3).unwrap();
        let offsets: Vec<f64> = (0..2000).map(|_| reference.next_offset()).collect();
        let at = |s: f64| start + Duration::from_secs_f64(s);
        let in_window = offsets.iter().filter(|&&o| (0.5..1.5).contains(&o)).count() as u64;
        let mut q = ArrivalQueue::new(OpenLoopSchedule::new(500.0, 3).unwrap(), start);
        // A connection took the first ten (some before the window): they are not counted again.
        let taken_in_window = offsets[..10].iter().filter(|&&o| o >= 0.5).count() as u64;
        for _ in 0..10 {
            q.take(start);
        }
        assert_eq!(q.take_untaken(at(0.5), at(1.5), || true), in_window - taken_in_window);
        assert!(q.peek() >= at(1.5), "every arrival due before the end was taken");
        let mut q = ArrivalQueue::new(OpenLoopSchedule::new(500.0, 3).unwrap(), start);
        let mut budget = 7;
        let admitted = q.take_untaken(at(0.5), at(1.5), || {
            budget -= 1;
            budget >= 0
        });
        assert_eq!(admitted, 7, "a spent budget stops the count");
    }
}
