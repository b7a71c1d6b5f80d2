//! `check`: why a policy configuration cannot run on a cluster of given weights — zero or
//! missing weights, ring and Maglev sizes, LARD thresholds, CSLD parameters.

use super::{ChashKind, PolicyConfig};

/// Most ring points `chash` and `chash-bounded` will build (vnodes × total weight).
const MAX_RING_POINTS: u64 = 10_000_000;
/// Maglev tables need many more entries than nodes to stay balanced (the paper uses
/// M ≥ 100·N for under 1% imbalance).
const MAGLEV_ENTRIES_PER_NODE: u64 = 100;
/// Largest Maglev table accepted.
const MAX_MAGLEV_TABLE: u32 = 1 << 26;

fn is_prime(n: u32) -> bool {
    if n < 2 {
        return false;
    }
    let n = n as u64;
    let mut d = 2u64;
    while d * d <= n {
        if n.is_multiple_of(d) {
            return false;
        }
        d += 1;
    }
    true
}

/// Why `config`'s own parameters make no sense whatever the cluster, if they do not: checked
/// as the configuration is read, so the error carries the table's line.
pub(super) fn check_params(config: &PolicyConfig) -> Result<(), String> {
    match *config {
        PolicyConfig::Csld(params) => params.check(),
        PolicyConfig::Lard { t_low, t_high, max_targets } => check_lard(t_low, t_high, max_targets),
        PolicyConfig::LardR { t_low, t_high, max_targets, .. } => check_lard(t_low, t_high, max_targets),
        _ => Ok(()),
    }
}

/// Why `config` cannot run on nodes of these `weights`, if it cannot.
pub(super) fn check(config: &PolicyConfig, weights: &[u32]) -> Result<(), String> {
    if weights.is_empty() {
        return Err("the cluster has no nodes (empty weight list)".into());
    }
    if let Some(i) = weights.iter().position(|&w| w == 0) {
        return Err(format!("node {i} has weight 0; weights must be at least 1"));
    }
    if weights.len() > u32::MAX as usize {
        return Err(format!("{} nodes is too many", weights.len()));
    }
    let total_weight: u64 = weights.iter().map(|&w| w as u64).sum();
    match *config {
        PolicyConfig::Rr
        | PolicyConfig::Wrr
        | PolicyConfig::Lc
        | PolicyConfig::Wlc
        | PolicyConfig::P2c { .. }
        | PolicyConfig::Hash
        | PolicyConfig::WrrMetrics { .. }
        | PolicyConfig::Cap => Ok(()),
        PolicyConfig::Csld(params) => params.check(),
        PolicyConfig::Chash { kind: ChashKind::Ring, vnodes, .. } => check_vnodes(vnodes, total_weight),
        PolicyConfig::Chash { kind: ChashKind::Maglev, table_size, .. } => {
            check_maglev_table(table_size, weights.len())
        }
        PolicyConfig::ChashBounded { vnodes, balance_factor } => {
            check_vnodes(vnodes, total_weight)?;
            if balance_factor < 100 {
                return Err(format!(
                    "balance_factor is in percent and must be at least 100 (got {balance_factor})"
                ));
            }
            Ok(())
        }
        PolicyConfig::Lard { t_low, t_high, max_targets } => check_lard(t_low, t_high, max_targets),
        PolicyConfig::LardR { t_low, t_high, k_secs, max_targets, .. } => {
            check_lard(t_low, t_high, max_targets)?;
            if !(0.0..=1e9).contains(&k_secs) {
                return Err(format!("k_secs must be a number of seconds from 0 to 1e9 (got {k_secs})"));
            }
            if weights.len() > u16::MAX as usize + 1 {
                return Err(format!("at most 65536 nodes (got {})", weights.len()));
            }
            Ok(())
        }
    }
}

fn check_vnodes(vnodes: u32, total_weight: u64) -> Result<(), String> {
    if vnodes == 0 {
        return Err("vnodes must be at least 1".into());
    }
    if vnodes as u64 * total_weight > MAX_RING_POINTS {
        return Err(format!(
            "vnodes × total weight = {} × {total_weight} ring points exceeds {MAX_RING_POINTS}",
            vnodes
        ));
    }
    Ok(())
}

fn check_maglev_table(table_size: u32, nodes: usize) -> Result<(), String> {
    if !is_prime(table_size) {
        return Err(format!("table_size {table_size} is not a prime (65537 is)"));
    }
    let min = MAGLEV_ENTRIES_PER_NODE * nodes as u64;
    if (table_size as u64) < min {
        return Err(format!(
            "table_size {table_size} is too small for {nodes} nodes: use a prime of at least {min}"
        ));
    }
    if table_size > MAX_MAGLEV_TABLE {
        return Err(format!("table_size {table_size} exceeds {MAX_MAGLEV_TABLE}"));
    }
    Ok(())
}

fn check_lard(t_low: u32, t_high: u32, max_targets: usize) -> Result<(), String> {
    if t_high == 0 {
        return Err("t_high must be greater than 0".into());
    }
    if t_low >= t_high {
        return Err(format!("t_low ({t_low}) must be less than t_high ({t_high})"));
    }
    if t_high > u32::MAX / 2 {
        return Err(format!("t_high ({t_high}) is too large"));
    }
    if max_targets == 0 {
        return Err("max_targets must be at least 1".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{PolicyConfigError, build};

    fn invalid(config: PolicyConfig, weights: &[u32], needle: &str) {
        match build(&config, weights) {
            Err(PolicyConfigError::Invalid { message, .. }) => {
                assert!(message.contains(needle), "{message:?} lacks {needle:?}")
            }
            Err(e) => panic!("unexpected error {e}"),
            Ok(p) => panic!("{} built from an invalid configuration", p.name()),
        }
    }

    #[test]
    fn build_rejects_invalid_parameters() {
        let lard = |t_low, t_high, max_targets| PolicyConfig::Lard { t_low, t_high, max_targets };
        invalid(PolicyConfig::Rr, &[], "no nodes");
        invalid(PolicyConfig::Rr, &[1, 0], "weight 0");
        invalid(lard(65, 65, 10), &[1], "t_low");
        invalid(lard(0, 0, 10), &[1], "t_high");
        invalid(lard(25, 65, 0), &[1], "max_targets");
        let lard_r = |k_secs| PolicyConfig::LardR {
            t_low: 25,
            t_high: 65,
            k_secs,
            admission_limit: None,
            max_targets: 10,
        };
        invalid(lard_r(-1.0), &[1], "k_secs");
        invalid(lard_r(f64::NAN), &[1], "k_secs");
        let chash = |kind, vnodes, table_size| PolicyConfig::Chash { kind, vnodes, table_size };
        invalid(chash(ChashKind::Ring, 0, 65537), &[1], "vnodes");
        invalid(chash(ChashKind::Maglev, 160, 65536), &[1], "prime");
        invalid(chash(ChashKind::Maglev, 160, 251), &[1, 1, 1], "too small");
        invalid(PolicyConfig::ChashBounded { vnodes: 10, balance_factor: 99 }, &[1], "at least 100");
        invalid(PolicyConfig::ChashBounded { vnodes: 0, balance_factor: 150 }, &[1], "vnodes");
        let csld = |f: fn(&mut crate::CsldParams)| {
            let mut p = crate::CsldParams::default();
            f(&mut p);
            PolicyConfig::csld(p)
        };
        invalid(csld(|p| p.period_ms = 0), &[1], "period_ms");
        invalid(csld(|p| p.load_l = 0.7), &[1], "load_l < load_m");
        invalid(csld(|p| p.max_files = 0), &[1, 1], "max_files");
        invalid(csld(|_| {}), &[], "no nodes");
        assert!(build(&chash(ChashKind::Maglev, 160, 251), &[1, 1]).is_ok());
        assert!(build(&lard(0, 1, 1), &[1]).is_ok());
        assert!(is_prime(65537) && is_prime(2) && !is_prime(1) && !is_prime(65535));
    }
}
