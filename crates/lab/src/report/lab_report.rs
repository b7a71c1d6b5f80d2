//! `LabReport`, what a lab run produced: its points (see `results.rs`) grouped into series
//! (one per switch and policy, averaged over repetitions), rendered as the Markdown report:
//! set-up, tables against node count, the plots, every point, highlights and notes.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::error::LabError;
use crate::experiment::{Experiment, SwitchKind};
use crate::report::{Best, best_series};
use crate::results::{FailedPoint, PointResult, series_label, write_results_json};
use crate::site::LabSite;

/// One run of a point: its seed and the numbers a ratio is taken of, seed by seed.
#[derive(Clone, Debug, PartialEq)]
pub struct SeedRun {
    pub seed: u64,
    pub rps: f64,
    pub mean_ms: f64,
    pub p99_ms: f64,
}

/// One series point: the median over a point's runs (one per seed), with every run kept for
/// ranges and paired ratios.
#[derive(Clone, Debug, PartialEq)]
pub struct SeriesPoint {
    pub nodes: usize,
    pub runs: usize,
    pub rps: f64,
    pub mean_ms: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub hit_ratio: f64,
    /// Misses served from a peer's memory over all lookups (cooperative caching).
    pub remote_hit_ratio: f64,
    pub imbalance: f64,
    pub switch_cpu_us_per_request: Option<f64>,
    /// CPU time of all nodes per request served, in µs.
    pub node_cpu_us_per_request: Option<f64>,
    /// Share of responses from replicas (DC rows).
    pub replica_share: f64,
    /// Summed over the runs.
    pub errors: u64,
    /// Of the errors, timeouts (summed).
    pub timeouts: u64,
    /// Responses in the measured intervals (summed).
    pub requests: u64,
    pub mismatches: u64,
    /// Every run, in run order.
    pub by_seed: Vec<SeedRun>,
}

impl SeriesPoint {
    /// The least and the greatest of a number over the runs.
    pub fn range(&self, value: impl Fn(&SeedRun) -> f64) -> (f64, f64) {
        min_max(self.by_seed.iter().map(value))
    }

    /// `1234 (1100–1300)` with the range when there is more than one run.
    pub fn with_range(&self, median: f64, value: impl Fn(&SeedRun) -> f64, decimals: usize) -> String {
        if self.by_seed.len() < 2 {
            return format!("{median:.decimals$}");
        }
        let (lo, hi) = self.range(value);
        format!("{median:.decimals$} ({lo:.decimals$}–{hi:.decimals$})")
    }
}

/// The ratio `a ÷ b` of a number seed by seed (only seeds both ran; none when `b` is not
/// positive), with its median and range.
#[derive(Clone, Debug, PartialEq)]
pub struct PairedRatio {
    pub ratios: Vec<f64>,
    pub median: f64,
    pub min: f64,
    pub max: f64,
}

impl PairedRatio {
    /// `None` when the two share no seed with a positive baseline.
    pub fn of(a: &SeriesPoint, b: &SeriesPoint, value: impl Fn(&SeedRun) -> f64) -> Option<PairedRatio> {
        let ratios: Vec<f64> = a
            .by_seed
            .iter()
            .filter_map(|ra| {
                let rb = b.by_seed.iter().find(|rb| rb.seed == ra.seed)?;
                let (x, y) = (value(ra), value(rb));
                (y > 0.0 && x.is_finite()).then_some(x / y)
            })
            .collect();
        if ratios.is_empty() {
            return None;
        }
        let (min, max) = min_max(ratios.iter().copied());
        Some(PairedRatio { median: median(ratios.iter().copied()), min, max, ratios })
    }

    /// `1.42× (1.31–1.55 over 3 seeds)`.
    pub fn text(&self) -> String {
        if self.ratios.len() < 2 {
            return format!("{:.2}× (one seed)", self.median);
        }
        format!("{:.2}× ({:.2}–{:.2} over {} seeds)", self.median, self.min, self.max, self.ratios.len())
    }
}

/// A switch, configuration and mode across node counts, for one workload.
#[derive(Clone, Debug, PartialEq)]
pub struct Series {
    pub label: String,
    pub switch: SwitchKind,
    /// The policy (`rr+cf-lfu` when the nodes cache cooperatively).
    pub policy: String,
    /// The policy with the row's settings beyond the defaults (`lard-r t_high=16 t_low=4`).
    pub config: String,
    pub mode: String,
    /// Ascending node counts.
    pub points: Vec<SeriesPoint>,
}

impl Series {
    /// The point at `nodes`.
    pub fn at(&self, nodes: usize) -> Option<&SeriesPoint> {
        self.points.iter().find(|p| p.nodes == nodes)
    }
}

/// A plot written next to the report.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlotFile {
    pub workload: String,
    pub title: String,
    /// File name inside the report folder.
    pub file: String,
}

/// Everything a run produced.
#[derive(Clone, Debug, Serialize)]
pub struct LabReport {
    pub experiment: Experiment,
    pub sites: Vec<LabSite>,
    pub points: Vec<PointResult>,
    /// `2025-01-31 12:00:00 UTC`.
    pub started_utc: String,
    /// Wall time of the whole run, set-up and teardown included.
    pub wall_s: f64,
    /// CPUs and kernel.
    pub machine: String,
    /// Markdown paragraphs for the end of the report (a demo explains its tuning here).
    pub notes: Vec<String>,
    /// Points that failed on both tries; the run went on without them.
    pub failed_points: Vec<FailedPoint>,
    /// Why the run stopped early, if it did.
    pub failure: Option<String>,
}

/// The least and the greatest of `values` (infinite, the wrong way round, of nothing).
fn min_max(values: impl Iterator<Item = f64>) -> (f64, f64) {
    values.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| (lo.min(v), hi.max(v)))
}

/// The median (the mean of the middle two of an even count); 0 of nothing.
pub fn median(values: impl Iterator<Item = f64>) -> f64 {
    let mut v: Vec<f64> = values.collect();
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(f64::total_cmp);
    let m = v.len() / 2;
    if v.len() % 2 == 1 { v[m] } else { (v[m - 1] + v[m]) / 2.0 }
}

/// The median point of a point's runs.
fn series_point(nodes: usize, runs: &[&PointResult]) -> SeriesPoint {
    let cpu: Vec<f64> = runs.iter().filter_map(|r| r.switch_cpu_us_per_request).collect();
    let node_cpu: Vec<f64> = runs.iter().filter_map(|r| r.node_cpu_us_per_request).collect();
    SeriesPoint {
        nodes,
        runs: runs.len(),
        rps: median(runs.iter().map(|r| r.rps)),
        mean_ms: median(runs.iter().map(|r| r.mean_ms)),
        p50_ms: median(runs.iter().map(|r| r.p50_ms)),
        p99_ms: median(runs.iter().map(|r| r.p99_ms)),
        hit_ratio: median(runs.iter().map(|r| r.hit_ratio)),
        remote_hit_ratio: median(runs.iter().map(|r| r.remote_hit_ratio)),
        imbalance: median(runs.iter().map(|r| r.imbalance)),
        switch_cpu_us_per_request: (!cpu.is_empty()).then(|| median(cpu.into_iter())),
        node_cpu_us_per_request: (!node_cpu.is_empty()).then(|| median(node_cpu.into_iter())),
        replica_share: median(runs.iter().map(|r| r.replica_share)),
        errors: runs.iter().map(|r| r.errors).sum(),
        timeouts: runs.iter().map(|r| r.timeouts).sum(),
        requests: runs.iter().map(|r| r.requests).sum(),
        mismatches: runs.iter().map(|r| r.mismatches).sum(),
        by_seed: runs
            .iter()
            .map(|r| SeedRun { seed: r.seed, rps: r.rps, mean_ms: r.mean_ms, p99_ms: r.p99_ms })
            .collect(),
    }
}

/// `a / b` as `2.31×`, or `n/a`.
pub fn ratio_text(a: f64, b: f64) -> String {
    if b > 0.0 && a.is_finite() { format!("{:.2}×", a / b) } else { "n/a".into() }
}

impl LabReport {
    /// The series of one workload, in the experiment's row and policy order: one per switch,
    /// configuration and mode.
    pub fn series(&self, workload: &str) -> Vec<Series> {
        let mut order: Vec<(SwitchKind, String, String, String)> = Vec::new();
        for p in self.points.iter().filter(|p| p.workload == workload) {
            let key = (p.switch, p.policy.clone(), p.config_or_policy().to_string(), p.mode.clone());
            if !order.contains(&key) {
                order.push(key);
            }
        }
        order
            .into_iter()
            .map(|(switch, policy, config, mode)| {
                let mut by_nodes: BTreeMap<usize, Vec<&PointResult>> = BTreeMap::new();
                for p in self.points.iter().filter(|p| {
                    p.workload == workload
                        && p.switch == switch
                        && p.config_or_policy() == config
                        && p.mode == mode
                }) {
                    by_nodes.entry(p.nodes).or_default().push(p);
                }
                let points = by_nodes.into_iter().map(|(nodes, runs)| series_point(nodes, &runs)).collect();
                Series { label: series_label(switch, &config, &mode), switch, policy, config, mode, points }
            })
            .collect()
    }

    /// Workload names that have results, in experiment order.
    pub fn workloads(&self) -> Vec<String> {
        self.experiment
            .workloads
            .iter()
            .map(|w| w.name.clone())
            .filter(|w| self.points.iter().any(|p| &p.workload == w))
            .collect()
    }

    /// Node counts that have results, ascending.
    fn node_counts(&self, workload: &str) -> Vec<usize> {
        let mut n: Vec<usize> =
            self.points.iter().filter(|p| p.workload == workload).map(|p| p.nodes).collect();
        n.sort_unstable();
        n.dedup();
        n
    }

    /// The comparisons that matter at the largest node count of a workload.
    pub fn highlights(&self, workload: &str) -> Vec<String> {
        let series = self.series(workload);
        let Some(&n) = self.node_counts(workload).last() else { return Vec::new() };
        let locus = |policy: &str| {
            series
                .iter()
                .find(|s| s.switch == SwitchKind::Locus && s.policy == policy && s.mode == "proxy")?
                .at(n)
        };
        let mut out = Vec::new();
        if let (Some(lr), Some(w)) = (locus("lard-r"), locus("wrr")) {
            out.push(format!(
                "At {n} nodes LARD/R serves {:.0} req/s and WRR {:.0} req/s: {} WRR's throughput.",
                lr.rps,
                w.rps,
                ratio_text(lr.rps, w.rps)
            ));
        }
        if let (Some(l), Some(w)) = (locus("lard"), locus("wrr")) {
            out.push(format!(
                "At {n} nodes LARD's cluster hit ratio is {:.3} against WRR's {:.3} ({}).",
                l.hit_ratio,
                w.hit_ratio,
                if l.hit_ratio > w.hit_ratio { "higher" } else { "not higher" }
            ));
        }
        let best = |kind: SwitchKind| best_series(&series, n, kind, None, None, Best::Throughput);
        if let Some((ls, lp)) = best(SwitchKind::Locus) {
            for kind in [SwitchKind::Haproxy, SwitchKind::Nginx] {
                if let Some((s, p)) = best(kind) {
                    out.push(format!(
                        "At {n} nodes the best Locus row ({}: {:.0} req/s, hit ratio {:.3}) serves {} the throughput of the best {} row ({}: {:.0} req/s, hit ratio {:.3}).",
                        ls.policy,
                        lp.rps,
                        lp.hit_ratio,
                        ratio_text(lp.rps, p.rps),
                        kind.name(),
                        s.policy,
                        p.rps,
                        p.hit_ratio
                    ));
                }
            }
        }
        out
    }

    /// The Markdown report; `plots` are linked in their workload's section.
    pub fn render_markdown(&self, plots: &[PlotFile]) -> String {
        let e = &self.experiment;
        let mut out = String::new();
        let _ = writeln!(out, "# {}\n", e.name);
        if !e.description.is_empty() {
            let _ = writeln!(out, "{}\n", e.description.trim());
        }
        let _ = writeln!(
            out,
            "Started {}; {} points measured in {:.0} s of wall time (set-up and teardown included) on {}.\n",
            self.started_utc,
            self.points.len(),
            self.wall_s,
            self.machine
        );
        if let Some(f) = &self.failure {
            let _ = writeln!(out, "**The run stopped early:** {f}\n");
        }
        if !self.failed_points.is_empty() {
            let _ = writeln!(
                out,
                "**{} points failed on both tries** and are left out of the tables:\n",
                self.failed_points.len()
            );
            for p in &self.failed_points {
                let label = series_label(p.switch, &p.policy, &p.mode);
                let _ = writeln!(out, "- {label}, {} nodes, run {}: {}", p.nodes, p.repetition, p.failed);
            }
            out.push('\n');
        }
        out.push_str(&self.render_setup());
        for w in self.workloads() {
            out.push_str(&self.render_workload(&w, plots));
        }
        if !self.notes.is_empty() {
            out.push_str("## Notes\n\n");
            for n in &self.notes {
                let _ = writeln!(out, "{}\n", n.trim());
            }
        }
        out
    }

    fn render_workload(&self, workload: &str, plots: &[PlotFile]) -> String {
        let mut out = format!("## Results: workload `{workload}`\n\n");
        let series = self.series(workload);
        let counts = self.node_counts(workload);
        let pivot = |title: &str, value: &dyn Fn(&SeriesPoint) -> String| -> String {
            let mut t = format!("### {title}\n\n| switch | policy |");
            for n in &counts {
                let _ = write!(t, " {n} node{} |", if *n == 1 { "" } else { "s" });
            }
            t.push_str("\n|---|---|");
            t.push_str(&"---:|".repeat(counts.len()));
            t.push('\n');
            for s in &series {
                let policy =
                    if s.mode == "proxy" { s.config.clone() } else { format!("{} ({})", s.config, s.mode) };
                let _ = write!(t, "| {} | {policy} |", s.switch.name());
                for n in &counts {
                    let _ = write!(t, " {} |", s.at(*n).map_or("—".into(), value));
                }
                t.push('\n');
            }
            t.push('\n');
            t
        };
        let runs = series.iter().flat_map(|s| &s.points).map(|p| p.runs).max().unwrap_or(1);
        if runs > 1 {
            let _ = writeln!(
                out,
                "Each cell is the median over {runs} runs, one per seed of the request stream (the hot set and the \
                 popularity order differ per seed), with the range in brackets; the rows ran interleaved, seed by seed.\n"
            );
        }
        out.push_str(&pivot("Throughput (requests/s)", &|p| p.with_range(p.rps, |r| r.rps, 0)));
        out.push_str(&pivot("Mean response time (ms)", &|p| p.with_range(p.mean_ms, |r| r.mean_ms, 1)));
        out.push_str(&pivot("99th percentile response time (ms)", &|p| {
            p.with_range(p.p99_ms, |r| r.p99_ms, 1)
        }));
        out.push_str(&pivot("Cluster hit ratio", &|p| format!("{:.3}", p.hit_ratio)));
        out.push_str(&pivot("Load imbalance (max/mean requests per node)", &|p| {
            format!("{:.2}", p.imbalance)
        }));
        if series.iter().any(|s| s.switch == SwitchKind::Dc) {
            out.push_str(&pivot("Share of responses from replicas", &|p| format!("{:.3}", p.replica_share)));
            out.push_str(&pivot("Nodes' CPU per request (µs, all nodes)", &|p| {
                p.node_cpu_us_per_request.map_or("—".into(), |c| format!("{c:.0}"))
            }));
        }
        out.push_str(&crate::report::best_of::best_of_each_balancer(self, workload, &series));
        let highlights = self.highlights(workload);
        if !highlights.is_empty() {
            out.push_str("### Highlights\n\n");
            for h in highlights {
                let _ = writeln!(out, "- {h}");
            }
            out.push('\n');
        }
        let mine: Vec<&PlotFile> = plots.iter().filter(|p| p.workload == workload).collect();
        if !mine.is_empty() {
            out.push_str("### Plots\n\n");
            for p in mine {
                let _ = writeln!(out, "![{}]({})\n", p.title, p.file);
            }
        }
        out.push_str(
            "### Every point\n\n| switch | configuration | mode | nodes | run | seed | node CPU | req/s | mean ms | p50 ms | p90 ms | p99 ms | hit ratio | imbalance | requests per node | switch CPU µs/req | errors | timeouts | unanswered at the end | mismatches |\n|---|---|---|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|\n",
        );
        for p in self.points.iter().filter(|p| p.workload == workload) {
            let per_node: Vec<String> = p.node_requests.iter().map(|n| n.to_string()).collect();
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {} | {} | {} | {:.0} | {:.2} | {:.2} | {:.2} | {:.2} | {:.3} | {:.2} | {} | {} | {} | {} | {} | {} |",
                p.switch.name(),
                p.config_or_policy(),
                p.mode,
                p.nodes,
                p.repetition,
                p.seed,
                p.node_cpu,
                p.rps,
                p.mean_ms,
                p.p50_ms,
                p.p90_ms,
                p.p99_ms,
                p.hit_ratio,
                p.imbalance,
                per_node.join(" / "),
                p.switch_cpu_us_per_request.map_or("—".into(), |c| format!("{c:.1}")),
                p.errors,
                p.timeouts,
                p.outstanding,
                p.mismatches
            );
        }
        let warnings: Vec<String> = self
            .points
            .iter()
            .filter(|p| p.workload == workload)
            .flat_map(|p| {
                p.warnings.iter().map(move |w| format!("{}, {} nodes: {w}", p.series_label(), p.nodes))
            })
            .collect();
        if !warnings.is_empty() {
            out.push_str("\nWarnings:\n\n");
            for w in warnings {
                let _ = writeln!(out, "- {w}");
            }
        }
        out.push('\n');
        out
    }

    /// Write `results.json`, the plots and `report.md` into `dir`; the files written.
    pub fn write(&self, dir: &Path) -> Result<Vec<PathBuf>, LabError> {
        std::fs::create_dir_all(dir).map_err(|e| LabError::io(dir, e))?;
        let mut written = vec![write_results_json(dir, self)?];
        let plots = crate::plots::write_plots(self, dir)?;
        written.extend(plots.iter().map(|p| dir.join(&p.file)));
        let md = dir.join("report.md");
        std::fs::write(&md, self.render_markdown(&plots)).map_err(|e| LabError::io(&md, e))?;
        written.push(md);
        Ok(written)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn point(switch: SwitchKind, policy: &str, nodes: usize, rps: f64, hit: f64) -> PointResult {
        PointResult {
            switch,
            policy: policy.into(),
            mode: "proxy".into(),
            nodes,
            workload: "zipf".into(),
            repetition: 1,
            seed: 1,
            config: policy.into(),
            rps,
            mean_ms: 1.5,
            p50_ms: 1.0,
            p90_ms: 2.0,
            p99_ms: 3.0,
            hit_ratio: hit,
            remote_hit_ratio: 0.0,
            replica_share: 0.0,
            node_cpu_us_per_request: None,
            imbalance: 1.25,
            errors: 0,
            timeouts: 0,
            outstanding: 0,
            node_cpu: "host".into(),
            mismatches: 0,
            requests: (rps * 6.0) as u64,
            duration_s: 6.0,
            node_requests: vec![10; nodes],
            switch_cpu_us_per_request: Some(40.0),
            congestion_control: "cubic".into(),
            attempts: 1,
            warnings: Vec::new(),
        }
    }

    pub(crate) fn sample_report() -> LabReport {
        let experiment = Experiment::from_toml(
            r#"
name = "sample"
nodes = [1, 2]
[[switch]]
kind = "locus"
policies = ["wrr", "lard", "lard-r"]
[[switch]]
kind = "haproxy"
policies = ["uri-chash-bounded"]
[[switch]]
kind = "nginx"
policies = ["uri-chash"]
[[workload]]
name = "zipf"
files = 10
"#,
            "sample",
        )
        .unwrap();
        let mut points = Vec::new();
        for (kind, policy, base, hit) in [
            (SwitchKind::Locus, "wrr", 100.0, 0.6),
            (SwitchKind::Locus, "lard", 180.0, 0.9),
            (SwitchKind::Locus, "lard-r", 250.0, 0.95),
            (SwitchKind::Haproxy, "uri-chash-bounded", 150.0, 0.85),
            (SwitchKind::Nginx, "uri-chash", 140.0, 0.85),
        ] {
            for nodes in [1, 2] {
                points.push(point(kind, policy, nodes, base * nodes as f64, hit));
            }
        }
        // A second run (seed) of one point: tables show the median, and the range.
        let mut again = point(SwitchKind::Locus, "wrr", 2, 300.0, 0.7);
        again.repetition = 2;
        again.seed = 101;
        points.push(again);
        LabReport {
            experiment,
            sites: Vec::new(),
            points,
            started_utc: "2025-01-01 00:00:00 UTC".into(),
            wall_s: 12.0,
            machine: "2 CPUs".into(),
            notes: vec!["A note.".into()],
            failed_points: Vec::new(),
            failure: None,
        }
    }

    #[test]
    fn results_json_is_an_array_of_points_with_the_documented_fields_and_types() {
        let r = sample_report();
        let json: serde_json::Value = serde_json::from_str(&r.results_json()).unwrap();
        let arr = json.as_array().unwrap();
        assert_eq!(arr.len(), r.points.len());
        for obj in arr {
            assert!(["locus", "haproxy", "nginx"].contains(&obj["switch"].as_str().unwrap()));
            for key in ["policy", "mode", "workload"] {
                assert!(obj[key].is_string(), "{key}");
            }
            for key in ["nodes", "errors", "mismatches", "requests", "repetition"] {
                assert!(obj[key].is_u64(), "{key} is not an integer: {}", obj[key]);
            }
            for key in ["rps", "p50_ms", "p99_ms", "hit_ratio", "imbalance", "duration_s"] {
                assert!(obj[key].is_f64(), "{key} is not a float: {}", obj[key]);
            }
            assert!(obj["node_requests"].is_array());
        }
        assert_eq!(arr[0]["switch"], "locus");
        assert_eq!(arr[6]["switch"], "haproxy");
        let back: Vec<PointResult> = serde_json::from_str(&r.results_json()).unwrap();
        assert_eq!(back, r.points);
    }

    #[test]
    fn series_take_the_median_of_repetitions_keep_each_seed_and_the_experiment_order() {
        let r = sample_report();
        let s = r.series("zipf");
        let labels: Vec<&str> = s.iter().map(|s| s.label.as_str()).collect();
        assert_eq!(
            labels,
            ["locus wrr", "locus lard", "locus lard-r", "haproxy uri-chash-bounded", "nginx uri-chash"]
        );
        let wrr2 = s[0].at(2).unwrap();
        assert_eq!(wrr2.runs, 2);
        assert!((wrr2.rps - 250.0).abs() < 1e-9 && (wrr2.hit_ratio - 0.65).abs() < 1e-9);
        assert_eq!(wrr2.by_seed.iter().map(|r| r.seed).collect::<Vec<_>>(), [1, 101]);
        assert_eq!(wrr2.range(|r| r.rps), (200.0, 300.0));
        assert_eq!(median([5.0, 1.0, 3.0].into_iter()), 3.0, "odd count: the middle value");
        assert_eq!(median(std::iter::empty()), 0.0);
    }

    #[test]
    fn paired_ratios_are_taken_seed_by_seed_over_the_seeds_both_ran() {
        let run = |seed, rps| SeedRun { seed, rps, mean_ms: 1.0, p99_ms: 1.0 };
        let mut a = sample_report().series("zipf")[0].at(2).unwrap().clone();
        let mut b = a.clone();
        a.by_seed = vec![run(1, 300.0), run(2, 200.0), run(3, 90.0), run(4, 50.0)];
        b.by_seed = vec![run(1, 100.0), run(2, 100.0), run(3, 100.0)];
        let r = PairedRatio::of(&a, &b, |r| r.rps).unwrap();
        // Seed 4 has no partner; the medians of 300/200/90 against 100 each: 3, 2, 0.9.
        assert_eq!(r.ratios, [3.0, 2.0, 0.9]);
        assert_eq!((r.median, r.min, r.max), (2.0, 0.9, 3.0));
        assert_eq!(r.text(), "2.00× (0.90–3.00 over 3 seeds)");
        b.by_seed = vec![run(1, 0.0)];
        assert!(PairedRatio::of(&a, &b, |r| r.rps).is_none(), "no ratio against zero");
    }

    #[test]
    fn the_markdown_report_has_pivot_tables_every_point_highlights_plots_and_notes() {
        let r = sample_report();
        let plots = vec![PlotFile {
            workload: "zipf".into(),
            title: "Throughput".into(),
            file: "zipf-throughput.svg".into(),
        }];
        let md = r.render_markdown(&plots);
        for needle in [
            "# sample",
            "## Set-up",
            "### Throughput (requests/s)",
            "| switch | policy | 1 node | 2 nodes |",
            "| locus | lard-r | 250 | 500 |",
            "| haproxy | uri-chash-bounded | 150 | 300 |",
            "| locus | wrr | 100 | 250 (200–300) |",
            "Each cell is the median over 2 runs",
            "### Cluster hit ratio",
            "| locus | lard | 0.900 | 0.900 |",
            "### Load imbalance",
            "LARD/R serves 500 req/s and WRR 250 req/s: 2.00× WRR's throughput",
            "LARD's cluster hit ratio is 0.900 against WRR's 0.650 (higher)",
            "(lard-r: 500 req/s, hit ratio 0.950) serves 1.67× the throughput of the best haproxy row (uri-chash-bounded: 300 req/s",
            "![Throughput](zipf-throughput.svg)",
            "| locus | wrr | proxy | 2 | 2 | 101 | host | 300 |",
            "### Best of each balancer (highest median throughput, 2 nodes, proxy mode)",
            "| haproxy | 1 | uri-chash-bounded | 300 | 3.0 |",
            "| nginx | 1 | uri-chash (load-blind) | 280 | 3.0 |",
            "Locus's best (`lard-r`) against haproxy's best (`uri-chash-bounded`): 1.67× (one seed) the throughput",
            "## Notes",
            "A note.",
            "10.253.0.100",
        ] {
            assert!(md.contains(needle), "missing {needle:?} in\n{md}");
        }
    }

    #[test]
    fn ratios_never_divide_by_zero() {
        assert_eq!(ratio_text(3.0, 1.5), "2.00×");
        assert_eq!(ratio_text(3.0, 0.0), "n/a");
    }

    #[test]
    fn writing_a_report_leaves_results_json_the_plots_and_report_md() {
        let dir = tempfile::tempdir().unwrap();
        let files = sample_report().write(dir.path()).unwrap();
        let names: Vec<String> =
            files.iter().map(|f| f.file_name().unwrap().to_string_lossy().into_owned()).collect();
        for n in
            ["results.json", "report.md", "zipf-throughput.svg", "zipf-hit-ratio.svg", "zipf-imbalance.svg"]
        {
            assert!(names.contains(&n.to_string()), "{n} not in {names:?}");
            assert!(dir.path().join(n).is_file());
        }
    }
}
