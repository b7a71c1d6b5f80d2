//! The CSLD paper's claims (CSLD.md §7) checked against the study's points: orderings of
//! Table 4, Table 5's knee and Fig. 6's trend. Criteria are fixed here before any run;
//! a claim that does not hold is reported as not met with the numbers.

use crate::reproduce::Claim;
use crate::reproduce::study::{StudyPoint, find_point};

use crate::reproduce::csld::{TABLE4, TABLE4_POLICIES, TABLE5, TABLE5_CASE};

const CASES: [&str; 6] = ["1", "2", "3", "4", "5", "6"];
const HEAVY: [&str; 3] = ["2", "4", "6"];
const LIGHT: [&str; 3] = ["1", "3", "5"];

fn lat(points: &[StudyPoint], case: &str, policy: &str) -> Option<f64> {
    find_point(points, case, policy).map(|p| p.latency_s)
}

fn rej(points: &[StudyPoint], case: &str, policy: &str) -> Option<f64> {
    find_point(points, case, policy).map(|p| p.rejection_ratio)
}

/// `test(case)` over `cases`: met if it holds for all (and every point exists); evidence
/// lists each case's numbers as `describe` gives them.
fn over(
    cases: &[&str],
    test: impl Fn(&str) -> Option<bool>,
    describe: impl Fn(&str) -> String,
) -> (bool, String) {
    let results: Vec<Option<bool>> = cases.iter().map(|c| test(c)).collect();
    let met = results.iter().all(|r| *r == Some(true));
    let evidence = cases
        .iter()
        .zip(&results)
        .map(|(c, r)| {
            let mark = match r {
                Some(true) => "✓",
                Some(false) => "✗",
                None => "missing",
            };
            format!("case {c}: {} {mark}", describe(c))
        })
        .collect::<Vec<_>>()
        .join("; ");
    (met, evidence)
}

fn claim(statement: &'static str, criterion: &'static str, (met, evidence): (bool, String)) -> Claim {
    Claim::new(statement, criterion, met, evidence)
}

/// The paper's CSLD ÷ RR in Table 4's case `id` (RR is the table's first column): 0.432, 0.690
/// and 0.315 in the heavy cases 2, 4 and 6.
pub fn paper_csld_over_rr(id: &str) -> f64 {
    let csld = TABLE4_POLICIES.iter().position(|p| *p == "csld").expect("CSLD is a Table 4 column");
    TABLE4.iter().find(|c| c.id.to_string() == id).map_or(f64::NAN, |c| c.paper[csld] / c.paper[0])
}
/// How far (absolute) our CSLD ÷ RR may be from the paper's in a heavy case.
pub const HEAVY_RATIO_TOLERANCE: f64 = 0.10;
/// The range CSLD ÷ RR must fall in in the light cases: the paper's 0.92–0.99 (Table 4:
/// 0.987, 0.981, 0.923), widened by 0.02 at each end.
pub const LIGHT_RATIO_RANGE: (f64, f64) = (0.90, 1.01);

/// Why CSLD's advantage over a policy without class costs holds in this model by construction.
const CSLD_BUILT: &str = "CSLD's pick is the delay of a processor-sharing queue fed the nodes' exact class-cost \
                          distributions, and the modelled CPU is exactly such a queue";

/// Every claim of CSLD.md §7 that the study's points can decide.
pub fn check_csld_claims(p: &[StudyPoint]) -> Vec<Claim> {
    let l = |c: &str, x: &str| lat(p, c, x);
    let f = |c: &str, x: &str| l(c, x).map_or("–".to_string(), |v| format!("{v:.4}"));
    let vs = |a: &'static str, b: &'static str| move |c: &str| format!("{a} {} vs {b} {}", f(c, a), f(c, b));
    let mut claims = Vec::new();
    claims.push(claim(
        "WRR_i (ideal metrics) is the best policy in every case",
        "WRR_i's mean server latency is the lowest of the nine policies in each of the six cases",
        over(
            &CASES,
            |c| {
                let best =
                    p.iter().filter(|x| x.case == c).map(|x| x.latency_s).fold(f64::INFINITY, f64::min);
                Some(l(c, "WRR_i")? <= best)
            },
            |c| {
                let best = p
                    .iter()
                    .filter(|x| x.case == c)
                    .min_by(|a, b| a.latency_s.total_cmp(&b.latency_s))
                    .map_or("–".into(), |x| format!("{} {:.4}", x.policy, x.latency_s));
                format!("WRR_i {}, best {best}", f(c, "WRR_i"))
            },
        ),
    ));
    claims.push(
        claim(
            "CSLD beats RR in every case",
            "CSLD latency < RR latency in all six cases",
            over(&CASES, |c| Some(l(c, "CSLD")? < l(c, "RR")?), vs("CSLD", "RR")),
        )
        .by_construction(CSLD_BUILT),
    );
    claims.push(
        claim(
            "CSLD's gain over RR is large under heavy dynamic load (÷RR 0.43/0.69/0.31 in cases 2/4/6) and small otherwise (0.92–0.99 in 1/3/5)",
            "CSLD ÷ RR within ±0.10 of the paper's 0.43, 0.69, 0.31 in cases 2, 4, 6 and within 0.90–1.01 in cases 1, 3, 5",
            {
                let ratio = |c: &str| Some(l(c, "CSLD")? / l(c, "RR")?);
                let paper = paper_csld_over_rr;
                let (a, ea) = over(
                    &HEAVY,
                    |c| Some((ratio(c)? - paper(c)).abs() <= HEAVY_RATIO_TOLERANCE),
                    |c| format!("÷RR {:.2} (paper {:.2})", ratio(c).unwrap_or(f64::NAN), paper(c)),
                );
                let (lo, hi) = LIGHT_RATIO_RANGE;
                let (b, eb) = over(&LIGHT, |c| Some((lo..=hi).contains(&ratio(c)?)), |c| {
                    format!("÷RR {:.2}", ratio(c).unwrap_or(f64::NAN))
                });
                (a && b, format!("{ea}; {eb}"))
            },
        )
        .with_slack("±0.10 of the paper's ÷RR in cases 2, 4, 6; 0.02 beyond 0.92–0.99 in cases 1, 3, 5"),
    );
    claims.push(
        claim(
            "CSLD beats WRR_a (real metric polling) in the heavy cases 2, 4, 6",
            "CSLD latency < WRR_a latency in cases 2, 4, 6",
            over(&HEAVY, |c| Some(l(c, "CSLD")? < l(c, "WRR_a")?), vs("CSLD", "WRR_a")),
        )
        .by_construction(CSLD_BUILT),
    );
    claims.push(
        claim(
            "CSLD comes within 25% of the ideal WRR_i in the heavy cases",
            "CSLD latency ≤ 1.25 × WRR_i latency in cases 2, 4, 6 (ours from the paper's 1.15, 1.04, 1.22)",
            over(&HEAVY, |c| Some(l(c, "CSLD")? <= 1.25 * l(c, "WRR_i")?), vs("CSLD", "WRR_i")),
        )
        .with_slack("≤ 1.25 × WRR_i (the paper's worst case is 1.22)")
        .by_construction(CSLD_BUILT),
    );
    claims.push(claim(
        "In the light cases 1, 3, 5 CSLD is 3–9% worse than WRR_a",
        "1.0 < CSLD ÷ WRR_a ≤ 1.09 in cases 1, 3, 5",
        over(
            &LIGHT,
            |c| {
                let r = l(c, "CSLD")? / l(c, "WRR_a")?;
                Some(r > 1.0 && r <= 1.09)
            },
            vs("CSLD", "WRR_a"),
        ),
    ));
    claims.extend(baseline_claims(p));
    claims.extend(table5_claims(p));
    for c in claims.iter_mut().filter(|c| !c.met) {
        if let Some(why) = likely_why_not(c.statement) {
            c.evidence = format!("{} — likely why: {why}", c.evidence);
        }
    }
    claims
}

/// What in our model most likely keeps a claim from holding, when it does not: the
/// differences from the paper's set-up that the numbers point at (each a reading of the
/// figures, not a separate experiment).
fn likely_why_not(statement: &str) -> Option<&'static str> {
    const WHY: &[(&str, &str)] = &[
        (
            "WRR_i (ideal",
            "in the light cases all nine policies agree to the fourth decimal; in the heavy ones \
          WRR_i's weights are a snapshot taken every 200 ms, while LC sees every connection and CSLD's cost \
          boards carry the work it already sent into the coming periods, which here matters more than exact \
          node metrics",
        ),
        (
            "In the light cases 1, 3, 5 CSLD",
            "our light-case latencies are 3.5–6 ms against the paper's 22–43 ms, \
          so WRR_a's 5 ms CPU burst every 500 ms weighs more here than its metrics bring",
        ),
        (
            "Polling less often",
            "cases 2 and 6 run at ≈99% CPU (calibration table): WRR_a's polls cost a node 1% \
          of its CPU, WRR_b's 0.5%, and at that utilisation the extra CPU outweighs the fresher metrics",
        ),
        (
            "LC is worse",
            "the paper blames its 150 ms RTTs but gives no mechanism; here a connection counts at the \
          front-end for its RTTs plus its service time, the RTTs average out over ~100 connections per node, \
          so the counts still follow the dynamic requests in service",
        ),
        (
            "WRR_p (probe only)",
            "at 50–64% CPU the probe's response time barely varies, so WRR_p's weights stay \
          even and it ties RR; the paper's WRR_p lost there through rejections our model does not produce",
        ),
        (
            "RR has no rejections",
            "cases 2 and 6 run at ≈99% CPU here (the design's calibration estimate is ≈98%): \
          bursts of CGI requests fill the 150 processes and the 128-entry backlog now and then",
        ),
        (
            "Fig. 6 at 6.3 K/s",
            "CSLD rejects less than WRR_i here, the same reading as the first claim: at the \
          peak, counting the work already sent beats 200 ms snapshots of exact metrics",
        ),
    ];
    WHY.iter().find(|(start, _)| statement.starts_with(start)).map(|(_, why)| *why)
}

/// Table 4's claims about the baselines (the WRR variants, LC, RR).
fn baseline_claims(p: &[StudyPoint]) -> Vec<Claim> {
    let l = |c: &str, x: &str| lat(p, c, x);
    let f = |c: &str, x: &str| l(c, x).map_or("–".to_string(), |v| format!("{v:.4}"));
    let vs = |a: &'static str, b: &'static str| move |c: &str| format!("{a} {} vs {b} {}", f(c, a), f(c, b));
    let mut claims = Vec::new();
    claims.push(claim(
        "Polling less often costs: WRR_a beats WRR_b in every case",
        "WRR_a latency < WRR_b latency in all six cases",
        over(&CASES, |c| Some(l(c, "WRR_a")? < l(c, "WRR_b")?), vs("WRR_a", "WRR_b")),
    ));
    claims.push(claim(
        "WRR_b is worse than plain RR in the light cases 1 and 3",
        "WRR_b latency > RR latency in cases 1 and 3",
        over(&["1", "3"], |c| Some(l(c, "WRR_b")? > l(c, "RR")?), vs("WRR_b", "RR")),
    ));
    claims.push(claim(
        "Costly frequent polling (WRR_a', 10 ms every 500 ms) causes rejections in cases 2 and 6",
        "WRR_a' rejection ratio > 0 in cases 2 and 6",
        over(
            &["2", "6"],
            |c| Some(rej(p, c, "WRR_a'")? > 0.0),
            |c| format!("WRR_a' rejections {:.4}", rej(p, c, "WRR_a'").unwrap_or(f64::NAN)),
        ),
    ));
    claims.push(claim(
        "LC is worse than RR except in case 6",
        "LC latency > RR latency in cases 1–5 and < RR in case 6",
        over(
            &CASES,
            |c| {
                let (lc, rr) = (l(c, "LC")?, l(c, "RR")?);
                Some(if c == "6" { lc < rr } else { lc > rr })
            },
            vs("LC", "RR"),
        ),
    ));
    claims.push(claim(
        "WRR_p (probe only) beats RR only in case 2",
        "WRR_p latency < RR latency in case 2 and > RR latency in every other case",
        over(
            &CASES,
            |c| {
                let (wp, rr) = (l(c, "WRR_p")?, l(c, "RR")?);
                Some(if c == "2" { wp < rr } else { wp > rr })
            },
            vs("WRR_p", "RR"),
        ),
    ));
    claims.push(claim(
        "RR has no rejections in the heavy cases 2, 4, 6",
        "RR rejection ratio = 0 in cases 2, 4, 6",
        over(
            &HEAVY,
            |c| Some(rej(p, c, "RR")? == 0.0),
            |c| format!("RR rejections {:.4}", rej(p, c, "RR").unwrap_or(f64::NAN)),
        ),
    ));
    claims
}

fn at<'a>(p: &'a [StudyPoint], policy: &str, rate: f64) -> Option<&'a StudyPoint> {
    p.iter().find(|x| x.case == TABLE5_CASE && x.policy == policy && x.rate == rate)
}

/// Table 5's knee and Fig. 6's trend.
fn table5_claims(p: &[StudyPoint]) -> Vec<Claim> {
    let rates: Vec<f64> = TABLE5.iter().map(|&(r, _)| r).collect();
    let rr: Vec<Option<f64>> = rates.iter().map(|&r| at(p, "RR", r).map(|x| x.latency_s)).collect();
    let series = rates
        .iter()
        .zip(&rr)
        .map(|(r, l)| format!("{:.1} K/s {}", r / 1e3, l.map_or("–".into(), |v| format!("{v:.4}"))))
        .collect::<Vec<_>>()
        .join(", ");
    let knee = match (rr[3], rr[5]) {
        (Some(a), Some(b)) => b >= 3.0 * a,
        _ => false,
    };
    let rising = rr.windows(2).all(|w| matches!((w[0], w[1]), (Some(a), Some(b)) if b > a));
    let ratio = |policy: &str, rate: f64| Some(at(p, policy, rate)?.latency_s / at(p, "RR", rate)?.latency_s);
    let (lo, hi) = (rates[0], rates[5]);
    let csld_lo = ratio("CSLD", lo);
    let csld_hi = ratio("CSLD", hi);
    let near = match (at(p, "CSLD", hi), at(p, "WRR_i", hi)) {
        (Some(c), Some(i)) => c.latency_s <= 1.25 * i.latency_s,
        _ => false,
    };
    let rj = |policy: &str| at(p, policy, hi).map_or(f64::NAN, |x| x.rejection_ratio);
    vec![
        Claim::new(
            "Table 5: RR's latency rises with the rate and has its knee between 6.0 and 6.3 K/s (0.17 → 1.59 s)",
            "RR's latency increases at every step of 3.0–6.3 K/s and at 6.3 K/s is ≥ 3× that at 6.0 K/s (ours; the paper's step is 9.4×)",
            rising && knee,
            format!("RR latency (s): {series}"),
        )
        .with_slack("a knee of ≥ 3× where the paper has 9.4×"),
        Claim::new(
            "Fig. 6: CSLD's gain over RR grows with the rate and nears WRR_i at the top",
            "CSLD ÷ RR at 6.3 K/s < CSLD ÷ RR at 3.0 K/s, and CSLD latency ≤ 1.25 × WRR_i at 6.3 K/s (\"nears\": ours)",
            matches!((csld_lo, csld_hi), (Some(a), Some(b)) if b < a) && near,
            format!(
                "CSLD ÷ RR {:.2} at 3.0 K/s, {:.2} at 6.3 K/s; WRR_i ÷ RR at 6.3 K/s {:.2}",
                csld_lo.unwrap_or(f64::NAN),
                csld_hi.unwrap_or(f64::NAN),
                ratio("WRR_i", hi).unwrap_or(f64::NAN)
            ),
        )
        .with_slack("≤ 1.25 × WRR_i")
        .by_construction(CSLD_BUILT),
        Claim::new(
            "Fig. 6 at 6.3 K/s: rejections RR 3.6%, WRR_i 1.8%, WRR_a 3.9%, CSLD 2.1% — CSLD rejects less than RR and WRR_a, WRR_i least",
            "at 6.3 K/s: WRR_i ≤ CSLD < RR and CSLD < WRR_a in rejection ratio",
            rj("WRR_i") <= rj("CSLD") && rj("CSLD") < rj("RR") && rj("CSLD") < rj("WRR_a"),
            format!(
                "rejection ratio at 6.3 K/s: RR {:.4}, WRR_i {:.4}, WRR_a {:.4}, CSLD {:.4}",
                rj("RR"),
                rj("WRR_i"),
                rj("WRR_a"),
                rj("CSLD")
            ),
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_papers_heavy_case_ratios_come_from_its_table_4() {
        let ratios: Vec<f64> =
            ["2", "4", "6"].iter().map(|c| (paper_csld_over_rr(c) * 1000.0).round() / 1000.0).collect();
        assert_eq!(ratios, [0.432, 0.690, 0.315]);
        assert!(paper_csld_over_rr("7").is_nan(), "no such case");
    }
}
