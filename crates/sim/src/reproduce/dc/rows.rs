//! The rows of `reproduce dc` that each figure, claim and table reads: Fig. 7's and Fig. 9's
//! rows of a set and method, a quota as a share of the set's full size, the row nearest a share.

use crate::reproduce::dc::DcRow;

pub(super) const MIB: f64 = (1 << 20) as f64;

pub(super) fn fig7<'a>(rows: &'a [DcRow], set: &str, method: &str) -> Vec<&'a DcRow> {
    let mut v: Vec<&DcRow> =
        rows.iter().filter(|r| r.experiment == "fig7" && r.dataset == set && r.method == method).collect();
    v.sort_by_key(|r| r.servers);
    v
}

pub(super) fn fig9<'a>(rows: &'a [DcRow], set: &str, method: &str) -> Vec<&'a DcRow> {
    let mut v: Vec<&DcRow> =
        rows.iter().filter(|r| r.experiment == "fig9" && r.dataset == set && r.method == method).collect();
    v.sort_by_key(|r| r.quota_bytes);
    v
}

/// `set`'s full size (0 if unknown).
pub(super) fn full_of(full_sizes: &[(String, u64)], set: &str) -> u64 {
    full_sizes.iter().find(|(n, _)| n == set).map_or(0, |f| f.1)
}

/// A quota as a share of the full size.
pub(super) fn fraction(row: &DcRow, full: u64) -> f64 {
    row.quota_bytes.unwrap_or(0) as f64 / full.max(1) as f64
}

/// `set`'s `method` run at the quota point nearest `share` × full.
pub(super) fn at_share<'a>(
    rows: &'a [DcRow],
    set: &str,
    method: &str,
    full: u64,
    share: f64,
) -> Option<&'a DcRow> {
    fig9(rows, set, method).into_iter().find(|r| (fraction(r, full) - share).abs() < 0.01)
}

pub(super) fn fig9_all<'a>(rows: &'a [DcRow], set: &'a str) -> impl Iterator<Item = &'a DcRow> {
    rows.iter().filter(move |r| r.experiment == "fig9" && r.dataset == set)
}
