//! `MeasuredLoad`: what a point's client measured, whichever client it was — `locus load`
//! (every byte verified) or h2load (status codes only) — in the terms a point's result uses.

use locus_load::LoadReport;

use crate::h2load::H2loadFigures;

/// A client's figures over a point's measured interval.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct MeasuredLoad {
    pub rps: f64,
    pub mean_ms: f64,
    pub p50_ms: f64,
    pub p90_ms: f64,
    pub p99_ms: f64,
    pub requests: u64,
    pub errors: u64,
    pub timeouts: u64,
    pub outstanding: u64,
    pub mismatches: u64,
    pub duration_s: f64,
    /// Share of responses that came from a DC replica (the surfer's; 0 otherwise).
    pub replica_share: f64,
    /// What makes the figures less trustworthy (failures by kind, mismatch samples...).
    pub warnings: Vec<String>,
}

impl From<&LoadReport> for MeasuredLoad {
    fn from(load: &LoadReport) -> MeasuredLoad {
        let mut warnings = load.warnings.clone();
        if load.errors > 0 {
            warnings.push(format!("{} requests failed: {:?}", load.errors, load.errors_by_kind));
        }
        for m in &load.mismatch_samples {
            warnings.push(format!(
                "mismatch: {} [{}]: expected {}, got {}",
                m.request,
                m.kind.name(),
                m.expected,
                m.actual
            ));
        }
        MeasuredLoad {
            rps: load.rps,
            mean_ms: load.mean_ms,
            p50_ms: load.p50_ms,
            p90_ms: load.p90_ms,
            p99_ms: load.p99_ms,
            requests: load.requests,
            errors: load.errors,
            timeouts: load.timeouts,
            outstanding: load.outstanding,
            mismatches: load.mismatches,
            duration_s: load.duration_s,
            replica_share: load
                .surf
                .as_ref()
                .filter(|_| load.requests > 0)
                .map_or(0.0, |s| s.counts.replica_responses as f64 / load.requests as f64),
            warnings,
        }
    }
}

impl From<&H2loadFigures> for MeasuredLoad {
    fn from(f: &H2loadFigures) -> MeasuredLoad {
        let mut warnings = vec!["h2load checks status codes only: bodies were not verified".to_string()];
        if f.errors > 0 {
            warnings.push(format!("{} requests failed or were answered 4xx/5xx (h2load)", f.errors));
        }
        MeasuredLoad {
            rps: f.rps,
            mean_ms: f.mean_ms,
            p50_ms: f.p50_ms,
            p90_ms: f.p90_ms,
            p99_ms: f.p99_ms,
            requests: f.done,
            errors: f.errors,
            timeouts: f.timeouts,
            duration_s: f.duration_s,
            warnings,
            ..MeasuredLoad::default()
        }
    }
}
