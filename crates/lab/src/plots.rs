//! SVG plots of a report, like the LARD paper's figures: throughput, cluster hit ratio and
//! load imbalance against the number of nodes, one line per switch and policy, drawn with
//! `locus_plot` (text is left to the SVG viewer, so no fonts are needed).

use std::path::Path;

use locus_plot::{Axis, Chart, Grid, Legend, Line, RGBColor};

use crate::error::LabError;
use crate::experiment::SwitchKind;
use crate::report::{LabReport, PlotFile, Series, SeriesPoint};

/// One metric plotted against node count.
struct Metric {
    /// File name part (`throughput`).
    slug: &'static str,
    title: &'static str,
    axis: &'static str,
    value: fn(&SeriesPoint) -> f64,
    /// Decimals on the y axis.
    decimals: usize,
    /// Lowest value the y axis shows (ratios start at 0, imbalance at 1).
    floor: f64,
}

const METRICS: [Metric; 3] = [
    Metric {
        slug: "throughput",
        title: "Throughput",
        axis: "requests/s",
        value: |p| p.rps,
        decimals: 0,
        floor: 0.0,
    },
    Metric {
        slug: "hit-ratio",
        title: "Cluster cache hit ratio",
        axis: "hit ratio",
        value: |p| p.hit_ratio,
        decimals: 2,
        floor: 0.0,
    },
    Metric {
        slug: "imbalance",
        title: "Load imbalance (max/mean requests per node)",
        axis: "max / mean",
        value: |p| p.imbalance,
        decimals: 2,
        floor: 1.0,
    },
];

/// Line colours, then dash patterns for the external switches.
const PALETTE: [RGBColor; 10] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
];

/// Width of the legend column right of the chart.
const LEGEND_WIDTH: u32 = 250;

/// Draw one metric of `series` as an SVG document: the chart, and a legend beside it (where
/// it can never hide a line).
fn render_svg(title: &str, metric: &Metric, series: &[Series]) -> Result<String, String> {
    let xs: Vec<usize> = series.iter().flat_map(|s| s.points.iter().map(|p| p.nodes)).collect();
    let x_max = xs.iter().copied().max().unwrap_or(1).max(2);
    let ys = series.iter().flat_map(|s| s.points.iter().map(metric.value));
    let y_max = ys.fold(metric.floor, f64::max);
    let y_top =
        if y_max <= metric.floor { metric.floor + 1.0 } else { metric.floor + (y_max - metric.floor) * 1.1 };
    let x_format =
        |x: &f64| if (x - x.round()).abs() < 1e-6 { format!("{}", x.round() as i64) } else { String::new() };
    let y_format = |y: &f64| format!("{y:.*}", metric.decimals);
    let chart = Chart {
        title,
        title_size: 20,
        size: (900, 480),
        margin: 12,
        label_areas: (42, 70),
        x: Axis {
            labels: Some(x_max),
            format: Some(&x_format),
            ..Axis::new("nodes", 0.5f64..(x_max as f64 + 0.5))
        },
        y: Axis { format: Some(&y_format), ..Axis::new(metric.axis, metric.floor..y_top) },
        grid: Grid::Color(RGBColor(238, 238, 238)),
        legend: Legend::Beside { width: LEGEND_WIDTH },
    };
    let lines: Vec<Line> = series
        .iter()
        .enumerate()
        .map(|(i, s)| Line {
            label: s.label.clone(),
            points: s.points.iter().map(|p| (p.nodes as f64, (metric.value)(p))).collect(),
            color: PALETTE[i % PALETTE.len()],
            width: if s.switch == SwitchKind::Locus { 3 } else { 2 },
            dot: 4,
        })
        .collect();
    chart.to_svg(&lines).map_err(|e| e.to_string())
}

/// Write the three plots of every workload into `dir`.
pub fn write_plots(report: &LabReport, dir: &Path) -> Result<Vec<PlotFile>, LabError> {
    let mut out = Vec::new();
    for workload in report.workloads() {
        let series = report.series(&workload);
        for m in &METRICS {
            let file = format!("{workload}-{}.svg", m.slug);
            let title = format!("{} — workload {workload}", m.title);
            let svg = render_svg(&title, m, &series)
                .map_err(|message| LabError::Plot { name: file.clone(), message })?;
            let path = dir.join(&file);
            std::fs::write(&path, svg).map_err(|e| LabError::io(&path, e))?;
            out.push(PlotFile { workload: workload.clone(), title, file });
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::tests::sample_report;

    #[test]
    fn a_plot_is_an_svg_with_a_line_and_a_legend_entry_per_series() {
        let r = sample_report();
        let series = r.series("zipf");
        let svg = render_svg("Throughput", &METRICS[0], &series).unwrap();
        assert!(
            svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"),
            "{}",
            &svg[..100.min(svg.len())]
        );
        for s in &series {
            assert!(svg.contains(&s.label), "legend lacks {}", s.label);
        }
        assert!(svg.matches("<polyline").count() >= 2 * series.len(), "a line per series, and its legend");
        assert!(svg.contains("requests/s") && svg.contains("nodes"));
    }

    #[test]
    fn an_empty_report_draws_empty_axes_instead_of_failing() {
        let svg = render_svg("Nothing", &METRICS[2], &[]).unwrap();
        assert!(svg.contains("<svg"));
    }
}
