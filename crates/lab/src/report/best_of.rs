//! The best configuration of each balancer on a workload (highest median throughput in a
//! closed loop, lowest median mean latency in an open loop, where every balancer carries the
//! offered load), every configuration tried beside it, and best against best, seed by seed.

use std::fmt::Write as _;

use crate::experiment::SwitchKind;
use crate::report::{LabReport, PairedRatio, Series, SeriesPoint};

/// Which number makes a configuration the best of its balancer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Best {
    /// The highest median throughput (closed-loop workloads).
    Throughput,
    /// The lowest median mean latency (open-loop workloads).
    MeanLatency,
}

impl Best {
    /// The measure of a workload: mean latency when it runs open loop.
    pub fn of_workload(report: &LabReport, workload: &str) -> Best {
        let open = report.experiment.workloads.iter().any(|w| w.name == workload && w.rate.is_some());
        if open { Best::MeanLatency } else { Best::Throughput }
    }
}

/// Among `series`, the best at `nodes` of `switch` whose policy is `policy` and whose mode is
/// `mode` (either any when `None`), with its point.
pub fn best_series(
    series: &[Series],
    nodes: usize,
    switch: SwitchKind,
    policy: Option<&str>,
    mode: Option<&str>,
    by: Best,
) -> Option<(Series, SeriesPoint)> {
    series
        .iter()
        .filter(|s| {
            s.switch == switch && mode.is_none_or(|m| s.mode == m) && policy.is_none_or(|p| s.policy == p)
        })
        .filter_map(|s| s.at(nodes).map(|p| (s.clone(), p.clone())))
        .max_by(|a, b| match by {
            Best::Throughput => a.1.rps.total_cmp(&b.1.rps),
            Best::MeanLatency => b.1.mean_ms.total_cmp(&a.1.mean_ms),
        })
}

/// The report's "Best of each balancer" section of a workload at its largest node count
/// (empty when only one balancer ran).
pub fn best_of_each_balancer(report: &LabReport, workload: &str, series: &[Series]) -> String {
    let Some(nodes) = series.iter().flat_map(|s| s.points.iter().map(|p| p.nodes)).max() else {
        return String::new();
    };
    let by = Best::of_workload(report, workload);
    let kinds = [SwitchKind::Locus, SwitchKind::Haproxy, SwitchKind::Nginx];
    let best: Vec<(SwitchKind, usize, (Series, SeriesPoint))> = kinds
        .into_iter()
        .filter_map(|k| {
            let tried =
                series.iter().filter(|s| s.switch == k && s.mode == "proxy" && s.at(nodes).is_some()).count();
            Some((k, tried, best_series(series, nodes, k, None, Some("proxy"), by)?))
        })
        .collect();
    if best.len() < 2 {
        return String::new();
    }
    let (measure, unit) = match by {
        Best::Throughput => ("highest median throughput", "req/s"),
        Best::MeanLatency => ("lowest median mean latency", "ms mean"),
    };
    let mut out = format!(
        "### Best of each balancer ({measure}, {nodes} nodes, proxy mode)\n\n| balancer | configurations tried | best | {unit} | p99 ms |\n|---|---:|---|---:|---:|\n"
    );
    for (k, tried, (s, p)) in &best {
        let value = match by {
            Best::Throughput => p.with_range(p.rps, |r| r.rps, 0),
            Best::MeanLatency => p.with_range(p.mean_ms, |r| r.mean_ms, 1),
        };
        let blind = if s.policy == "uri-chash" || s.policy == "hash" { " (load-blind)" } else { "" };
        let _ = writeln!(
            out,
            "| {} | {tried} | {}{blind} | {value} | {} |",
            k.name(),
            s.config,
            p.with_range(p.p99_ms, |r| r.p99_ms, 1)
        );
    }
    let (_, _, (ls, lp)) = &best[0];
    if best[0].0 == SwitchKind::Locus {
        out.push('\n');
        for (k, _, (s, p)) in &best[1..] {
            let ratio = match by {
                Best::Throughput => {
                    PairedRatio::of(lp, p, |r| r.rps).map(|r| format!("{} the throughput", r.text()))
                }
                Best::MeanLatency => {
                    PairedRatio::of(lp, p, |r| r.mean_ms).map(|r| format!("{} the mean latency", r.text()))
                }
            };
            if let Some(ratio) = ratio {
                let _ = writeln!(
                    out,
                    "- Locus's best (`{}`) against {}'s best (`{}`): {ratio}, seed by seed.",
                    ls.config,
                    k.name(),
                    s.config
                );
            }
        }
    }
    out.push('\n');
    out
}
