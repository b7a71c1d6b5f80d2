//! `LoadWorker`: one OS thread with its own current-thread tokio runtime running a share of
//! the run's connections; it waits for the run's start time, runs its connections to the
//! end (`ClientConnection`s, `H2Connection`s with `--h2`, or `SurfClient`s for the surf
//! workload), counts the open-loop arrivals due in the window that no connection took, and
//! hands back its `ThreadStats` to be merged.

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::Arc;
use std::sync::mpsc::{Receiver, Sender, channel};
use std::thread::JoinHandle;
use std::time::Instant;

use crate::accounting::NotSentReason;
use crate::connection::{ClientConnection, RequestBudget, RunSettings, RunTiming, WorkerShared};
use crate::error::LoadError;
use crate::h2_connection::H2Connection;
use crate::open_loop::{ArrivalQueue, OpenLoopSchedule};
use crate::stats::{LiveCounters, ThreadStats};
use crate::surf_client::SurfClient;
use crate::workload::{JobPlan, WorkloadPlan};

/// One worker thread of a run.
pub struct LoadWorker {
    handle: JoinHandle<Result<ThreadStats, String>>,
    start: Sender<RunTiming>,
    /// What it has counted so far (for the progress line).
    pub live: Arc<LiveCounters>,
}

/// What a worker runs.
pub struct WorkerPlan {
    pub index: usize,
    /// Client numbers of its connections.
    pub slots: Vec<usize>,
    pub plan: Arc<WorkloadPlan>,
    pub settings: Arc<RunSettings>,
    pub budget: Arc<RequestBudget>,
    /// Open loop: this thread's share of the arrival rate.
    pub rate: Option<f64>,
}

impl LoadWorker {
    /// Start the thread; it builds its runtime and waits for `begin`.
    pub fn spawn(spec: WorkerPlan) -> Result<LoadWorker, LoadError> {
        let live = Arc::new(LiveCounters::default());
        let (start, started) = channel();
        let thread_live = live.clone();
        let handle = std::thread::Builder::new()
            .name(format!("load-w{}", spec.index))
            .spawn(move || worker_main(spec, thread_live, started))
            .map_err(|e| LoadError::Worker(format!("cannot start a worker thread: {e}")))?;
        Ok(LoadWorker { handle, start, live })
    }

    /// Let the worker start its connections with this timing.
    pub fn begin(&self, timing: RunTiming) {
        let _ = self.start.send(timing);
    }

    /// Whether the thread has ended.
    pub fn is_finished(&self) -> bool {
        self.handle.is_finished()
    }

    /// Wait for the thread and take its counts.
    pub fn join(self) -> Result<ThreadStats, LoadError> {
        drop(self.start);
        match self.handle.join() {
            Ok(Ok(stats)) => Ok(stats),
            Ok(Err(e)) => Err(LoadError::Worker(e)),
            Err(_) => Err(LoadError::Worker("a worker thread panicked".into())),
        }
    }
}

fn worker_main(
    spec: WorkerPlan,
    live: Arc<LiveCounters>,
    started: Receiver<RunTiming>,
) -> Result<ThreadStats, String> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot build a worker runtime: {e}"))?;
    // The run is called off (a sibling failed to start) when the sender goes away.
    let Ok(timing) = started.recv() else { return Ok(ThreadStats::default()) };
    let arrivals = match spec.rate {
        Some(rate) => {
            let schedule = OpenLoopSchedule::for_worker(rate, spec.settings.seed, spec.index)
                .map_err(|e| e.to_string())?;
            Some(RefCell::new(ArrivalQueue::new(schedule, timing.start)))
        }
        None => None,
    };
    let shared = Rc::new(WorkerShared {
        plan: spec.plan,
        settings: spec.settings,
        budget: spec.budget,
        timing,
        stats: RefCell::new(ThreadStats::default()),
        live,
        arrivals,
        workload_ended: Cell::new(false),
    });
    let local = tokio::task::LocalSet::new();
    let panicked = local.block_on(&runtime, async {
        let tasks: Vec<_> = spec
            .slots
            .iter()
            .map(|&slot| match &shared.plan.jobs {
                JobPlan::Surf(plan) => {
                    tokio::task::spawn_local(SurfClient::new(slot, shared.clone(), plan.clone()).run())
                }
                _ if shared.settings.h2 => {
                    tokio::task::spawn_local(H2Connection::new(slot, shared.clone()).run())
                }
                _ => tokio::task::spawn_local(ClientConnection::new(slot, shared.clone()).run()),
            })
            .collect();
        let mut panicked = false;
        for t in tasks {
            panicked |= t.await.is_err();
        }
        panicked
    });
    drop(local);
    drop(runtime);
    if panicked {
        return Err("a connection task panicked".into());
    }
    count_untaken_arrivals(&shared);
    let stats = shared.stats.replace(ThreadStats::default());
    Ok(stats)
}

/// Open loop, once the window has ended: arrivals due in it that no connection took (each was
/// busy, or had ended) are scheduled and not sent. Within the budget of measured requests.
fn count_untaken_arrivals(shared: &WorkerShared) {
    let (Some(queue), Some(end)) = (&shared.arrivals, shared.timing.run_end) else { return };
    if Instant::now() < end {
        return;
    }
    let from = shared.timing.warmup_end;
    let n = queue.borrow_mut().take_untaken(from, end, || shared.budget.take());
    let reason = if shared.workload_ended.get() {
        NotSentReason::WorkloadEnded
    } else {
        NotSentReason::NoFreeConnection
    };
    let mut stats = shared.stats.borrow_mut();
    stats.accounting.scheduled += n;
    stats.accounting.not_sent.add(reason, n);
}
