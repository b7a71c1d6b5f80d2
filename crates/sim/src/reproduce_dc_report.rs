//! The claims of `reproduce dc` (Figs 7, 8 and 9, each with a criterion fixed before the runs),
//! its SVG plots (CPS against servers, response time against servers, CPS against quota as a
//! share of the full size) and its `report.md`: our numbers beside what the paper reports.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use crate::error::SimError;
use crate::plot_lines::{Axes, Series, plot_lines};
use crate::reproduce::Claim;
use locus_dc::balancer::BalancerConfig;
use locus_dc::selector::SelectorConfig;

use crate::reproduce_dc::{DcOptions, DcRow, QUOTA_FRACTIONS, QUOTA_METHODS, QUOTA_SERVERS, QUOTA_SETS};

const MIB: f64 = (1 << 20) as f64;

fn fig7<'a>(rows: &'a [DcRow], set: &str, method: &str) -> Vec<&'a DcRow> {
    let mut v: Vec<&DcRow> =
        rows.iter().filter(|r| r.experiment == "fig7" && r.dataset == set && r.method == method).collect();
    v.sort_by_key(|r| r.servers);
    v
}

fn fig9<'a>(rows: &'a [DcRow], set: &str, method: &str) -> Vec<&'a DcRow> {
    let mut v: Vec<&DcRow> =
        rows.iter().filter(|r| r.experiment == "fig9" && r.dataset == set && r.method == method).collect();
    v.sort_by_key(|r| r.quota_bytes);
    v
}

/// `set`'s full size (0 if unknown).
fn full_of(full_sizes: &[(String, u64)], set: &str) -> u64 {
    full_sizes.iter().find(|(n, _)| n == set).map_or(0, |f| f.1)
}

/// A quota as a share of the full size.
fn fraction(row: &DcRow, full: u64) -> f64 {
    row.quota_bytes.unwrap_or(0) as f64 / full.max(1) as f64
}

/// `set`'s `method` run at the quota point nearest `share` × full.
fn at_share<'a>(rows: &'a [DcRow], set: &str, method: &str, full: u64, share: f64) -> Option<&'a DcRow> {
    fig9(rows, set, method).into_iter().find(|r| (fraction(r, full) - share).abs() < 0.01)
}

fn claim(statement: &'static str, criterion: &'static str, met: bool, evidence: String) -> Claim {
    Claim { statement, criterion, met, evidence }
}

/// Every claim, met or not, with its numbers.
pub fn check_dc_claims(
    rows: &[DcRow],
    datasets: &[(String, u64)],
    full_sizes: &[(String, u64)],
) -> Vec<Claim> {
    let mut claims = vec![scaling_claim(rows, datasets), migration_claim(rows), response_claim(rows)];
    claims.extend(quota_claims(rows, full_sizes));
    claims
}

fn scaling_claim(rows: &[DcRow], datasets: &[(String, u64)]) -> Claim {
    let mut met = true;
    let mut evidence = Vec::new();
    for (set, _) in datasets {
        let v = fig7(rows, set, "resource-aware");
        let (Some(first), Some(last)) = (v.first(), v.last()) else { continue };
        let ratio = last.cps / first.cps.max(1e-9);
        let goal = 0.8 * f64::from(last.servers) / f64::from(first.servers);
        met &= ratio >= goal;
        evidence.push(format!("{set} {:.0}→{:.0} CPS ({ratio:.1}×, need {goal:.1}×)", first.cps, last.cps));
    }
    claim(
        "Fig. 7: CPS grows near-linearly with the server count for all four data sets",
        "CPS(max) >= 0.8 × (max/min servers) × CPS(min), resource-aware, unlimited quota, each set",
        met && !evidence.is_empty(),
        evidence.join("; "),
    )
}

fn migration_claim(rows: &[DcRow]) -> Claim {
    let (rep, mig) = (fig7(rows, "mapug", "resource-aware"), fig7(rows, "mapug", "migration"));
    let (Some(r), Some(m)) = (rep.last(), mig.last()) else {
        return claim(
            "Fig. 7: MAPUG under migration only is clearly below replication",
            "CPS(migration) <= 0.6 × CPS(replication) at the most servers",
            false,
            "no MAPUG runs".into(),
        );
    };
    claim(
        "Fig. 7: MAPUG under migration only (one copy per document) is clearly below replication",
        "CPS(migration) <= 0.6 × CPS(replication) at the most servers",
        m.cps <= 0.6 * r.cps,
        format!(
            "{} servers: migration {:.0} CPS vs replication {:.0} CPS ({:.2}×); home share {:.1}% vs {:.1}%",
            r.servers,
            m.cps,
            r.cps,
            m.cps / r.cps.max(1e-9),
            100.0 * m.run.home_share,
            100.0 * r.run.home_share
        ),
    )
}

fn response_claim(rows: &[DcRow]) -> Claim {
    let mut met = true;
    let mut evidence = Vec::new();
    for set in ["specweb99", "sequoia"] {
        let v = fig7(rows, set, "resource-aware");
        let (Some(first), Some(last)) = (v.first(), v.last()) else { continue };
        let ratio = first.mean_ms / last.mean_ms.max(1e-9);
        let goal = 0.5 * f64::from(last.servers) / f64::from(first.servers);
        met &= ratio >= goal;
        evidence.push(format!(
            "{set} {:.0}→{:.0} ms ({ratio:.1}×, need {goal:.1}×)",
            first.mean_ms, last.mean_ms
        ));
    }
    claim(
        "Fig. 8: mean response time of SpecWeb and Sequoia falls about inversely with the server count",
        "mean(min servers) / mean(max servers) >= 0.5 × (max/min servers) for both sets",
        met && !evidence.is_empty(),
        evidence.join("; "),
    )
}

fn quota_claims(rows: &[DcRow], full_sizes: &[(String, u64)]) -> Vec<Claim> {
    let mut ends = (true, Vec::new(), true, Vec::new());
    for (set, _, _) in QUOTA_SETS {
        let full = full_of(full_sizes, set);
        if full == 0 {
            continue;
        }
        let one = fig7(rows, set, "resource-aware").into_iter().find(|r| r.servers == 1).map(|r| r.cps);
        let mut largest = Vec::new();
        for m in QUOTA_METHODS {
            let v = fig9(rows, set, m.as_str());
            if let (Some(zero), Some(one)) = (v.first(), one) {
                ends.0 &= zero.quota_bytes == Some(0) && zero.cps <= 1.25 * one;
                ends.1.push(format!("{set} {m} q=0 {:.0} vs 1 server {one:.0}", zero.cps));
            }
            if let Some(last) = v.last() {
                largest.push((m, last.cps, fraction(last, full) >= 1.0));
            }
        }
        let best = fig9_all(rows, set).map(|r| r.cps).fold(0.0, f64::max);
        let ok = !largest.is_empty() && largest.iter().all(|f| f.2 && f.1 >= 0.9 * best);
        ends.2 &= ok;
        ends.3.push(format!(
            "{set} at {:.1} × full: {} (best {best:.0})",
            QUOTA_FRACTIONS[QUOTA_FRACTIONS.len() - 1],
            largest.iter().map(|f| format!("{} {:.0}", f.0, f.1)).collect::<Vec<_>>().join(", ")
        ));
    }
    vec![
        claim(
            "Fig. 9: quota 0 gives one-server performance",
            "CPS at quota 0 <= 1.25 × CPS of one server, each method and set",
            ends.0 && !ends.1.is_empty(),
            ends.1.join("; "),
        ),
        claim(
            "Fig. 9: a quota holding the whole replicated set is best and the methods are equal",
            "full size (ours) = most replica bytes a co-op held at an unlimited quota; at the largest quota (1.2 × full) every method >= 0.9 × the best CPS of the sweep",
            ends.2 && !ends.3.is_empty(),
            ends.3.join("; "),
        ),
    ]
    .into_iter()
    .chain(specweb_claims(rows, full_of(full_sizes, "specweb99")))
    .chain([sequoia_order_claim(rows, full_of(full_sizes, "sequoia"))])
    .collect()
}

fn fig9_all<'a>(rows: &'a [DcRow], set: &'a str) -> impl Iterator<Item = &'a DcRow> {
    rows.iter().filter(move |r| r.experiment == "fig9" && r.dataset == set)
}

/// Fig. 9(a) holds two claims: the methods' order over the range, and Naive's drop.
fn specweb_claims(rows: &[DcRow], full: u64) -> [Claim; 2] {
    let (n, d, r) = (
        fig9(rows, "specweb99", "naive"),
        fig9(rows, "specweb99", "deletion-aware"),
        fig9(rows, "specweb99", "resource-aware"),
    );
    let mut ordered = !n.is_empty() && n.len() == d.len() && d.len() == r.len();
    let mut evidence = Vec::new();
    for ((a, b), c) in n.iter().zip(&d).zip(&r) {
        ordered &= c.cps >= 0.95 * b.cps && b.cps >= 0.95 * a.cps;
        evidence.push(format!(
            "{:.2} × full: RA {:.0} DA {:.0} N {:.0}",
            fraction(a, full),
            c.cps,
            b.cps,
            a.cps
        ));
    }
    let below = at_share(rows, "specweb99", "naive", full, 0.95);
    let top = at_share(rows, "specweb99", "naive", full, 1.2);
    let drop = matches!((below, top), (Some(b), Some(t)) if b.cps <= 0.7 * t.cps);
    let drop_evidence = match (below, top) {
        (Some(b), Some(t)) => format!(
            "Naive 0.95 × full {:.0} vs 1.2 × full {:.0} ({:.2}×)",
            b.cps,
            t.cps,
            b.cps / t.cps.max(1e-9)
        ),
        _ => "Naive has no 0.95 × or 1.2 × full point".to_string(),
    };
    [
        claim(
            "Fig. 9(a): SpecWeb — Resource-Aware > Deletion-Aware > Naive over the whole quota range",
            "at every quota RA >= 0.95 × DA and DA >= 0.95 × Naive (full size ours: see above)",
            ordered,
            evidence.join("; "),
        ),
        claim(
            "Fig. 9(a): SpecWeb — Naive drops sharply even just below full size",
            "Naive at 0.95 × full <= 0.7 × Naive at 1.2 × full",
            drop,
            drop_evidence,
        ),
    ]
}

fn sequoia_order_claim(rows: &[DcRow], full: u64) -> Claim {
    let mid = |m: &str| -> f64 {
        let v: Vec<f64> = fig9(rows, "sequoia", m)
            .iter()
            .filter(|r| r.quota_bytes.is_some_and(|q| q > 0 && q < full))
            .map(|r| r.cps)
            .collect();
        if v.is_empty() { 0.0 } else { v.iter().sum::<f64>() / v.len() as f64 }
    };
    let (da, ra) = (mid("deletion-aware"), mid("resource-aware"));
    claim(
        "Fig. 9(b): Sequoia — Deletion-Aware beats Resource-Aware (revoked large copies idle until evicted)",
        "mean CPS over the quotas strictly between 0 and full size: DA > RA",
        da > ra && da > 0.0,
        format!("DA {da:.2} vs RA {ra:.2} CPS"),
    )
}

/// `fig7_cps.svg`, `fig8_response.svg`, `fig9_specweb99.svg`, `fig9_sequoia.svg`.
pub fn write_dc_plots(
    dir: &Path,
    rows: &[DcRow],
    datasets: &[(String, u64)],
    full_sizes: &[(String, u64)],
) -> Result<Vec<PathBuf>, SimError> {
    let mut files = Vec::new();
    let mut series: Vec<Series> = Vec::new();
    for (set, _) in datasets {
        for method in ["resource-aware", "migration"] {
            let pts: Vec<(f64, f64)> =
                fig7(rows, set, method).iter().map(|r| (f64::from(r.servers), r.cps)).collect();
            if !pts.is_empty() {
                series.push((format!("{set} {method}"), pts));
            }
        }
    }
    let path = dir.join("fig7_cps.svg");
    plot_lines(
        &path,
        Axes { title: "Fig. 7: CPS vs servers (256 clients)", x: "servers", y: "responses/s" },
        &series,
    )?;
    files.push(path);
    let series: Vec<Series> = ["specweb99", "sequoia"]
        .iter()
        .map(|set| {
            (
                set.to_string(),
                fig7(rows, set, "resource-aware").iter().map(|r| (f64::from(r.servers), r.mean_ms)).collect(),
            )
        })
        .collect();
    let path = dir.join("fig8_response.svg");
    plot_lines(
        &path,
        Axes { title: "Fig. 8: mean response time vs servers", x: "servers", y: "ms" },
        &series,
    )?;
    files.push(path);
    for (set, _, _) in QUOTA_SETS {
        let full = full_of(full_sizes, set);
        let series: Vec<Series> = QUOTA_METHODS
            .iter()
            .map(|m| {
                (
                    m.to_string(),
                    fig9(rows, set, m.as_str()).iter().map(|r| (fraction(r, full), r.cps)).collect(),
                )
            })
            .collect();
        let path = dir.join(format!("fig9_{set}.svg"));
        let title = format!(
            "Fig. 9: {set}, 1 home + {} co-ops, CPS vs co-op quota (full = {:.2} MiB)",
            QUOTA_SERVERS - 1,
            full as f64 / MIB
        );
        plot_lines(&path, Axes { title: &title, x: "quota (× full size)", y: "responses/s" }, &series)?;
        files.push(path);
    }
    Ok(files)
}

/// `report.md`.
pub fn dc_markdown(
    opts: &DcOptions,
    rows: &[DcRow],
    claims: &[Claim],
    datasets: &[(String, u64)],
    full_sizes: &[(String, u64)],
    wall_s: f64,
) -> String {
    let (balancer, selector) = (BalancerConfig::default(), SelectorConfig::default());
    let mut o = String::new();
    let _ = writeln!(o, "# DC-Apache on the peer simulator (Figs 7–9)\n");
    let _ = writeln!(
        o,
        "Peer mode, no front-end; all documents on home s0, the others co-ops. {} closed-loop surfers (20 requests a session, no think time); LARD costs × 1.5 (200 MHz); 64 MB page cache, one disk and a 100 Mbps NIC per server; pinger 1 s, the `locus_dc` defaults: balancer every {} s (θ = {}, ≥ {} or {} per co-op placements a round), selection {} among the set's servers not above (1+θ) × the mean load; co-op validation. Scale {}, seed {}, warm-up {} s and {} s measured (Sequoia × {}). {} points in {wall_s:.1} s on {} threads.\n",
        opts.clients,
        balancer.period_ns as f64 / 1e9,
        balancer.theta,
        balancer.max_placements,
        balancer.placements_per_coop,
        selector.rule,
        opts.scale,
        opts.seed,
        opts.warmup_s,
        opts.measure_s,
        opts.slow_factor,
        rows.len(),
        opts.threads
    );
    let _ = writeln!(
        o,
        "Data sets: {}\n",
        datasets
            .iter()
            .map(|(n, b)| format!("{n} {:.2} MiB", *b as f64 / MIB))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let _ = writeln!(
        o,
        "## Fig. 7 and 8 — servers (paper: near-linear CPS for all sets; response time ∝ 1/servers)\n"
    );
    let _ = writeln!(
        o,
        "| set | method | servers | CPS | KB/s | mean ms | home share | home CPU | co-op CPU (mean, busiest) | busiest server each second | saturated server-seconds | home disk | co-op disk | copies |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
    );
    for r in rows.iter().filter(|r| r.experiment == "fig7") {
        let _ = writeln!(
            o,
            "| {} | {} | {} | {:.1} | {:.0} | {:.1} | {:.1}% | {:.0}% | {:.0}%, {:.0}% | {:.0}% | {:.0}% | {:.0}% | {:.0}% | {} |",
            r.dataset,
            r.method,
            r.servers,
            r.cps,
            r.run.bps / 1024.0,
            r.mean_ms,
            100.0 * r.run.home_share,
            100.0 * r.run.home_cpu,
            100.0 * r.run.coop_cpu,
            100.0 * r.run.busiest_coop_cpu,
            100.0 * r.run.peak_cpu,
            100.0 * r.run.saturated_share,
            100.0 * r.run.home_disk,
            100.0 * r.run.coop_disk,
            r.run.placed_copies
        );
    }
    let _ = writeln!(
        o,
        "\n## Fig. 9 — co-op quota, 1 home + {} co-ops (paper: RA > DA > Naive on SpecWeb; DA > RA on Sequoia)\n",
        QUOTA_SERVERS - 1
    );
    for (set, paper_max_mb, paper_set_mb) in QUOTA_SETS {
        let full = full_of(full_sizes, set);
        let total = datasets.iter().find(|d| d.0 == set).map_or(0, |d| d.1);
        let held: Vec<String> = (rows.iter())
            .filter(|r| r.experiment == "fig9_unlimited" && r.dataset == set)
            .map(|r| format!("{} {:.3} MiB ({:.0} CPS)", r.method, r.run.max_store_bytes as f64 / MIB, r.cps))
            .collect();
        let _ = writeln!(
            o,
            "- {set}: full size (ours) {:.3} MiB = the most replica bytes a co-op held at an unlimited quota ({}); data set {:.3} MiB. Paper: quota 0–{paper_max_mb} MB, data set {paper_set_mb} MB (its full size).",
            full as f64 / MIB,
            held.join(", "),
            total as f64 / MIB
        );
    }
    let _ = writeln!(
        o,
        "\n| set | × full | quota MiB | same share of the paper's set, MB | method | CPS | mean ms | fetches | evicted | notices | redirects | co-op CPU | co-op disk |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|"
    );
    for r in rows.iter().filter(|r| r.experiment == "fig9") {
        let full = full_of(full_sizes, &r.dataset);
        let paper_set = QUOTA_SETS.iter().find(|q| q.0 == r.dataset).map_or(0.0, |q| q.2);
        let _ = writeln!(
            o,
            "| {} | {:.2} | {:.3} | {:.1} | {} | {:.1} | {:.1} | {} | {} | {} | {} | {:.0}% | {:.0}% |",
            r.dataset,
            fraction(r, full),
            r.quota_bytes.unwrap_or(0) as f64 / MIB,
            fraction(r, full) * paper_set,
            r.method,
            r.cps,
            r.mean_ms,
            r.run.fetches,
            r.run.copies_evicted,
            r.run.deletion_notices,
            r.run.redirects,
            100.0 * r.run.coop_cpu,
            100.0 * r.run.coop_disk
        );
    }
    let _ = writeln!(o, "\n## Claims\n\n| | claim | criterion | result |\n|---|---|---|---|");
    for c in claims {
        let _ = writeln!(
            o,
            "| {} | {} | {} | {} |",
            if c.met { "met" } else { "NOT MET" },
            c.statement,
            c.criterion,
            c.evidence
        );
    }
    let _ = writeln!(o, "\nPlots: fig7_cps.svg, fig8_response.svg, fig9_specweb99.svg, fig9_sequoia.svg.");
    o
}
