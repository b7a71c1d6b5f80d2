//! `CpuModel`: a node's modelled CPUs — a `locus_core::ProcessorSharing` queue shared by all
//! the node's workers, through which `run(cost)` waits as long as the job's service takes
//! (time passes, no CPU is burnt). One driver thread sleeps until the next completion (woken
//! early when a job arrives that completes first, or one leaves) and wakes the finished
//! jobs' tasks; a dropped `run` future removes its job.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll, Waker};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use locus_core::{JobId, ProcessorSharing};
use parking_lot::{Condvar, Mutex, MutexGuard};

use locus_node_config::CpuModelConfig;

/// The model was shut down before the job completed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("CPU model is shut down")]
pub struct CpuModelClosed;

struct Waiter {
    waker: Option<Waker>,
    done: bool,
}

struct State {
    queue: ProcessorSharing,
    /// The task of every job present, and of jobs completed but not yet collected.
    waiters: BTreeMap<JobId, Waiter>,
    closed: bool,
}

struct Shared {
    epoch: Instant,
    state: Mutex<State>,
    /// Wakes the driver: a job arrived that completes first, a job left, or shutdown.
    driver_wake: Condvar,
    /// Jobs whose service completed.
    charged: AtomicU64,
    /// Jobs removed before completing (their request went away).
    cancelled: AtomicU64,
}

impl Shared {
    fn now(&self) -> Duration {
        self.epoch.elapsed()
    }
}

/// A snapshot of the model's queue.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CpuModelStats {
    /// Jobs in service now.
    pub active: usize,
    /// Time with at least one job in service, seconds.
    pub busy_s: f64,
    /// Service given, summed over the modelled CPUs, seconds.
    pub served_s: f64,
    /// Jobs completed.
    pub charged: u64,
    /// Jobs cancelled before completing.
    pub cancelled: u64,
}

/// A node's modelled CPUs.
pub struct CpuModel {
    config: CpuModelConfig,
    shared: Arc<Shared>,
    driver: Mutex<Option<JoinHandle<()>>>,
}

impl CpuModel {
    /// An idle model of `config.cpus` CPUs, with its driver thread named `{name}-cpu-model`.
    pub fn new(config: CpuModelConfig, name: &str) -> std::io::Result<CpuModel> {
        let shared = Arc::new(Shared {
            epoch: Instant::now(),
            state: Mutex::new(State {
                queue: ProcessorSharing::new(config.cpus),
                waiters: BTreeMap::new(),
                closed: false,
            }),
            driver_wake: Condvar::new(),
            charged: AtomicU64::new(0),
            cancelled: AtomicU64::new(0),
        });
        let driver_shared = shared.clone();
        let driver = std::thread::Builder::new()
            .name(format!("{name}-cpu-model"))
            .spawn(move || drive(&driver_shared))?;
        Ok(CpuModel { config, shared, driver: Mutex::new(Some(driver)) })
    }

    pub fn config(&self) -> &CpuModelConfig {
        &self.config
    }

    /// What serving one request costs: `conn_us` if it is its connection's first, plus
    /// `request_us`, plus `kb_us` per KiB of `body_bytes`.
    pub fn request_cost(&self, first_on_connection: bool, body_bytes: u64) -> Duration {
        let c = &self.config;
        let conn = if first_on_connection { c.conn_us } else { 0.0 };
        let us = conn + c.request_us + c.kb_us * body_bytes as f64 / 1024.0;
        Duration::from_secs_f64((us / 1e6).max(0.0))
    }

    /// Wait until a job of `cost` has been served, sharing the modelled CPUs with every
    /// other job present. Returns the time waited. Dropping the future removes the job.
    pub fn run(&self, cost: Duration) -> CpuJob<'_> {
        CpuJob { shared: &self.shared, cost, id: None, started: Instant::now(), finished: false }
    }

    pub fn stats(&self) -> CpuModelStats {
        let st = self.shared.state.lock();
        CpuModelStats {
            active: st.queue.active(),
            busy_s: st.queue.busy_time().as_secs_f64(),
            served_s: st.queue.served_time().as_secs_f64(),
            charged: self.shared.charged.load(Ordering::Relaxed),
            cancelled: self.shared.cancelled.load(Ordering::Relaxed),
        }
    }

    /// Stop the driver; jobs present and later ones end with `CpuModelClosed`.
    pub fn shutdown(&self) {
        self.shared.state.lock().closed = true;
        self.shared.driver_wake.notify_all();
        if let Some(driver) = self.driver.lock().take() {
            let _ = driver.join();
        }
    }
}

impl Drop for CpuModel {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// The driver: complete the jobs whose service is done, wake their tasks, sleep until the
/// next completion.
fn drive(shared: &Shared) {
    // Wake at the completion asked for, not up to 50 µs after (this thread's own setting).
    // SAFETY: PR_SET_TIMERSLACK takes one integer argument and touches no memory of ours.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1_000 as libc::c_ulong) };
    let mut done = Vec::new();
    let mut wake = Vec::new();
    let mut st = shared.state.lock();
    loop {
        if st.closed {
            wake.extend(st.waiters.values_mut().filter_map(|w| w.waker.take()));
            MutexGuard::unlocked(&mut st, || wake.drain(..).for_each(Waker::wake));
            return;
        }
        done.clear();
        let now = shared.now();
        st.queue.take_finished(now, &mut done);
        for id in &done {
            if let Some(w) = st.waiters.get_mut(id) {
                w.done = true;
                wake.extend(w.waker.take());
            }
        }
        shared.charged.fetch_add(done.len() as u64, Ordering::Relaxed);
        if !wake.is_empty() {
            MutexGuard::unlocked(&mut st, || wake.drain(..).for_each(Waker::wake));
            continue;
        }
        match st.queue.next_completion() {
            None => shared.driver_wake.wait(&mut st),
            Some(at) => {
                let _ = shared.driver_wake.wait_until(&mut st, shared.epoch + at);
            }
        }
    }
}

/// A job in the CPU model (from `CpuModel::run`): resolves when its service is complete.
pub struct CpuJob<'a> {
    shared: &'a Shared,
    cost: Duration,
    id: Option<JobId>,
    started: Instant,
    finished: bool,
}

impl Future for CpuJob<'_> {
    type Output = Result<Duration, CpuModelClosed>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = &mut *self;
        let shared = this.shared;
        let mut st = shared.state.lock();
        let Some(id) = this.id else {
            if st.closed {
                this.finished = true;
                return Poll::Ready(Err(CpuModelClosed));
            }
            if this.cost.is_zero() {
                this.finished = true;
                shared.charged.fetch_add(1, Ordering::Relaxed);
                return Poll::Ready(Ok(Duration::ZERO));
            }
            let id = st.queue.add(shared.now(), this.cost);
            st.waiters.insert(id, Waiter { waker: Some(cx.waker().clone()), done: false });
            this.id = Some(id);
            // The driver sleeps until the completion it knew of; this one may come first.
            let first = st.queue.next_job() == Some(id);
            drop(st);
            if first {
                shared.driver_wake.notify_one();
            }
            return Poll::Pending;
        };
        let done = st.waiters.get(&id).is_none_or(|w| w.done);
        if done || st.closed {
            st.waiters.remove(&id);
            if !done {
                st.queue.remove(shared.now(), id);
            }
            this.finished = true;
            return Poll::Ready(if done { Ok(this.started.elapsed()) } else { Err(CpuModelClosed) });
        }
        if let Some(w) = st.waiters.get_mut(&id)
            && !w.waker.as_ref().is_some_and(|k| k.will_wake(cx.waker()))
        {
            w.waker = Some(cx.waker().clone());
        }
        Poll::Pending
    }
}

impl Drop for CpuJob<'_> {
    fn drop(&mut self) {
        let Some(id) = self.id else { return };
        if self.finished {
            return;
        }
        let shared = self.shared;
        let mut st = shared.state.lock();
        let done = st.waiters.remove(&id).is_none_or(|w| w.done);
        if !done && st.queue.remove(shared.now(), id) {
            shared.cancelled.fetch_add(1, Ordering::Relaxed);
            drop(st);
            // The others now complete sooner than the driver planned.
            shared.driver_wake.notify_one();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn model(request_us: f64, cpus: u32) -> CpuModel {
        let config = CpuModelConfig { conn_us: 100.0, request_us, kb_us: 40.0, cpus };
        CpuModel::new(config, "t").unwrap()
    }

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap()
    }

    #[test]
    fn request_cost_is_connection_plus_request_plus_kib() {
        let m = model(50.0, 1);
        assert_eq!(m.request_cost(false, 0), Duration::from_micros(50));
        assert_eq!(m.request_cost(true, 2048), Duration::from_micros(100 + 50 + 80));
    }

    #[test]
    fn a_job_waits_at_least_its_cost_and_concurrent_jobs_share_one_cpu() {
        let m = model(0.0, 1);
        let ms = Duration::from_millis;
        runtime().block_on(async {
            let start = Instant::now();
            m.run(ms(10)).await.unwrap();
            assert!(start.elapsed() >= ms(10));
            let start = Instant::now();
            let (a, b, c) = tokio::join!(m.run(ms(10)), m.run(ms(10)), m.run(ms(10)));
            for r in [a, b, c] {
                assert!(r.unwrap() >= ms(10));
            }
            // 30 ms of work on one modelled CPU, none of it before `start`.
            assert!(start.elapsed() >= ms(30), "{:?}", start.elapsed());
        });
        let s = m.stats();
        assert_eq!((s.active, s.charged, s.cancelled), (0, 4, 0));
        assert!(s.busy_s >= 0.039 && s.served_s >= 0.039, "{s:?}");
    }

    #[test]
    fn with_two_cpus_two_jobs_do_not_slow_each_other() {
        let m = model(0.0, 2);
        runtime().block_on(async {
            let (a, b) = tokio::join!(m.run(Duration::from_millis(10)), m.run(Duration::from_millis(10)));
            assert!(a.unwrap() >= Duration::from_millis(10) && b.unwrap() >= Duration::from_millis(10));
        });
        assert!((m.stats().served_s - 0.020).abs() < 0.002, "{:?}", m.stats());
    }

    #[test]
    fn a_dropped_job_is_removed_and_never_counted_as_charged() {
        let m = model(0.0, 1);
        runtime().block_on(async {
            let slow = m.run(Duration::from_secs(30));
            let r = tokio::time::timeout(Duration::from_millis(5), slow).await;
            assert!(r.is_err());
            assert_eq!(m.stats().active, 0);
            // The queue is empty again: a short job is not held behind the cancelled one.
            let waited = m.run(Duration::from_millis(2)).await.unwrap();
            assert!(waited >= Duration::from_millis(2) && waited < Duration::from_secs(30));
        });
        let s = m.stats();
        assert_eq!((s.charged, s.cancelled), (1, 1));
    }

    #[test]
    fn after_shutdown_jobs_are_refused() {
        let m = model(0.0, 1);
        m.shutdown();
        assert_eq!(runtime().block_on(m.run(Duration::from_millis(1))), Err(CpuModelClosed));
    }
}
