//! How the Socket Cloning study's shape moves with the one parameter the paper leaves open that
//! decides it, the file server's link rate: the whole sweep again on a share of the trace at
//! each of several rates, with the claims checked at each, so the report shows why the default
//! rate was chosen and what the other rates give; and what cooperative caching gains by keeping
//! the copies it fetches (`cf-*` against `cf-*-single`).

use serde::Serialize;

use crate::config::SimConfig;
use crate::error::SimError;
use crate::reproduce::sc::claims::check_sc_claims;
use crate::reproduce::sc::{SC_POLICIES, ScRow, sc_study_config};
use crate::sweep::{SweepSpec, run_sweep};
use crate::workload::Workload;

/// File-server link rates of the sensitivity sweep, Mbps.
pub const SENSITIVITY_MBPS: [u64; 5] = [100, 200, 300, 400, 1000];

/// What one file-server rate gives.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct SensitivityRow {
    pub file_server_mbps: u64,
    /// RR's rise from 8 to 12 nodes (0.087 = +8.7%).
    pub rr_rise_8_to_12: f64,
    /// The highest CF-LRU or CF-LFU throughput over RR's at 8 nodes or fewer.
    pub max_cf_over_rr_up_to_8: f64,
    /// Throughput ratios at 12 nodes.
    pub cf_lfu_over_rr_12: f64,
    pub cf_lru_over_rr_12: f64,
    pub sc_over_rr_12: f64,
    pub claims_met: usize,
    pub claims: usize,
    /// Statements of the claims not met.
    pub not_met: Vec<String>,
}

fn rps(rows: &[ScRow], policy: &str, nodes: u32) -> f64 {
    rows.iter().find(|r| r.policy == policy && r.nodes == nodes).map_or(f64::NAN, |r| r.rps)
}

impl SensitivityRow {
    /// The figures of one rate's rows (node counts 1–12, all four strategies).
    pub fn of(file_server_mbps: u64, rows: &[ScRow]) -> SensitivityRow {
        let claims = check_sc_claims(rows);
        let rr = |n| rps(rows, "rr", n);
        let max_cf = rows
            .iter()
            .filter(|r| r.nodes <= 8 && r.policy.starts_with("cf-"))
            .map(|r| r.rps / rr(r.nodes))
            .fold(f64::NAN, f64::max);
        SensitivityRow {
            file_server_mbps,
            rr_rise_8_to_12: rr(12) / rr(8) - 1.0,
            max_cf_over_rr_up_to_8: max_cf,
            cf_lfu_over_rr_12: rps(rows, "cf-lfu", 12) / rr(12),
            cf_lru_over_rr_12: rps(rows, "cf-lru", 12) / rr(12),
            sc_over_rr_12: rps(rows, "sc", 12) / rr(12),
            claims_met: claims.iter().filter(|c| c.met).count(),
            claims: claims.len(),
            not_met: claims.iter().filter(|c| !c.met).map(|c| c.statement.to_string()).collect(),
        }
    }
}

/// Run the study's sweep on `workload` (a share of the trace) at each rate of `mbps`.
pub fn file_server_sensitivity(
    workload: &Workload,
    seed: u64,
    node_counts: &[u32],
    threads: usize,
    mbps: &[u64],
) -> Result<Vec<SensitivityRow>, SimError> {
    let mut out = Vec::with_capacity(mbps.len());
    for &m in mbps {
        let sweep =
            SweepSpec::named(sc_study_config(seed, m * 1_000_000), &SC_POLICIES, node_counts, threads)?;
        let rows: Vec<ScRow> = run_sweep(workload, &sweep, false)?.iter().map(ScRow::of).collect();
        out.push(SensitivityRow::of(m, &rows));
    }
    Ok(out)
}

/// Cooperative caching with and without the requester keeping a copy.
pub const KEEP_COPY_POLICIES: [&str; 4] = ["cf-lru", "cf-lru-single", "cf-lfu", "cf-lfu-single"];

/// The `KEEP_COPY_POLICIES` on `workload` over `base` at `node_counts`.
pub fn keep_copy_rows(
    workload: &Workload,
    base: SimConfig,
    node_counts: &[u32],
    threads: usize,
) -> Result<Vec<ScRow>, SimError> {
    let sweep = SweepSpec::named(base, &KEEP_COPY_POLICIES, node_counts, threads)?;
    Ok(run_sweep(workload, &sweep, false)?.iter().map(ScRow::of).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(policy: &str, nodes: u32, rps: f64) -> ScRow {
        ScRow {
            policy: policy.into(),
            label: policy.into(),
            nodes,
            rps,
            local_hit: 0.0,
            remote_hit: 0.0,
            server_read: 0.0,
            mean_delay_ms: 0.0,
            cpu_utilization: 0.0,
            tx_utilization: 0.0,
            tx_utilization_max: 0.0,
            rx_utilization: 0.0,
            file_server_tx_utilization: 0.0,
            measured_requests: 1,
        }
    }

    #[test]
    fn a_rate_row_has_rr_s_rise_the_largest_cf_lead_up_to_8_nodes_and_the_12_node_ratios() {
        let mut rows = Vec::new();
        for (n, rr, lru, lfu, sc) in [
            (1, 100.0, 100.0, 101.0, 100.0),
            (8, 400.0, 380.0, 420.0, 500.0),
            (12, 440.0, 500.0, 600.0, 800.0),
        ] {
            rows.extend([row("rr", n, rr), row("cf-lru", n, lru), row("cf-lfu", n, lfu), row("sc", n, sc)]);
        }
        let s = SensitivityRow::of(300, &rows);
        assert!((s.rr_rise_8_to_12 - 0.1).abs() < 1e-12);
        assert!((s.max_cf_over_rr_up_to_8 - 1.05).abs() < 1e-12, "{s:?}");
        assert_eq!((s.cf_lfu_over_rr_12, s.sc_over_rr_12), (600.0 / 440.0, 800.0 / 440.0));
        assert_eq!(s.claims, check_sc_claims(&rows).len());
        assert!(s.not_met.iter().any(|c| c.contains("not above RR")), "CF-LFU leads RR at 8: {s:?}");
        assert_eq!(s.claims_met + s.not_met.len(), s.claims);
    }
}
