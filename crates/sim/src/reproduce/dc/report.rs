//! `report.md` of `reproduce dc`: the claims, our numbers beside what the paper reports, and the
//! model and settings behind them.

use std::fmt::Write as _;

use locus_dc::balancer::BalancerConfig;
use locus_dc::selector::SelectorConfig;

use super::rows::{MIB, fraction, full_of};
use crate::reproduce::dc::{DcOptions, DcRow, QUOTA_SERVERS, QUOTA_SETS};
use crate::reproduce::{Claim, write_claims_table};

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
    o.push('\n');
    write_claims_table(&mut o, claims);
    let _ = writeln!(o, "\nPlots: fig7_cps.svg, fig8_response.svg, fig9_specweb99.svg, fig9_sequoia.svg.");
    o
}
