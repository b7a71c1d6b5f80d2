//! `locus lab`: `run EXPERIMENT.toml`, `demo` and `clean` on the command line — SIGINT and
//! SIGTERM handled first (teardown, then a non-zero exit), progress on standard error, the
//! report folder (`lab-out/<timestamp>` by default), and `--json` printing `results.json`.

use std::path::PathBuf;

use anyhow::Context;

use crate::demo::{checks_markdown, demo_checks};
use crate::demo::{demo_experiment, tuning_note};
use crate::error::LabError;
use crate::experiment::Experiment;
use crate::report::LabReport;
use crate::runner::{LabOptions, run_experiment};
use crate::utc_time::UtcTime;
use locus_rig::InterruptWatch;
use locus_rig::clean_stale_labs;

/// `locus lab` subcommands.
#[derive(clap::Subcommand, Debug)]
pub enum LabCommand {
    /// Run an experiment file: build the namespace cluster, measure every point, write the
    /// report (report.md, results.json, SVG plots).
    Run(RunArgs),
    /// The built-in demo: four workloads (zipf on disk-bound nodes, a moving hot spot, a
    /// dynamic mix, cooperative caching) behind Locus and every configuration of HAProxy and
    /// NGINX in the tuning budget, three seeds each (about 14 minutes; `--full`: five seeds).
    Demo(DemoArgs),
    /// Remove namespaces and bridges left behind by a lab run that was killed.
    Clean,
}

/// Flags shared by `run` and `demo`.
#[derive(clap::Args, Debug)]
pub struct OutputArgs {
    /// Report folder (default: lab-out/<UTC timestamp>).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Also print results.json on standard output.
    #[arg(long)]
    pub json: bool,
    /// The locus executable for nodes and switches (default: this one).
    #[arg(long, value_name = "FILE")]
    pub locus: Option<PathBuf>,
    /// Generate the sites here (default: a temporary folder, removed afterwards).
    #[arg(long, value_name = "DIR")]
    pub site_dir: Option<PathBuf>,
}

/// Flags of `locus lab run`.
#[derive(clap::Args, Debug)]
pub struct RunArgs {
    /// The experiment file (TOML).
    #[arg(value_name = "EXPERIMENT.toml")]
    pub experiment: PathBuf,
    #[command(flatten)]
    pub output: OutputArgs,
}

/// Flags of `locus lab demo`.
#[derive(clap::Args, Debug)]
pub struct DemoArgs {
    #[command(flatten)]
    pub output: OutputArgs,
    /// Run every workload at five seeds instead of three (about 25 minutes): the run the
    /// README's headline comes from.
    #[arg(long)]
    pub full: bool,
    /// Run every workload at every node count (1 to 4), not only at 4 (about four times as long).
    #[arg(long)]
    pub every_node_count: bool,
}

/// Seeds per workload of `locus lab demo --full`.
pub const FULL_RUNS: u32 = 5;

/// Run a `locus lab` subcommand.
pub fn run(cmd: LabCommand) -> anyhow::Result<()> {
    match cmd {
        LabCommand::Run(a) => {
            let experiment = Experiment::from_file(&a.experiment)?;
            run_and_report(experiment, a.output, false)
        }
        LabCommand::Demo(a) => {
            let experiment = demo_experiment()?;
            let experiment = if a.full { experiment.with_at_least_runs(FULL_RUNS) } else { experiment };
            let experiment = if a.every_node_count { experiment.with_every_node_count() } else { experiment };
            run_and_report(experiment, a.output, true)
        }
        LabCommand::Clean => {
            let r = clean_stale_labs()?;
            for n in &r.namespaces {
                println!("removed namespace {n}");
            }
            for b in &r.bridges {
                println!("removed bridge {b}");
            }
            for f in &r.folders {
                println!("removed folder {}", f.display());
            }
            for c in &r.cgroups {
                println!("removed cgroup {}", c.display());
            }
            for n in &r.in_use {
                println!("left {n}: its lab is still running");
            }
            if r.namespaces.is_empty() && r.bridges.is_empty() && r.folders.is_empty() && r.cgroups.is_empty()
            {
                println!("nothing to clean");
            }
            Ok(())
        }
    }
}

fn run_and_report(experiment: Experiment, output: OutputArgs, demo: bool) -> anyhow::Result<()> {
    // First, before any other thread starts: every thread then has the signals blocked.
    let _watch = InterruptWatch::install()?;
    let json = output.json;
    let report = run_to_report(experiment, output, demo)?;
    if json {
        println!("{}", report.results_json());
    }
    Ok(())
}

/// Run `experiment` as `locus lab run` does (or `demo`, with its checks): progress on standard
/// error, the report written into the output folder; the report back. An error when a point
/// could not be measured (the report of the others is written first) or, for the demo, when a
/// check failed. The caller installs `locus_rig::InterruptWatch` first.
pub fn run_to_report(experiment: Experiment, output: OutputArgs, demo: bool) -> anyhow::Result<LabReport> {
    let out = output.out.unwrap_or_else(|| PathBuf::from("lab-out").join(UtcTime::now().compact()));
    let locus = match output.locus {
        Some(p) => p,
        None => std::env::current_exe().context("locating the locus executable")?,
    };
    eprintln!(
        "locus lab: {} — {} points; report in {}",
        experiment.name,
        experiment.points().len(),
        out.display()
    );
    let options = LabOptions { locus, out_dir: out.clone(), site_dir: output.site_dir };
    let run = run_experiment(&experiment, &options, &mut |line| eprintln!("{line}"))?;
    let mut report = run.report;
    let mut failed_checks = Vec::new();
    if demo {
        report.notes.push(tuning_note(&report));
        let checks = demo_checks(&report);
        failed_checks = checks.iter().filter(|c| c.failed()).map(|c| c.name.clone()).collect();
        for c in &checks {
            let verdict = match c.met {
                Some(true) => "met",
                Some(false) => "NOT MET",
                None => "not measured",
            };
            let kind = if c.target { "target" } else { "check" };
            eprintln!("{kind}: {} — {verdict} ({})", c.name, c.detail);
        }
        report.notes.push(checks_markdown(&checks));
    }
    report.write(&out)?;
    eprintln!("report: {} ({:.0} s)", out.join("report.md").display(), report.wall_s);
    if let Some(e) = run.error {
        let what = match e {
            LabError::PointsFailed { .. } => "the lab run did not measure every point",
            _ => "the lab run stopped early",
        };
        return Err(e).context(format!("{what}; the report of what was measured is in {}", out.display()));
    }
    if !failed_checks.is_empty() {
        anyhow::bail!(
            "{} of the demo's checks failed (not met or not measured): {}",
            failed_checks.len(),
            failed_checks.join("; ")
        );
    }
    Ok(report)
}
