//! `locus sim`: the `SimCommand` subcommands — `run` one point, `sweep` policies × node
//! counts, `reproduce lard | csld | cap | sc | dc` — their flags (a trace file or a synthetic spec; a TOML config
//! and/or flags on top of a preset), and `run`, which prints summaries and writes results.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Context, bail};
use locus_cache::Replacement;
use locus_trace::{DocumentSizes, ReadOptions, SizeModel, TraceFormat, ZipfTraceSpec};

use crate::berkeley_like::BERKELEY_REQUESTS;
use crate::config::{Arrivals, CpuModel, Preset, SimConfig};
use crate::cost_model::CostModel;
use crate::engine::simulate;
use crate::frontend::FrontEndLimit;
use crate::plot::write_plots;
use crate::reproduce::cap::reproduce_cap;
use crate::reproduce::csld::{CsldOptions, StudyOutput, TABLE4, reproduce_csld};
use crate::reproduce::dc::{DcOptions, reproduce_dc};
use crate::reproduce::sc::{ScOptions, reproduce_sc};
use crate::reproduce::study::find_point;
use crate::reproduce::{ReproduceOptions, describe_outputs, reproduce_lard};
use crate::sim_policy::SimPolicy;
use crate::sweep::{SweepSpec, run_sweep, write_results};
use crate::trace_classes::{apply_class_table, read_class_file};
use crate::workload::Workload;

/// `locus sim` subcommands.
#[derive(clap::Subcommand, Debug)]
pub enum SimCommand {
    /// Simulate one point: a policy on a number of nodes over a trace.
    Run(RunArgs),
    /// Simulate policies × node counts (in parallel threads) and plot them.
    Sweep(SweepArgs),
    /// Reproduce a paper's simulation study (`lard`).
    Reproduce(ReproduceArgs),
}

/// The trace to simulate: a file, or a synthetic Zipf trace (default: the Rice-like spec).
#[derive(clap::Args, Debug, Clone)]
pub struct WorkloadArgs {
    /// Trace file in any format `locus trace` reads (default: a synthetic trace).
    #[arg(long)]
    pub trace: Option<PathBuf>,
    /// Format of --trace (default: detected).
    #[arg(long, value_enum)]
    pub from: Option<TraceFormat>,
    /// Synthetic trace: requests.
    #[arg(long, default_value_t = 1_000_000)]
    pub requests: u64,
    /// Synthetic trace: documents in the Zipf set.
    #[arg(long, default_value_t = 10_000)]
    pub documents: u64,
    /// Synthetic trace: Zipf exponent.
    #[arg(long, default_value_t = 1.0)]
    pub alpha: f64,
    /// Synthetic trace: share of requests to one-timers.
    #[arg(long, default_value_t = 0.01)]
    pub one_timers: f64,
    /// Synthetic trace: largest document in KiB (SURGE sizes are capped here).
    #[arg(long, default_value_t = 4096)]
    pub max_size_kb: u64,
    /// Synthetic trace: seed.
    #[arg(long, default_value_t = 1)]
    pub trace_seed: u64,
    /// `[[classes]]` tables (the node's and switch's schema): requests whose target matches a
    /// class are dynamic, with that class's costs.
    #[arg(long)]
    pub class_file: Option<PathBuf>,
}

impl WorkloadArgs {
    fn spec(&self) -> ZipfTraceSpec {
        ZipfTraceSpec {
            seed: self.trace_seed,
            requests: self.requests,
            documents: self.documents,
            alpha: self.alpha,
            sizes: DocumentSizes::Model(SizeModel { max_size: self.max_size_kb << 10, ..SizeModel::surge() }),
            one_timer_share: self.one_timers,
            ..ZipfTraceSpec::default()
        }
    }

    /// The workload, classified by `--class-file` if given (whose costs go into `costs`).
    fn load_classified(&self, costs: &mut CostModel) -> anyhow::Result<Workload> {
        let mut workload = self.load()?;
        if let Some(path) = &self.class_file {
            let classifier = read_class_file(path)?;
            let dynamic = apply_class_table(&mut workload, costs, &classifier);
            eprintln!("{}: {dynamic} distinct targets are dynamic", path.display());
        }
        Ok(workload)
    }

    fn load(&self) -> anyhow::Result<Workload> {
        match &self.trace {
            Some(path) => {
                let options = ReadOptions { format: self.from, ..ReadOptions::default() };
                Workload::from_trace_file(path, &options)
                    .with_context(|| format!("reading {}", path.display()))
            }
            None => Workload::synthetic(self.spec()).context("making the synthetic trace"),
        }
    }
}

/// Configuration of a point: a TOML file and/or flags over a preset.
#[derive(clap::Args, Debug, Clone)]
pub struct PointArgs {
    /// TOML configuration (keys of `SimConfig`; `preset` picks the base).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Preset to start from (when no --config).
    #[arg(long, value_enum)]
    pub preset: Option<Preset>,
    /// Cache per node in MiB.
    #[arg(long)]
    pub cache_mb: Option<f64>,
    /// Cache replacement: lru, lfu, gds, gdsf.
    #[arg(long)]
    pub replacement: Option<Replacement>,
    /// Closed loop with this many clients (default: enough to saturate).
    #[arg(long, conflicts_with = "rate")]
    pub clients: Option<u32>,
    /// Open loop: Poisson arrivals at this many requests per second.
    #[arg(long)]
    pub rate: Option<f64>,
    /// Seed of the run's random draws.
    #[arg(long)]
    pub seed: Option<u64>,
    /// CPU speed multiplier.
    #[arg(long)]
    pub cpu_speed: Option<f64>,
    /// Memory (cache size) multiplier.
    #[arg(long)]
    pub memory_scale: Option<f64>,
    /// Disks per node.
    #[arg(long)]
    pub disks: Option<u32>,
    /// Front-end admission limit: auto (policy's or the paper's S), policy, none, or a number.
    #[arg(long)]
    pub frontend_limit: Option<FrontEndLimit>,
    /// Completed requests to leave out of the measurement.
    #[arg(long)]
    pub warmup: Option<u64>,
    /// LARD T_low.
    #[arg(long)]
    pub t_low: Option<u32>,
    /// LARD T_high.
    #[arg(long)]
    pub t_high: Option<u32>,
}

impl PointArgs {
    fn config(&self) -> anyhow::Result<SimConfig> {
        let mut c = match (&self.config, self.preset) {
            (Some(path), _) => SimConfig::from_file(path)?,
            (None, Some(p)) => SimConfig::preset(p),
            (None, None) => SimConfig::lard98(),
        };
        if let Some(mb) = self.cache_mb {
            c.cache.capacity_bytes = (mb * 1024.0 * 1024.0).round() as u64;
        }
        if let Some(r) = self.replacement {
            c.cache.replacement = r;
        }
        if let Some(n) = self.clients {
            c.arrivals = Arrivals::Closed { clients: Some(n) };
        }
        if let Some(rate) = self.rate {
            c.arrivals = Arrivals::Poisson { rate };
        }
        c.seed = self.seed.unwrap_or(c.seed);
        c.cpu_speed = self.cpu_speed.unwrap_or(c.cpu_speed);
        c.memory_scale = self.memory_scale.unwrap_or(c.memory_scale);
        c.disks = self.disks.unwrap_or(c.disks);
        c.frontend_limit = self.frontend_limit.unwrap_or(c.frontend_limit);
        c.warmup_requests = self.warmup.unwrap_or(c.warmup_requests);
        c.t_low = self.t_low.unwrap_or(c.t_low);
        c.t_high = self.t_high.unwrap_or(c.t_high);
        c.validate()?;
        Ok(c)
    }
}

/// Flags of `locus sim run`.
#[derive(clap::Args, Debug, Clone)]
pub struct RunArgs {
    #[command(flatten)]
    pub workload: WorkloadArgs,
    #[command(flatten)]
    pub point: PointArgs,
    /// Policy: any switch policy, or lb-gc, wrr-gms.
    #[arg(long)]
    pub policy: Option<String>,
    /// Back-end nodes.
    #[arg(long)]
    pub nodes: Option<u32>,
    /// Write results.json and results.csv into this directory.
    #[arg(long, short)]
    pub out: Option<PathBuf>,
    /// Print the full report as JSON.
    #[arg(long)]
    pub json: bool,
}

/// Flags of `locus sim sweep`.
#[derive(clap::Args, Debug, Clone)]
pub struct SweepArgs {
    #[command(flatten)]
    pub workload: WorkloadArgs,
    #[command(flatten)]
    pub point: PointArgs,
    /// Policies, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "wrr,hash,lb-gc,lard,lard-r,wrr-gms")]
    pub policies: Vec<String>,
    /// Node counts, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1,2,4,6,8,10,12,14,16")]
    pub node_counts: Vec<u32>,
    /// Threads running points in parallel.
    #[arg(long, default_value_t = 2)]
    pub threads: usize,
    /// Directory for results.json, results.csv and the SVG plots.
    #[arg(long, short)]
    pub out: PathBuf,
    /// Title of the plots.
    #[arg(long, default_value = "")]
    pub title: String,
}

/// Paper studies `reproduce` knows.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum Study {
    /// The LARD paper: WRR, LB, LB/GC, LARD, LARD/R, WRR/GMS on a Rice-like trace, 1–16 nodes.
    Lard,
    /// The CSLD paper: Table 4, Table 5 and Fig. 6 on the process-driven back end.
    Csld,
    /// CAP beside LARD, LARD/R, LC and WRR on static and CPU/disk-bound dynamic mixes.
    Cap,
    /// The Socket Cloning paper's Fig. 9: RR, CF-LRU, CF-LFU and SC with links and a file
    /// server on a synthetic stand-in for the Berkeley trace, 1–12 nodes.
    Sc,
    /// The DC-Apache paper's Figs 7–9: peer servers without a front-end, four data sets on
    /// 1–16 servers, and the co-op quota sweep of SpecWeb and Sequoia.
    Dc,
}

/// Flags of `locus sim reproduce`.
#[derive(clap::Args, Debug, Clone)]
pub struct ReproduceArgs {
    /// The study.
    #[arg(value_enum)]
    pub study: Study,
    /// Directory for report.md, results.json, CSV and SVG plots.
    #[arg(long, short)]
    pub out: PathBuf,
    /// Requests in the trace (lard: 2 000 000 Rice-like; sc: the Berkeley trace's 3 940 707).
    #[arg(long)]
    pub requests: Option<u64>,
    /// sc: the share of the Berkeley trace's requests to simulate (e.g. 0.25); dc: the share
    /// of the paper's data sets (documents and bytes, 0 < scale <= 1).
    #[arg(long)]
    pub scale: Option<f64>,
    /// sc: raw rate of the file server's TX link, Mbit/s (default 100: the design's rate, fixed before the first run).
    #[arg(long)]
    pub file_server_mbps: Option<u64>,
    /// Seed of the trace and the runs.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Node counts, comma-separated (lard: 1–16; sc: 1,2,4,6,8,10,12; dc: servers 1,2,4,8,16).
    #[arg(long, value_delimiter = ',', visible_alias = "servers")]
    pub node_counts: Option<Vec<u32>>,
    /// Threads running points in parallel.
    #[arg(long, default_value_t = 2)]
    pub threads: usize,
    /// csld, cap, sc: a tiny version of every point (for tests).
    #[arg(long)]
    pub quick: bool,
    /// csld, cap: simulated warm-up and measured seconds per point (default 60 and 180).
    #[arg(long)]
    pub warmup_s: Option<f64>,
    #[arg(long)]
    pub measure_s: Option<f64>,
    /// csld, cap: the nodes' CPU scheduling (`ps`: processor sharing; `credit`: Linux 2.4).
    #[arg(long, value_enum, default_value = "ps")]
    pub cpu: CpuModel,
}

/// Run a `locus sim` subcommand.
pub fn run(cmd: SimCommand) -> anyhow::Result<()> {
    match cmd {
        SimCommand::Run(a) => run_point(a),
        SimCommand::Sweep(a) => run_sweep_command(a),
        SimCommand::Reproduce(a) => run_reproduce(a),
    }
}

fn run_point(a: RunArgs) -> anyhow::Result<()> {
    let mut config = a.point.config()?;
    if let Some(p) = &a.policy {
        config.policy = SimPolicy::from_name(p)?;
    }
    config.nodes = a.nodes.unwrap_or(config.nodes);
    let workload = a.workload.load_classified(&mut config.costs)?;
    config.validate()?;
    let started = Instant::now();
    let report = simulate(&workload, &config)?;
    let wall = started.elapsed();
    if a.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        println!("{}", report.summary());
    }
    eprintln!(
        "{} requests simulated in {:.2?} ({:.2} M simulated requests/s)",
        report.requests,
        wall,
        report.requests as f64 / wall.as_secs_f64().max(1e-9) / 1e6
    );
    if let Some(dir) = &a.out {
        write_results(dir, std::slice::from_ref(&report))?;
        eprintln!("wrote {}", dir.join("results.json").display());
    }
    Ok(())
}

fn run_sweep_command(a: SweepArgs) -> anyhow::Result<()> {
    if a.policies.is_empty() || a.node_counts.is_empty() {
        bail!("a sweep needs at least one policy and one node count");
    }
    let mut base = a.point.config()?;
    let policies = a.policies.iter().map(|p| SimPolicy::from_name(p)).collect::<Result<Vec<_>, _>>()?;
    let workload = a.workload.load_classified(&mut base.costs)?;
    let spec = SweepSpec { base, policies, node_counts: a.node_counts.clone(), threads: a.threads };
    let started = Instant::now();
    let reports = run_sweep(&workload, &spec, true)?;
    for r in &reports {
        println!("{}", r.summary());
    }
    write_results(&a.out, &reports)?;
    write_plots(&a.out, &reports, &a.title)?;
    let simulated: u64 = reports.iter().map(|r| r.requests).sum();
    eprintln!(
        "{} points in {:.2?} on {} threads ({:.2} M simulated requests/s); wrote results.json, results.csv and plots into {}",
        reports.len(),
        started.elapsed(),
        a.threads,
        simulated as f64 / started.elapsed().as_secs_f64().max(1e-9) / 1e6,
        a.out.display()
    );
    Ok(())
}

fn print_study(out: &StudyOutput, dir: &std::path::Path, wall: std::time::Duration, threads: usize) {
    for c in &out.claims {
        println!("[{}] {} — {}", if c.met { "met" } else { "NOT MET" }, c.statement, c.evidence);
    }
    eprintln!(
        "{} points in {:.2?} on {} threads; wrote {}",
        out.points.len(),
        wall,
        threads,
        describe_outputs(&out.files, dir)
    );
}

fn study_options(a: &ReproduceArgs) -> CsldOptions {
    let mut opts = if a.quick { CsldOptions::quick(&a.out) } else { CsldOptions::full(&a.out) };
    opts.seed = a.seed;
    opts.cpu = a.cpu;
    opts.threads = a.threads;
    opts.durations.warmup_s = a.warmup_s.unwrap_or(opts.durations.warmup_s);
    opts.durations.measure_s = a.measure_s.unwrap_or(opts.durations.measure_s);
    opts
}

fn run_reproduce(a: ReproduceArgs) -> anyhow::Result<()> {
    match a.study {
        Study::Cap => {
            let opts = study_options(&a);
            let started = Instant::now();
            let out = reproduce_cap(&opts)?;
            print_study(&out, &a.out, started.elapsed(), a.threads);
            Ok(())
        }
        Study::Csld => {
            let opts = study_options(&a);
            let started = Instant::now();
            let out = reproduce_csld(&opts)?;
            for c in &TABLE4 {
                if let Some(p) = find_point(&out.points, &c.id.to_string(), "RR") {
                    println!(
                        "case {}: RR CPU utilisation {:.1}% (busiest node {:.1}%)",
                        c.id,
                        p.cpu_utilization * 100.0,
                        p.cpu_utilization_max * 100.0
                    );
                }
            }
            print_study(&out, &a.out, started.elapsed(), a.threads);
            Ok(())
        }
        Study::Sc => run_sc(&a),
        Study::Dc => run_dc(&a),
        Study::Lard => {
            let opts = ReproduceOptions {
                out: a.out.clone(),
                requests: a.requests.unwrap_or(2_000_000),
                seed: a.seed,
                node_counts: a.node_counts.clone().unwrap_or_else(|| (1..=16).collect()),
                threads: a.threads,
                progress: true,
            };
            let started = Instant::now();
            let r = reproduce_lard(&opts)?;
            let wall = started.elapsed();
            for c in &r.claims {
                println!("[{}] {} — {}", if c.met { "met" } else { "NOT MET" }, c.statement, c.evidence);
            }
            let simulated: u64 = r.reports.iter().map(|x| x.requests).sum();
            eprintln!(
                "{} points, {} simulated requests in {:.2?} on {} threads; wrote {}",
                r.reports.len(),
                simulated,
                wall,
                a.threads,
                describe_outputs(&r.files, &a.out)
            );
            Ok(())
        }
    }
}

fn run_dc(a: &ReproduceArgs) -> anyhow::Result<()> {
    let mut opts = if a.quick { DcOptions::quick(&a.out) } else { DcOptions::full(&a.out) };
    opts.scale = a.scale.unwrap_or(opts.scale);
    if let Some(counts) = &a.node_counts {
        opts.servers = (counts.iter())
            .map(|&n| u16::try_from(n).map_err(|_| anyhow::anyhow!("--servers {n} is too many")))
            .collect::<anyhow::Result<_>>()?;
    }
    opts.seed = a.seed;
    opts.threads = a.threads;
    opts.warmup_s = a.warmup_s.unwrap_or(opts.warmup_s);
    opts.measure_s = a.measure_s.unwrap_or(opts.measure_s);
    let r = reproduce_dc(&opts)?;
    for c in &r.claims {
        println!("[{}] {} — {}", if c.met { "met" } else { "NOT MET" }, c.statement, c.evidence);
    }
    eprintln!(
        "{} points in {:.1} s on {} threads; wrote {}",
        r.rows.len(),
        r.wall_s,
        opts.threads,
        describe_outputs(&r.files, &a.out)
    );
    Ok(())
}

fn run_sc(a: &ReproduceArgs) -> anyhow::Result<()> {
    let mut opts = if a.quick { ScOptions::quick(&a.out) } else { ScOptions::full(&a.out) };
    if let Some(scale) = a.scale {
        if !(scale.is_finite() && scale > 0.0) {
            bail!("--scale must be a positive share of the trace, not {scale}");
        }
        opts.requests = ((BERKELEY_REQUESTS as f64 * scale).round() as u64).max(1);
    }
    opts.requests = a.requests.unwrap_or(opts.requests);
    opts.node_counts = a.node_counts.clone().unwrap_or(opts.node_counts);
    opts.seed = a.seed;
    opts.threads = a.threads;
    if let Some(mbps) = a.file_server_mbps {
        if mbps == 0 {
            bail!("--file-server-mbps must be > 0");
        }
        opts.file_server_bps = mbps * 1_000_000;
    }
    let r = reproduce_sc(&opts)?;
    for c in &r.claims {
        println!("[{}] {} — {}", if c.met { "met" } else { "NOT MET" }, c.statement, c.evidence);
    }
    eprintln!(
        "{} points, {} requests each, in {:.1} s on {} threads; wrote {}",
        r.rows.len(),
        opts.requests,
        r.wall_s,
        opts.threads,
        describe_outputs(&r.files, &a.out)
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser, Debug)]
    struct Cli {
        #[command(subcommand)]
        cmd: SimCommand,
    }

    #[test]
    fn cli_parses_run_sweep_and_reproduce() {
        let cli = Cli::try_parse_from([
            "sim",
            "run",
            "--policy",
            "lb-gc",
            "--nodes",
            "4",
            "--rate",
            "500",
            "--cache-mb",
            "8",
            "--replacement",
            "lru",
            "--frontend-limit",
            "none",
        ])
        .unwrap();
        let SimCommand::Run(a) = cli.cmd else { panic!("not run") };
        let c = a.point.config().unwrap();
        assert_eq!(c.arrivals, Arrivals::Poisson { rate: 500.0 });
        assert_eq!(c.cache.capacity_bytes, 8 << 20);
        assert_eq!(c.cache.replacement, Replacement::Lru);
        assert_eq!(c.frontend_limit, FrontEndLimit::None);
        let cli = Cli::try_parse_from([
            "sim",
            "sweep",
            "--policies",
            "wrr,lard",
            "--node-counts",
            "1,2",
            "--out",
            "x",
        ])
        .unwrap();
        let SimCommand::Sweep(a) = cli.cmd else { panic!("not sweep") };
        assert_eq!(a.node_counts, [1, 2]);
        let cli = Cli::try_parse_from(["sim", "reproduce", "lard", "--out", "d"]).unwrap();
        assert!(matches!(cli.cmd, SimCommand::Reproduce(ReproduceArgs { study: Study::Lard, .. })));
        let cli = Cli::try_parse_from([
            "sim",
            "reproduce",
            "sc",
            "--out",
            "d",
            "--scale",
            "0.5",
            "--node-counts",
            "1,12",
        ])
        .unwrap();
        let SimCommand::Reproduce(a) = cli.cmd else { panic!("not reproduce") };
        assert_eq!((a.study, a.scale, a.node_counts), (Study::Sc, Some(0.5), Some(vec![1, 12])));
        assert!(Cli::try_parse_from(["sim", "run", "--clients", "3", "--rate", "5"]).is_err());
    }

    #[test]
    fn sweep_command_writes_results_json_csv_and_plots() {
        let dir = tempfile::tempdir().unwrap();
        let cli = Cli::try_parse_from([
            "sim",
            "sweep",
            "--requests",
            "3000",
            "--documents",
            "300",
            "--policies",
            "wrr,lard-r,lb-gc",
            "--node-counts",
            "1,3",
            "--out",
            dir.path().to_str().unwrap(),
        ])
        .unwrap();
        run(cli.cmd).unwrap();
        let rows: Vec<serde_json::Value> =
            serde_json::from_slice(&std::fs::read(dir.path().join("results.json")).unwrap()).unwrap();
        assert_eq!(rows.len(), 6);
        for row in &rows {
            assert!(row["policy"].is_string() && row["nodes"].is_u64());
            for key in ["rps", "miss_ratio", "idle_ratio", "mean_delay_ms"] {
                assert!(row[key].is_f64(), "{key} in {row}");
            }
        }
        assert_eq!(rows[2]["policy"], "lard-r");
        let csv = std::fs::read_to_string(dir.path().join("results.csv")).unwrap();
        assert_eq!(csv.lines().count(), 7);
        let svg = std::fs::read_to_string(dir.path().join("throughput.svg")).unwrap();
        assert!(
            svg.starts_with("<svg") && svg.contains("LARD/R") && svg.contains("<polyline"),
            "{}",
            &svg[..200]
        );
    }
}
