//! The lab demo's acceptance checks, at each workload's largest node count: `zipf` (LARD/R
//! against WRR and NGINX's best), `hotspot` (LARD/R against the best HAProxy and NGINX
//! configurations, throughput and p99), `dynamic` (CSLD's mean latency and errors against the
//! best rivals), `coop` (cooperative caching, LARD/R, socket cloning), and every workload's
//! budget of errors and timeouts. Each balancer is represented by its best configuration (by
//! median); a ratio is taken seed by seed and holds on its median while the worst seed must
//! not lose. A ratio against a point that served nothing fails. The comparisons with the
//! rivals' best are the issue's targets: reported met or not met, as measured; `locus lab demo`
//! exits non-zero when a check is not met, or anything is not measured.

use std::fmt::Write as _;

use crate::experiment::SwitchKind;
use crate::report::{Best, LabReport, PairedRatio, SeedRun, Series, SeriesPoint, best_series};

/// One acceptance check of the demo.
#[derive(Clone, Debug, PartialEq)]
pub struct DemoCheck {
    pub name: String,
    /// `None` when the run did not produce the points the check needs.
    pub met: Option<bool>,
    pub detail: String,
    /// A target against the rivals' best (reported, not a reason to fail the run when
    /// measured and missed), not a check of what the demo must show.
    pub target: bool,
}

/// A point as a check names it: its series (switch and configuration) and its numbers.
type Named = (Series, SeriesPoint);

impl DemoCheck {
    fn compare(
        name: String,
        points: Option<(&Named, &Named)>,
        f: impl Fn(&Named, &Named) -> (bool, String),
    ) -> DemoCheck {
        match points {
            // A ratio against a point that served nothing (or a mean of an empty histogram)
            // proves nothing: the check fails.
            Some((a, b)) if served_nothing(&a.1) || served_nothing(&b.1) => DemoCheck {
                name,
                met: Some(false),
                detail: format!("a point served nothing ({} and {} responses)", a.1.requests, b.1.requests),
                target: false,
            },
            Some((a, b)) => {
                let (met, detail) = f(a, b);
                DemoCheck { name, met: Some(met), detail, target: false }
            }
            None => DemoCheck { name, met: None, detail: "not measured".into(), target: false },
        }
    }

    /// The same comparison, as a target: a ratio against nothing still fails the run.
    fn into_target(self) -> DemoCheck {
        let nothing = self.detail.starts_with("a point served nothing");
        DemoCheck { target: !nothing, ..self }
    }

    /// Whether the check stops the demo: a check not met, or anything not measured.
    pub fn failed(&self) -> bool {
        match self.met {
            None => true,
            Some(met) => !met && !self.target,
        }
    }
}

fn served_nothing(p: &SeriesPoint) -> bool {
    p.requests == 0 || p.rps <= 0.0 || p.by_seed.iter().any(|r| r.rps <= 0.0)
}

/// The share of a point's requests that may fail or time out before the demo's error check
/// fails: one in a thousand. Requests still in flight when the window ends (`outstanding`,
/// about one per client in a closed loop) are censored, not failed, and are not counted.
pub const ERROR_BUDGET: f64 = 0.001;

/// One check per workload: every point at its largest node count kept its failed and
/// timed-out requests within [`ERROR_BUDGET`] of what it served.
fn error_budget_check(w: &WorkloadPoints) -> DemoCheck {
    let name = format!(
        "{}: every point's errors and timeouts within {}% of its responses",
        w.workload,
        ERROR_BUDGET * 100.0
    );
    let over: Vec<String> = w
        .series
        .iter()
        .filter_map(|s| s.at(w.nodes).map(|p| (s, p)))
        .filter(|(_, p)| p.errors as f64 > ERROR_BUDGET * p.requests as f64)
        .map(|(s, p)| format!("{}: {} of {} ({} timeouts)", s.label, p.errors, p.requests, p.timeouts))
        .collect();
    let met = over.is_empty();
    let detail = if met { "all within".to_string() } else { over.join("; ") };
    DemoCheck { name, met: Some(met), detail, target: false }
}

/// The points of one workload at its largest node count.
struct WorkloadPoints {
    series: Vec<Series>,
    workload: String,
    nodes: usize,
}

impl WorkloadPoints {
    fn new(report: &LabReport, workload: &str) -> Option<WorkloadPoints> {
        let nodes = report.points.iter().filter(|p| p.workload == workload).map(|p| p.nodes).max()?;
        Some(WorkloadPoints { series: report.series(workload), workload: workload.to_string(), nodes })
    }

    /// The best configuration of `switch` (in proxy mode) whose policy is `policy` (any
    /// policy when `None`).
    fn best(&self, switch: SwitchKind, policy: Option<&str>, by: Best) -> Option<Named> {
        self.best_in_mode(switch, policy, "proxy", by)
    }

    fn best_in_mode(&self, switch: SwitchKind, policy: Option<&str>, mode: &str, by: Best) -> Option<Named> {
        best_series(&self.series, self.nodes, switch, policy, Some(mode), by)
    }

    fn pair(&self, a: Option<Named>, b: Option<Named>) -> Option<(Named, Named)> {
        Some((a?, b?))
    }
}

fn pair_ref(p: &Option<(Named, Named)>) -> Option<(&Named, &Named)> {
    p.as_ref().map(|(a, b)| (a, b))
}

/// `a`'s throughput over `b`'s, seed by seed: the median at least `factor`, and no seed
/// below `min(factor, 1)` (the worst seed must not lose; a parity target allows its own slack).
fn throughput_at_least(factor: f64) -> impl Fn(&Named, &Named) -> (bool, String) {
    move |a, b| ratio_check(a, b, |r| r.rps, factor, true, "req/s")
}

/// `a`'s mean latency over `b`'s: the median at most `factor` and no seed above 1.
fn mean_at_most(factor: f64) -> impl Fn(&Named, &Named) -> (bool, String) {
    move |a, b| ratio_check(a, b, |r| r.mean_ms, factor, false, "ms mean")
}

/// `a`'s p99 over `b`'s: the median at most 1.
fn p99_no_higher(a: &Named, b: &Named) -> (bool, String) {
    ratio_check(a, b, |r| r.p99_ms, 1.0, false, "ms p99")
}

fn ratio_check(
    a: &Named,
    b: &Named,
    value: impl Fn(&SeedRun) -> f64,
    factor: f64,
    higher_is_better: bool,
    unit: &str,
) -> (bool, String) {
    let Some(r) = PairedRatio::of(&a.1, &b.1, &value) else {
        return (false, "no seed that both ran".into());
    };
    let met = if higher_is_better {
        r.median >= factor && r.min >= factor.min(1.0)
    } else {
        r.median <= factor && r.max <= factor.max(1.0)
    };
    let (va, vb) = (median_of(&a.1, &value), median_of(&b.1, &value));
    let detail = format!("{} {va:.1} vs {} {vb:.1} {unit}: {}", a.0.config, b.0.config, r.text());
    (met, detail)
}

fn median_of(p: &SeriesPoint, value: impl Fn(&SeedRun) -> f64) -> f64 {
    crate::report::median(p.by_seed.iter().map(value))
}

/// The demo's acceptance checks, from the measured points.
pub fn demo_checks(report: &LabReport) -> Vec<DemoCheck> {
    let mut checks = Vec::new();
    if let Some(w) = WorkloadPoints::new(report, "zipf") {
        zipf_checks(&w, &mut checks);
    }
    if let Some(w) = WorkloadPoints::new(report, "hotspot") {
        hotspot_checks(&w, &mut checks);
    }
    if let Some(w) = WorkloadPoints::new(report, "dynamic") {
        dynamic_checks(&w, &mut checks);
    }
    if let Some(w) = WorkloadPoints::new(report, "coop") {
        coop_checks(&w, &mut checks);
    }
    for workload in report.workloads() {
        if let Some(w) = WorkloadPoints::new(report, &workload) {
            checks.push(error_budget_check(&w));
        }
    }
    let rows = |kind: SwitchKind| report.points.iter().filter(|p| p.switch == kind).count();
    let (l, h, x) = (rows(SwitchKind::Locus), rows(SwitchKind::Haproxy), rows(SwitchKind::Nginx));
    checks.push(DemoCheck {
        name: "Locus rows beside HAProxy's and NGINX's in one run".into(),
        met: Some(l > 0 && h > 0 && x > 0),
        detail: format!("{l} Locus, {h} HAProxy and {x} NGINX points"),
        target: false,
    });
    checks
}

fn zipf_checks(w: &WorkloadPoints, checks: &mut Vec<DemoCheck>) {
    let n = w.nodes;
    let t = Best::Throughput;
    let lard_r = || w.best(SwitchKind::Locus, Some("lard-r"), t);
    let wrr = || w.best(SwitchKind::Locus, Some("wrr"), t);
    let p = w.pair(lard_r(), wrr());
    checks.push(DemoCheck::compare(
        format!("zipf: LARD/R throughput ≥ 2× WRR at {n} nodes"),
        pair_ref(&p),
        throughput_at_least(2.0),
    ));
    let p = w.pair(w.best(SwitchKind::Locus, Some("lard"), t), wrr());
    checks.push(DemoCheck::compare(
        format!("zipf: LARD's cluster hit ratio above WRR's at {n} nodes"),
        pair_ref(&p),
        |a, b| {
            (a.1.hit_ratio > b.1.hit_ratio, format!("{:.3} vs {:.3} (medians)", a.1.hit_ratio, b.1.hit_ratio))
        },
    ));
    let p = w.pair(lard_r(), w.best(SwitchKind::Nginx, None, t));
    checks.push(
        DemoCheck::compare(
            format!("zipf: LARD/R throughput ≥ 0.97× NGINX's best at {n} nodes"),
            pair_ref(&p),
            throughput_at_least(0.97),
        )
        .into_target(),
    );
}

fn hotspot_checks(w: &WorkloadPoints, checks: &mut Vec<DemoCheck>) {
    let n = w.nodes;
    let t = Best::Throughput;
    for (other, label, factor) in [(SwitchKind::Haproxy, "HAProxy", 1.3), (SwitchKind::Nginx, "NGINX", 1.5)] {
        let p = w.pair(w.best(SwitchKind::Locus, Some("lard-r"), t), w.best(other, None, t));
        checks.push(
            DemoCheck::compare(
                format!(
                    "hotspot: LARD/R throughput ≥ {factor}× {label}'s best at {n} nodes, no seed below 1×"
                ),
                pair_ref(&p),
                throughput_at_least(factor),
            )
            .into_target(),
        );
        checks.push(
            DemoCheck::compare(
                format!("hotspot: LARD/R p99 no higher than {label}'s best"),
                pair_ref(&p),
                p99_no_higher,
            )
            .into_target(),
        );
    }
}

fn coop_checks(w: &WorkloadPoints, checks: &mut Vec<DemoCheck>) {
    let n = w.nodes;
    let t = Best::Throughput;
    let locus = |policy: &str| w.best(SwitchKind::Locus, Some(policy), t);
    let p = w.pair(locus("rr+cf-lru"), locus("rr"));
    checks.push(DemoCheck::compare(
        format!("coop: cooperative caching (CF-LRU) throughput ≥ 1.2× round robin's at {n} nodes"),
        pair_ref(&p),
        throughput_at_least(1.2),
    ));
    checks.push(DemoCheck::compare(
        "coop: CF-LRU's nodes serve at least a tenth of their lookups from a peer's memory".into(),
        pair_ref(&p),
        |a, _| {
            let a = &a.1;
            (a.remote_hit_ratio >= 0.1, format!("{:.3} remote, {:.3} local", a.remote_hit_ratio, a.hit_ratio))
        },
    ));
    let p = w.pair(locus("rr+cf-lfu"), locus("rr+cf-lru"));
    checks.push(DemoCheck::compare(
        format!("coop: CF-LFU throughput ≥ 0.95× CF-LRU's at {n} nodes"),
        pair_ref(&p),
        throughput_at_least(0.95),
    ));
    let p = w.pair(locus("lard-r"), locus("rr+cf-lfu"));
    checks.push(DemoCheck::compare(
        format!("coop: LARD/R throughput above cooperative caching's (CF-LFU) at {n} nodes"),
        pair_ref(&p),
        throughput_at_least(1.0),
    ));
    let p = w.pair(w.best_in_mode(SwitchKind::Locus, Some("hash"), "l4", t), locus("rr+cf-lfu"));
    checks.push(DemoCheck::compare(
        format!("coop: socket cloning (l4, URI hash) throughput above CF-LFU's at {n} nodes"),
        pair_ref(&p),
        throughput_at_least(1.0),
    ));
}

fn dynamic_checks(w: &WorkloadPoints, checks: &mut Vec<DemoCheck>) {
    let n = w.nodes;
    let m = Best::MeanLatency;
    let csld = || w.best(SwitchKind::Locus, Some("csld"), m);
    let p = w.pair(csld(), w.best(SwitchKind::Locus, Some("rr"), m));
    checks.push(DemoCheck::compare(
        format!("dynamic: CSLD mean latency ≤ 0.7× round robin's at {n} nodes"),
        pair_ref(&p),
        mean_at_most(0.7),
    ));
    let rival = [SwitchKind::Haproxy, SwitchKind::Nginx]
        .into_iter()
        .filter_map(|k| w.best(k, None, m))
        .min_by(|a, b| a.1.mean_ms.total_cmp(&b.1.mean_ms));
    let p = w.pair(csld(), rival);
    checks.push(
        DemoCheck::compare(
            format!(
                "dynamic: CSLD mean latency ≤ 0.9× the best HAProxy or NGINX configuration's at {n} nodes"
            ),
            pair_ref(&p),
            mean_at_most(0.9),
        )
        .into_target(),
    );
    checks.push(
        DemoCheck::compare(
            "dynamic: CSLD has no more errors and timeouts than that rival".into(),
            pair_ref(&p),
            |a, b| {
                let (a, b) = (&a.1, &b.1);
                (
                    a.errors <= b.errors,
                    format!(
                        "{} vs {} errors ({} vs {} timeouts)",
                        a.errors, b.errors, a.timeouts, b.timeouts
                    ),
                )
            },
        )
        .into_target(),
    );
}

/// The checks as a Markdown section.
pub fn checks_markdown(checks: &[DemoCheck]) -> String {
    let mut out = String::from(
        "### Checks and targets of this run\n\nA check is what the demo must show (the run fails without it); a target \
         is a comparison with the rivals' best configurations, reported as measured. Ratios are taken seed by seed: \
         median (range over the seeds).\n\n| check or target | result | measured |\n|---|---|---|\n",
    );
    for c in checks {
        let verdict = match c.met {
            Some(true) => "met",
            Some(false) => "**not met**",
            None => "not measured",
        };
        let kind = if c.target { "target" } else { "check" };
        let _ = writeln!(out, "| {kind}: {} | {verdict} | {} |", c.name, c.detail);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::tests::{point, sample_report};

    fn at(
        workload: &str,
        switch: SwitchKind,
        policy: &str,
        rps: f64,
        mean_ms: f64,
        p99_ms: f64,
    ) -> crate::results::PointResult {
        let mut p = point(switch, policy, 4, rps, 0.9);
        p.workload = workload.into();
        p.mean_ms = mean_ms;
        p.p99_ms = p99_ms;
        p
    }

    #[test]
    fn checks_compare_lard_r_with_wrr_and_find_every_switch() {
        let checks = demo_checks(&sample_report());
        assert_eq!(checks.len(), 5, "{checks:?}");
        assert_eq!(checks[0].met, Some(true), "{:?}", checks[0]);
        // Paired by seed: LARD/R ran seed 1 only, where WRR served 200 (its median over two
        // seeds is 250).
        assert!(
            checks[0].detail.contains("lard-r 500.0 vs wrr 250.0 req/s: 2.50× (one seed)"),
            "{}",
            checks[0].detail
        );
        assert_eq!(checks[1].met, Some(true));
        assert_eq!(checks[2].met, Some(true), "LARD/R 500 vs NGINX 280: {:?}", checks[2]);
        assert_eq!(checks[3].met, Some(true), "zipf's error budget: {:?}", checks[3]);
        assert_eq!(checks[4].met, Some(true));
        assert!(checks.iter().all(|c| !c.failed()));
        let md = checks_markdown(&checks);
        assert!(
            md.contains("| check: zipf: LARD/R throughput ≥ 2× WRR at 2 nodes | met | lard-r 500.0 vs wrr 250.0 req/s: 2.50× (one seed) |"),
            "{md}"
        );
        let mut r = sample_report();
        r.points.retain(|p| p.switch == SwitchKind::Locus && p.policy != "lard-r");
        let checks = demo_checks(&r);
        assert_eq!(checks[0].met, None);
        assert!(checks[0].failed(), "a check not measured stops the demo");
        assert_eq!(checks.last().unwrap().met, Some(false));
    }

    #[test]
    fn a_ratio_against_a_point_that_served_nothing_fails_the_check() {
        let mut r = sample_report();
        for p in r.points.iter_mut().filter(|p| p.policy == "wrr") {
            (p.rps, p.requests) = (0.0, 0);
        }
        let first = demo_checks(&r).remove(0);
        assert_eq!(first.met, Some(false), "LARD/R ÷ an empty WRR is no win: {first:?}");
        assert!(first.failed());
        let mut r = sample_report();
        for p in r.points.iter_mut().filter(|p| p.switch == SwitchKind::Nginx) {
            (p.rps, p.requests) = (0.0, 0);
        }
        let target = demo_checks(&r).into_iter().find(|c| c.name.contains("NGINX's best")).unwrap();
        assert!(!target.target && target.failed(), "a target against nothing is a failed check: {target:?}");
        assert!(first.detail.contains("served nothing"), "{}", first.detail);
    }

    #[test]
    fn errors_or_timeouts_over_the_budget_fail_the_workload_check_and_in_flight_requests_do_not() {
        let mut r = sample_report();
        let budget = |r: &crate::report::LabReport| {
            demo_checks(r).into_iter().find(|c| c.name.starts_with("zipf: every point's errors")).unwrap()
        };
        assert_eq!(budget(&r).met, Some(true));
        // One in a thousand of a point's responses may fail or time out; one more fails the
        // check. Requests in flight at the window's end (one per client) are not failures.
        let nginx = r.points.iter_mut().find(|p| p.switch == SwitchKind::Nginx && p.nodes == 2).unwrap();
        let allowed = (nginx.requests as f64 * ERROR_BUDGET).floor() as u64;
        (nginx.errors, nginx.timeouts, nginx.outstanding) = (allowed, allowed, 128);
        assert_eq!(budget(&r).met, Some(true), "{:?}", budget(&r));
        let nginx = r.points.iter_mut().find(|p| p.switch == SwitchKind::Nginx && p.nodes == 2).unwrap();
        nginx.errors += 1;
        let check = budget(&r);
        assert_eq!(check.met, Some(false), "{check:?}");
        assert!(check.detail.contains("nginx uri-chash: 2 of"), "{}", check.detail);
    }

    #[test]
    fn hotspot_checks_need_both_throughput_ratios_and_a_p99_no_higher() {
        let mut r = sample_report();
        r.points.push(at("hotspot", SwitchKind::Locus, "lard-r", 3000.0, 40.0, 100.0));
        r.points.push(at("hotspot", SwitchKind::Nginx, "uri-chash", 1900.0, 60.0, 300.0));
        r.points.push(at("hotspot", SwitchKind::Haproxy, "uri-chash-bounded", 2600.0, 45.0, 90.0));
        r.points.push(at("hotspot", SwitchKind::Haproxy, "leastconn", 1000.0, 45.0, 50.0));
        let checks: Vec<DemoCheck> =
            demo_checks(&r).into_iter().filter(|c| c.name.starts_with("hotspot")).collect();
        let verdicts: Vec<Option<bool>> = checks.iter().map(|c| c.met).collect();
        // HAProxy's best is the bounded hash (2600 > 1000), p99 90 (leastconn's 50 is not
        // its best): 3000 < 1.3 × 2600; p99 100 > 90; 3000 ≥ 1.5 × 1900; p99 100 ≤ 300.
        assert_eq!(verdicts, [Some(false), Some(false), Some(true), Some(true)], "{checks:?}");
        assert!(checks[0].detail.contains("uri-chash-bounded 2600.0 req/s: 1.15×"), "{}", checks[0].detail);
        // Targets: reported not met, but the run does not fail on them.
        assert!(checks.iter().all(|c| c.target && !c.failed()), "{checks:?}");
    }

    /// The rows of a workload at three seeds: `rps[i]` at seed 1 + 100 i.
    fn seeded(
        workload: &str,
        switch: SwitchKind,
        config: &str,
        rps: [f64; 3],
    ) -> Vec<crate::results::PointResult> {
        rps.iter()
            .enumerate()
            .map(|(i, &v)| {
                let mut p = at(workload, switch, config.split(' ').next().unwrap(), v, 10.0, 50.0);
                (p.config, p.repetition, p.seed) = (config.into(), i as u32 + 1, 1 + 100 * i as u64);
                p
            })
            .collect()
    }

    #[test]
    fn the_targets_are_the_comparisons_with_the_rivals_best_and_nothing_else() {
        let mut r = sample_report();
        r.points.push(at("hotspot", SwitchKind::Locus, "lard-r", 3000.0, 40.0, 100.0));
        r.points.push(at("dynamic", SwitchKind::Locus, "csld", 700.0, 20.0, 80.0));
        let targets: Vec<String> = demo_checks(&r).into_iter().filter(|c| c.target).map(|c| c.name).collect();
        let starts: Vec<&str> = targets.iter().map(|n| n.split(" at ").next().unwrap()).collect();
        assert_eq!(
            starts,
            [
                "zipf: LARD/R throughput ≥ 0.97× NGINX's best",
                "hotspot: LARD/R throughput ≥ 1.3× HAProxy's best",
                "hotspot: LARD/R p99 no higher than HAProxy's best",
                "hotspot: LARD/R throughput ≥ 1.5× NGINX's best",
                "hotspot: LARD/R p99 no higher than NGINX's best",
                "dynamic: CSLD mean latency ≤ 0.9× the best HAProxy or NGINX configuration's",
                "dynamic: CSLD has no more errors and timeouts than that rival",
            ],
            "{targets:?}"
        );
    }

    #[test]
    fn a_check_holds_on_the_median_of_paired_ratios_and_fails_when_the_worst_seed_loses() {
        let mut r = sample_report();
        r.points.extend(seeded("hotspot", SwitchKind::Locus, "lard-r t_low=4", [3000.0, 3100.0, 2900.0]));
        // LARD/R at the paper's thresholds is worse: the best LARD/R configuration counts.
        r.points.extend(seeded("hotspot", SwitchKind::Locus, "lard-r t_low=25", [1000.0, 1000.0, 1000.0]));
        r.points.extend(seeded("hotspot", SwitchKind::Nginx, "uri-chash", [1500.0, 1800.0, 1900.0]));
        // HAProxy's best by median (2000) is the factor-125 hash; its seed 3 beats LARD/R.
        r.points.extend(seeded(
            "hotspot",
            SwitchKind::Haproxy,
            "uri-chash-bounded",
            [1900.0, 1900.0, 1900.0],
        ));
        r.points.extend(seeded(
            "hotspot",
            SwitchKind::Haproxy,
            "uri-chash-bounded factor=125",
            [1500.0, 2000.0, 3000.0],
        ));
        let checks: Vec<DemoCheck> = demo_checks(&r)
            .into_iter()
            .filter(|c| c.name.contains("throughput"))
            .filter(|c| c.name.starts_with("hotspot"))
            .collect();
        // Against HAProxy: 2.00, 1.55, 0.97: median 1.55 ≥ 1.3 but the worst seed loses.
        assert_eq!(checks[0].met, Some(false), "{:?}", checks[0]);
        assert!(
            checks[0].detail.contains("factor=125")
                && checks[0].detail.contains("1.55× (0.97–2.00 over 3 seeds)"),
            "{}",
            checks[0].detail
        );
        // Against NGINX: 2.00, 1.72, 1.53: median 1.72 ≥ 1.5, worst ≥ 1.
        assert_eq!(checks[1].met, Some(true), "{:?}", checks[1]);
    }

    #[test]
    fn dynamic_checks_compare_csld_means_and_errors() {
        let mut r = sample_report();
        r.points.push(at("dynamic", SwitchKind::Locus, "csld", 700.0, 20.0, 80.0));
        r.points.push(at("dynamic", SwitchKind::Locus, "rr", 700.0, 30.0, 200.0));
        let mut lc = at("dynamic", SwitchKind::Haproxy, "leastconn", 700.0, 21.0, 90.0);
        lc.errors = 2;
        r.points.push(lc);
        let checks: Vec<DemoCheck> =
            demo_checks(&r).into_iter().filter(|c| c.name.starts_with("dynamic")).collect();
        let verdicts: Vec<Option<bool>> = checks.iter().map(|c| c.met).collect();
        // 20 ≤ 0.7 × 30 = 21, met; 20 > 0.9 × 21 = 18.9, not met; 0 errors ≤ 2.
        assert_eq!(verdicts, [Some(true), Some(false), Some(true)], "{checks:?}");
        // NGINX's least_conn at 25 ms is not the best rival; at 22.5 ms it is not either.
        r.points.push(at("dynamic", SwitchKind::Nginx, "least-conn", 700.0, 25.0, 90.0));
        let checks: Vec<DemoCheck> =
            demo_checks(&r).into_iter().filter(|c| c.name.starts_with("dynamic")).collect();
        assert!(checks[1].detail.contains("vs leastconn 21.0 ms mean"), "{}", checks[1].detail);
        assert!(!checks[0].target && checks[1].target && checks[2].target, "{checks:?}");
        assert!(!checks[1].failed(), "a target measured and missed does not fail the run");
        r.points.retain(|p| !(p.workload == "dynamic" && p.policy == "rr"));
        r.points.retain(|p| !(p.workload == "dynamic" && p.switch != SwitchKind::Locus));
        let checks: Vec<DemoCheck> =
            demo_checks(&r).into_iter().filter(|c| c.name.starts_with("dynamic")).collect();
        assert_eq!((checks[0].met, checks[2].met), (None, None), "no baseline points: not measured");
        assert!(checks[2].failed(), "a target not measured fails the run");
    }

    #[test]
    fn coop_checks_compare_cooperative_caching_with_round_robin_and_lard_r() {
        let mut r = sample_report();
        for (policy, rps, remote) in [
            ("rr", 900.0, 0.0),
            ("rr+cf-lru", 1500.0, 0.2),
            ("rr+cf-lfu", 1400.0, 0.2),
            ("lard-r", 1450.0, 0.0),
        ] {
            let mut p = at("coop", SwitchKind::Locus, policy, rps, 10.0, 50.0);
            p.remote_hit_ratio = remote;
            r.points.push(p);
        }
        let checks: Vec<DemoCheck> =
            demo_checks(&r).into_iter().filter(|c| c.name.starts_with("coop")).collect();
        let verdicts: Vec<Option<bool>> = checks.iter().map(|c| c.met).collect();
        // 1500 ≥ 1.2 × 900; 0.2 remote ≥ 0.1; 1400 ≥ 0.95 × 1500 = 1425? No; 1450 > 1400; no
        // l4 point.
        assert_eq!(verdicts, [Some(true), Some(true), Some(false), Some(true), None], "{checks:?}");
        let mut sc = at("coop", SwitchKind::Locus, "hash", 2000.0, 10.0, 50.0);
        assert!(checks.iter().all(|c| !c.target), "coop has checks only");
        sc.mode = "l4".into();
        r.points.push(sc);
        let last = demo_checks(&r).into_iter().rfind(|c| c.name.starts_with("coop")).unwrap();
        assert_eq!(last.met, Some(true), "2000 > 1400: {last:?}");
        assert!(checks[1].detail.contains("0.200 remote"), "{}", checks[1].detail);
    }
}
