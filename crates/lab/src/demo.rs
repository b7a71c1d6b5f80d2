//! `locus lab demo`: the built-in experiment (`demo.toml`) — a disk-bound cluster of 1 to 4
//! nodes behind the Locus switch (WRR, LB, bounded consistent hashing, LARD, LARD/R), HAProxy
//! and NGINX — with the report paragraph that explains its tuning and the demo's acceptance
//! checks computed from what was measured. Without root, `locus demo` (`loopback_demo.rs`)
//! runs a small experiment of the same kind on loopback.

use std::fmt::Write as _;

use crate::error::LabError;
use crate::experiment::{Experiment, SwitchKind};
use crate::report::{LabReport, ratio_text};

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
    for site in &report.sites {
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
        "Each point runs {} s of warm-up from cold caches (enough for the hot set to be fetched once) and {} s measured, \
         which keeps the whole demo, set-up included, under 10 minutes on the 2-core machine.",
        e.warmup_s, e.measure_s
    );
    if e.switches.iter().any(|r| r.kind == SwitchKind::Locus && r.splice_min_bytes == Some(0)) {
        out.push_str(" The Locus switch relays every body through user space here (`splice_min_bytes = 0`).");
    }
    out
}

/// One acceptance check of the demo.
#[derive(Clone, Debug, PartialEq)]
pub struct DemoCheck {
    pub name: String,
    /// `None` when the run did not produce the points the check needs.
    pub met: Option<bool>,
    pub detail: String,
}

/// The demo's acceptance checks, from the measured points, at the largest node count.
pub fn demo_checks(report: &LabReport) -> Vec<DemoCheck> {
    let mut checks = Vec::new();
    let workload = report.workloads().into_iter().next().unwrap_or_default();
    let series = report.series(&workload);
    let n = report.experiment.max_nodes();
    let locus = |policy: &str| {
        series
            .iter()
            .find(|s| s.switch == SwitchKind::Locus && s.policy == policy && s.mode == "proxy")?
            .at(n)
    };
    let (lard_r, lard, wrr) = (locus("lard-r"), locus("lard"), locus("wrr"));
    checks.push(match (lard_r, wrr) {
        (Some(l), Some(w)) => DemoCheck {
            name: format!("LARD/R throughput ≥ 2× WRR at {n} nodes"),
            met: Some(l.rps >= 2.0 * w.rps),
            detail: format!("{:.0} vs {:.0} req/s = {}", l.rps, w.rps, ratio_text(l.rps, w.rps)),
        },
        _ => DemoCheck {
            name: format!("LARD/R throughput ≥ 2× WRR at {n} nodes"),
            met: None,
            detail: "not measured".into(),
        },
    });
    checks.push(match (lard, wrr) {
        (Some(l), Some(w)) => DemoCheck {
            name: format!("LARD's cluster hit ratio above WRR's at {n} nodes"),
            met: Some(l.hit_ratio > w.hit_ratio),
            detail: format!("{:.3} vs {:.3}", l.hit_ratio, w.hit_ratio),
        },
        _ => DemoCheck {
            name: format!("LARD's cluster hit ratio above WRR's at {n} nodes"),
            met: None,
            detail: "not measured".into(),
        },
    });
    let rows = |kind: SwitchKind| series.iter().filter(|s| s.switch == kind && !s.points.is_empty()).count();
    let (l, h, x) = (rows(SwitchKind::Locus), rows(SwitchKind::Haproxy), rows(SwitchKind::Nginx));
    checks.push(DemoCheck {
        name: "Locus rows beside HAProxy's and NGINX's in one run".into(),
        met: Some(l > 0 && h > 0 && x > 0),
        detail: format!("{l} Locus, {h} HAProxy and {x} NGINX series"),
    });
    checks
}

/// The checks as a Markdown section.
pub fn checks_markdown(checks: &[DemoCheck]) -> String {
    let mut out =
        String::from("### Acceptance checks of this run\n\n| check | result | measured |\n|---|---|---|\n");
    for c in checks {
        let verdict = match c.met {
            Some(true) => "met",
            Some(false) => "**not met**",
            None => "not measured",
        };
        let _ = writeln!(out, "| {} | {verdict} | {} |", c.name, c.detail);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::tests::sample_report;

    #[test]
    fn the_built_in_demo_parses_and_covers_the_switch_policy_matrix() {
        let e = demo_experiment().unwrap();
        assert_eq!(e.nodes, [1, 2, 3, 4]);
        let locus = &e.switches.iter().find(|s| s.kind == SwitchKind::Locus).unwrap().policies;
        assert_eq!(locus, &["wrr", "hash", "chash-bounded", "lard", "lard-r"]);
        assert!(e.uses(SwitchKind::Haproxy) && e.uses(SwitchKind::Nginx));
        assert!(e.node.storage.is_some(), "the storage model is on");
        let handoff =
            e.switches.iter().find(|s| s.modes.iter().any(|m| m == "handoff")).expect("a handoff row");
        assert_eq!(
            (handoff.kind, handoff.policies.as_slice()),
            (SwitchKind::Locus, &["lard-r".to_string()][..])
        );
        // Five two-way Locus policies, LARD/R one-way, two HAProxy rows and one NGINX row.
        assert_eq!(e.points().len(), (5 + 1 + 2 + 1) * 4);
        // The whole point set fits in 10 minutes with ~2 s of start-up per point.
        let per_point = e.warmup_s + e.measure_s + 2.0;
        assert!(per_point * e.points().len() as f64 <= 540.0, "{per_point} s per point is too long");
    }

    #[test]
    fn checks_compare_lard_r_with_wrr_and_find_every_switch() {
        let checks = demo_checks(&sample_report());
        assert_eq!(checks.len(), 3);
        assert_eq!(checks[0].met, Some(true), "{:?}", checks[0]);
        assert!(checks[0].detail.contains("500 vs 250"), "{}", checks[0].detail);
        assert_eq!(checks[1].met, Some(true));
        assert_eq!(checks[2].met, Some(true));
        let md = checks_markdown(&checks);
        assert!(
            md.contains("| LARD/R throughput ≥ 2× WRR at 2 nodes | met | 500 vs 250 req/s = 2.00× |"),
            "{md}"
        );
        let mut r = sample_report();
        r.points.retain(|p| p.switch == SwitchKind::Locus && p.policy != "lard-r");
        let checks = demo_checks(&r);
        assert_eq!(checks[0].met, None);
        assert_eq!(checks[2].met, Some(false));
    }

    #[test]
    fn the_tuning_note_states_the_cache_storage_and_timing() {
        let r = sample_report();
        let note = tuning_note(&r);
        assert!(note.contains("8MiB") && note.contains("warm-up"), "{note}");
        let mut demo = LabReport { experiment: demo_experiment().unwrap(), ..r };
        assert!(!tuning_note(&demo).contains("splice_min_bytes"), "the demo uses the switch's default relay");
        for row in &mut demo.experiment.switches {
            if row.kind == SwitchKind::Locus {
                row.splice_min_bytes = Some(0);
            }
        }
        assert!(tuning_note(&demo).contains("splice_min_bytes = 0"));
    }
}
