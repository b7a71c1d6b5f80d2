//! `plot_lines`: an SVG line chart of named series over any x axis (the CSLD and CAP
//! studies plot latency against case, rate or dynamic share), drawn like `plot.rs`'s
//! node-count plots with plotters' SVG backend.

use std::path::Path;

use plotters::coord::Shift;
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;

use crate::error::SimError;

/// One line: its label and its (x, y) points.
pub type Series = (String, Vec<(f64, f64)>);

/// Axis texts of a chart.
#[derive(Clone, Copy, Debug)]
pub struct Axes<'a> {
    pub title: &'a str,
    pub x: &'a str,
    pub y: &'a str,
}

/// Draw `series` to `path` (lines with dots; the legend in the upper left).
pub fn plot_lines(path: &Path, axes: Axes<'_>, series: &[Series]) -> Result<(), SimError> {
    let err = |e: String| SimError::Plot { path: path.to_path_buf(), message: e };
    let xs = series.iter().flat_map(|(_, p)| p.iter().map(|&(x, _)| x));
    let (min_x, max_x) = xs.fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), x| (a.min(x), b.max(x)));
    let (min_x, max_x) = if min_x.is_finite() { (min_x, max_x) } else { (0.0, 1.0) };
    let pad = ((max_x - min_x) * 0.05).max(1e-9);
    let max_y = series.iter().flat_map(|(_, p)| p.iter().map(|&(_, y)| y)).fold(0.0f64, f64::max);
    let top = if max_y > 0.0 { max_y * 1.35 } else { 1.0 };
    let root = SVGBackend::new(path, (820, 560)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(e.to_string()))?;
    let mut chart = ChartBuilder::on(&root)
        .caption(axes.title, ("sans-serif", 20))
        .margin(14)
        .x_label_area_size(44)
        .y_label_area_size(72)
        .build_cartesian_2d((min_x - pad)..(max_x + pad), 0.0..top)
        .map_err(|e| err(e.to_string()))?;
    chart
        .configure_mesh()
        .x_desc(axes.x)
        .y_desc(axes.y)
        .light_line_style(WHITE.mix(0.0))
        .draw()
        .map_err(|e| err(e.to_string()))?;
    draw_lines(&root, &mut chart, series, |_, i| {
        let c = Palette99::pick(i).to_rgba();
        RGBColor(c.0, c.1, c.2)
    })
    .map_err(err)?;
    Ok(())
}

/// Draw `series` onto `chart` as lines with dots in `color(label, index)`, the legend in the
/// upper left, and write the picture out.
pub(crate) fn draw_lines<'a, 'b: 'a>(
    root: &DrawingArea<SVGBackend<'b>, Shift>,
    chart: &mut ChartContext<'a, SVGBackend<'b>, Cartesian2d<RangedCoordf64, RangedCoordf64>>,
    series: &[Series],
    color: impl Fn(&str, usize) -> RGBColor,
) -> Result<(), String> {
    for (i, (label, pts)) in series.iter().enumerate() {
        let color = color(label, i);
        chart
            .draw_series(LineSeries::new(pts.iter().copied(), color.stroke_width(2)))
            .map_err(|e| e.to_string())?
            .label(label.clone())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2)));
        chart
            .draw_series(pts.iter().map(|&p| Circle::new(p, 3, color.filled())))
            .map_err(|e| e.to_string())?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(|e| e.to_string())?;
    root.present().map_err(|e| e.to_string())
}
