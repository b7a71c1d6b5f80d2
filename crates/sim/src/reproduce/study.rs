//! What the process-driven studies (`reproduce csld`, `reproduce cap`) share: one result
//! object per simulated point (`StudyPoint`), the run of many (workload, configuration)
//! points on threads, and the writing of `results.json`, `claims.json` and `report.md`.

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::config::SimConfig;
use crate::error::SimError;
use crate::report::SimReport;
use crate::reproduce::{Claim, pretty_json, write_file};
use crate::sweep::run_each;
use crate::workload::Workload;

/// One simulated point of a study, as written to `results.json`.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct StudyPoint {
    /// The study's name for the point's workload (`"1"`..`"6"`, `"table5"`, `"mix-20%"`, ...).
    pub case: String,
    /// The policy's label (`RR`, `WRR_a'`, `CSLD`, `LARD/R`, ...).
    pub policy: String,
    /// Offered load, requests per second.
    pub rate: f64,
    /// Mean server latency, seconds.
    pub latency_s: f64,
    pub latency_p90_s: f64,
    /// Dropped SYNs / SYNs.
    pub rejection_ratio: f64,
    /// Requests given up after their retries.
    pub failed_requests: u64,
    /// Mean client delay (first SYN → end of the response), seconds.
    pub client_delay_s: f64,
    /// Completed requests per second over the measured period.
    pub throughput_rps: f64,
    /// CPU utilisation averaged over nodes, and the busiest node's.
    pub cpu_utilization: f64,
    pub cpu_utilization_max: f64,
    /// Static requests that needed the disk.
    pub miss_ratio: f64,
    /// CSLD's predicted miss ratio over the measured period.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub predicted_miss_ratio: Option<f64>,
    /// Measured requests (after the warm-up).
    pub measured_requests: u64,
    /// The paper's figure for this point, if it gives one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub paper_latency_s: Option<f64>,
    /// Whether the paper marks this point as having rejections.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub paper_rejections: Option<bool>,
    /// The study's own parameters of the point (dynamic share, thresholds, ...).
    #[serde(skip_serializing_if = "serde_json::Map::is_empty")]
    pub params: serde_json::Map<String, serde_json::Value>,
}

impl StudyPoint {
    /// The point of `report` (from the process-driven back end).
    pub fn new(case: impl Into<String>, policy: impl Into<String>, rate: f64, r: &SimReport) -> StudyPoint {
        let s = r.server.clone().unwrap_or_default();
        StudyPoint {
            case: case.into(),
            policy: policy.into(),
            rate,
            latency_s: s.latency_mean_s,
            latency_p90_s: s.latency_p90_s,
            rejection_ratio: s.rejection_ratio,
            failed_requests: s.failed_requests,
            client_delay_s: r.mean_delay_ms / 1e3,
            throughput_rps: r.rps,
            cpu_utilization: s.cpu_utilization,
            cpu_utilization_max: s.cpu_utilization_max,
            miss_ratio: r.miss_ratio,
            predicted_miss_ratio: s.predicted_miss_ratio,
            measured_requests: r.measured_requests,
            paper_latency_s: None,
            paper_rejections: None,
            params: serde_json::Map::new(),
        }
    }
}

/// Simulated time of a study: warm-up and measured seconds.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Durations {
    pub warmup_s: f64,
    pub measure_s: f64,
}

impl Durations {
    /// Requests a Poisson stream at `rate` sends over both, and how many are warm-up.
    pub fn requests(&self, rate: f64) -> (u64, u64) {
        ((rate * (self.warmup_s + self.measure_s)).round() as u64, (rate * self.warmup_s).round() as u64)
    }
}

/// Run every (workload index, configuration) job on `threads` threads.
pub fn run_jobs(
    workloads: &[Workload],
    jobs: &[(usize, SimConfig)],
    threads: usize,
    progress: bool,
) -> Result<Vec<SimReport>, SimError> {
    let pairs: Vec<(&Workload, SimConfig)> = jobs.iter().map(|(w, c)| (&workloads[*w], c.clone())).collect();
    run_each(&pairs, threads, progress)
}

/// Write `results.json`, `claims.json` and `report.md` into `dir`; returns their paths.
pub fn write_study<T: Serialize>(
    dir: &Path,
    points: &[T],
    claims: &[Claim],
    report: &str,
) -> Result<Vec<PathBuf>, SimError> {
    std::fs::create_dir_all(dir).map_err(|e| SimError::io(dir, e))?;
    Ok(vec![
        write_file(dir, "results.json", pretty_json(&points))?,
        write_file(dir, "claims.json", pretty_json(&claims))?,
        write_file(dir, "report.md", report.to_string())?,
    ])
}

/// The point of `case` and `policy`, if run.
pub fn find_point<'a>(points: &'a [StudyPoint], case: &str, policy: &str) -> Option<&'a StudyPoint> {
    points.iter().find(|p| p.case == case && p.policy == policy)
}
