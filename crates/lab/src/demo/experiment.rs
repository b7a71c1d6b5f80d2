//! `locus lab demo`: the built-in experiment (`demo.toml`) — four workloads (`zipf` on a
//! disk-bound cluster, `hotspot` with a moving hot set, `dynamic` with costly dynamic classes,
//! `coop` with cooperative caching) behind the Locus switch, HAProxy and NGINX — and the
//! report paragraph that explains its
//! tuning (the checks are in `checks`). Without root, `locus demo` (`loopback_demo.rs`)
//! runs a small experiment of the zipf kind on loopback.

use std::fmt::Write as _;

use crate::error::LabError;
use crate::experiment::{Experiment, SwitchKind};
use crate::report::LabReport;

/// The demo's experiment file.
pub const DEMO_EXPERIMENT: &str = include_str!("demo.toml");

/// The demo's experiment.
pub fn demo_experiment() -> Result<Experiment, LabError> {
    Experiment::from_toml(DEMO_EXPERIMENT, "built-in demo")
}

/// Why the demo's numbers are what they are (a paragraph of the report).
pub fn tuning_note(report: &LabReport) -> String {
    let e = &report.experiment;
    let cache = e.node.cache_bytes().unwrap_or(0);
    let mut out = String::from("### How the demo is tuned\n\n");
    let storage = e.node.storage.as_deref().unwrap_or("off");
    let _ = write!(
        out,
        "The point of the demo is the LARD paper's regime: nodes whose misses go to disk, and a working set larger than one \
         node's memory but within the cluster's. Each node has a cache of {} and a storage model `{storage}` — every miss \
         waits in one FIFO disk queue for a seek plus the transfer, as on the papers' disks. The model sleeps instead of \
         burning CPU, so a miss costs milliseconds of latency and disk time but almost no CPU, and the 2 shared cores stay \
         free for the load generator, the switch and the cache hits. ",
        e.node.cache
    );
    for site in report.sites.iter().filter(|s| s.workload == "zipf") {
        let Some(w) = e.workloads.iter().find(|w| w.name == site.workload) else { continue };
        let times = if cache > 0 { site.total_bytes as f64 / cache as f64 } else { 0.0 };
        let _ = write!(
            out,
            "The site has {} files, {:.1} MiB in all ({times:.1}× one node's cache, {:.1}× the cache of {} nodes), sizes \
             with SURGE's shape (median {:.1} KiB, a heavy tail up to {:.0} KiB); requests follow Zipf α = {} over the files \
             from {} closed-loop clients. ",
            site.files,
            site.total_bytes as f64 / (1 << 20) as f64,
            times / e.max_nodes() as f64,
            e.max_nodes(),
            site.median_bytes as f64 / 1024.0,
            site.largest_bytes as f64 / 1024.0,
            w.alpha,
            w.clients
        );
    }
    out.push_str(
        "With content-blind WRR every node caches the same popular files, so the cluster's hit ratio is one node's and \
         the misses keep every disk busy: throughput grows with the number of disks but stays disk-bound. Content-aware \
         policies give each node its own share of the files, so the cluster caches up to N times as much, the disks go \
         quiet, and throughput rises until the shared CPUs are the limit. The seek time is chosen so that WRR is \
         clearly disk-bound at every node count while a policy that hits almost always is not; the alpha and site size so \
         that one cache holds the hottest files but the cluster's caches are needed for most of the rest; the clients so \
         that four disk queues and the CPUs stay busy. ",
    );
    if let Some(z) = e.workloads.iter().position(|w| w.name == "zipf") {
        let _ = write!(
            out,
            "Each zipf point runs {} s of warm-up from cold caches (enough for the hot set to be fetched once) and {} s measured.",
            e.warmup_of(z),
            e.measure_of(z)
        );
    }
    if e.switches.iter().any(|r| r.kind == SwitchKind::Locus && r.splice_min_bytes == Some(0)) {
        out.push_str(" The Locus switch relays every body through user space here (`splice_min_bytes = 0`).");
    }
    out.push_str("\n\n");
    out.push_str(&crate::demo::tuning::hotspot_and_dynamic_note(report));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::tests::sample_report;

    fn rows(e: &Experiment, workload: &str) -> Vec<String> {
        let w = e.workloads.iter().position(|w| w.name == workload).unwrap();
        e.points()
            .iter()
            .filter(|p| p.workload == w && p.nodes == e.max_nodes() && p.repetition == 1)
            .map(|p| p.label())
            .collect()
    }

    /// Seconds a run of `e` takes: every point's warm-up and measured time, half a second
    /// of start-up each (measured: 0.2 s), and half a minute to generate the sites.
    fn estimate_s(e: &Experiment) -> f64 {
        e.points().iter().map(|p| e.warmup_of(p.workload) + e.measure_of(p.workload) + 0.5).sum::<f64>()
            + 30.0
    }

    #[test]
    fn the_built_in_demo_runs_the_tuning_budget_at_three_seeds_in_at_most_fifteen_minutes() {
        let e = demo_experiment().unwrap();
        let names: Vec<&str> = e.workloads.iter().map(|w| w.name.as_str()).collect();
        assert_eq!(names, ["zipf", "hotspot", "dynamic", "coop"]);
        assert!(e.node.storage.is_some() && e.node.cpu.is_none(), "zipf: disks modelled, real CPUs");
        let zipf = rows(&e, "zipf");
        for row in ["locus wrr", "locus lard", "locus lard-r", "haproxy uri-chash-bounded", "nginx uri-chash"]
        {
            assert!(zipf.contains(&format!("{row} proxy, 4 nodes")), "{zipf:?}");
        }
        let hot = rows(&e, "hotspot");
        for row in [
            "locus lard-r t_high=65 t_low=25",
            "locus lard-r t_high=16 t_low=4",
            "locus chash-bounded",
            "locus hash",
            "haproxy uri-chash-bounded",
            "haproxy uri-chash-bounded factor=115",
            "haproxy uri-chash-bounded factor=200",
            "haproxy uri-chash-bounded factor=125 avalanche weight=100",
            "haproxy uri-chash-bounded maxconn=16",
            "haproxy leastconn",
            "haproxy random-2",
            "nginx uri-chash",
            "nginx least-conn",
            "nginx random-two-least-conn",
        ] {
            assert!(hot.contains(&format!("{row} proxy, 4 nodes")), "{row}: {hot:?}");
        }
        assert_eq!(hot.len(), 14);
        let dynamic = rows(&e, "dynamic");
        for row in [
            "locus rr",
            "locus lc",
            "locus csld",
            "locus csld pick=\"wrr\"",
            "haproxy leastconn",
            "haproxy leastconn maxconn=4",
            "haproxy random-2",
            "nginx least-conn",
            "nginx random-two-least-conn",
        ] {
            assert!(dynamic.contains(&format!("{row} proxy, 4 nodes")), "{row}: {dynamic:?}");
        }
        assert_eq!(dynamic.len(), 9);
        let coop = rows(&e, "coop");
        for row in ["rr", "wrr", "lard-r", "rr+cf-lru", "rr+cf-lfu"] {
            assert!(coop.contains(&format!("locus {row} proxy, 4 nodes")), "{coop:?}");
        }
        assert!(coop.contains(&"locus hash l4, 4 nodes".to_string()), "socket cloning: {coop:?}");
        for (w, limit) in [("hotspot", 0.05), ("dynamic", 0.25)] {
            let i = e.workloads.iter().position(|x| x.name == w).unwrap();
            let node = e.node_of(i);
            assert_eq!(
                (node.cpu_limit, node.cpu.as_deref(), node.node_cpu()),
                (Some(limit), None, "cgroup"),
                "{w}"
            );
        }
        // Three seeds of every compared workload, seeds outermost: the rows of a seed run
        // together (interleaved with the other rows), each seed its own.
        for w in ["zipf", "hotspot", "dynamic"] {
            let i = e.workloads.iter().position(|x| x.name == w).unwrap();
            let seeds: std::collections::BTreeSet<u64> =
                e.points().iter().filter(|p| p.workload == i).map(|p| p.seed).collect();
            assert_eq!(seeds.len(), 3, "{w}: {seeds:?}");
        }
        let reps: Vec<u32> = e.points().iter().map(|p| p.repetition).collect();
        assert!(reps.windows(2).all(|w| w[0] <= w[1]), "repetitions outermost");
        let total = estimate_s(&e);
        assert!(total <= 15.0 * 60.0, "{total} s is more than the demo's 15 minutes");
    }

    #[test]
    fn full_runs_every_workload_at_five_seeds_and_every_node_count_on_request() {
        let e = demo_experiment().unwrap();
        let full = e.clone().with_at_least_runs(crate::cli::FULL_RUNS);
        for (i, w) in full.workloads.iter().enumerate() {
            let seeds: std::collections::BTreeSet<u64> =
                full.points().iter().filter(|p| p.workload == i).map(|p| p.seed).collect();
            assert_eq!(seeds.len(), 5, "{}", w.name);
        }
        assert!(estimate_s(&full) <= 40.0 * 60.0, "{} s", estimate_s(&full));
        let every = e.with_every_node_count();
        for (i, _) in every.workloads.iter().enumerate() {
            assert_eq!(every.nodes_of(i), [1, 2, 3, 4]);
        }
    }

    #[test]
    fn the_tuning_note_states_the_cache_storage_and_timing() {
        let r = sample_report();
        let note = tuning_note(&r);
        assert!(note.contains("8MiB") && note.contains("warm-up"), "{note}");
        let mut demo = LabReport { experiment: demo_experiment().unwrap(), ..r };
        assert!(!tuning_note(&demo).contains("splice_min_bytes"), "the demo uses the switch's default relay");
        let note = tuning_note(&demo);
        assert!(note.contains("hot set") && note.contains("real CPU limit"), "{note}");
        assert!(note.contains("5 s of warm-up"), "zipf's own timing: {note}");
        for row in &mut demo.experiment.switches {
            if row.kind == SwitchKind::Locus {
                row.splice_min_bytes = Some(0);
            }
        }
        assert!(tuning_note(&demo).contains("splice_min_bytes = 0"));
    }
}
