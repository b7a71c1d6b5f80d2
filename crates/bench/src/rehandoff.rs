//! `locus bench rehandoff`: multiple handoff on persistent connections against back-end
//! forwarding, in the lab with two nodes behind a handoff switch (policy `hash`): keep-alive
//! clients whose consecutive requests alternate between targets on different nodes; beside
//! them, the same requests on a fresh connection each and through the proxy-mode switch.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, bail};
use locus_load::{LoadConfig, TraceSource, Verification, Workload};
use serde::Serialize;

use crate::lab_rig::{
    Rig, RigArgs, failure_note, failures, file_content, json_lines, parse_size, size_label,
};

/// A configuration measured: how the cluster runs and how clients connect.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Setup {
    pub name: &'static str,
    /// Switch mode.
    pub mode: &'static str,
    /// Nodes' `--handoff-rehandoff`.
    pub rehandoff: Option<&'static str>,
    pub keepalive: bool,
}

/// Every configuration, in table order.
pub const SETUPS: [Setup; 4] = [
    Setup { name: "handoff", mode: "handoff", rehandoff: Some("handoff"), keepalive: true },
    Setup { name: "forward", mode: "handoff", rehandoff: Some("forward"), keepalive: true },
    Setup { name: "handoff-close", mode: "handoff", rehandoff: Some("handoff"), keepalive: false },
    Setup { name: "proxy", mode: "proxy", rehandoff: None, keepalive: true },
];

/// Flags of `locus bench rehandoff`.
#[derive(clap::Args, Debug)]
pub struct RehandoffArgs {
    /// Print one JSON object per configuration and size.
    #[arg(long)]
    pub json: bool,
    /// File sizes, comma-separated: bytes, or with a binary suffix (`k`, `m`).
    #[arg(long, value_delimiter = ',', default_value = "1k,64k", value_parser = parse_size)]
    pub sizes: Vec<u64>,
    /// Configurations, comma-separated: handoff (the connection moves), forward (the node
    /// fetches from the other node), handoff-close (a connection per request), proxy.
    #[arg(long, value_delimiter = ',', default_value = "handoff,forward,handoff-close,proxy")]
    pub setups: Vec<String>,
    /// Closed-loop clients.
    #[arg(long, default_value_t = 16)]
    pub clients: usize,
    /// Targets per node: each client alternates between a target of node 1 and one of node 2.
    #[arg(long, default_value_t = 16)]
    pub targets: usize,
    #[command(flatten)]
    pub rig: RigArgs,
}

/// One configuration at one size.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RehandoffRow {
    /// Always `rehandoff`.
    pub bench: String,
    pub setup: String,
    pub size: u64,
    pub keepalive: bool,
    pub clients: usize,
    /// Responses per second over the measured time.
    pub rps: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    /// CPU of the switch process over the measured run ÷ responses.
    pub switch_cpu_us_per_req: f64,
    /// CPU of both node processes over the measured run ÷ responses.
    pub node_cpu_us_per_req: f64,
    /// Busy time of the whole machine over the measured run ÷ responses (load generator,
    /// kernel network work and any other job included).
    pub host_cpu_us_per_req: f64,
    /// Requests that crossed nodes on a connection (the nodes' re-handoffs plus back-end
    /// forwards) per 100 responses.
    pub cross_node_pct: f64,
    /// Failed requests (connect, reset, timeout, framing, 4xx, 5xx) plus responses with wrong
    /// bytes.
    pub errors: u64,
}

/// Look a configuration up by name.
pub fn setup(name: &str) -> anyhow::Result<Setup> {
    SETUPS.iter().copied().find(|s| s.name == name).with_context(|| {
        let names: Vec<&str> = SETUPS.iter().map(|s| s.name).collect();
        format!("unknown configuration {name:?} ({})", names.join(", "))
    })
}

/// The Markdown table: a row per size and configuration, with throughput and CPU per request
/// beside the `handoff` configuration's at the same size.
pub fn markdown_table(rows: &[RehandoffRow]) -> String {
    let mut out = String::from(
        "| size | setup | keep-alive | req/s | ÷ handoff | p50 (ms) | p99 (ms) | switch CPU (µs/req) | node CPU (µs/req) | node CPU ÷ handoff | host CPU (µs/req) | crossed (%) | errors |\n\
         |---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    let mut sizes: Vec<u64> = rows.iter().map(|r| r.size).collect();
    sizes.sort_unstable();
    sizes.dedup();
    let order = |s: &str| SETUPS.iter().position(|x| x.name == s).unwrap_or(SETUPS.len());
    let ratio = |a: f64, b: Option<f64>| match b {
        Some(b) if b > 0.0 => format!("{:.2}", a / b),
        _ => "—".to_string(),
    };
    for size in sizes {
        let mut at: Vec<&RehandoffRow> = rows.iter().filter(|r| r.size == size).collect();
        at.sort_by_key(|r| order(&r.setup));
        let base = at.iter().find(|r| r.setup == "handoff");
        for r in &at {
            let _ = writeln!(
                out,
                "| {} | {} | {} | {:.0} | {} | {:.2} | {:.2} | {:.1} | {:.1} | {} | {:.0} | {:.0} | {} |",
                size_label(r.size),
                r.setup,
                if r.keepalive { "on" } else { "off" },
                r.rps,
                ratio(r.rps, base.map(|b| b.rps)),
                r.p50_ms,
                r.p99_ms,
                r.switch_cpu_us_per_req,
                r.node_cpu_us_per_req,
                ratio(r.node_cpu_us_per_req, base.map(|b| b.node_cpu_us_per_req)),
                r.host_cpu_us_per_req,
                r.cross_node_pct,
                r.errors
            );
        }
    }
    out
}

/// The output: JSON lines, or the Markdown table.
pub fn render(rows: &[RehandoffRow], json: bool) -> anyhow::Result<String> {
    if json { json_lines(rows) } else { Ok(markdown_table(rows)) }
}

/// JSON-lines trace whose client `k` asks `first[k]` then `second[k]`: replayed as sessions
/// on keep-alive connections, every request goes to the other node than the one before.
pub fn alternating_trace(first: &[String], second: &[String], size: u64) -> String {
    let mut out = String::new();
    for (k, (a, b)) in first.iter().zip(second).enumerate() {
        for target in [a, b] {
            let record = serde_json::json!({
                "client": k, "method": "GET", "target": target, "size": size, "status": 200
            });
            out.push_str(&record.to_string());
            out.push('\n');
        }
    }
    out
}

/// Sum of a counter over node statuses.
fn node_counter(statuses: &[serde_json::Value], name: &str) -> u64 {
    statuses.iter().filter_map(|s| s[name].as_u64()).sum()
}

/// Files of one size: `root/<label>/f<i>`, `4 × targets` of them (targets per node are then
/// picked by asking the cluster).
fn write_files(root: &Path, size: u64, count: usize) -> anyhow::Result<Vec<String>> {
    let label = size_label(size);
    std::fs::create_dir_all(root.join(&label))?;
    let mut targets = Vec::with_capacity(count);
    for i in 0..count {
        let rel = format!("{label}/f{i:03}");
        std::fs::write(root.join(&rel), file_content(&rel, size as usize))?;
        targets.push(format!("/{rel}"));
    }
    Ok(targets)
}

/// Split `targets` by the node that serves them and pair `per_node` of node 1's with node 2's.
fn split_by_node(
    rig: &Rig,
    targets: &[String],
    per_node: usize,
) -> anyhow::Result<(Vec<String>, Vec<String>)> {
    let (mut one, mut two) = (Vec::new(), Vec::new());
    for t in targets {
        match rig.node_of(t)?.as_str() {
            "node1" => one.push(t.clone()),
            "node2" => two.push(t.clone()),
            other => bail!("{t} served by {other:?}"),
        }
    }
    let n = one.len().min(two.len()).min(per_node);
    if n == 0 {
        bail!("the policy put every target on one node ({} on node1, {} on node2)", one.len(), two.len());
    }
    one.truncate(n);
    two.truncate(n);
    Ok((one, two))
}

/// Check the flags.
fn validate(a: &RehandoffArgs) -> anyhow::Result<Vec<Setup>> {
    if a.sizes.is_empty() || a.setups.is_empty() || a.clients == 0 || a.targets == 0 {
        bail!("--sizes, --setups, --clients and --targets must not be empty or 0");
    }
    a.rig.validate()?;
    a.setups.iter().map(|s| setup(s)).collect()
}

/// Run every configuration at every size; `progress` gets a line per point.
pub fn run_rehandoff(a: &RehandoffArgs, mut progress: impl FnMut(&str)) -> anyhow::Result<Vec<RehandoffRow>> {
    let setups = validate(a)?;
    let locus = a.rig.locus()?;
    let site = locus_rig::ScratchFolder::new("rehandoff-site")?;
    let mut candidates = Vec::new();
    for &size in &a.sizes {
        candidates.push(write_files(site.path(), size, 4 * a.targets)?);
    }
    let mut rig = Rig::new(&locus, site.path(), a.rig.keep.as_deref())?;
    let config = |s: &Setup| a.rig.cluster(s.mode, "hash", s.rehandoff);
    // `hash` is a static partition of the targets: ask a cluster once where each one goes.
    rig.start(&config(&SETUPS[0]))?;
    let mut traces: Vec<PathBuf> = Vec::new();
    for (&size, targets) in a.sizes.iter().zip(&candidates) {
        let (one, two) = split_by_node(&rig, targets, a.targets)?;
        let path = site.path().join(format!("trace-{}.jsonl", size_label(size)));
        std::fs::write(&path, alternating_trace(&one, &two, size))?;
        traces.push(path);
    }
    let mut rows = Vec::new();
    for (i, (&size, trace)) in a.sizes.iter().zip(&traces).enumerate() {
        for s in crate::clubweb::rotated(&setups, i) {
            rig.start(&config(&s)).with_context(|| format!("starting the {} cluster", s.name))?;
            let load = LoadConfig {
                targets: vec![rig.url("/")?],
                workload: Workload::Trace {
                    source: TraceSource::File { path: trace.clone(), format: None },
                    repeat: true,
                },
                // On keep-alive connections a session is a pair; they follow one another.
                sessions: s.keepalive,
                clients: a.clients,
                keepalive: s.keepalive,
                duration: Some(Duration::from_secs_f64(a.rig.duration)),
                threads: a.rig.load_threads,
                // Shorter than the measured time: a request that stalls counts as an error.
                timeout: Duration::from_secs(2),
                verification: Verification::Root(site.path().to_path_buf()),
                mismatch_samples: 3,
                ..LoadConfig::default()
            };
            let warmup = (a.rig.warmup > 0.0).then(|| LoadConfig {
                duration: Some(Duration::from_secs_f64(a.rig.warmup)),
                ..load.clone()
            });
            let label = format!("{} at {}", s.name, size_label(size));
            if let Some(w) = &warmup {
                rig.load(w).with_context(|| format!("{label}: warm-up"))?;
            }
            let nodes_before = rig.node_statuses()?;
            let (report, cpu) = rig.measure(None, &load).with_context(|| label.clone())?;
            let nodes_after = rig.node_statuses()?;
            let crossed = ["rehandoffs", "backend_forwards"]
                .iter()
                .map(|c| node_counter(&nodes_after, c).saturating_sub(node_counter(&nodes_before, c)))
                .sum::<u64>();
            let row = RehandoffRow {
                bench: "rehandoff".into(),
                setup: s.name.into(),
                size,
                keepalive: s.keepalive,
                clients: a.clients,
                rps: report.rps,
                p50_ms: report.p50_ms,
                p99_ms: report.p99_ms,
                switch_cpu_us_per_req: cpu.switch,
                node_cpu_us_per_req: cpu.nodes,
                host_cpu_us_per_req: cpu.host,
                cross_node_pct: if report.requests > 0 {
                    crossed as f64 * 100.0 / report.requests as f64
                } else {
                    0.0
                },
                errors: failures(&report),
            };
            progress(&format!(
                "rehandoff {label}: {:.0} req/s, p50 {:.2} ms, p99 {:.2} ms, switch {:.1} µs/req, nodes {:.1} µs/req, host {:.0} µs/req, crossed {:.0}%, {} errors{}",
                row.rps,
                row.p50_ms,
                row.p99_ms,
                row.switch_cpu_us_per_req,
                row.node_cpu_us_per_req,
                row.host_cpu_us_per_req,
                row.cross_node_pct,
                row.errors,
                failure_note(&report)
            ));
            rows.push(row);
        }
    }
    drop(rig);
    Ok(rows)
}

/// `locus bench rehandoff`.
pub fn run(a: RehandoffArgs) -> anyhow::Result<()> {
    let rows = run_rehandoff(&a, |line| eprintln!("{line}"))?;
    print!("{}", render(&rows, a.json)?);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(setup: &str, size: u64, rps: f64, node_cpu: f64) -> RehandoffRow {
        RehandoffRow {
            bench: "rehandoff".into(),
            setup: setup.into(),
            size,
            keepalive: setup != "handoff-close",
            clients: 16,
            rps,
            p50_ms: 1.5,
            p99_ms: 4.0,
            switch_cpu_us_per_req: 12.5,
            node_cpu_us_per_req: node_cpu,
            host_cpu_us_per_req: 300.0,
            cross_node_pct: 100.0,
            errors: 0,
        }
    }

    #[test]
    fn json_lines_carry_every_field() {
        let text = render(&[row("forward", 1024, 3000.0, 50.0)], true).unwrap();
        assert_eq!(
            text.trim_end(),
            r#"{"bench":"rehandoff","setup":"forward","size":1024,"keepalive":true,"clients":16,"rps":3000.0,"p50_ms":1.5,"p99_ms":4.0,"switch_cpu_us_per_req":12.5,"node_cpu_us_per_req":50.0,"host_cpu_us_per_req":300.0,"cross_node_pct":100.0,"errors":0}"#
        );
    }

    #[test]
    fn table_orders_setups_per_size_with_ratios_to_handoff() {
        let rows = [
            row("proxy", 65536, 1000.0, 10.0),
            row("forward", 1024, 3000.0, 50.0),
            row("handoff", 1024, 2000.0, 100.0),
            row("handoff-close", 1024, 1000.0, 80.0),
        ];
        let table = markdown_table(&rows);
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(lines.len(), 6, "{table}");
        assert!(lines[2].starts_with("| 1k | handoff | on | 2000 | 1.00 |"), "{table}");
        assert!(
            lines[3].starts_with("| 1k | forward | on | 3000 | 1.50 |")
                && lines[3].contains("| 50.0 | 0.50 |")
        );
        assert!(lines[4].starts_with("| 1k | handoff-close | off | 1000 | 0.50 |"), "{table}");
        assert!(lines[5].starts_with("| 64k | proxy | on | 1000 | — |"), "{table}");
    }

    #[test]
    fn trace_pairs_targets_of_the_two_nodes_per_client() {
        let one = vec!["/a".to_string(), "/b".to_string()];
        let two = vec!["/x".to_string(), "/y".to_string(), "/z".to_string()];
        let text = alternating_trace(&one, &two, 10);
        let records: Vec<serde_json::Value> =
            text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        let got: Vec<(u64, &str)> =
            records.iter().map(|r| (r["client"].as_u64().unwrap(), r["target"].as_str().unwrap())).collect();
        assert_eq!(got, [(0, "/a"), (0, "/x"), (1, "/b"), (1, "/y")]);
        assert!(records.iter().all(|r| r["method"] == "GET" && r["size"] == 10));
    }

    #[test]
    fn setups_are_found_by_name() {
        assert_eq!(setup("forward").unwrap().rehandoff, Some("forward"));
        assert!(!setup("handoff-close").unwrap().keepalive);
        assert!(setup("bounce").unwrap_err().to_string().contains("handoff, forward, handoff-close, proxy"));
    }
}
