//! Criterion benchmark of the CPU model's own cost per job (`cargo bench -p locus-node --bench
//! cpu_model`): the wall time of a 1-µs job and of a 100-µs job run one at a time, the
//! process CPU a 1-µs job costs, and the wall time and process CPU per job with jobs from two
//! threads at once.

use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use locus_node::{CpuModel, CpuModelConfig};

/// The process's CPU time so far (every thread: the callers and the model's driver).
fn process_cpu_time() -> Duration {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid, writable timespec and the clock id is a constant the kernel knows.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0, "process CPU clock");
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// Run `n` jobs of `cost` one after the other on a fresh current-thread runtime.
fn run_jobs(model: &CpuModel, n: u64, cost: Duration) {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    rt.block_on(async {
        for _ in 0..n {
            model.run(cost).await.expect("model open");
        }
    });
}

/// Run `n` jobs of `cost` from each of two threads at once.
fn run_jobs_on_two_threads(model: &CpuModel, n: u64, cost: Duration) {
    std::thread::scope(|s| {
        s.spawn(|| run_jobs(model, n, cost));
        s.spawn(|| run_jobs(model, n, cost));
    });
}

/// What one measurement reads: wall time, or the process's CPU time.
#[derive(Clone, Copy)]
enum Clock {
    Wall,
    ProcessCpu,
}

/// The time `work` takes on `clock`, divided by the jobs each iteration runs (two when two
/// threads each run one job per iteration), so criterion reports the time per job.
fn per_job(clock: Clock, jobs_per_iter: u32, work: impl FnOnce()) -> Duration {
    let (cpu0, t0) = (process_cpu_time(), Instant::now());
    work();
    let spent = match clock {
        Clock::Wall => t0.elapsed(),
        Clock::ProcessCpu => process_cpu_time() - cpu0,
    };
    spent / jobs_per_iter
}

fn model_overhead(c: &mut Criterion) {
    let config = CpuModelConfig { conn_us: 0.0, request_us: 0.0, kb_us: 0.0, cpus: 1 };
    let model = CpuModel::new(config, "bench").expect("model starts");
    let (us1, us100) = (Duration::from_micros(1), Duration::from_micros(100));
    let mut group = c.benchmark_group("cpu_model");
    group.bench_function("one_at_a_time/1us_job/wall", |b| {
        b.iter_custom(|n| per_job(Clock::Wall, 1, || run_jobs(&model, n, us1)))
    });
    group.bench_function("one_at_a_time/1us_job/process_cpu", |b| {
        b.iter_custom(|n| per_job(Clock::ProcessCpu, 1, || run_jobs(&model, n, us1)))
    });
    group.bench_function("one_at_a_time/100us_job/wall", |b| {
        b.iter_custom(|n| per_job(Clock::Wall, 1, || run_jobs(&model, n, us100)))
    });
    group.bench_function("two_threads/1us_job/wall", |b| {
        b.iter_custom(|n| per_job(Clock::Wall, 2, || run_jobs_on_two_threads(&model, n, us1)))
    });
    group.bench_function("two_threads/1us_job/process_cpu", |b| {
        b.iter_custom(|n| per_job(Clock::ProcessCpu, 2, || run_jobs_on_two_threads(&model, n, us1)))
    });
    group.finish();
}

criterion_group!(benches, model_overhead);
criterion_main!(benches);
