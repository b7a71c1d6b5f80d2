//! `locus demo`: the lab demo's no-root mode. A small experiment of the same kind as the
//! built-in one (a generated site several times one node's cache, nodes with a disk model,
//! the Locus switch with each policy in turn, `locus load` checking every byte), run by the lab
//! runner on loopback instead of in namespaces, at one node count, printed as one table.

use std::path::Path;
use std::time::Duration;

use anyhow::{Context, bail};
use serde::Serialize;

use crate::experiment::{Experiment, FileSizes, NodeSettings, SwitchKind, SwitchRow, WorkloadSpec};
use crate::runner::{LabOptions, run_experiment_on_loopback};
use locus_rig::{InterruptWatch, ScratchFolder};

/// Settings of a loopback demo run.
#[derive(Clone, Debug)]
pub struct DemoOptions {
    pub files: usize,
    pub nodes: usize,
    pub cache_bytes: u64,
    pub seek_ms: f64,
    pub transfer_mb_s: f64,
    pub clients: usize,
    pub warmup: Duration,
    pub measure: Duration,
    pub zipf_alpha: f64,
    pub policies: Vec<String>,
    pub seed: u64,
}

impl Default for DemoOptions {
    fn default() -> DemoOptions {
        DemoOptions {
            files: 2000,
            nodes: 2,
            cache_bytes: 4 << 20,
            seek_ms: 2.0,
            transfer_mb_s: 40.0,
            clients: 32,
            warmup: Duration::from_secs(3),
            measure: Duration::from_secs(6),
            zipf_alpha: 0.9,
            policies: ["wrr", "hash", "chash-bounded", "lard", "lard-r"].map(String::from).to_vec(),
            seed: 1,
        }
    }
}

/// One policy's result.
#[derive(Clone, Debug, Serialize)]
pub struct DemoRow {
    pub policy: String,
    pub rps: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub hit_ratio: f64,
    /// Share of requests each node served.
    pub shares: Vec<f64>,
    pub errors: u64,
    pub mismatches: u64,
}

/// The experiment of a loopback demo: one node count, one Locus row (two-way, every policy
/// asked for), one Zipf workload over a site of lognormal sizes around 6 KiB.
pub fn loopback_experiment(opts: &DemoOptions) -> Experiment {
    Experiment {
        name: "Locus demo on loopback".into(),
        description: "The lab demo's kind of experiment, small, with every role on 127.0.0.1.".into(),
        nodes: vec![opts.nodes],
        repeat: 1,
        warmup_s: opts.warmup.as_secs_f64(),
        measure_s: opts.measure.as_secs_f64(),
        measure_requests: None,
        node: NodeSettings {
            cache: format!("{}B", opts.cache_bytes),
            cache_policy: "gds".into(),
            max_object: "1MiB".into(),
            storage: Some(format!("seek_ms={},mb_s={},disks=1", opts.seek_ms, opts.transfer_mb_s)),
            cpu: None,
            cpu_limit: None,
            workers: 1,
        },
        switches: vec![SwitchRow {
            kind: SwitchKind::Locus,
            policies: opts.policies.clone(),
            modes: vec!["proxy".into()],
            workers: 1,
            splice_min_bytes: None,
            rehandoff: None,
            workloads: Vec::new(),
            policy_params: None,
            coop: None,
            dc_quota: None,
            dc_balance_ms: None,
            class_cost_scale: None,
            haproxy: None,
        }],
        workloads: vec![WorkloadSpec {
            alpha: opts.zipf_alpha,
            clients: opts.clients,
            seed: opts.seed,
            sizes: FileSizes {
                median_bytes: 6 * 1024,
                sigma: 1.0,
                tail_share: 0.0,
                min_bytes: 200,
                max_bytes: 256 * 1024,
                ..FileSizes::default()
            },
            ..WorkloadSpec::new("zipf", opts.files.try_into().unwrap_or(u32::MAX))
        }],
    }
}

/// Run the demo on loopback with `locus` as the nodes' and the switch's executable;
/// `progress` gets the lab runner's lines (one as each policy finishes).
pub fn run_demo(
    opts: &DemoOptions,
    locus: &Path,
    mut progress: impl FnMut(&str),
) -> anyhow::Result<Vec<DemoRow>> {
    let experiment = loopback_experiment(opts);
    progress(&format!(
        "{} nodes with {:.1} MiB caches each; disk model {} ms + {} MB/s; {} clients; {} s warm-up + {} s measured per policy",
        opts.nodes,
        opts.cache_bytes as f64 / (1 << 20) as f64,
        opts.seek_ms,
        opts.transfer_mb_s,
        opts.clients,
        opts.warmup.as_secs_f64(),
        opts.measure.as_secs_f64()
    ));
    let out = ScratchFolder::new("demo")?;
    let options =
        LabOptions { locus: locus.to_path_buf(), out_dir: out.path().to_path_buf(), site_dir: None };
    let run = run_experiment_on_loopback(&experiment, &options, &mut |line| progress(line))?;
    if let Some(e) = run.error {
        return Err(e).context("the loopback demo did not measure every policy");
    }
    Ok(run.report.points.iter().map(|p| row(&p.policy, p)).collect())
}

fn row(policy: &str, p: &crate::results::PointResult) -> DemoRow {
    let total = p.node_requests.iter().sum::<u64>().max(1);
    DemoRow {
        policy: policy.to_string(),
        rps: p.rps,
        p50_ms: p.p50_ms,
        p99_ms: p.p99_ms,
        hit_ratio: p.hit_ratio,
        shares: p.node_requests.iter().map(|&n| n as f64 / total as f64).collect(),
        errors: p.errors,
        mismatches: p.mismatches,
    }
}

/// The result table in Markdown.
pub fn demo_table(rows: &[DemoRow]) -> String {
    let mut out = String::from(
        "| policy | req/s | p50 ms | p99 ms | hit ratio | load shares | errors | mismatches |\n|---|---|---|---|---|---|---|---|\n",
    );
    for r in rows {
        let shares: Vec<String> = r.shares.iter().map(|s| format!("{:.0}%", s * 100.0)).collect();
        out.push_str(&format!(
            "| {} | {:.0} | {:.2} | {:.2} | {:.3} | {} | {} | {} |\n",
            r.policy,
            r.rps,
            r.p50_ms,
            r.p99_ms,
            r.hit_ratio,
            shares.join(" / "),
            r.errors,
            r.mismatches
        ));
    }
    let rps = |p: &str| rows.iter().find(|r| r.policy == p).map(|r| r.rps);
    if let (Some(l), Some(w)) = (rps("lard-r"), rps("wrr"))
        && w > 0.0
    {
        out.push_str(&format!("\nLARD/R throughput is {:.2}× WRR's on this workload.\n", l / w));
    }
    out
}

/// Flags of `locus demo`.
#[derive(clap::Args, Debug)]
pub struct LoopbackDemoArgs {
    /// Print the results as JSON.
    #[arg(long)]
    pub json: bool,
    /// Files in the generated site.
    #[arg(long, default_value_t = 2000)]
    pub files: usize,
    /// Back-end nodes.
    #[arg(long, default_value_t = 2)]
    pub nodes: usize,
    /// Cache per node in MiB.
    #[arg(long, default_value_t = 4)]
    pub cache_mib: u64,
    /// Closed-loop clients.
    #[arg(long, default_value_t = 32)]
    pub clients: usize,
    /// Measured seconds per policy (after a warm-up of half as long).
    #[arg(long, default_value_t = 6)]
    pub seconds: u64,
    /// Policies to compare, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "wrr,hash,chash-bounded,lard,lard-r")]
    pub policies: Vec<String>,
    /// Seed of the site and the load.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
}

/// Run `locus demo`: the nodes and the switch run this executable.
pub fn run_loopback_demo_command(a: LoopbackDemoArgs) -> anyhow::Result<()> {
    // First, before any other thread starts: on Ctrl-C or SIGTERM the servers and the
    // generated site go too.
    let _watch = InterruptWatch::install()?;
    for p in &a.policies {
        locus_policy::PolicyConfig::from_name(p)?;
    }
    if a.nodes == 0 || a.files == 0 || a.clients == 0 || a.seconds == 0 {
        bail!("--nodes, --files, --clients and --seconds must be at least 1");
    }
    let opts = DemoOptions {
        files: a.files,
        nodes: a.nodes,
        cache_bytes: a.cache_mib << 20,
        clients: a.clients,
        warmup: Duration::from_millis(a.seconds * 500),
        measure: Duration::from_secs(a.seconds),
        policies: a.policies,
        seed: a.seed,
        ..DemoOptions::default()
    };
    let locus = std::env::current_exe().context("locating the locus executable")?;
    let rows = run_demo(&opts, &locus, |line| eprintln!("{line}"))?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&rows)?);
    } else {
        print!("{}", demo_table(&rows));
    }
    let bad: u64 = rows.iter().map(|r| r.errors + r.mismatches).sum();
    if bad > 0 {
        bail!("{bad} requests failed or returned wrong bytes");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_loopback_experiment_has_one_node_count_and_every_policy_two_way() {
        let opts =
            DemoOptions { nodes: 3, policies: vec!["wrr".into(), "lard-r".into()], ..DemoOptions::default() };
        let e = loopback_experiment(&opts);
        assert_eq!(e.nodes, [3]);
        assert_eq!(e.points().len(), 2);
        assert!(e.points().iter().all(|p| p.switch == SwitchKind::Locus && p.mode == "proxy"));
        assert_eq!(e.node.cache_bytes(), Some(4 << 20));
        assert_eq!((e.warmup_s, e.measure_s), (3.0, 6.0));
        assert!(e.validate().is_ok(), "{:?}", e.validate());
    }

    #[test]
    fn the_table_gives_shares_and_the_lard_r_to_wrr_ratio() {
        let row = |policy: &str, rps| DemoRow {
            policy: policy.into(),
            rps,
            p50_ms: 1.0,
            p99_ms: 2.0,
            hit_ratio: 0.5,
            shares: vec![0.25, 0.75],
            errors: 0,
            mismatches: 0,
        };
        let table = demo_table(&[row("wrr", 100.0), row("lard-r", 250.0)]);
        assert!(table.contains("| wrr | 100 | 1.00 | 2.00 | 0.500 | 25% / 75% | 0 | 0 |"), "{table}");
        assert!(table.contains("LARD/R throughput is 2.50× WRR's"), "{table}");
    }
}
