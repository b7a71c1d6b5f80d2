//! The simulator's twin of a lab workload: the same files (the site's manifest), the same Zipf
//! popularity over them in the same order, the same node count, caches, disk and CPU models,
//! run through `locus-sim` for each Locus row the lab ran, so that a report can set the lab's
//! throughput ratios beside the simulator's prediction for the same workload.

use locus_node_config::{ByteSize, CpuModelConfig, Replacement, StorageConfig};
use locus_sim::{Arrivals, CacheModel, SimConfig, SimPolicy, Workload};
use locus_trace::{DocumentFile, DocumentSizes, SiteManifest, ZipfTraceSpec};

use crate::error::LabError;
use crate::experiment::{Experiment, NodeSettings, SwitchKind, WorkloadSpec};
use crate::results::PointResult;
use crate::site::LabSite;

/// Requests the twin simulates per strategy (the first third warm the caches).
pub const TWIN_REQUESTS: u64 = 300_000;

/// One lab row and what the simulator predicts for it.
#[derive(Clone, Debug, PartialEq)]
pub struct TwinPoint {
    /// The lab's policy label (`rr`, `rr+cf-lru`, `lard-r`) and mode.
    pub policy: String,
    pub mode: String,
    /// The simulator's strategy it stands for (`rr`, `cf-lru`, `sc`, `lard-r`).
    pub strategy: String,
    pub rps: f64,
    /// Requests served from the serving node's own memory.
    pub local_hit: f64,
    /// Requests served from another node's memory.
    pub remote_hit: f64,
}

/// The simulator's strategy for a Locus row (policy label as the lab names it, mode), and the
/// replacement its nodes use; `None` for a row the simulator has no model of.
pub fn strategy_of(
    policy: &str,
    mode: &str,
    workload_replacement: Replacement,
) -> Option<(String, Replacement)> {
    if let Some((_, replacement)) = policy.split_once("+cf-") {
        let r: Replacement = replacement.parse().ok()?;
        return Some((format!("cf-{replacement}"), r));
    }
    match (policy, mode) {
        // Socket cloning: the forwarder picks the entry node, the policy the node that serves.
        ("hash", "l4") => Some(("sc".into(), Replacement::Lru)),
        (_, "proxy" | "handoff") => Some((policy.to_string(), workload_replacement)),
        _ => None,
    }
}

/// The twin's configuration of one strategy: the lab's nodes as the simulator models them.
/// Clients keep their connections (as the lab's load generator does), so connection costs are
/// left out; the CPU model's request and per-KiB costs go to the simulated CPU.
pub fn twin_config(
    strategy: &str,
    replacement: Replacement,
    node: &NodeSettings,
    nodes: usize,
    clients: usize,
    seed: u64,
) -> Result<SimConfig, LabError> {
    let bad = |message: String| LabError::Point { point: format!("simulator twin ({strategy})"), message };
    let policy = SimPolicy::from_name(strategy).map_err(|e| bad(e.to_string()))?;
    let mut config = SimConfig { policy, nodes: nodes as u32, seed, ..SimConfig::lard98() };
    let size = |s: &str| s.parse::<ByteSize>().map(|b| b.0).map_err(|e| bad(e.to_string()));
    config.cache = CacheModel {
        capacity_bytes: size(&node.cache)?,
        replacement,
        max_object_bytes: Some(size(&node.max_object)?),
        gds_cost: 1.0,
    };
    let storage = match &node.storage {
        Some(s) => s.parse::<StorageConfig>().map_err(|e| bad(e.to_string()))?,
        None => StorageConfig { seek_ms: 0.0, transfer_mb_s: 1e6, disks: 1 },
    };
    let costs = &mut config.costs;
    costs.disk_latency_ns = (storage.seek_ms * 1e6) as u64;
    costs.disk_per_4k_ns = (4096.0 * 1e3 / storage.transfer_mb_s) as u64;
    costs.disk_seek_block_bytes = 0;
    costs.disk_extra_seek_ns = 0;
    config.disks = storage.disks as u32;
    let cpu = match &node.cpu {
        Some(c) => c.parse::<CpuModelConfig>().map_err(|e| bad(e.to_string()))?,
        None => CpuModelConfig { conn_us: 0.0, request_us: 0.0, kb_us: 0.0, cpus: 1 },
    };
    costs.conn_setup_ns = 0;
    costs.conn_teardown_ns = 0;
    costs.request_cpu_ns = (cpu.request_us * 1e3) as u64;
    costs.transmit_per_512_ns = (cpu.kb_us * 1e3 / 2.0) as u64;
    config.arrivals = Arrivals::Closed { clients: Some(clients as u32) };
    Ok(config)
}

/// The request stream of `workload` over `site`: Zipf α over the manifest's files in the
/// popularity order the load generator gives them (same seed), without its hot set or
/// dynamic requests.
pub fn twin_workload(workload: &WorkloadSpec, site: &LabSite, requests: u64) -> Result<Workload, LabError> {
    let manifest = SiteManifest::load(&site.manifest())
        .map_err(|e| LabError::io(site.manifest(), std::io::Error::other(e.to_string())))?;
    let files = manifest
        .files
        .iter()
        .map(|f| DocumentFile {
            target: f.target.clone(),
            path: f.target.clone().into(),
            size: f.size,
            mtime: 0,
        })
        .collect();
    let spec = ZipfTraceSpec {
        seed: workload.seed,
        requests,
        documents: 0,
        alpha: workload.alpha,
        sizes: DocumentSizes::Files(files),
        ..ZipfTraceSpec::default()
    };
    Workload::synthetic(spec).map_err(|e| LabError::Point {
        point: format!("simulator twin of `{}`", workload.name),
        message: e.to_string(),
    })
}

/// Simulate every Locus row the lab ran on `workload` at `nodes` nodes; `rows` are the lab's
/// (switch, policy label, mode). Rows the simulator has no model of are left out. Each
/// strategy runs `requests` requests, the first third warming the caches.
pub fn simulate_twin(
    workload: &WorkloadSpec,
    node: &NodeSettings,
    site: &LabSite,
    nodes: usize,
    rows: &[(SwitchKind, String, String)],
    requests: u64,
) -> Result<Vec<TwinPoint>, LabError> {
    let trace = twin_workload(workload, site, requests)?;
    let replacement: Replacement = node.cache_policy.parse().unwrap_or(Replacement::Lru);
    let mut out = Vec::new();
    for (switch, policy, mode) in rows {
        if *switch != SwitchKind::Locus {
            continue;
        }
        let Some((strategy, r)) = strategy_of(policy, mode, replacement) else { continue };
        let mut config = twin_config(&strategy, r, node, nodes, workload.clients, workload.seed)?;
        config.warmup_requests = requests / 3;
        let report = locus_sim::simulate(&trace, &config).map_err(|e| LabError::Point {
            point: format!("simulator twin ({strategy})"),
            message: e.to_string(),
        })?;
        out.push(TwinPoint {
            policy: policy.clone(),
            mode: mode.clone(),
            strategy,
            rps: report.rps,
            local_hit: report.hit_ratio,
            remote_hit: report.remote_hit_ratio,
        });
    }
    Ok(out)
}

/// A row's lab numbers: the medians over its runs (seeds).
struct LabRow {
    rps: f64,
    hit_ratio: f64,
    remote_hit_ratio: f64,
}

/// The lab's points of one workload at `nodes` nodes beside the twin's prediction, as a
/// Markdown section: throughput and hit ratios (the lab's the median over its runs), each row
/// also as a ratio to round robin's (`rr`), and how far the lab's ratios are from the
/// simulator's.
pub fn twin_markdown(workload: &str, nodes: usize, lab: &[&PointResult], twin: &[TwinPoint]) -> String {
    let find = |policy: &str, mode: &str| {
        let runs: Vec<&&PointResult> = lab.iter().filter(|p| p.policy == policy && p.mode == mode).collect();
        let med = |f: fn(&PointResult) -> f64| crate::report::median(runs.iter().map(|p| f(p)));
        (!runs.is_empty()).then(|| LabRow {
            rps: med(|p| p.rps),
            hit_ratio: med(|p| p.hit_ratio),
            remote_hit_ratio: med(|p| p.remote_hit_ratio),
        })
    };
    let (lab_rr, sim_rr) =
        match (find("rr", "proxy"), twin.iter().find(|t| t.policy == "rr" && t.mode == "proxy")) {
            (Some(l), Some(s)) => (l.rps, s.rps),
            _ => (f64::NAN, f64::NAN),
        };
    let mut out = format!(
        "### The simulator's twin of `{workload}`\n\n\
         The same files, popularity, node count ({nodes}), caches, disk and CPU models in `locus sim`, {TWIN_REQUESTS} \
         requests per row (the first third warm the caches). Ratios are to round robin's throughput in each.\n\n\
         | row | lab req/s | lab ÷ RR | sim req/s | sim ÷ RR | lab hit (local / remote) | sim hit (local / remote) |\n\
         |---|---:|---:|---:|---:|---:|---:|\n"
    );
    let mut gaps = Vec::new();
    for t in twin {
        let Some(l) = find(&t.policy, &t.mode) else { continue };
        let (lr, sr) = (l.rps / lab_rr, t.rps / sim_rr);
        if lr.is_finite() && sr.is_finite() && t.policy != "rr" {
            gaps.push((lr / sr - 1.0).abs());
        }
        let row = if t.mode == "proxy" { t.policy.clone() } else { format!("{} ({})", t.policy, t.mode) };
        let ratio = |r: f64| if r.is_finite() { format!("{r:.2}") } else { "–".into() };
        out.push_str(&format!(
            "| {row} | {:.0} | {} | {:.0} | {} | {:.2} / {:.2} | {:.2} / {:.2} |\n",
            l.rps,
            ratio(lr),
            t.rps,
            ratio(sr),
            l.hit_ratio,
            l.remote_hit_ratio,
            t.local_hit,
            t.remote_hit
        ));
    }
    if !gaps.is_empty() {
        let mean = gaps.iter().sum::<f64>() / gaps.len() as f64;
        let worst = gaps.iter().copied().fold(0.0, f64::max);
        out.push_str(&format!(
            "\nThe lab's ratios to RR differ from the simulator's by {:.0}% on average ({:.0}% at most).\n",
            mean * 100.0,
            worst * 100.0
        ));
    }
    out
}

/// For every workload on which a row caches cooperatively: the twin at its largest node count
/// beside the lab's points, as Markdown sections (the sites must still be on disk).
pub fn twin_notes(
    experiment: &Experiment,
    sites: &[LabSite],
    points: &[PointResult],
) -> Result<Vec<String>, LabError> {
    let mut notes = Vec::new();
    for (w, spec) in experiment.workloads.iter().enumerate() {
        if !experiment.switches.iter().any(|r| r.coop.is_some() && r.runs_on(&spec.name)) {
            continue;
        }
        let mine: Vec<&PointResult> = points.iter().filter(|p| p.workload == spec.name).collect();
        let Some(nodes) = mine.iter().map(|p| p.nodes).max() else { continue };
        let at: Vec<&PointResult> = mine.into_iter().filter(|p| p.nodes == nodes).collect();
        let mut rows: Vec<(SwitchKind, String, String)> = Vec::new();
        for p in &at {
            let row = (p.switch, p.policy.clone(), p.mode.clone());
            if !rows.contains(&row) {
                rows.push(row);
            }
        }
        let Some(site) = sites.iter().find(|s| s.workload == spec.name) else { continue };
        let twin = simulate_twin(spec, experiment.node_of(w), site, nodes, &rows, TWIN_REQUESTS)?;
        notes.push(twin_markdown(&spec.name, nodes, &at, &twin));
    }
    Ok(notes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lab_rows_map_to_the_simulators_strategies_with_their_replacement() {
        let gds = Replacement::Gds;
        assert_eq!(strategy_of("rr+cf-lfu", "proxy", gds), Some(("cf-lfu".into(), Replacement::Lfu)));
        assert_eq!(strategy_of("hash", "l4", gds), Some(("sc".into(), Replacement::Lru)));
        assert_eq!(strategy_of("lard-r", "handoff", gds), Some(("lard-r".into(), gds)));
        assert_eq!(strategy_of("wrr", "splice", gds), None);
        assert_eq!(strategy_of("rr+cf-fifo", "proxy", gds), None);
    }

    #[test]
    fn on_a_disk_bound_site_the_twin_predicts_lard_r_above_round_robin() {
        let dir = tempfile::tempdir().unwrap();
        let workload = WorkloadSpec { alpha: 0.8, clients: 32, ..WorkloadSpec::new("twin", 400) };
        let site = LabSite::generate(&workload, dir.path()).unwrap();
        let node = NodeSettings {
            cache: format!("{}", site.total_bytes / 6),
            cache_policy: "lru".into(),
            storage: Some("seek_ms=8,mb_s=40,disks=1".into()),
            ..NodeSettings::default()
        };
        let rows: Vec<(SwitchKind, String, String)> =
            [("rr", "proxy"), ("lard-r", "proxy"), ("uri-chash", "proxy")]
                .iter()
                .map(|(p, m)| (SwitchKind::Locus, p.to_string(), m.to_string()))
                .collect();
        let mut rows = rows;
        rows[2].0 = SwitchKind::Nginx;
        let points = simulate_twin(&workload, &node, &site, 4, &rows, 30_000).unwrap();
        assert_eq!(points.len(), 2, "the NGINX row has no twin");
        let (rr, lard) = (&points[0], &points[1]);
        assert!(lard.rps > 1.5 * rr.rps && lard.local_hit > rr.local_hit, "{points:?}");
    }

    #[test]
    fn the_twin_section_sets_each_rows_ratio_to_rr_beside_the_simulators_and_says_how_far_apart() {
        let lab = |policy: &str, rps: f64| {
            let mut p = crate::report::tests::point(SwitchKind::Locus, policy, 4, rps, 0.5);
            p.remote_hit_ratio = 0.2;
            p
        };
        // Three runs of CF-LRU: the table takes their median, 150, once.
        let points = [
            lab("rr", 100.0),
            lab("rr+cf-lru", 150.0),
            lab("rr+cf-lru", 120.0),
            lab("rr+cf-lru", 190.0),
            lab("lard-r", 300.0),
        ];
        let refs: Vec<&PointResult> = points.iter().collect();
        let twin = |policy: &str, strategy: &str, rps: f64| TwinPoint {
            policy: policy.into(),
            mode: "proxy".into(),
            strategy: strategy.into(),
            rps,
            local_hit: 0.4,
            remote_hit: 0.1,
        };
        let sim =
            [twin("rr", "rr", 50.0), twin("rr+cf-lru", "cf-lru", 100.0), twin("lard-r", "lard-r", 150.0)];
        let md = twin_markdown("coop", 4, &refs, &sim);
        assert!(md.contains("| rr+cf-lru | 150 | 1.50 | 100 | 2.00 | 0.50 / 0.20 | 0.40 / 0.10 |"), "{md}");
        assert_eq!(md.matches("| rr+cf-lru |").count(), 1, "{md}");
        // |1.5/2 - 1| = 25%, |3/3 - 1| = 0%.
        assert!(md.contains("by 12% on average (25% at most)"), "{md}");
    }

    #[test]
    fn the_twin_takes_the_nodes_cache_disk_and_cpu_models() {
        let node = NodeSettings {
            cache: "8MiB".into(),
            cache_policy: "lru".into(),
            max_object: "1MiB".into(),
            storage: Some("seek_ms=8,mb_s=40,disks=2".into()),
            cpu: Some("conn_us=1000,request_us=450,kb_us=4".into()),
            cpu_limit: None,
            workers: 1,
        };
        let c = twin_config("rr", Replacement::Lru, &node, 4, 128, 7).unwrap();
        assert_eq!((c.nodes, c.seed, c.disks), (4, 7, 2));
        assert_eq!((c.cache.capacity_bytes, c.cache.max_object_bytes), (8 << 20, Some(1 << 20)));
        assert_eq!((c.costs.disk_latency_ns, c.costs.disk_per_4k_ns), (8_000_000, 102_400));
        assert_eq!(
            (c.costs.request_cpu_ns, c.costs.transmit_per_512_ns, c.costs.conn_setup_ns),
            (450_000, 2_000, 0)
        );
        assert_eq!(c.arrivals, Arrivals::Closed { clients: Some(128) });
        assert!(twin_config("no-such-policy", Replacement::Lru, &node, 4, 128, 7).is_err());
    }
}
