//! The run of `locus sim reproduce lard`, the LARD paper's simulation study. Makes a synthetic trace
//! with the character of the paper's Rice University trace, runs WRR, LB, LB/GC, LARD,
//! LARD/R and WRR/GMS over 1–16 nodes, and writes `report.md`, `results.json`, CSV and SVG
//! plots, setting the results beside the paper's claims and marking each met or not.

use std::path::PathBuf;

use locus_trace::{DEFAULT_COVERAGE_SHARES, DocumentSizes, SizeModel, TraceStats, ZipfTraceSpec};

use super::claims::check_claims;
use super::report::markdown;
use crate::config::SimConfig;
use crate::error::SimError;
use crate::plot::write_plots;
use crate::report::SimReport;
use crate::reproduce::{Claim, pretty_json, write_file};
use crate::sweep::{SweepSpec, run_sweep, write_results};
use crate::workload::Workload;

/// A synthetic trace with the character of the LARD paper's Rice trace: Zipf popularity
/// (α = 0.7) over 7 000 documents, SURGE sizes capped at 4 MiB, 1% one-timers. With two
/// million requests it has ~27 000 targets and a 1.4 GiB working set (mostly one-timers);
/// the memory of ~8 nodes of 32 MB covers 90% of the requests and ~9–10 nodes 95–99%, and
/// no target has more than ~2% of the requests (see `CHOICE`).
pub fn rice_like_spec(requests: u64, seed: u64) -> ZipfTraceSpec {
    ZipfTraceSpec {
        seed,
        requests,
        documents: 7_000,
        alpha: 0.7,
        sizes: DocumentSizes::Model(SizeModel { max_size: 4 << 20, ..SizeModel::surge() }),
        one_timer_share: 0.01,
        ..ZipfTraceSpec::default()
    }
}

/// How `rice_like_spec` was chosen: candidate specs (2 M requests, seed 1, SURGE sizes) with
/// the memory they need to cover 90%, 95% and 99% of the requests, in nodes of 32 MB, and
/// the share of requests of the most requested target, as measured with
/// `examples/trace_character.rs` (the trace crate's statistics).
pub const CHOICE: &[(&str, f64, f64, f64, f64)] = &[
    ("40 000 docs, α 1.0, 2% one-timers, ≤ 8 MiB", 24.7, 41.5, 70.7, 8.8),
    ("30 000 docs, α 1.2, 1% one-timers, ≤ 4 MiB", 3.4, 11.1, 40.8, 20.0),
    ("20 000 docs, α 1.1, 1% one-timers, ≤ 4 MiB", 6.2, 14.2, 31.5, 14.4),
    ("10 000 docs, α 1.0, 1% one-timers, ≤ 4 MiB (first choice)", 5.9, 9.9, 15.2, 10.1),
    ("10 000 docs, α 0.8, 1% one-timers, ≤ 4 MiB", 9.8, 12.6, 15.1, 3.7),
    ("8 000 docs, α 0.6, 1% one-timers, ≤ 4 MiB", 9.2, 10.4, 11.7, 1.1),
    ("7 000 docs, α 0.6, 1% one-timers, ≤ 4 MiB", 8.4, 9.3, 10.1, 1.2),
    ("7 000 docs, α 0.9, 1% one-timers, ≤ 4 MiB", 5.8, 8.0, 10.1, 6.7),
    ("7 000 docs, α 0.7, 1% one-timers, ≤ 4 MiB (chosen)", 7.6, 9.1, 10.1, 2.2),
];

/// The strategies of the paper's figures, in its order.
pub const LARD_POLICIES: [&str; 6] = ["wrr", "hash", "lb-gc", "lard", "lard-r", "wrr-gms"];

/// Options of the reproduction.
#[derive(Clone, Debug)]
pub struct ReproduceOptions {
    pub out: PathBuf,
    pub requests: u64,
    pub seed: u64,
    pub node_counts: Vec<u32>,
    pub threads: usize,
    pub progress: bool,
}

impl ReproduceOptions {
    /// Two million requests, seed 1, 1–16 nodes, two threads.
    pub fn new(out: impl Into<PathBuf>) -> ReproduceOptions {
        ReproduceOptions {
            out: out.into(),
            requests: 2_000_000,
            seed: 1,
            node_counts: (1..=16).collect(),
            threads: 2,
            progress: true,
        }
    }
}

/// What a reproduction produced.
#[derive(Clone, Debug)]
pub struct Reproduction {
    pub reports: Vec<SimReport>,
    pub stats: TraceStats,
    pub claims: Vec<Claim>,
    pub files: Vec<PathBuf>,
}

/// Run the LARD study and write its outputs into `opts.out`.
pub fn reproduce_lard(opts: &ReproduceOptions) -> Result<Reproduction, SimError> {
    let spec = rice_like_spec(opts.requests, opts.seed);
    let (workload, stats) = Workload::synthetic_with_stats(spec.clone(), &DEFAULT_COVERAGE_SHARES)?;
    let base = SimConfig { seed: opts.seed, ..SimConfig::lard98() };
    let sweep = SweepSpec::named(base.clone(), &LARD_POLICIES, &opts.node_counts, opts.threads)?;
    let reports = run_sweep(&workload, &sweep, opts.progress)?;
    let claims = check_claims(&reports);

    let dir = &opts.out;
    write_results(dir, &reports)?;
    let mut files = vec![dir.join("results.json"), dir.join("results.csv")];
    files.extend(write_plots(dir, &reports, "LARD paper, Rice-like trace")?);
    files.push(write_file(dir, "trace_stats.json", pretty_json(&stats))?);
    files.push(write_file(dir, "claims.json", pretty_json(&claims))?);
    let config_toml = toml::to_string(&base).map_err(|e| SimError::Config(e.to_string()))?;
    files.push(write_file(dir, "config.toml", config_toml)?);
    files.push(write_file(dir, "report.md", markdown(opts, &spec, &stats, &base, &reports, &claims))?);
    Ok(Reproduction { reports, stats, claims, files })
}
