//! The CAP study's claims (CAP.md "Experiments": orderings only — CAP's own paper is not
//! in the corpus) checked against its points.

use crate::reproduce::Claim;
use crate::reproduce::cap::{THRESHOLDS, mix_cases};
use crate::reproduce::study::{StudyPoint, find_point};

fn fmt(p: Option<&StudyPoint>) -> String {
    p.map_or("–".into(), |p| format!("{:.4}/{:.4}", p.latency_s, p.latency_p90_s))
}

/// Whether `a` beats `b` at `case` in mean and p90 server latency; evidence text.
fn beats(points: &[StudyPoint], case: &str, a: &str, b: &str) -> (Option<bool>, String) {
    let (pa, pb) = (find_point(points, case, a), find_point(points, case, b));
    let won = match (pa, pb) {
        (Some(x), Some(y)) => Some(x.latency_s < y.latency_s && x.latency_p90_s < y.latency_p90_s),
        _ => None,
    };
    (won, format!("{case}: {a} {} vs {b} {}", fmt(pa), fmt(pb)))
}

fn mix_claim(
    points: &[StudyPoint],
    rivals: &[&str],
    statement: &'static str,
    criterion: &'static str,
) -> Claim {
    let mut met = true;
    let mut ev = Vec::new();
    for (case, _, _) in mix_cases() {
        for r in rivals {
            let (won, text) = beats(points, &case, "CAP", r);
            met &= won == Some(true);
            ev.push(format!("{text} {}", if won == Some(true) { "✓" } else { "✗" }));
        }
    }
    Claim::new(statement, criterion, met, format!("mean/p90 s — {}", ev.join("; ")))
}

/// CAP.md's claims.
pub fn check_cap_claims(points: &[StudyPoint]) -> Vec<Claim> {
    let mut claims = Vec::new();
    let (s_cap, s_lr) = (find_point(points, "static", "CAP"), find_point(points, "static", "LARD/R"));
    claims.push(Claim::new(
        "On a static Web-publishing workload LARD/R is at least as good as CAP (locality wins)",
        "static workload: LARD/R's mean server latency ≤ CAP's and its miss ratio below CAP's (ours, from CAP.md)",
        matches!((s_cap, s_lr), (Some(c), Some(l)) if l.latency_s <= c.latency_s && l.miss_ratio < c.miss_ratio),
        match (s_cap, s_lr) {
            (Some(c), Some(l)) => format!(
                "LARD/R {:.4} s, miss {:.1}%; CAP {:.4} s, miss {:.1}%",
                l.latency_s,
                l.miss_ratio * 100.0,
                c.latency_s,
                c.miss_ratio * 100.0
            ),
            _ => "points missing".into(),
        },
    ));
    claims.push(mix_claim(
        points,
        &["LARD", "LARD/R"],
        "On a mix of CPU- and disk-bound dynamic requests CAP beats LARD (and LARD/R)",
        "every mix (10/20/30% dynamic, CB:DB:DCB 1:1:1, 3:1:1, 1:3:1): CAP's mean and p90 server latency below LARD's and LARD/R's (ours, from CAP.md)",
    ));
    claims.push(mix_claim(
        points,
        &["RR", "LC"],
        "On the mix CAP beats the load-balancing policies WRR and LC",
        "every mix: CAP's mean and p90 server latency below RR's (the switch's wrr) and LC's (ours, from CAP.md)",
    ));
    claims.push(threshold_claim(points));
    claims
}

/// LARD's sensitivity to its thresholds against CAP, which has none.
fn threshold_claim(points: &[StudyPoint]) -> Claim {
    let case_of = |t: (u32, u32)| {
        if t == (25, 65) { "mix-20%".to_string() } else { format!("thresholds-{}-{}", t.0, t.1) }
    };
    let lr: Vec<(String, Option<f64>)> = THRESHOLDS
        .iter()
        .map(|&t| {
            (format!("{}/{}", t.0, t.1), find_point(points, &case_of(t), "LARD/R").map(|p| p.latency_s))
        })
        .collect();
    let vals: Vec<f64> = lr.iter().filter_map(|(_, v)| *v).collect();
    let (min, max) = vals.iter().fold((f64::INFINITY, 0.0f64), |(a, b), &v| (a.min(v), b.max(v)));
    let cap = find_point(points, "mix-20%", "CAP").map(|p| p.latency_s);
    let met = vals.len() == THRESHOLDS.len() && max >= 1.25 * min && cap.is_some_and(|c| c < min);
    Claim::new(
        "CAP needs no tuning while LARD depends on its thresholds",
        "20% mix: LARD/R's mean latency over the T_low/T_high settings varies by ≥ 25% (max ≥ 1.25 × min; ours) and CAP beats its best setting",
        met,
        format!(
            "LARD/R by T_low/T_high: {}; CAP {}",
            lr.iter()
                .map(|(t, v)| format!("{t} {}", v.map_or("–".into(), |v| format!("{v:.4}"))))
                .collect::<Vec<_>>()
                .join(", "),
            cap.map_or("–".into(), |v| format!("{v:.4}"))
        ),
    )
    .with_slack("a spread of ≥ 25% counts as depending on the thresholds")
}
