//! Sweeps: every (policy, node count) point of a `SweepSpec` over one workload, run in
//! parallel threads (`std::thread::scope`, one point per thread at a time), with a progress
//! bar on a terminal; results in spec order whatever the thread timing. Also the writers of
//! `results.json` and `results.csv`.

use std::io::IsTerminal;
use std::path::Path;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use indicatif::{ProgressBar, ProgressStyle};

use crate::config::SimConfig;
use crate::engine::simulate;
use crate::error::SimError;
use crate::report::{SimReport, to_csv};
use crate::sim_policy::SimPolicy;
use crate::workload::Workload;

/// Policies × node counts over a base configuration.
#[derive(Clone, Debug)]
pub struct SweepSpec {
    /// Everything but the policy and node count.
    pub base: SimConfig,
    pub policies: Vec<SimPolicy>,
    pub node_counts: Vec<u32>,
    /// Worker threads (at least 1).
    pub threads: usize,
}

impl SweepSpec {
    /// A sweep of the policies named (as `SimPolicy::from_name` reads them) over `base`.
    pub fn named(
        base: SimConfig,
        names: &[&str],
        node_counts: &[u32],
        threads: usize,
    ) -> Result<SweepSpec, SimError> {
        let policies = names.iter().map(|p| SimPolicy::from_name(p)).collect::<Result<Vec<_>, _>>()?;
        Ok(SweepSpec { base, policies, node_counts: node_counts.to_vec(), threads })
    }

    /// The configuration of every point, policy-major.
    pub fn points(&self) -> Vec<SimConfig> {
        let mut out = Vec::with_capacity(self.policies.len() * self.node_counts.len());
        for p in &self.policies {
            for &n in &self.node_counts {
                let mut c = self.base.clone();
                c.policy = p.clone();
                c.nodes = n;
                out.push(c);
            }
        }
        out
    }
}

/// Run every point of `spec`; `progress` shows a bar when standard error is a terminal.
pub fn run_sweep(workload: &Workload, spec: &SweepSpec, progress: bool) -> Result<Vec<SimReport>, SimError> {
    run_points(workload, &spec.points(), spec.threads, progress)
}

/// Run `points` on `threads` threads, each taking the next point when it is done with one.
pub fn run_points(
    workload: &Workload,
    points: &[SimConfig],
    threads: usize,
    progress: bool,
) -> Result<Vec<SimReport>, SimError> {
    let pairs: Vec<(&Workload, SimConfig)> = points.iter().map(|p| (workload, p.clone())).collect();
    run_each(&pairs, threads, progress)
}

/// Run each (workload, configuration) point on `threads` threads; reports in input order.
pub fn run_each(
    points: &[(&Workload, SimConfig)],
    threads: usize,
    progress: bool,
) -> Result<Vec<SimReport>, SimError> {
    for (_, p) in points {
        p.validate()?;
    }
    let bar = if progress && std::io::stderr().is_terminal() {
        let bar = ProgressBar::new(points.len() as u64);
        if let Ok(style) =
            ProgressStyle::with_template("{spinner} [{elapsed_precise}] {bar:40} {pos}/{len} {msg}")
        {
            bar.set_style(style);
        }
        bar
    } else {
        ProgressBar::hidden()
    };
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<Result<SimReport, SimError>>>> =
        Mutex::new((0..points.len()).map(|_| None).collect());
    std::thread::scope(|scope| {
        for _ in 0..threads.max(1).min(points.len().max(1)) {
            scope.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some((workload, config)) = points.get(i) else { break };
                    let result = simulate(workload, config);
                    if let Ok(r) = &result {
                        bar.set_message(format!("{} n={}", r.label, r.nodes));
                    }
                    bar.inc(1);
                    results.lock().expect("no thread panicked holding the lock")[i] = Some(result);
                }
            });
        }
    });
    bar.finish_and_clear();
    results
        .into_inner()
        .expect("no thread panicked holding the lock")
        .into_iter()
        .map(|r| r.expect("every point ran"))
        .collect()
}

/// Write `results.json` (an array, one object per point) and `results.csv` into `dir`.
pub fn write_results(dir: &Path, reports: &[SimReport]) -> Result<(), SimError> {
    std::fs::create_dir_all(dir).map_err(|e| SimError::io(dir, e))?;
    let json = serde_json::to_string_pretty(reports).expect("reports serialize");
    let path = dir.join("results.json");
    std::fs::write(&path, json + "\n").map_err(|e| SimError::io(&path, e))?;
    let path = dir.join("results.csv");
    std::fs::write(&path, to_csv(reports)).map_err(|e| SimError::io(&path, e))?;
    Ok(())
}
