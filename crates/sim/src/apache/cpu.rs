//! `NodeCpu`: a node's CPU under the configured scheduler — egalitarian processor sharing
//! (`locus_core::ProcessorSharing`, the queue the live node's CPU model runs, on the
//! simulator's ns clock) or Linux 2.4's credit scheduler (`CreditCpu`). Jobs are named by the
//! engine's `u32` ids (a connection, or the shared kernel and fork ids).

use std::collections::HashMap;
use std::time::Duration;

use locus_core::{JobId, ProcessorSharing};

use super::credit::CreditCpu;
use crate::directory::BuildIdHasher;

/// One processor-sharing CPU and the engine id of each job in it.
pub(super) struct SharedCpu {
    queue: ProcessorSharing,
    owner: HashMap<JobId, u32, BuildIdHasher>,
    /// Reused buffer of the jobs a completion takes.
    finished: Vec<JobId>,
}

/// A node's CPU under the configured scheduler.
pub(super) enum NodeCpu {
    Ps(SharedCpu),
    Credit(CreditCpu),
}

impl NodeCpu {
    /// One processor-sharing CPU, idle at time zero.
    pub fn processor_sharing() -> NodeCpu {
        NodeCpu::Ps(SharedCpu {
            queue: ProcessorSharing::new(1),
            owner: HashMap::with_hasher(BuildIdHasher),
            finished: Vec::new(),
        })
    }

    /// Make job `id` runnable at `now` with `work` ns of CPU to do.
    pub fn add(&mut self, now: u64, work: u64, id: u32) {
        match self {
            NodeCpu::Ps(c) => {
                let job = c.queue.add(Duration::from_nanos(now), Duration::from_nanos(work));
                c.owner.insert(job, id);
            }
            NodeCpu::Credit(c) => c.add(now, work, id),
        }
    }

    /// When the next job finishes (or, under credit, spends its slice) if nothing else
    /// arrives (`None`: idle).
    pub fn next_completion(&self) -> Option<u64> {
        match self {
            NodeCpu::Ps(c) => c.queue.next_completion().map(|t| t.as_nanos() as u64),
            NodeCpu::Credit(c) => c.next_completion(),
        }
    }

    /// Advance to `now` and move every job done by then into `done` (in finishing order).
    pub fn complete_due(&mut self, now: u64, done: &mut Vec<u32>) {
        match self {
            NodeCpu::Ps(c) => {
                c.queue.take_finished(Duration::from_nanos(now), &mut c.finished);
                done.extend(c.finished.drain(..).filter_map(|job| c.owner.remove(&job)));
            }
            NodeCpu::Credit(c) => c.complete_due(now, done),
        }
    }

    /// CPU time used up to `now`.
    pub fn busy_until(&self, now: u64) -> u64 {
        match self {
            NodeCpu::Ps(c) => c.queue.busy_time_at(Duration::from_nanos(now)).as_nanos() as u64,
            NodeCpu::Credit(c) => c.busy_until(now),
        }
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::queues::CpuQueue;

    /// Run `cpu` from completion to completion until idle: (job, time it finished).
    pub(in crate::apache) fn run_to_idle(cpu: &mut NodeCpu) -> Vec<(u32, u64)> {
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
        let mut cpu = NodeCpu::processor_sharing();
        cpu.add(0, 10_000_000, 1);
        cpu.add(0, 10_000_000, 2);
        let done = run_to_idle(&mut cpu);
        assert_eq!(done, vec![(1, 20_000_000), (2, 20_000_000)]);
        assert_eq!(cpu.busy_until(20_000_000), 20_000_000);
    }

    #[test]
    fn a_40ms_cgi_does_not_block_a_static_request_behind_it_unlike_fifo() {
        let (cgi, stat) = (40_000_000, 1_000_000);
        let mut cpu = NodeCpu::processor_sharing();
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
        let mut cpu = NodeCpu::processor_sharing();
        cpu.add(0, 5, 1);
        assert_eq!(run_to_idle(&mut cpu), vec![(1, 5)]);
        cpu.add(100, 7, 2);
        assert_eq!(cpu.next_completion(), Some(107));
        assert_eq!(run_to_idle(&mut cpu), vec![(2, 107)]);
        assert_eq!(cpu.busy_until(200), 12);
    }

    #[test]
    fn jobs_sharing_an_engine_id_each_complete() {
        let mut cpu = NodeCpu::processor_sharing();
        cpu.add(0, 4, u32::MAX);
        cpu.add(0, 6, u32::MAX);
        assert_eq!(run_to_idle(&mut cpu), vec![(u32::MAX, 8), (u32::MAX, 10)]);
    }
}
