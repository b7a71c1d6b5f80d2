//! `CpuPool`: a fixed set of threads (one per CPU by default) that run dynamic requests' CPU
//! work — spinning on real computation until the thread's own CPU clock
//! (`CLOCK_THREAD_CPUTIME_ID`) has advanced by the drawn cost — so CPU contention between
//! requests, and with everything else on the machine, is real. Jobs wait in one FIFO queue.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use parking_lot::{Condvar, Mutex};
use tokio::sync::oneshot;

/// CPU time consumed by the calling thread so far.
pub fn thread_cpu_time() -> Duration {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid, writable timespec and the clock id is a constant the kernel knows.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if rc != 0 {
        return Duration::ZERO;
    }
    Duration::new(ts.tv_sec.max(0) as u64, ts.tv_nsec.clamp(0, 999_999_999) as u32)
}

/// Spend at least `cost` of this thread's CPU time on real work (a hash chain the optimiser
/// cannot remove); returns the CPU time actually spent.
pub fn burn_cpu(cost: Duration) -> Duration {
    let start = thread_cpu_time();
    let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
    loop {
        for _ in 0..2_000 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state = state.wrapping_mul(0x2545_F491_4F6C_DD1D);
        }
        std::hint::black_box(state);
        let spent = thread_cpu_time().saturating_sub(start);
        if spent >= cost {
            return spent;
        }
    }
}

/// The pool was shut down before the job ran.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("CPU pool is shut down")]
pub struct PoolClosed;

struct Job {
    cost: Duration,
    done: oneshot::Sender<Duration>,
}

#[derive(Default)]
struct Queue {
    jobs: VecDeque<Job>,
    closed: bool,
}

struct Shared {
    queue: Mutex<Queue>,
    ready: Condvar,
    running: AtomicUsize,
}

/// A bounded pool of CPU-burning threads.
pub struct CpuPool {
    shared: Arc<Shared>,
    threads: Mutex<Vec<JoinHandle<()>>>,
}

impl CpuPool {
    /// A pool of `threads` threads (at least 1) named `{name}-cpu-{i}`.
    pub fn new(threads: usize, name: &str) -> std::io::Result<CpuPool> {
        let shared = Arc::new(Shared {
            queue: Mutex::new(Queue::default()),
            ready: Condvar::new(),
            running: AtomicUsize::new(0),
        });
        let mut handles = Vec::new();
        for i in 0..threads.max(1) {
            let thread_shared = shared.clone();
            let handle = std::thread::Builder::new()
                .name(format!("{name}-cpu-{i}"))
                .spawn(move || worker(&thread_shared));
            match handle {
                Ok(h) => handles.push(h),
                Err(e) => {
                    let pool = CpuPool { shared, threads: Mutex::new(handles) };
                    pool.shutdown();
                    return Err(e);
                }
            }
        }
        Ok(CpuPool { shared, threads: Mutex::new(handles) })
    }

    /// Run `cost` of CPU work on the pool; returns the CPU time spent once it is done.
    pub async fn run(&self, cost: Duration) -> Result<Duration, PoolClosed> {
        let (done, rx) = oneshot::channel();
        {
            let mut q = self.shared.queue.lock();
            if q.closed {
                return Err(PoolClosed);
            }
            q.jobs.push_back(Job { cost, done });
        }
        self.shared.ready.notify_one();
        rx.await.map_err(|_| PoolClosed)
    }

    /// Jobs waiting for a thread.
    pub fn queue_length(&self) -> usize {
        self.shared.queue.lock().jobs.len()
    }

    /// Jobs being run.
    pub fn running(&self) -> usize {
        self.shared.running.load(Ordering::Relaxed)
    }

    /// Refuse new jobs, drop queued ones, and join the threads once their current job ends.
    pub fn shutdown(&self) {
        {
            let mut q = self.shared.queue.lock();
            q.closed = true;
            q.jobs.clear();
        }
        self.shared.ready.notify_all();
        for h in self.threads.lock().drain(..) {
            let _ = h.join();
        }
    }
}

impl Drop for CpuPool {
    fn drop(&mut self) {
        self.shutdown();
    }
}

fn worker(shared: &Shared) {
    loop {
        let job = {
            let mut q = shared.queue.lock();
            loop {
                if q.closed {
                    return;
                }
                if let Some(job) = q.jobs.pop_front() {
                    break job;
                }
                shared.ready.wait(&mut q);
            }
        };
        if job.done.is_closed() {
            // The client went away while the job waited: do not burn CPU for nobody.
            continue;
        }
        shared.running.fetch_add(1, Ordering::Relaxed);
        let spent = burn_cpu(job.cost);
        shared.running.fetch_sub(1, Ordering::Relaxed);
        let _ = job.done.send(spent);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn burn_cpu_spends_at_least_the_cost_in_thread_cpu_time() {
        let before = thread_cpu_time();
        let spent = burn_cpu(Duration::from_millis(15));
        assert!(spent >= Duration::from_millis(15));
        assert!(thread_cpu_time() - before >= Duration::from_millis(15));
    }

    #[test]
    fn pool_runs_jobs_and_refuses_after_shutdown() {
        let pool = CpuPool::new(2, "t").unwrap();
        let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
        let (a, b, c) = rt.block_on(async {
            tokio::join!(
                pool.run(Duration::from_millis(5)),
                pool.run(Duration::from_millis(5)),
                pool.run(Duration::from_millis(5))
            )
        });
        for r in [a, b, c] {
            assert!(r.unwrap() >= Duration::from_millis(5));
        }
        assert_eq!(pool.queue_length(), 0);
        pool.shutdown();
        assert_eq!(rt.block_on(pool.run(Duration::from_millis(1))), Err(PoolClosed));
    }
}
