//! What each point of a lab run left: `PointResult`, the measurement of a point, and
//! `FailedPoint`, a point that failed on both tries; `results.json` lists both (rewritten
//! after every point, so a stopped run keeps what it measured).

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::LabError;
use crate::experiment::SwitchKind;
use crate::report::LabReport;

/// The measurement of one point (one object of `results.json`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PointResult {
    pub switch: SwitchKind,
    pub policy: String,
    pub mode: String,
    pub nodes: usize,
    pub workload: String,
    /// Which run of the point (1-based).
    pub repetition: u32,
    /// The request stream's seed (the hot set's and the popularity order's).
    #[serde(default)]
    pub seed: u64,
    /// The balancer's configuration as a short string: the policy and what the row sets
    /// beyond the defaults (`lard-r t_high=16 t_low=4`, `uri-chash-bounded factor=125`).
    #[serde(default)]
    pub config: String,
    /// Responses per second over the measured interval.
    pub rps: f64,
    /// Mean response time over the measured interval.
    #[serde(default)]
    pub mean_ms: f64,
    pub p50_ms: f64,
    pub p90_ms: f64,
    pub p99_ms: f64,
    /// Cache hits over hits and misses, summed over the nodes.
    pub hit_ratio: f64,
    /// Misses served from a peer's memory (cooperative caching) over hits and misses.
    #[serde(default)]
    pub remote_hit_ratio: f64,
    /// CPU time of all nodes per request served, in µs.
    #[serde(default)]
    pub node_cpu_us_per_request: Option<f64>,
    /// Share of responses that came from a replica (surfing DC clusters; 0 otherwise).
    #[serde(default)]
    pub replica_share: f64,
    /// Max over mean of the requests per node.
    pub imbalance: f64,
    /// Requests that failed (connection errors, timeouts, bad framing).
    pub errors: u64,
    /// Of the failed requests, those that timed out.
    #[serde(default)]
    pub timeouts: u64,
    /// Requests still unanswered when the measured window ended (not in `errors`; their
    /// latencies, censored at the window's end, are in the percentiles).
    #[serde(default)]
    pub outstanding: u64,
    /// What the nodes' CPU was: `cgroup` (a real limit each), `model` or `host` (unlimited).
    #[serde(default)]
    pub node_cpu: String,
    /// Responses whose status, length or bytes were wrong.
    pub mismatches: u64,
    /// Responses in the measured interval.
    pub requests: u64,
    pub duration_s: f64,
    /// Requests each node served in the measured interval (its own counter).
    pub node_requests: Vec<u64>,
    /// The switch process's CPU time (utime + stime) over the interval per forwarded request.
    pub switch_cpu_us_per_request: Option<f64>,
    /// The TCP congestion control of the lab's connections (the machine's on loopback).
    #[serde(default)]
    pub congestion_control: String,
    /// Runs it took: 2 when the first failed and the point was tried again.
    #[serde(default = "one_attempt")]
    pub attempts: u32,
    /// Anything that made a number less trustworthy.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

fn one_attempt() -> u32 {
    1
}

/// A point that failed on both tries (an object of `results.json` with a `failed` key and no
/// measurements).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FailedPoint {
    pub switch: SwitchKind,
    pub policy: String,
    pub mode: String,
    pub nodes: usize,
    pub workload: String,
    pub repetition: u32,
    pub attempts: u32,
    /// Why the last try failed.
    pub failed: String,
}

impl PointResult {
    /// `locus lard-r` (with the mode when it is not `proxy`).
    pub fn series_label(&self) -> String {
        series_label(self.switch, self.config_or_policy(), &self.mode)
    }

    /// The configuration, or the policy for results written before rows carried one.
    pub fn config_or_policy(&self) -> &str {
        if self.config.is_empty() { &self.policy } else { &self.config }
    }
}

pub(crate) fn series_label(switch: SwitchKind, policy: &str, mode: &str) -> String {
    if mode == "proxy" {
        format!("{} {policy}", switch.name())
    } else {
        format!("{} {policy} ({mode})", switch.name())
    }
}

impl LabReport {
    /// `results.json`: an array with one object per measured point, then one per failed point
    /// (those have a `failed` key).
    pub fn results_json(&self) -> String {
        let measured = self.points.iter().filter_map(|p| serde_json::to_value(p).ok());
        let failed = self.failed_points.iter().filter_map(|p| serde_json::to_value(p).ok());
        let all: Vec<serde_json::Value> = measured.chain(failed).collect();
        serde_json::to_string_pretty(&all).unwrap_or_else(|_| "[]".into())
    }
}

/// Write `results.json` (rewritten after every point, so a stopped run keeps what it measured).
pub fn write_results_json(dir: &Path, report: &LabReport) -> Result<PathBuf, LabError> {
    let path = dir.join("results.json");
    std::fs::write(&path, report.results_json() + "\n").map_err(|e| LabError::io(&path, e))?;
    Ok(path)
}
