//! The lab demo's acceptance checks, at each workload's largest node count: `zipf` (LARD/R
//! against WRR and NGINX's URI hash), `hotspot` (LARD/R against the URI hashes, throughput and
//! p99), `dynamic` (CSLD's mean latency and errors), `coop` (cooperative caching, LARD/R, socket
//! cloning), and every workload's budget of errors and timeouts. A ratio against a point that served nothing
//! fails; `locus lab demo` exits non-zero when a check is not met or not measured.

use std::fmt::Write as _;

use crate::experiment::SwitchKind;
use crate::report::{LabReport, SeriesPoint, ratio_text};

/// One acceptance check of the demo.
#[derive(Clone, Debug, PartialEq)]
pub struct DemoCheck {
    pub name: String,
    /// `None` when the run did not produce the points the check needs.
    pub met: Option<bool>,
    pub detail: String,
}

impl DemoCheck {
    fn compare(
        name: String,
        points: Option<(&SeriesPoint, &SeriesPoint)>,
        f: impl Fn(&SeriesPoint, &SeriesPoint) -> (bool, String),
    ) -> DemoCheck {
        match points {
            // A ratio against a point that served nothing (or a mean of an empty histogram)
            // proves nothing: the check fails.
            Some((a, b)) if served_nothing(a) || served_nothing(b) => DemoCheck {
                name,
                met: Some(false),
                detail: format!("a point served nothing ({} and {} responses)", a.requests, b.requests),
            },
            Some((a, b)) => {
                let (met, detail) = f(a, b);
                DemoCheck { name, met: Some(met), detail }
            }
            None => DemoCheck { name, met: None, detail: "not measured".into() },
        }
    }

    /// Whether the check stops the demo: not met, or not measured.
    pub fn failed(&self) -> bool {
        self.met != Some(true)
    }
}

fn served_nothing(p: &SeriesPoint) -> bool {
    p.requests == 0 || p.rps <= 0.0
}

/// The share of a point's requests that may fail or time out before the demo's error check
/// fails: one in a thousand. Requests still in flight when the window ends (`outstanding`,
/// about one per client in a closed loop) are censored, not failed, and are not counted.
pub const ERROR_BUDGET: f64 = 0.001;

/// One check per workload: every point at its largest node count kept its failed and
/// timed-out requests within [`ERROR_BUDGET`] of what it served.
fn error_budget_check(report: &LabReport, w: &WorkloadPoints<'_>) -> DemoCheck {
    let name = format!(
        "{}: every point's errors and timeouts within {}% of its responses",
        w.workload,
        ERROR_BUDGET * 100.0
    );
    let over: Vec<String> = report
        .series(&w.workload)
        .iter()
        .filter_map(|s| s.at(w.nodes).map(|p| (s, p)))
        .filter(|(_, p)| p.errors as f64 > ERROR_BUDGET * p.requests as f64)
        .map(|(s, p)| format!("{}: {} of {} ({} timeouts)", s.label, p.errors, p.requests, p.timeouts))
        .collect();
    let met = over.is_empty();
    let detail = if met { "all within".to_string() } else { over.join("; ") };
    DemoCheck { name, met: Some(met), detail }
}

/// The points of one workload at its largest node count, looked up by switch, policy and mode.
struct WorkloadPoints<'r> {
    report: &'r LabReport,
    workload: String,
    nodes: usize,
}

impl<'r> WorkloadPoints<'r> {
    fn new(report: &'r LabReport, workload: &str) -> Option<WorkloadPoints<'r>> {
        let nodes = report.points.iter().filter(|p| p.workload == workload).map(|p| p.nodes).max()?;
        Some(WorkloadPoints { report, workload: workload.to_string(), nodes })
    }

    fn at(&self, switch: SwitchKind, policy: &str) -> Option<SeriesPoint> {
        self.at_mode(switch, policy, "proxy")
    }

    fn at_mode(&self, switch: SwitchKind, policy: &str, mode: &str) -> Option<SeriesPoint> {
        self.report
            .series(&self.workload)
            .into_iter()
            .find(|s| s.switch == switch && s.policy == policy && s.mode == mode)?
            .at(self.nodes)
            .cloned()
    }

    fn pair(&self, a: (SwitchKind, &str), b: (SwitchKind, &str)) -> Option<(SeriesPoint, SeriesPoint)> {
        Some((self.at(a.0, a.1)?, self.at(b.0, b.1)?))
    }
}

fn pair_ref(p: &Option<(SeriesPoint, SeriesPoint)>) -> Option<(&SeriesPoint, &SeriesPoint)> {
    p.as_ref().map(|(a, b)| (a, b))
}

fn throughput_at_least(factor: f64) -> impl Fn(&SeriesPoint, &SeriesPoint) -> (bool, String) {
    move |a, b| {
        (
            a.rps >= factor * b.rps,
            format!("{:.0} vs {:.0} req/s = {}", a.rps, b.rps, ratio_text(a.rps, b.rps)),
        )
    }
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
            checks.push(error_budget_check(report, &w));
        }
    }
    let rows = |kind: SwitchKind| report.points.iter().filter(|p| p.switch == kind).count();
    let (l, h, x) = (rows(SwitchKind::Locus), rows(SwitchKind::Haproxy), rows(SwitchKind::Nginx));
    checks.push(DemoCheck {
        name: "Locus rows beside HAProxy's and NGINX's in one run".into(),
        met: Some(l > 0 && h > 0 && x > 0),
        detail: format!("{l} Locus, {h} HAProxy and {x} NGINX points"),
    });
    checks
}

fn zipf_checks(w: &WorkloadPoints<'_>, checks: &mut Vec<DemoCheck>) {
    let n = w.nodes;
    let lard_r = (SwitchKind::Locus, "lard-r");
    let p = w.pair(lard_r, (SwitchKind::Locus, "wrr"));
    checks.push(DemoCheck::compare(
        format!("zipf: LARD/R throughput ≥ 2× WRR at {n} nodes"),
        pair_ref(&p),
        throughput_at_least(2.0),
    ));
    let p = w.pair((SwitchKind::Locus, "lard"), (SwitchKind::Locus, "wrr"));
    checks.push(DemoCheck::compare(
        format!("zipf: LARD's cluster hit ratio above WRR's at {n} nodes"),
        pair_ref(&p),
        |a, b| (a.hit_ratio > b.hit_ratio, format!("{:.3} vs {:.3}", a.hit_ratio, b.hit_ratio)),
    ));
    let p = w.pair(lard_r, (SwitchKind::Nginx, "uri-chash"));
    checks.push(DemoCheck::compare(
        format!("zipf: LARD/R throughput ≥ 0.97× NGINX's URI hash at {n} nodes"),
        pair_ref(&p),
        throughput_at_least(0.97),
    ));
}

fn hotspot_checks(w: &WorkloadPoints<'_>, checks: &mut Vec<DemoCheck>) {
    let n = w.nodes;
    let lard_r = (SwitchKind::Locus, "lard-r");
    for (other, label, factor) in [
        ((SwitchKind::Nginx, "uri-chash"), "NGINX's URI hash", 1.5),
        ((SwitchKind::Haproxy, "uri-chash-bounded"), "HAProxy's bounded-load URI hash", 1.2),
    ] {
        let p = w.pair(lard_r, other);
        checks.push(DemoCheck::compare(
            format!("hotspot: LARD/R throughput ≥ {factor}× {label} at {n} nodes"),
            pair_ref(&p),
            throughput_at_least(factor),
        ));
        checks.push(DemoCheck::compare(
            format!("hotspot: LARD/R p99 no higher than {label}'s"),
            pair_ref(&p),
            |a, b| (a.p99_ms <= b.p99_ms, format!("{:.1} vs {:.1} ms", a.p99_ms, b.p99_ms)),
        ));
    }
}

fn coop_checks(w: &WorkloadPoints<'_>, checks: &mut Vec<DemoCheck>) {
    let n = w.nodes;
    let (cf_lru, cf_lfu) = ((SwitchKind::Locus, "rr+cf-lru"), (SwitchKind::Locus, "rr+cf-lfu"));
    let p = w.pair(cf_lru, (SwitchKind::Locus, "rr"));
    checks.push(DemoCheck::compare(
        format!("coop: cooperative caching (CF-LRU) throughput ≥ 1.2× round robin's at {n} nodes"),
        pair_ref(&p),
        throughput_at_least(1.2),
    ));
    checks.push(DemoCheck::compare(
        "coop: CF-LRU's nodes serve at least a tenth of their lookups from a peer's memory".into(),
        pair_ref(&p),
        |a, _| {
            (a.remote_hit_ratio >= 0.1, format!("{:.3} remote, {:.3} local", a.remote_hit_ratio, a.hit_ratio))
        },
    ));
    let p = w.pair(cf_lfu, cf_lru);
    checks.push(DemoCheck::compare(
        format!("coop: CF-LFU throughput ≥ 0.95× CF-LRU's at {n} nodes"),
        pair_ref(&p),
        throughput_at_least(0.95),
    ));
    let p = w.pair((SwitchKind::Locus, "lard-r"), cf_lfu);
    checks.push(DemoCheck::compare(
        format!("coop: LARD/R throughput above cooperative caching's (CF-LFU) at {n} nodes"),
        pair_ref(&p),
        throughput_at_least(1.0),
    ));
    let sc = w.at_mode(SwitchKind::Locus, "hash", "l4");
    let p = sc.zip(w.at(cf_lfu.0, cf_lfu.1));
    checks.push(DemoCheck::compare(
        format!("coop: socket cloning (l4, URI hash) throughput above CF-LFU's at {n} nodes"),
        pair_ref(&p),
        throughput_at_least(1.0),
    ));
}

fn dynamic_checks(w: &WorkloadPoints<'_>, checks: &mut Vec<DemoCheck>) {
    let n = w.nodes;
    let csld = (SwitchKind::Locus, "csld");
    let p = w.pair(csld, (SwitchKind::Locus, "rr"));
    checks.push(DemoCheck::compare(
        format!("dynamic: CSLD mean latency ≤ 0.7× round robin's at {n} nodes"),
        pair_ref(&p),
        |a, b| (a.mean_ms <= 0.7 * b.mean_ms, mean_detail(a, b)),
    ));
    let p = w.pair(csld, (SwitchKind::Haproxy, "leastconn"));
    checks.push(DemoCheck::compare(
        format!("dynamic: CSLD mean latency no worse than HAProxy leastconn's at {n} nodes"),
        pair_ref(&p),
        |a, b| (a.mean_ms <= b.mean_ms, mean_detail(a, b)),
    ));
    let rr = w.at(SwitchKind::Locus, "rr");
    let lc = w.at(SwitchKind::Haproxy, "leastconn");
    let mine = w.at(csld.0, csld.1);
    checks.push(match (mine, rr, lc) {
        (Some(c), Some(r), Some(l)) => DemoCheck {
            name: "dynamic: CSLD has no more errors than round robin or HAProxy leastconn".into(),
            met: Some(c.errors <= r.errors && c.errors <= l.errors),
            detail: format!("{} vs {} and {} errors (timeouts included)", c.errors, r.errors, l.errors),
        },
        _ => DemoCheck {
            name: "dynamic: CSLD has no more errors than round robin or HAProxy leastconn".into(),
            met: None,
            detail: "not measured".into(),
        },
    });
}

fn mean_detail(a: &SeriesPoint, b: &SeriesPoint) -> String {
    format!("{:.1} vs {:.1} ms = {}", a.mean_ms, b.mean_ms, ratio_text(a.mean_ms, b.mean_ms))
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
        assert!(checks[0].detail.contains("500 vs 250"), "{}", checks[0].detail);
        assert_eq!(checks[1].met, Some(true));
        assert_eq!(checks[2].met, Some(true), "LARD/R 500 vs NGINX 280: {:?}", checks[2]);
        assert_eq!(checks[3].met, Some(true), "zipf's error budget: {:?}", checks[3]);
        assert_eq!(checks[4].met, Some(true));
        assert!(checks.iter().all(|c| !c.failed()));
        let md = checks_markdown(&checks);
        assert!(
            md.contains("| zipf: LARD/R throughput ≥ 2× WRR at 2 nodes | met | 500 vs 250 req/s = 2.00× |"),
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
        let checks: Vec<DemoCheck> =
            demo_checks(&r).into_iter().filter(|c| c.name.starts_with("hotspot")).collect();
        let verdicts: Vec<Option<bool>> = checks.iter().map(|c| c.met).collect();
        // 3000 ≥ 1.5 × 1900; p99 100 ≤ 300; 3000 < 1.2 × 2600; p99 100 > 90.
        assert_eq!(verdicts, [Some(true), Some(true), Some(false), Some(false)], "{checks:?}");
        assert!(checks[2].detail.contains("1.15×"), "{}", checks[2].detail);
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
        // 20 > 0.7 × 30 = 21? No: 20 ≤ 21, met; 20 ≤ 21 met; 0 errors ≤ 0 and ≤ 2.
        assert_eq!(verdicts, [Some(true), Some(true), Some(true)], "{checks:?}");
        r.points.retain(|p| !(p.workload == "dynamic" && p.policy == "rr"));
        let checks: Vec<DemoCheck> =
            demo_checks(&r).into_iter().filter(|c| c.name.starts_with("dynamic")).collect();
        assert_eq!((checks[0].met, checks[2].met), (None, None), "no round robin point: not measured");
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
        sc.mode = "l4".into();
        r.points.push(sc);
        let last = demo_checks(&r).into_iter().rfind(|c| c.name.starts_with("coop")).unwrap();
        assert_eq!(last.met, Some(true), "2000 > 1400: {last:?}");
        assert!(checks[1].detail.contains("0.200 remote"), "{}", checks[1].detail);
    }
}
