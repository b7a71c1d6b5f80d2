//! `locus sim reproduce dc`: the DC-Apache paper's Figs 7–9 on the peer simulator — CPS and
//! response time of the four data sets on 1–16 servers (resource-aware, unlimited quota; MAPUG
//! also migration-only), and the quota sweep of SpecWeb and Sequoia on one home and 7 co-ops
//! under naive, deletion-aware and resource-aware, as fractions of the set's full size (what
//! the co-ops hold at an unlimited quota, measured first) — written as `report.md`,
//! `results.json`, `claims.json` and SVG plots.

use std::path::PathBuf;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use locus_dc::balancer::QuotaMethod;
use locus_trace::SitePreset;
use serde::Serialize;

use super::{check_dc_claims, dc_markdown, write_dc_plots};
use crate::dc::peer::{DcPeerConfig, DcRun, UNLIMITED_QUOTA, simulate_dc};
use crate::dc::site::DcSite;
use crate::error::SimError;
use crate::reproduce::Claim;
use crate::reproduce::study::write_study;

/// Servers of the quota study: one home and 7 co-ops.
pub const QUOTA_SERVERS: u16 = 8;
/// The quota points of Fig. 9 as fractions of the set's full size.
pub const QUOTA_FRACTIONS: [f64; 9] = [0.0, 0.2, 0.4, 0.6, 0.8, 0.9, 0.95, 1.0, 1.2];
/// The data sets of Fig. 9 with the paper's largest quota and data set size (MB): SpecWeb
/// 0–1.2 MB of 1.03 MB, Sequoia 0–256 MB of about 247 MB.
pub const QUOTA_SETS: [(&str, f64, f64); 2] = [("specweb99", 1.2, 1.03), ("sequoia", 256.0, 247.0)];
/// The quota methods of Fig. 9.
pub const QUOTA_METHODS: [QuotaMethod; 3] =
    [QuotaMethod::Naive, QuotaMethod::DeletionAware, QuotaMethod::ResourceAware];

/// Options of the reproduction.
#[derive(Clone, Debug)]
pub struct DcOptions {
    pub out: PathBuf,
    /// Share of the paper's data sets (document counts, bytes); 1 = the paper's.
    pub scale: f64,
    pub servers: Vec<u16>,
    pub seed: u64,
    pub threads: usize,
    pub clients: u32,
    /// Simulated warm-up and measured seconds (Sequoia: `slow_factor` × these).
    pub warmup_s: f64,
    pub measure_s: f64,
    pub slow_factor: f64,
}

impl DcOptions {
    /// The paper's data sets, servers 1, 2, 4, 8, 16, 256 clients, 300 s warm-up, 120 s measured.
    pub fn full(out: impl Into<PathBuf>) -> DcOptions {
        DcOptions {
            out: out.into(),
            scale: 1.0,
            servers: vec![1, 2, 4, 8, 16],
            seed: 1,
            threads: 2,
            clients: 256,
            warmup_s: 300.0,
            measure_s: 120.0,
            slow_factor: 20.0,
        }
    }

    /// A tiny run for tests: 5% data sets, 1, 2 and 4 servers, 32 clients, 20 s + 20 s.
    pub fn quick(out: impl Into<PathBuf>) -> DcOptions {
        DcOptions {
            scale: 0.05,
            servers: vec![1, 2, 4],
            clients: 32,
            warmup_s: 20.0,
            measure_s: 20.0,
            slow_factor: 2.0,
            ..DcOptions::full(out)
        }
    }
}

/// One point of the study (a row of `results.json`).
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct DcRow {
    /// `fig7` (server scaling), `fig9_unlimited` (the quota study's servers at an unlimited
    /// quota, which measures the full size) or `fig9` (quota sweep).
    pub experiment: &'static str,
    pub dataset: String,
    pub servers: u16,
    pub method: String,
    /// Per co-op replica quota; `null` when unlimited.
    pub quota_bytes: Option<u64>,
    pub cps: f64,
    pub mean_ms: f64,
    pub run: DcRun,
}

/// What `reproduce_dc` produced.
#[derive(Clone, Debug)]
pub struct DcOutcome {
    pub rows: Vec<DcRow>,
    pub claims: Vec<Claim>,
    pub files: Vec<PathBuf>,
    pub wall_s: f64,
    /// Data set name and total bytes.
    pub datasets: Vec<(String, u64)>,
    /// Fig. 9's data sets and their full size: the most replica bytes a co-op held at an
    /// unlimited quota (any method).
    pub full_sizes: Vec<(String, u64)>,
}

/// One job: which site, which configuration, which experiment.
struct Job {
    site: usize,
    experiment: &'static str,
    config: DcPeerConfig,
}

/// Run the study and write its files into `opts.out`.
pub fn reproduce_dc(opts: &DcOptions) -> Result<DcOutcome, SimError> {
    let started = Instant::now();
    if !(opts.scale > 0.0 && opts.scale <= 1.0) || opts.servers.is_empty() || opts.servers.contains(&0) {
        return Err(SimError::Config(format!(
            "reproduce dc: scale {} must be within (0, 1] and servers {:?} non-empty and positive",
            opts.scale, opts.servers
        )));
    }
    std::fs::create_dir_all(&opts.out).map_err(|e| SimError::io(&opts.out, e))?;
    let sites = (SitePreset::ALL.iter())
        .map(|&p| DcSite::from_preset(p, opts.scale, opts.seed, &opts.out))
        .collect::<Result<Vec<_>, _>>()?;
    let jobs = plan_jobs(opts, &sites);
    let runs = run_jobs(&sites, &jobs, opts.threads)?;
    let mut rows = to_rows(&sites, &jobs, runs);
    let full_sizes = full_sizes(&rows, &sites);
    let jobs = plan_quota_jobs(opts, &sites, &full_sizes);
    let runs = run_jobs(&sites, &jobs, opts.threads)?;
    rows.extend(to_rows(&sites, &jobs, runs));
    rows.sort_by(|a, b| {
        (a.experiment, &a.dataset, &a.method, a.servers, a.quota_bytes).cmp(&(
            b.experiment,
            &b.dataset,
            &b.method,
            b.servers,
            b.quota_bytes,
        ))
    });
    let datasets: Vec<(String, u64)> = sites.iter().map(|s| (s.name.clone(), s.total_bytes)).collect();
    let claims = check_dc_claims(&rows, &datasets, &full_sizes);
    let wall_s = started.elapsed().as_secs_f64();
    let mut files = write_dc_plots(&opts.out, &rows, &datasets, &full_sizes)?;
    let report = dc_markdown(opts, &rows, &claims, &datasets, &full_sizes, wall_s);
    files.extend(write_study(&opts.out, &rows, &claims, &report)?);
    Ok(DcOutcome { rows, claims, files, wall_s, datasets, full_sizes })
}

fn to_rows(sites: &[DcSite], jobs: &[Job], runs: Vec<DcRun>) -> Vec<DcRow> {
    (jobs.iter().zip(runs))
        .map(|(job, run)| DcRow {
            experiment: job.experiment,
            dataset: sites[job.site].name.clone(),
            servers: run.servers,
            method: run.method.clone(),
            quota_bytes: (run.quota_bytes < UNLIMITED_QUOTA).then_some(run.quota_bytes),
            cps: run.cps,
            mean_ms: run.mean_ms,
            run,
        })
        .collect()
}

/// Each quota set's full size: the most replica bytes any co-op held in its `fig9_unlimited`
/// runs; the data set's bytes if replication never started (nothing measured).
pub fn full_sizes(rows: &[DcRow], sites: &[DcSite]) -> Vec<(String, u64)> {
    (QUOTA_SETS.iter())
        .filter_map(|&(name, _, _)| sites.iter().find(|s| s.name == name))
        .map(|site| {
            let held = (rows.iter())
                .filter(|r| r.experiment == "fig9_unlimited" && r.dataset == site.name)
                .map(|r| r.run.max_store_bytes)
                .max()
                .unwrap_or(0);
            (site.name.clone(), if held > 0 { held } else { site.total_bytes })
        })
        .collect()
}

/// The quota points of a full size: `QUOTA_FRACTIONS` of it, in bytes.
pub fn quota_points(full_bytes: u64) -> Vec<u64> {
    QUOTA_FRACTIONS.iter().map(|f| (f * full_bytes as f64).round() as u64).collect()
}

/// One run of the study: the paper's testbed with the options' clients, seed and times, and
/// the `locus_dc` default balancer and selector.
fn base_config(
    opts: &DcOptions,
    site: &DcSite,
    servers: u16,
    method: QuotaMethod,
    quota: u64,
) -> DcPeerConfig {
    let mut c = DcPeerConfig::paper(servers, method, quota);
    c.seed = opts.seed;
    c.clients = opts.clients;
    let slow = if site.name == "sequoia" { opts.slow_factor } else { 1.0 };
    c.warmup_s = opts.warmup_s * slow;
    c.measure_s = opts.measure_s * slow;
    c
}

/// Fig. 7 and, for the quota sets, the quota study's servers at an unlimited quota.
fn plan_jobs(opts: &DcOptions, sites: &[DcSite]) -> Vec<Job> {
    let base = |site: &DcSite, servers: u16, method: QuotaMethod, quota: u64| {
        base_config(opts, site, servers, method, quota)
    };
    let mut jobs = Vec::new();
    for (i, site) in sites.iter().enumerate() {
        for &n in &opts.servers {
            let config = base(site, n, QuotaMethod::ResourceAware, UNLIMITED_QUOTA);
            jobs.push(Job { site: i, experiment: "fig7", config });
        }
        if site.name == "mapug" {
            for &n in &opts.servers {
                let config = base(site, n, QuotaMethod::MigrationOnly, UNLIMITED_QUOTA);
                jobs.push(Job { site: i, experiment: "fig7", config });
            }
        }
        if QUOTA_SETS.iter().any(|&(name, _, _)| name == site.name) {
            for method in QUOTA_METHODS {
                let config = base(site, QUOTA_SERVERS, method, UNLIMITED_QUOTA);
                jobs.push(Job { site: i, experiment: "fig9_unlimited", config });
            }
        }
    }
    slowest_first(&mut jobs, sites);
    jobs
}

/// Fig. 9: each quota set's quota points (fractions of its full size) under every method.
fn plan_quota_jobs(opts: &DcOptions, sites: &[DcSite], full_sizes: &[(String, u64)]) -> Vec<Job> {
    let mut jobs = Vec::new();
    for (name, full) in full_sizes {
        let Some(i) = sites.iter().position(|s| &s.name == name) else { continue };
        for quota in quota_points(*full) {
            for method in QUOTA_METHODS {
                let config = base_config(opts, &sites[i], QUOTA_SERVERS, method, quota);
                jobs.push(Job { site: i, experiment: "fig9", config });
            }
        }
    }
    slowest_first(&mut jobs, sites);
    jobs
}

/// The slowest points first, so the threads finish together.
fn slowest_first(jobs: &mut [Job], sites: &[DcSite]) {
    jobs.sort_by_key(|j| std::cmp::Reverse((sites[j.site].name == "sequoia", j.config.servers)));
}

/// Run every job on `threads` threads; results in job order.
fn run_jobs(sites: &[DcSite], jobs: &[Job], threads: usize) -> Result<Vec<DcRun>, SimError> {
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<Result<DcRun, SimError>>>> =
        Mutex::new((0..jobs.len()).map(|_| None).collect());
    std::thread::scope(|scope| {
        for _ in 0..threads.max(1) {
            scope.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(job) = jobs.get(i) else { break };
                    let run = simulate_dc(&sites[job.site], &job.config);
                    results.lock().unwrap_or_else(|e| e.into_inner())[i] = Some(run);
                }
            });
        }
    });
    let results = results.into_inner().unwrap_or_else(|e| e.into_inner());
    results
        .into_iter()
        .map(|r| r.unwrap_or_else(|| Err(SimError::Config("a dc job did not run".into()))))
        .collect()
}
