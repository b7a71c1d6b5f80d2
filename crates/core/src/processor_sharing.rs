//! `ProcessorSharing`: a processor-sharing queue of `cpus` servers on a caller's clock (times
//! are `Duration`s from the caller's epoch). Each of the `n` jobs present is served at rate
//! `min(1, cpus / n)`; jobs are added with a cost, removed (cancelled), and taken once served.
//! Virtual time is kept in integer units, rounded down as it advances, so a job never
//! completes before its whole cost has been served.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

/// Virtual-time units per nanosecond of service.
const UNITS_PER_NS: u128 = 1 << 16;

/// A job in a `ProcessorSharing` queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct JobId(pub u64);

/// A processor-sharing queue of `cpus` identical servers.
#[derive(Clone, Debug)]
pub struct ProcessorSharing {
    cpus: u32,
    /// Service a job present since the epoch would have received by `last`, in units.
    virtual_time: u128,
    /// When the state was last advanced, in ns from the caller's epoch.
    last_ns: u128,
    /// Jobs present, by the virtual time at which they finish, then id.
    by_finish: BTreeSet<(u128, JobId)>,
    /// Finish tag of each job present.
    finish_of: BTreeMap<JobId, u128>,
    next_id: u64,
    /// Time with at least one job present, ns.
    busy_ns: u128,
    /// Service given, summed over servers (CPU time), ns.
    served_ns: u128,
}

fn ns(d: Duration) -> u128 {
    d.as_nanos()
}

fn from_ns(n: u128) -> Duration {
    let n = n.min(u64::MAX as u128 * 1_000_000_000);
    Duration::new((n / 1_000_000_000) as u64, (n % 1_000_000_000) as u32)
}

impl ProcessorSharing {
    /// An idle queue of `cpus` servers (at least 1) at time zero.
    pub fn new(cpus: u32) -> ProcessorSharing {
        ProcessorSharing {
            cpus: cpus.max(1),
            virtual_time: 0,
            last_ns: 0,
            by_finish: BTreeSet::new(),
            finish_of: BTreeMap::new(),
            next_id: 0,
            busy_ns: 0,
            served_ns: 0,
        }
    }

    /// Servers sharing the work.
    pub fn cpus(&self) -> u32 {
        self.cpus
    }

    /// Jobs present (in service, as every job present is).
    pub fn active(&self) -> usize {
        self.by_finish.len()
    }

    /// Time during which at least one job was present, up to the last update.
    pub fn busy_time(&self) -> Duration {
        from_ns(self.busy_ns)
    }

    /// Time during which at least one job was present, up to `now` (a time earlier than the
    /// last update counts as the last update): the jobs present now are taken to stay.
    pub fn busy_time_at(&self, now: Duration) -> Duration {
        let ahead = if self.by_finish.is_empty() { 0 } else { ns(now).saturating_sub(self.last_ns) };
        from_ns(self.busy_ns + ahead)
    }

    /// Service given so far, summed over servers (the modelled CPU time spent).
    pub fn served_time(&self) -> Duration {
        from_ns(self.served_ns)
    }

    /// Servers busy while `n` jobs are present.
    fn busy_servers(&self, n: usize) -> u128 {
        (n as u128).min(self.cpus as u128)
    }

    /// Move the clock to `now` (a time earlier than the last update counts as the last
    /// update), serving the jobs present meanwhile; rounds service down.
    fn advance(&mut self, now: Duration) {
        let now_ns = ns(now).max(self.last_ns);
        let elapsed = now_ns - self.last_ns;
        let n = self.by_finish.len();
        if n > 0 && elapsed > 0 {
            let servers = self.busy_servers(n);
            self.virtual_time += elapsed * UNITS_PER_NS * servers / n as u128;
            self.busy_ns += elapsed;
            self.served_ns += elapsed * servers;
        }
        self.last_ns = now_ns;
    }

    /// Add a job needing `cost` of service, arriving at `now`.
    pub fn add(&mut self, now: Duration, cost: Duration) -> JobId {
        self.advance(now);
        let id = JobId(self.next_id);
        self.next_id += 1;
        let finish = self.virtual_time + ns(cost) * UNITS_PER_NS;
        self.by_finish.insert((finish, id));
        self.finish_of.insert(id, finish);
        id
    }

    /// Remove job `id` at `now` (cancelled: it never completes); false if it is not present.
    pub fn remove(&mut self, now: Duration, id: JobId) -> bool {
        self.advance(now);
        match self.finish_of.remove(&id) {
            Some(finish) => self.by_finish.remove(&(finish, id)),
            None => false,
        }
    }

    /// When the job of `finish` tag completes if no job arrives or leaves before (rounded up
    /// to the nanosecond).
    fn completion_of(&self, finish: u128) -> Duration {
        let n = self.by_finish.len().max(1) as u128;
        let left = finish.saturating_sub(self.virtual_time);
        let rate = UNITS_PER_NS * self.busy_servers(n as usize);
        from_ns(self.last_ns + (left * n).div_ceil(rate))
    }

    /// When the next job completes if none arrives or leaves before; `None` when idle.
    pub fn next_completion(&self) -> Option<Duration> {
        self.by_finish.first().map(|&(finish, _)| self.completion_of(finish))
    }

    /// The job that completes next.
    pub fn next_job(&self) -> Option<JobId> {
        self.by_finish.first().map(|&(_, id)| id)
    }

    /// When job `id` completes if no job arrives or leaves before; `None` if it is not present.
    pub fn projected_completion(&self, id: JobId) -> Option<Duration> {
        self.finish_of.get(&id).map(|&finish| self.completion_of(finish))
    }

    /// Whether job `id` is present (not yet completed or removed).
    pub fn contains(&self, id: JobId) -> bool {
        self.finish_of.contains_key(&id)
    }

    /// Move the clock to `now` and append to `done` the jobs completed by then, in the order
    /// they completed; returns how many were appended.
    pub fn take_finished(&mut self, now: Duration, done: &mut Vec<JobId>) -> usize {
        let before = done.len();
        let target = ns(now).max(self.last_ns);
        loop {
            while let Some(&(finish, id)) = self.by_finish.first() {
                if finish > self.virtual_time {
                    break;
                }
                self.by_finish.pop_first();
                self.finish_of.remove(&id);
                done.push(id);
            }
            match self.next_completion() {
                Some(t) if ns(t) <= target => self.advance(t),
                _ => break,
            }
        }
        self.advance(from_ns(target));
        done.len() - before
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn us(n: u64) -> Duration {
        Duration::from_micros(n)
    }

    fn finished(ps: &mut ProcessorSharing, now: Duration) -> Vec<JobId> {
        let mut done = Vec::new();
        ps.take_finished(now, &mut done);
        done
    }

    #[test]
    fn a_lone_job_finishes_exactly_after_its_cost() {
        let mut ps = ProcessorSharing::new(1);
        let start = Duration::from_nanos(1_234_567);
        let id = ps.add(start, us(145));
        assert_eq!(ps.next_completion(), Some(start + us(145)));
        assert!(finished(&mut ps, start + us(145) - Duration::from_nanos(1)).is_empty());
        assert_eq!(finished(&mut ps, start + us(145)), vec![id]);
        assert_eq!((ps.active(), ps.busy_time(), ps.served_time()), (0, us(145), us(145)));
    }

    #[test]
    fn n_equal_jobs_on_one_cpu_finish_together_after_n_times_the_cost() {
        let mut ps = ProcessorSharing::new(1);
        let ids: Vec<JobId> = (0..4).map(|_| ps.add(Duration::ZERO, Duration::from_millis(20))).collect();
        assert_eq!(ps.next_completion(), Some(Duration::from_millis(80)));
        assert!(finished(&mut ps, Duration::from_millis(79)).is_empty());
        assert_eq!(finished(&mut ps, Duration::from_millis(80)), ids);
    }

    #[test]
    fn with_as_many_cpus_as_jobs_each_finishes_after_its_own_cost() {
        let mut ps = ProcessorSharing::new(3);
        let a = ps.add(Duration::ZERO, us(100));
        let b = ps.add(Duration::ZERO, us(300));
        let c = ps.add(us(50), us(100));
        assert_eq!(finished(&mut ps, us(100)), vec![a]);
        assert_eq!(finished(&mut ps, us(150)), vec![c]);
        assert_eq!(finished(&mut ps, us(300)), vec![b]);
        assert_eq!(ps.served_time(), us(500));
    }

    #[test]
    fn a_removed_job_never_completes_and_the_others_speed_up() {
        let mut ps = ProcessorSharing::new(1);
        let a = ps.add(Duration::ZERO, us(100));
        let b = ps.add(Duration::ZERO, us(100));
        // Both at half rate for 50 µs: 25 µs served each; then `b` alone needs 75 µs more.
        assert!(ps.remove(us(50), a));
        assert!(!ps.remove(us(50), a));
        assert_eq!(ps.next_completion(), Some(us(125)));
        assert_eq!(finished(&mut ps, Duration::from_secs(1)), vec![b]);
    }

    #[test]
    fn a_zero_cost_job_completes_at_once_and_a_clock_going_back_is_ignored() {
        let mut ps = ProcessorSharing::new(2);
        let a = ps.add(us(10), Duration::ZERO);
        assert_eq!(ps.next_completion(), Some(us(10)));
        assert_eq!(finished(&mut ps, us(5)), vec![a]);
        assert_eq!(ps.busy_time(), Duration::ZERO);
    }

    #[test]
    fn busy_time_at_counts_the_jobs_present_up_to_now_and_an_idle_gap_not_at_all() {
        let mut ps = ProcessorSharing::new(1);
        ps.add(Duration::ZERO, us(5));
        assert_eq!(ps.busy_time_at(us(3)), us(3));
        assert_eq!(finished(&mut ps, us(5)).len(), 1);
        assert_eq!(ps.busy_time_at(us(100)), us(5));
        ps.add(us(100), us(7));
        assert_eq!(ps.busy_time_at(us(50)), us(5), "a time before the last update counts as it");
        assert_eq!(ps.busy_time_at(us(104)), us(9));
    }

    /// FIFO single server: when the last of `jobs` (arrival, cost) completes.
    fn fifo_end(jobs: &[(u64, u64)]) -> u64 {
        let mut sorted = jobs.to_vec();
        sorted.sort();
        sorted.iter().fold(0, |busy_until, &(at, cost)| busy_until.max(at) + cost)
    }

    /// Runs `jobs` (arrival ns, cost ns) through the queue, stepping from event to event;
    /// returns each job's completion time (ns), by job.
    fn run(cpus: u32, jobs: &[(u64, u64)]) -> Vec<u64> {
        let mut ps = ProcessorSharing::new(cpus);
        let mut order: Vec<usize> = (0..jobs.len()).collect();
        order.sort_by_key(|&i| jobs[i].0);
        let mut ids = BTreeMap::new();
        let mut done_at = vec![0u64; jobs.len()];
        let mut done = Vec::new();
        let mut pending = order.into_iter().peekable();
        loop {
            let next_arrival = pending.peek().map(|&i| jobs[i].0);
            let next_done = ps.next_completion().map(|t| t.as_nanos() as u64);
            let now = match (next_arrival, next_done) {
                (None, None) => break,
                (Some(a), Some(d)) => a.min(d),
                (Some(a), None) => a,
                (None, Some(d)) => d,
            };
            done.clear();
            ps.take_finished(Duration::from_nanos(now), &mut done);
            for id in &done {
                done_at[ids[id]] = now;
            }
            while let Some(&i) = pending.peek() {
                if jobs[i].0 > now {
                    break;
                }
                pending.next();
                ids.insert(ps.add(Duration::from_nanos(now), Duration::from_nanos(jobs[i].1)), i);
            }
        }
        done_at
    }

    proptest! {
        #[test]
        fn on_one_cpu_a_batch_ends_after_exactly_the_sum_of_its_costs(
            costs in prop::collection::vec(0u64..5_000_000, 1..20)
        ) {
            let jobs: Vec<(u64, u64)> = costs.iter().map(|&c| (0, c)).collect();
            let ends = run(1, &jobs);
            prop_assert_eq!(ends.iter().max().copied(), Some(costs.iter().sum::<u64>()));
        }

        #[test]
        fn no_job_completes_before_its_cost_and_one_cpu_is_work_conserving(
            jobs in prop::collection::vec((0u64..10_000_000, 0u64..3_000_000), 1..25),
            cpus in 1u32..4,
        ) {
            let ends = run(cpus, &jobs);
            for (end, &(at, cost)) in ends.iter().zip(&jobs) {
                prop_assert!(*end >= at + cost, "ends {} < {} + {}", end, at, cost);
            }
            if cpus == 1 {
                // Rounding service down costs at most a nanosecond per event.
                let last = *ends.iter().max().unwrap();
                let fifo = fifo_end(&jobs);
                prop_assert!(last >= fifo && last <= fifo + 2 * jobs.len() as u64, "{} vs {}", last, fifo);
            }
        }

        #[test]
        fn removed_jobs_never_complete(
            costs in prop::collection::vec(1u64..1_000_000, 2..12),
            remove_at in 0u64..500_000,
        ) {
            let mut ps = ProcessorSharing::new(1);
            let ids: Vec<JobId> = costs.iter().map(|&c| ps.add(Duration::ZERO, Duration::from_nanos(c))).collect();
            let mut done = Vec::new();
            ps.take_finished(Duration::from_nanos(remove_at), &mut done);
            let victim = ids[0];
            let removed = ps.remove(Duration::from_nanos(remove_at), victim);
            prop_assert_eq!(removed, !done.contains(&victim));
            ps.take_finished(Duration::from_secs(100), &mut done);
            prop_assert_eq!(done.iter().filter(|&&id| id == victim).count(), usize::from(!removed));
            prop_assert_eq!(done.len(), ids.len() - usize::from(removed));
            prop_assert_eq!(ps.active(), 0);
        }
    }
}
