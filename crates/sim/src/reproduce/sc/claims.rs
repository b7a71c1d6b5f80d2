//! The Socket Cloning paper's Fig. 9 claims checked against `reproduce sc`'s rows: the
//! 12-node ordering and ratios, RR's plateau from 8 nodes, CF not above RR up to 8 nodes, and
//! CF-LFU above CF-LRU. Criteria are fixed here, before any run, and never tuned to pass.

use crate::reproduce::Claim;
use crate::reproduce::sc::{PAPER_RATIOS_AT_12, ScRow};

/// Relative tolerance on the paper's 12-node ratios.
pub const RATIO_TOLERANCE: f64 = 0.30;
/// Most RR may rise from 8 to 12 nodes and still count as flat.
pub const RR_FLAT_RISE: f64 = 0.10;
/// Noise allowance when CF must not be above RR (up to 8 nodes).
pub const CF_NOT_ABOVE_SLACK: f64 = 0.02;

fn rps(rows: &[ScRow], policy: &str, nodes: u32) -> Option<f64> {
    rows.iter().find(|r| r.policy == policy && r.nodes == nodes).map(|r| r.rps)
}

fn counts(rows: &[ScRow]) -> Vec<u32> {
    let mut n: Vec<u32> = rows.iter().map(|r| r.nodes).collect();
    n.sort_unstable();
    n.dedup();
    n
}

/// Check the claims; a claim whose node counts were not run is not met, saying so.
pub fn check_sc_claims(rows: &[ScRow]) -> Vec<Claim> {
    let mut claims = vec![ordering_claim(rows)];
    for (other, paper) in PAPER_RATIOS_AT_12 {
        claims.push(ratio_claim(rows, other, paper));
    }
    claims.push(rr_flat_claim(rows));
    claims.push(cf_not_above_rr_claim(rows));
    claims.push(lfu_above_lru_claim(rows));
    claims
}

fn ordering_claim(rows: &[ScRow]) -> Claim {
    let order = ["sc", "cf-lfu", "cf-lru", "rr"];
    let values: Option<Vec<f64>> = order.iter().map(|p| rps(rows, p, 12)).collect();
    let (met, evidence) = match values {
        None => (false, "12 nodes not run".to_string()),
        Some(v) => (
            v.windows(2).all(|w| w[0] > w[1]),
            format!(
                "at 12 nodes: SC {:.0}, CF-LFU {:.0}, CF-LRU {:.0}, RR {:.0} req/s",
                v[0], v[1], v[2], v[3]
            ),
        ),
    };
    Claim::new(
        "With 12 nodes SC has the highest throughput, then CF-LFU, CF-LRU and RR",
        "rps at 12 nodes: SC > CF-LFU > CF-LRU > RR",
        met,
        evidence,
    )
}

fn ratio_claim(rows: &[ScRow], other: &str, paper: f64) -> Claim {
    let (statement, criterion) = match other {
        "cf-lfu" => (
            "With 12 nodes SC outperforms CF-LFU by 30%",
            "SC / CF-LFU rps at 12 nodes within 1.30 ± 30% (the tolerance is ours)",
        ),
        "cf-lru" => (
            "With 12 nodes SC outperforms CF-LRU by 64%",
            "SC / CF-LRU rps at 12 nodes within 1.64 ± 30% (the tolerance is ours)",
        ),
        _ => (
            "With 12 nodes SC outperforms RR by 96%",
            "SC / RR rps at 12 nodes within 1.96 ± 30% (the tolerance is ours)",
        ),
    };
    let (met, evidence) = match (rps(rows, "sc", 12), rps(rows, other, 12)) {
        (Some(sc), Some(o)) if o > 0.0 => {
            let r = sc / o;
            let within = (r / paper - 1.0).abs() <= RATIO_TOLERANCE;
            (within, format!("{r:.2} here vs {paper:.2} in the paper ({:+.0}%)", (r / paper - 1.0) * 100.0))
        }
        _ => (false, "12 nodes not run".to_string()),
    };
    Claim::new(statement, criterion, met, evidence)
        .with_slack("±30% of the paper's ratio (COOPERATIVE-CACHING.md)")
}

fn rr_flat_claim(rows: &[ScRow]) -> Claim {
    let (met, evidence) = match (rps(rows, "rr", 8), rps(rows, "rr", 12)) {
        (Some(a), Some(b)) if a > 0.0 => {
            let curve: Vec<String> = counts(rows)
                .into_iter()
                .filter_map(|n| Some(format!("{n}: {:.0}", rps(rows, "rr", n)?)))
                .collect();
            (
                b / a - 1.0 <= RR_FLAT_RISE,
                format!(
                    "RR 8 → 12 nodes {:+.1}% (req/s by nodes: {})",
                    (b / a - 1.0) * 100.0,
                    curve.join(", ")
                ),
            )
        }
        _ => (false, "8 or 12 nodes not run".to_string()),
    };
    Claim::new(
        "RR's throughput stops rising beyond 8 nodes",
        "RR rps at 12 nodes ≤ 1.10 × RR rps at 8 nodes (the 10% is ours)",
        met,
        evidence,
    )
    .with_slack("a rise of up to 10% counts as flat")
    .by_construction(
        "RR's plateau is the one shared file-server link that every node's misses cross, a bottleneck the \
         design put in to produce it (COOPERATIVE-CACHING.md); where it appears depends on the link's rate",
    )
}

fn cf_not_above_rr_claim(rows: &[ScRow]) -> Claim {
    let mut worst: Option<(String, u32, f64)> = None;
    let mut checked = 0;
    for n in counts(rows).into_iter().filter(|&n| n <= 8) {
        let Some(rr) = rps(rows, "rr", n) else { continue };
        for cf in ["cf-lru", "cf-lfu"] {
            if let Some(v) = rps(rows, cf, n) {
                checked += 1;
                let r = v / rr;
                if worst.as_ref().is_none_or(|w| r > w.2) {
                    worst = Some((cf.to_string(), n, r));
                }
            }
        }
    }
    let (met, evidence) = match worst {
        None => (false, "no node count ≤ 8 with RR and CF run".to_string()),
        Some((cf, n, r)) => (
            r <= 1.0 + CF_NOT_ABOVE_SLACK,
            format!("{checked} points checked; the highest CF / RR is {r:.3} ({cf} at {n} nodes)"),
        ),
    };
    Claim::new(
        "Cooperative caching is not above RR up to 8 nodes",
        "CF-LRU and CF-LFU rps ≤ 1.02 × RR rps at every node count ≤ 8 (the 2% is ours)",
        met,
        evidence,
    )
    .with_slack("up to 2% above RR counts as not above")
}

fn lfu_above_lru_claim(rows: &[ScRow]) -> Claim {
    let pairs: Vec<(u32, f64)> = counts(rows)
        .into_iter()
        .filter(|&n| n >= 2)
        .filter_map(|n| Some((n, rps(rows, "cf-lfu", n)? / rps(rows, "cf-lru", n)?)))
        .collect();
    let text: Vec<String> = pairs.iter().map(|(n, r)| format!("{n}: {r:.2}")).collect();
    Claim::new(
        "Cooperative caching with LFU performs better than with LRU",
        "CF-LFU rps > CF-LRU rps at every node count ≥ 2",
        !pairs.is_empty() && pairs.iter().all(|&(_, r)| r > 1.0),
        format!("CF-LFU / CF-LRU by nodes: {}", text.join(", ")),
    )
}
