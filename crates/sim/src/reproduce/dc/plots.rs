//! The SVG plots of `reproduce dc`: CPS against servers, response time against servers, and CPS
//! against quota as a share of the full size.

use std::path::{Path, PathBuf};

use super::rows::{MIB, fig7, fig9, fraction, full_of};
use crate::error::SimError;
use crate::plot::{Axes, Series, plot_lines};
use crate::reproduce::dc::{DcRow, QUOTA_METHODS, QUOTA_SERVERS, QUOTA_SETS};

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
