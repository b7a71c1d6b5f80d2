//! `CreditCpu`: a node's CPU under Linux 2.4's credit scheduler, simplified — one job runs
//! at a time; each has a counter (its process's remaining time slice, `base` = 100 ms when
//! fresh) that running uses up; the runnable job with the largest counter runs; a job made
//! runnable with a larger counter than the running one preempts it; a job whose counter is
//! spent yields, and when every runnable counter is spent all are recalculated to
//! `counter / 2 + base`. Counters are kept per job id (a connection's process) between its
//! bursts; no context-switch cost.

/// One runnable burst of CPU work.
#[derive(Clone, Copy, Debug)]
struct Job {
    id: u32,
    /// Work left, ns.
    left: u64,
    /// Slice left, ns (≤ 0: spent).
    counter: i64,
}

/// A credit-scheduled CPU. Ids below `u32::MAX - 1` keep their counter between bursts;
/// the two highest ids (the engine's kernel and fork jobs) always start fresh.
#[derive(Clone, Debug)]
pub struct CreditCpu {
    base: i64,
    current: Option<Job>,
    /// When `current` started running (or was last advanced).
    since: u64,
    runnable: Vec<Job>,
    /// Counter of each id's last burst (absent: fresh).
    counters: Vec<i64>,
    busy_ns: u64,
}

impl CreditCpu {
    /// A CPU whose fresh slices are `base_ns` long.
    pub fn new(base_ns: u64) -> CreditCpu {
        CreditCpu {
            base: base_ns as i64,
            current: None,
            since: 0,
            runnable: Vec::new(),
            counters: Vec::new(),
            busy_ns: 0,
        }
    }

    fn advance(&mut self, now: u64) {
        let dt = now.saturating_sub(self.since);
        if let Some(j) = &mut self.current {
            let used = dt.min(j.left);
            j.left -= used;
            j.counter -= used as i64;
            self.busy_ns += used;
        }
        self.since = self.since.max(now);
    }

    fn counter_of(&self, id: u32) -> i64 {
        if id >= u32::MAX - 1 {
            return self.base;
        }
        self.counters.get(id as usize).copied().filter(|&c| c != i64::MIN).unwrap_or(self.base)
    }

    fn remember(&mut self, job: &Job) {
        if job.id >= u32::MAX - 1 {
            return;
        }
        let i = job.id as usize;
        if self.counters.len() <= i {
            self.counters.resize(i + 1, i64::MIN);
        }
        self.counters[i] = job.counter.max(0);
    }

    /// Make job `id` runnable at `now` with `work` ns to do.
    pub fn add(&mut self, now: u64, work: u64, id: u32) {
        self.advance(now);
        let job = Job { id, left: work, counter: self.counter_of(id) };
        match self.current {
            None => {
                self.current = Some(job);
                self.since = now;
            }
            Some(cur) if job.counter > cur.counter => {
                self.runnable.push(cur);
                self.current = Some(job);
                self.since = now;
            }
            Some(_) => self.runnable.push(job),
        }
    }

    /// When the running job finishes or spends its slice (`None`: idle).
    pub fn next_completion(&self) -> Option<u64> {
        let j = self.current?;
        Some(self.since + j.left.min(j.counter.max(0) as u64))
    }

    /// Advance to `now`: finished jobs go into `done`, a job with its slice spent yields.
    pub fn complete_due(&mut self, now: u64, done: &mut Vec<u32>) {
        self.advance(now);
        while let Some(j) = self.current {
            if j.left == 0 {
                done.push(j.id);
                self.remember(&j);
            } else if j.counter <= 0 {
                self.runnable.push(j);
            } else {
                break;
            }
            self.current = self.pick();
            self.since = now;
        }
    }

    /// Take the runnable job with the largest counter (the oldest among equals),
    /// recalculating every counter first if all are spent.
    fn pick(&mut self) -> Option<Job> {
        if self.runnable.is_empty() {
            return None;
        }
        if self.runnable.iter().all(|j| j.counter <= 0) {
            let base = self.base;
            for j in &mut self.runnable {
                j.counter = j.counter.max(0) / 2 + base;
            }
            for c in self.counters.iter_mut().filter(|c| **c != i64::MIN) {
                *c = *c / 2 + base;
            }
        }
        let best =
            (0..self.runnable.len()).max_by_key(|&i| (self.runnable[i].counter, std::cmp::Reverse(i)))?;
        Some(self.runnable.remove(best))
    }

    /// Jobs runnable or running.
    pub fn runnable(&self) -> usize {
        self.runnable.len() + usize::from(self.current.is_some())
    }

    /// CPU time used up to `now`.
    pub fn busy_until(&self, now: u64) -> u64 {
        let extra = self.current.map_or(0, |j| now.saturating_sub(self.since).min(j.left));
        self.busy_ns + extra
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::apache::cpu::NodeCpu;
    use crate::apache::cpu::tests::run_to_idle;

    const MS: u64 = 1_000_000;

    #[test]
    fn a_fresh_short_job_preempts_a_cgi_that_used_part_of_its_slice() {
        let mut cpu = NodeCpu::Credit(CreditCpu::new(100 * MS));
        cpu.add(0, 40 * MS, 1);
        cpu.add(MS, MS, 2);
        // The CGI has 99 ms of slice left at 1 ms; the fresh job has 100 ms: it runs at once.
        assert_eq!(run_to_idle(&mut cpu), vec![(2, 2 * MS), (1, 41 * MS)]);
        assert_eq!(cpu.busy_until(50 * MS), 41 * MS);
    }

    #[test]
    fn jobs_with_equal_counters_run_one_after_another_and_spent_slices_are_recalculated() {
        let mut cpu = NodeCpu::Credit(CreditCpu::new(100 * MS));
        // Two 150 ms jobs: the first runs its 100 ms slice, the second (not preempting: equal
        // counter) its 100 ms; all spent ⇒ both get 0/2 + 100 ms; the first finishes.
        cpu.add(0, 150 * MS, 1);
        cpu.add(0, 150 * MS, 2);
        assert_eq!(run_to_idle(&mut cpu), vec![(1, 250 * MS), (2, 300 * MS)]);
    }
}
