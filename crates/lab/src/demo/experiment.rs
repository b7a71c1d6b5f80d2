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
    let _ = write!(
        out,
        "Each zipf point runs {} s of warm-up from cold caches (enough for the hot set to be fetched once) and {} s measured.",
        e.warmup_s, e.measure_s
    );
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
        e.points().iter().filter(|p| p.workload == w && p.nodes == e.max_nodes()).map(|p| p.label()).collect()
    }

    #[test]
    fn the_built_in_demo_runs_four_workloads_with_their_rows_in_ten_and_a_half_minutes() {
        let e = demo_experiment().unwrap();
        let names: Vec<&str> = e.workloads.iter().map(|w| w.name.as_str()).collect();
        assert_eq!(names, ["zipf", "hotspot", "dynamic", "coop"]);
        assert!(e.node.storage.is_some() && e.node.cpu.is_none(), "zipf: disks modelled, real CPUs");
        let zipf = rows(&e, "zipf");
        for row in ["wrr", "hash", "chash-bounded", "lard", "lard-r"] {
            assert!(zipf.contains(&format!("locus {row} proxy, 4 nodes")), "{zipf:?}");
        }
        assert!(zipf.contains(&"locus lard-r handoff, 4 nodes".to_string()));
        assert_eq!(zipf.len(), 5 + 1 + 2 + 1);
        let hot = rows(&e, "hotspot");
        for row in [
            "locus hash proxy",
            "locus chash-bounded proxy",
            "locus lard proxy",
            "locus lard-r proxy",
            "locus lard-r handoff",
            "nginx uri-chash proxy",
            "nginx least-conn proxy",
            "haproxy uri-chash-bounded proxy",
            "haproxy leastconn proxy",
        ] {
            assert!(hot.contains(&format!("{row}, 4 nodes")), "{row}: {hot:?}");
        }
        assert_eq!(hot.len(), 9);
        let dynamic = rows(&e, "dynamic");
        for row in ["rr", "lc", "wrr-metrics", "cap", "csld", "lard-r"] {
            assert!(dynamic.contains(&format!("locus {row} proxy, 4 nodes")), "{dynamic:?}");
        }
        for row in ["haproxy leastconn", "haproxy roundrobin", "nginx least-conn"] {
            assert!(dynamic.contains(&format!("{row} proxy, 4 nodes")), "{dynamic:?}");
        }
        assert_eq!(dynamic.len(), 9);
        let coop = rows(&e, "coop");
        for row in ["rr", "wrr", "lard-r", "rr+cf-lru", "rr+cf-lfu"] {
            assert!(coop.contains(&format!("locus {row} proxy, 4 nodes")), "{coop:?}");
        }
        assert!(coop.contains(&"locus hash l4, 4 nodes".to_string()), "socket cloning: {coop:?}");
        assert_eq!(coop.len(), 6);
        for w in ["hotspot", "dynamic"] {
            let i = e.workloads.iter().position(|x| x.name == w).unwrap();
            assert!(e.node_of(i).cpu.is_some(), "{w}: every node has a modelled CPU of its own");
        }
        // The whole point set fits in 10.5 minutes with ~0.5 s of start-up per point (measured:
        // 403 s for 36 points of 11 s) and half a minute to generate the sites.
        let total: f64 =
            e.points().iter().map(|p| e.warmup_of(p.workload) + e.measure_of(p.workload) + 0.5).sum();
        assert!(total + 30.0 <= 630.0, "{total} s of points is too long");
    }

    #[test]
    fn full_runs_every_workload_at_every_node_count() {
        let e = demo_experiment().unwrap();
        assert!(e.workloads.iter().any(|w| w.nodes.is_some()));
        let full = e.with_every_node_count();
        for (i, _) in full.workloads.iter().enumerate() {
            assert_eq!(full.nodes_of(i), [1, 2, 3, 4]);
        }
        assert_eq!(full.points().len(), (9 + 9 + 9 + 6) * 4);
    }

    #[test]
    fn the_tuning_note_states_the_cache_storage_and_timing() {
        let r = sample_report();
        let note = tuning_note(&r);
        assert!(note.contains("8MiB") && note.contains("warm-up"), "{note}");
        let mut demo = LabReport { experiment: demo_experiment().unwrap(), ..r };
        assert!(!tuning_note(&demo).contains("splice_min_bytes"), "the demo uses the switch's default relay");
        let note = tuning_note(&demo);
        assert!(note.contains("hot set") && note.contains("modelled CPU"), "{note}");
        for row in &mut demo.experiment.switches {
            if row.kind == SwitchKind::Locus {
                row.splice_min_bytes = Some(0);
            }
        }
        assert!(tuning_note(&demo).contains("splice_min_bytes = 0"));
    }
}
