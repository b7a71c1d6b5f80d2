//! SVG plots of a sweep against node count, like the LARD paper's figures: throughput,
//! cache miss ratio, idle time (and mean delay), one line per policy, drawn with plotters'
//! SVG backend (text as SVG `<text>`, no font files).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use plotters::prelude::*;

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
        _ => {
            let c = Palette99::pick(index).to_rgba();
            RGBColor(c.0, c.1, c.2)
        }
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
    let err = |e: String| SimError::Plot { path: path.to_path_buf(), message: e };
    let lines = series(reports, metric);
    let max_x = reports.iter().map(|r| r.nodes).max().unwrap_or(1) as f64;
    let max_y = lines.iter().flat_map(|(_, p)| p.iter().map(|&(_, y)| y)).fold(0.0f64, f64::max);
    // Headroom above the highest point keeps the legend (upper left) clear of the lines.
    let top = if max_y > 0.0 { max_y * 1.3 } else { 1.0 };
    let root = SVGBackend::new(path, (820, 560)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(e.to_string()))?;
    let caption =
        if title.is_empty() { metric.title().to_string() } else { format!("{title}: {}", metric.title()) };
    let mut chart = ChartBuilder::on(&root)
        .caption(caption, ("sans-serif", 22))
        .margin(14)
        .x_label_area_size(44)
        .y_label_area_size(72)
        .build_cartesian_2d(0.0..(max_x + 0.5), 0.0..top)
        .map_err(|e| err(e.to_string()))?;
    chart
        .configure_mesh()
        .x_desc("# nodes in cluster")
        .y_desc(metric.y_desc())
        .x_labels(max_x as usize + 2)
        .x_label_formatter(&|x| format!("{x:.0}"))
        .y_label_formatter(&|y| if top >= 100.0 { format!("{y:.0}") } else { format!("{y:.1}") })
        .light_line_style(WHITE.mix(0.0))
        .draw()
        .map_err(|e| err(e.to_string()))?;
    crate::plot_lines::draw_lines(&root, &mut chart, &lines, color_of).map_err(err)
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
