//! `PsCpu`: a node's CPU as an egalitarian processor-sharing server — every runnable job
//! (a process's next stretch of CPU work) gets 1/n of the CPU. Kept as virtual time (the
//! service each runnable job has received), so a change costs O(log n).

use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// A processor-sharing CPU. Jobs are named by the caller's `u32` ids.
#[derive(Clone, Debug, Default)]
pub struct PsCpu {
    /// Service every runnable job has received since the CPU was created, ns (as f64).
    virt: f64,
    /// Real time `virt` is current at.
    last: u64,
    /// Runnable jobs by finishing tag (the `virt` at which each is done; f64 bits of a
    /// non-negative number order like the number).
    jobs: BinaryHeap<Reverse<(u64, u32)>>,
    /// CPU time used (time with at least one runnable job), ns.
    busy_ns: u64,
}

impl PsCpu {
    /// Bring the virtual time to `now`.
    fn advance(&mut self, now: u64) {
        let dt = now.saturating_sub(self.last);
        if dt > 0 && !self.jobs.is_empty() {
            self.virt += dt as f64 / self.jobs.len() as f64;
            self.busy_ns += dt;
        }
        self.last = self.last.max(now);
    }

    /// Make job `id` runnable at `now` with `work` ns of CPU to do.
    pub fn add(&mut self, now: u64, work: u64, id: u32) {
        self.advance(now);
        let tag = self.virt + work as f64;
        self.jobs.push(Reverse((tag.to_bits(), id)));
    }

    /// When the next job finishes if nothing else arrives (`None`: idle). Never before the
    /// time the CPU is current at.
    pub fn next_completion(&self) -> Option<u64> {
        let Reverse((tag, _)) = *self.jobs.peek()?;
        let left = (f64::from_bits(tag) - self.virt).max(0.0);
        Some(self.last + (left * self.jobs.len() as f64).ceil() as u64)
    }

    /// Advance to `now` and move every job done by then into `done` (in finishing order).
    pub fn complete_due(&mut self, now: u64, done: &mut Vec<u32>) {
        self.advance(now);
        // A job is done when its tag is within rounding of the virtual time (completion
        // times are rounded up to whole ns).
        let slack = 1e-3 + self.virt * 1e-12;
        while let Some(&Reverse((tag, id))) = self.jobs.peek() {
            if f64::from_bits(tag) > self.virt + slack {
                break;
            }
            self.jobs.pop();
            done.push(id);
        }
    }

    /// Runnable jobs.
    pub fn runnable(&self) -> usize {
        self.jobs.len()
    }

    /// CPU time used up to `now` (≥ the time the CPU is current at).
    pub fn busy_until(&self, now: u64) -> u64 {
        let extra = if self.jobs.is_empty() { 0 } else { now.saturating_sub(self.last) };
        self.busy_ns + extra
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::queues::CpuQueue;

    fn run_to_idle(cpu: &mut PsCpu) -> Vec<(u32, u64)> {
        let mut out = Vec::new();
        let mut done = Vec::new();
        while let Some(t) = cpu.next_completion() {
            cpu.complete_due(t, &mut done);
            out.extend(done.drain(..).map(|id| (id, t)));
        }
        out
    }

    #[test]
    fn processor_sharing_gives_two_equal_jobs_the_same_finish_time() {
        let mut cpu = PsCpu::default();
        cpu.add(0, 10_000_000, 1);
        cpu.add(0, 10_000_000, 2);
        let done = run_to_idle(&mut cpu);
        assert_eq!(done, vec![(1, 20_000_000), (2, 20_000_000)]);
        assert_eq!(cpu.busy_until(20_000_000), 20_000_000);
    }

    #[test]
    fn a_40ms_cgi_does_not_block_a_static_request_behind_it_unlike_fifo() {
        let (cgi, stat) = (40_000_000, 1_000_000);
        let mut cpu = PsCpu::default();
        cpu.add(0, cgi, 1);
        cpu.add(1_000_000, stat, 2);
        let done = run_to_idle(&mut cpu);
        // The static job shares the CPU with the CGI from 1 ms on: done at 1 + 2 × 1 ms.
        assert_eq!(done[0], (2, 3_000_000));
        assert_eq!(done[1], (1, 41_000_000));
        let mut fifo = CpuQueue::default();
        fifo.submit(0, cgi);
        assert_eq!(fifo.submit(1_000_000, stat), 41_000_000, "FIFO makes it wait for the CGI");
    }

    #[test]
    fn an_idle_gap_is_not_busy_time_and_a_late_job_starts_at_once() {
        let mut cpu = PsCpu::default();
        cpu.add(0, 5, 1);
        assert_eq!(run_to_idle(&mut cpu), vec![(1, 5)]);
        cpu.add(100, 7, 2);
        assert_eq!(cpu.next_completion(), Some(107));
        assert_eq!(run_to_idle(&mut cpu), vec![(2, 107)]);
        assert_eq!(cpu.busy_until(200), 12);
    }
}
