//! The simulator's SVG figures, drawn with `locus_plot`: a sweep against node count like the
//! LARD paper's figures (throughput, cache miss ratio, idle time and mean delay, one line per
//! policy), and `plot_lines`, a line chart of named series over any x axis (the CSLD, CAP, SC
//! and DC studies plot latency or throughput against case, rate, share or quota).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use locus_plot::{Axis, Chart, Corner, Grid, Legend, Line, RGBColor, palette99};

use crate::error::SimError;
use crate::report::SimReport;

/// A quantity plotted against node count.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PlotMetric {
    Throughput,
    MissRatio,
    IdleTime,
    MeanDelay,
}

impl PlotMetric {
    pub const ALL: [PlotMetric; 4] =
        [PlotMetric::Throughput, PlotMetric::MissRatio, PlotMetric::IdleTime, PlotMetric::MeanDelay];

    /// File name of the plot.
    pub fn file_name(self) -> &'static str {
        match self {
            PlotMetric::Throughput => "throughput.svg",
            PlotMetric::MissRatio => "miss_ratio.svg",
            PlotMetric::IdleTime => "idle_time.svg",
            PlotMetric::MeanDelay => "delay.svg",
        }
    }

    fn title(self) -> &'static str {
        match self {
            PlotMetric::Throughput => "Throughput",
            PlotMetric::MissRatio => "Cache miss ratio",
            PlotMetric::IdleTime => "Idle time",
            PlotMetric::MeanDelay => "Mean delay",
        }
    }

    fn y_desc(self) -> &'static str {
        match self {
            PlotMetric::Throughput => "Throughput (reqs/sec)",
            PlotMetric::MissRatio => "Cache miss ratio (%)",
            PlotMetric::IdleTime => "Idle time (%)",
            PlotMetric::MeanDelay => "Mean delay (ms)",
        }
    }

    /// The plotted value of one point.
    pub fn value(self, r: &SimReport) -> f64 {
        match self {
            PlotMetric::Throughput => r.rps,
            PlotMetric::MissRatio => r.miss_ratio * 100.0,
            PlotMetric::IdleTime => r.idle_ratio * 100.0,
            PlotMetric::MeanDelay => r.mean_delay_ms,
        }
    }
}

fn color_of(label: &str, index: usize) -> RGBColor {
    match label {
        "WRR" => RGBColor(214, 39, 40),
        "LB" => RGBColor(31, 119, 180),
        "LB/GC" => RGBColor(23, 190, 207),
        "LARD" => RGBColor(44, 160, 44),
        "LARD/R" => RGBColor(0, 0, 0),
        "WRR/GMS" => RGBColor(255, 127, 14),
        _ => palette99(index),
    }
}

/// Lines of `reports` grouped by label (in first-appearance order), points sorted by nodes.
fn series(reports: &[SimReport], metric: PlotMetric) -> Vec<(String, Vec<(f64, f64)>)> {
    let mut order: Vec<String> = Vec::new();
    let mut by_label: BTreeMap<String, Vec<(f64, f64)>> = BTreeMap::new();
    for r in reports {
        if !by_label.contains_key(&r.label) {
            order.push(r.label.clone());
        }
        by_label.entry(r.label.clone()).or_default().push((r.nodes as f64, metric.value(r)));
    }
    order
        .into_iter()
        .map(|label| {
            let mut pts = by_label.remove(&label).unwrap_or_default();
            pts.sort_by(|a, b| a.0.total_cmp(&b.0));
            (label, pts)
        })
        .collect()
}

/// Draw one metric of `reports` to `path` with `title` before the metric's name.
pub fn plot_metric(
    path: &Path,
    reports: &[SimReport],
    metric: PlotMetric,
    title: &str,
) -> Result<(), SimError> {
    let lines = series(reports, metric);
    let max_x = reports.iter().map(|r| r.nodes).max().unwrap_or(1) as f64;
    let max_y = lines.iter().flat_map(|(_, p)| p.iter().map(|&(_, y)| y)).fold(0.0f64, f64::max);
    // Headroom above the highest point keeps the legend (upper left) clear of the lines.
    let top = if max_y > 0.0 { max_y * 1.3 } else { 1.0 };
    let caption =
        if title.is_empty() { metric.title().to_string() } else { format!("{title}: {}", metric.title()) };
    let x_format = |x: &f64| format!("{x:.0}");
    let y_format = |y: &f64| if top >= 100.0 { format!("{y:.0}") } else { format!("{y:.1}") };
    let chart = Chart {
        title: &caption,
        title_size: 22,
        x: Axis {
            labels: Some(max_x as usize + 2),
            format: Some(&x_format),
            ..Axis::new("# nodes in cluster", 0.0..(max_x + 0.5))
        },
        y: Axis { format: Some(&y_format), ..Axis::new(metric.y_desc(), 0.0..top) },
        ..frame()
    };
    let lines: Vec<Line> = lines
        .into_iter()
        .enumerate()
        .map(|(i, (label, pts))| Line::new(label.clone(), pts, color_of(&label, i)))
        .collect();
    chart.to_file(path, &lines).map_err(|e| plot_error(path, e))
}

/// The frame every figure of the simulator shares: 820 × 560, the legend in the upper left,
/// no light grid lines (each user sets the title and both axes).
fn frame<'a>() -> Chart<'a> {
    Chart {
        title: "",
        title_size: 20,
        size: (820, 560),
        margin: 14,
        label_areas: (44, 72),
        x: Axis::new("", 0.0..1.0),
        y: Axis::new("", 0.0..1.0),
        grid: Grid::Hidden,
        legend: Legend::Inside { corner: Corner::UpperLeft, background: 0.85, key: 20 },
    }
}

fn plot_error(path: &Path, e: locus_plot::PlotError) -> SimError {
    SimError::Plot { path: path.to_path_buf(), message: e.to_string() }
}

/// Write every `PlotMetric` of `reports` into `dir`; returns the files written.
pub fn write_plots(dir: &Path, reports: &[SimReport], title: &str) -> Result<Vec<PathBuf>, SimError> {
    std::fs::create_dir_all(dir).map_err(|e| SimError::io(dir, e))?;
    let mut written = Vec::new();
    for m in PlotMetric::ALL {
        let path = dir.join(m.file_name());
        plot_metric(&path, reports, m, title)?;
        written.push(path);
    }
    Ok(written)
}

/// One line: its label and its (x, y) points.
pub type Series = (String, Vec<(f64, f64)>);

/// Axis texts of a chart.
#[derive(Clone, Copy, Debug)]
pub struct Axes<'a> {
    pub title: &'a str,
    pub x: &'a str,
    pub y: &'a str,
}

/// Draw `series` to `path` (lines with dots; the legend in the upper left), the x axis over
/// the points with 5% room each side, the y axis from 0 with room above for the legend.
pub fn plot_lines(path: &Path, axes: Axes<'_>, series: &[Series]) -> Result<(), SimError> {
    let xs = series.iter().flat_map(|(_, p)| p.iter().map(|&(x, _)| x));
    let (min_x, max_x) = xs.fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), x| (a.min(x), b.max(x)));
    let (min_x, max_x) = if min_x.is_finite() { (min_x, max_x) } else { (0.0, 1.0) };
    let pad = ((max_x - min_x) * 0.05).max(1e-9);
    let max_y = series.iter().flat_map(|(_, p)| p.iter().map(|&(_, y)| y)).fold(0.0f64, f64::max);
    let top = if max_y > 0.0 { max_y * 1.35 } else { 1.0 };
    let chart = Chart {
        title: axes.title,
        x: Axis::new(axes.x, (min_x - pad)..(max_x + pad)),
        y: Axis::new(axes.y, 0.0..top),
        ..frame()
    };
    let lines: Vec<Line> = series
        .iter()
        .enumerate()
        .map(|(i, (label, pts))| Line::new(label.clone(), pts.clone(), palette99(i)))
        .collect();
    chart.to_file(path, &lines).map_err(|e| plot_error(path, e))
}
