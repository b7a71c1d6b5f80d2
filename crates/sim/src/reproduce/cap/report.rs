//! `report.md` of the CAP study: the claims, the latencies of every case and policy, and the
//! workloads, rates and model behind them.

use std::fmt::Write as _;

use crate::reproduce::Claim;
use crate::reproduce::cap::{CAP_POLICIES, MIX_TARGET_UTILISATION, STATIC_RATE, THRESHOLDS, cap_classes};
use crate::reproduce::csld::CsldOptions;
use crate::reproduce::study::{StudyPoint, find_point};

/// The report.
pub fn cap_markdown(opts: &CsldOptions, points: &[StudyPoint], claims: &[Claim]) -> String {
    let mut o = String::new();
    let met = claims.iter().filter(|c| c.met).count();
    let d = opts.durations;
    let _ = writeln!(o, "# CAP (client-aware policy) — simulation study with `locus sim`\n");
    let _ = writeln!(
        o,
        "{met} of {} claims met. Command: `locus sim reproduce cap --out {}` ({} nodes, seed {}, {} s warm-up + \
         {} s measured per point, the process-driven back end of `reproduce csld`). CAP's own paper is not in \
         the corpus: only the orderings CAP.md lists are checked, no figures.\n",
        claims.len(),
        opts.out.display(),
        opts.nodes,
        opts.seed,
        d.warmup_s,
        d.measure_s
    );
    crate::reproduce::write_claims_table(&mut o, claims);
    results_table(&mut o, points);
    setup(&mut o);
    o
}

fn results_table(o: &mut String, points: &[StudyPoint]) {
    let _ = writeln!(
        o,
        "\n## Results — mean / p90 server latency (s), rejection ratio, miss ratio\n\n![mix](mix_latency.svg)\n"
    );
    let labels = ["CAP", "LARD/R", "LARD", "RR", "LC"];
    let _ =
        writeln!(o, "| case | rate | {} |\n|---|---:|{}", labels.join(" | "), "---|".repeat(labels.len()));
    let mut cases: Vec<String> = Vec::new();
    for p in points {
        if !cases.contains(&p.case) {
            cases.push(p.case.clone());
        }
    }
    for case in &cases {
        let rate = points.iter().find(|p| &p.case == case).map_or(0.0, |p| p.rate);
        let cells: Vec<String> = labels
            .iter()
            .map(|l| {
                find_point(points, case, l).map_or("–".into(), |p| {
                    format!(
                        "{:.4} / {:.4}, rej {:.2}%, miss {:.1}%",
                        p.latency_s,
                        p.latency_p90_s,
                        p.rejection_ratio * 100.0,
                        p.miss_ratio * 100.0
                    )
                })
            })
            .collect();
        let _ = writeln!(o, "| {case} | {rate:.0} | {} |", cells.join(" | "));
    }
}

fn setup(o: &mut String) {
    let classes: Vec<String> = cap_classes()
        .iter()
        .map(|c| {
            format!("class {}: {} ms CPU, {} ms disk", c.class, c.mean_ns / 1_000_000, c.disk_ns / 1_000_000)
        })
        .collect();
    let _ = writeln!(
        o,
        "\n## Workloads and setup\n\n\
         - Policies: {} — CAP is `locus_policy`'s `cap` (one round robin per resource class, from the class \
         table's resource); LARD and LARD/R use T_low = 25, T_high = 65 unless swept, load = the front-end's \
         active connections (which include the client RTT); RR is the switch's `wrr` with equal weights.\n\
         - (a) static: 20 000 documents, Zipf α 0.8, SURGE sizes up to 1 MiB, {STATIC_RATE:.0} requests/s, \
         cold caches (LARD's partition has to form during the warm-up).\n\
         - (b) mixes: the WC98-like static traffic of `reproduce csld` (warm caches) with dynamic requests \
         ({}); CB = classes 1–4, DB = class 5, DCB = class 6, drawn with the CB:DB:DCB weights given; each \
         mix's rate puts RR's busier resource (CPU or disk) near {:.0}% (computed from the mean costs).\n\
         - (c) the 20% 1:1:1 mix with LARD and LARD/R at T_low/T_high = {}.\n",
        CAP_POLICIES.join(", "),
        classes.join("; "),
        MIX_TARGET_UTILISATION * 100.0,
        THRESHOLDS.iter().map(|t| format!("{}/{}", t.0, t.1)).collect::<Vec<_>>().join(", ")
    );
    let _ = writeln!(
        o,
        "## Known gaps\n\n- Orderings only (CAP's paper is not available); synthetic workloads.\n\
         - LARD's load is connection count at an L4-like front-end; the CAP paper's LARD ran on an L7 switch.\n"
    );
}
