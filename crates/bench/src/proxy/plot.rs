//! The plot of `locus bench proxy --plot FILE.svg`: normalized efficiency (throughput ÷ one
//! node directly) against the file size on a log axis, a line per path and keep-alive setting,
//! like the Socket Cloning paper's micro-benchmark figure. Drawn with `locus_plot`.

use std::path::Path;

use locus_plot::{Axis, Chart, Corner, Grid, Legend, Line, palette99};

use super::ProxyRow;
use super::paths::DIRECT;

/// One line: its label and its (size, efficiency) points in size order.
type Series = (String, Vec<(f64, f64)>);

/// The lines of `rows`: every throughput row with an efficiency, but the normalizer's.
fn lines(rows: &[ProxyRow]) -> Vec<Series> {
    let settings: Vec<bool> = rows
        .iter()
        .filter_map(|r| match r {
            ProxyRow::Throughput { keepalive, .. } => Some(*keepalive),
            _ => None,
        })
        .fold(Vec::new(), |mut v, k| {
            if !v.contains(&k) {
                v.push(k);
            }
            v
        });
    let mut out: Vec<Series> = Vec::new();
    for row in rows {
        let ProxyRow::Throughput { path, size, keepalive, efficiency: Some(e), .. } = row else { continue };
        if path == DIRECT {
            continue;
        }
        let label = if settings.len() > 1 {
            format!("{path} (keep-alive {})", if *keepalive { "on" } else { "off" })
        } else {
            path.clone()
        };
        let point = ((*size).max(1) as f64, *e);
        match out.iter_mut().find(|(l, _)| *l == label) {
            Some((_, points)) => points.push(point),
            None => out.push((label, vec![point])),
        }
    }
    for (_, points) in &mut out {
        points.sort_by(|a, b| a.0.total_cmp(&b.0));
    }
    out
}

/// Draw efficiency against size to `path`; an error says what failed and where.
pub fn write_plot(rows: &[ProxyRow], path: &Path) -> anyhow::Result<()> {
    let lines = lines(rows);
    anyhow::ensure!(!lines.is_empty(), "no efficiencies to plot (only `direct` was measured?)");
    let sizes = lines.iter().flat_map(|(_, p)| p.iter().map(|&(x, _)| x));
    let (lo, hi) = sizes.fold((f64::INFINITY, 1.0f64), |(a, b), x| (a.min(x), b.max(x)));
    let top = lines.iter().flat_map(|(_, p)| p.iter().map(|&(_, y)| y)).fold(1.0f64, f64::max) * 1.15;
    let chart = Chart {
        title: "Normalized efficiency against file size",
        title_size: 20,
        size: (820, 560),
        margin: 14,
        label_areas: (44, 60),
        x: Axis { log: true, ..Axis::new("file size (bytes, log scale)", lo / 1.5..hi * 1.5) },
        y: Axis::new("throughput ÷ one node directly", 0.0..top),
        grid: Grid::Default,
        legend: Legend::Inside { corner: Corner::LowerLeft, background: 0.8, key: 18 },
    };
    let lines: Vec<Line> = lines
        .into_iter()
        .enumerate()
        .map(|(i, (label, points))| Line::new(label, points, palette99(i)))
        .collect();
    chart.to_file(path, &lines).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(path: &str, size: u64, keepalive: bool, e: Option<f64>) -> ProxyRow {
        ProxyRow::Throughput {
            path: path.into(),
            size,
            keepalive,
            rps: 1.0,
            efficiency: e,
            efficiency_rounds: Vec::new(),
            p50_ms: 0.0,
            p99_ms: 0.0,
            errors: 0,
        }
    }

    #[test]
    fn lines_leave_out_the_normalizer_and_sort_by_size_and_name_keepalive_only_when_both_ran() {
        let rows = [
            row("direct", 1, false, Some(1.0)),
            row("cf", 4096, false, Some(0.7)),
            row("cf", 1, false, Some(0.9)),
        ];
        assert_eq!(lines(&rows), vec![("cf".to_string(), vec![(1.0, 0.9), (4096.0, 0.7)])]);
        let both = [row("cf", 1, false, Some(0.9)), row("cf", 1, true, Some(0.8)), row("l4", 1, true, None)];
        let labels: Vec<String> = lines(&both).into_iter().map(|(l, _)| l).collect();
        assert_eq!(labels, ["cf (keep-alive off)", "cf (keep-alive on)"]);
    }

    #[test]
    fn plot_is_written_as_svg_and_an_empty_one_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("eff.svg");
        write_plot(&[row("cf", 100, false, Some(0.9)), row("cf", 1 << 20, false, Some(0.5))], &file).unwrap();
        assert!(std::fs::read_to_string(&file).unwrap().contains("<svg"));
        assert!(write_plot(&[row("direct", 1, false, Some(1.0))], &file).is_err());
    }
}
