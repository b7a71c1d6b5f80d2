//! `Chart`: the frame of one SVG line chart — size, caption, margins, both axes (range, log
//! scale, tick count and label format, description), the light grid lines and where the
//! legend goes — and its drawing of `Line`s to an SVG string or file.

use std::ops::Range;
use std::path::Path;

use plotters::coord::Shift;
use plotters::coord::ranged1d::{Ranged, ValueFormatter};
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;

use crate::error::PlotError;
use crate::line::Line;

/// One axis of a chart.
pub struct Axis<'a> {
    /// What the axis shows.
    pub desc: &'a str,
    pub range: Range<f64>,
    /// A logarithmic scale (the x axis only).
    pub log: bool,
    /// How many tick labels (`None`: plotters' default).
    pub labels: Option<usize>,
    /// How a tick label is written (`None`: plotters' default).
    pub format: Option<&'a dyn Fn(&f64) -> String>,
}

impl<'a> Axis<'a> {
    /// A linear axis over `range` with plotters' default ticks.
    pub fn new(desc: &'a str, range: Range<f64>) -> Axis<'a> {
        Axis { desc, range, log: false, labels: None, format: None }
    }
}

/// The light grid lines between the labelled ones.
#[derive(Clone, Copy, Debug)]
pub enum Grid {
    /// plotters' default.
    Default,
    /// Not drawn.
    Hidden,
    Color(RGBColor),
}

/// A corner of the chart.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Corner {
    UpperLeft,
    LowerLeft,
}

impl Corner {
    fn position(self) -> SeriesLabelPosition {
        match self {
            Corner::UpperLeft => SeriesLabelPosition::UpperLeft,
            Corner::LowerLeft => SeriesLabelPosition::LowerLeft,
        }
    }
}

/// Where the legend goes.
#[derive(Clone, Copy, Debug)]
pub enum Legend {
    /// In a corner of the chart, on a white box of `background` opacity with a black border,
    /// each key a line `key` px long.
    Inside { corner: Corner, background: f64, key: i32 },
    /// In a column `width` px wide right of the chart, where it can never hide a line.
    Beside { width: u32 },
}

/// The frame of a chart.
pub struct Chart<'a> {
    pub title: &'a str,
    /// Font size of the title, px.
    pub title_size: u32,
    /// Width and height of the picture, px.
    pub size: (u32, u32),
    pub margin: u32,
    /// Room for the x axis's labels (below) and the y axis's (left), px.
    pub label_areas: (u32, u32),
    pub x: Axis<'a>,
    pub y: Axis<'a>,
    pub grid: Grid,
    pub legend: Legend,
}

type Area<'b> = DrawingArea<SVGBackend<'b>, Shift>;

impl Chart<'_> {
    /// Draw `lines` (in order) as an SVG document.
    pub fn to_svg(&self, lines: &[Line]) -> Result<String, PlotError> {
        let mut svg = String::new();
        self.render(&mut svg, lines)?;
        Ok(svg)
    }

    /// Draw `lines` (in order) into the SVG file `path`.
    pub fn to_file(&self, path: &Path, lines: &[Line]) -> Result<(), PlotError> {
        let svg = self.to_svg(lines)?;
        std::fs::write(path, svg).map_err(|source| PlotError::Write { path: path.to_path_buf(), source })
    }

    fn render(&self, svg: &mut String, lines: &[Line]) -> Result<(), PlotError> {
        let root = SVGBackend::with_string(svg, self.size).into_drawing_area();
        root.fill(&WHITE).map_err(PlotError::draw)?;
        let (area, beside) = match self.legend {
            Legend::Beside { width } => {
                let (chart, legend) = root.split_horizontally(self.size.0.saturating_sub(width));
                (chart, Some(legend))
            }
            Legend::Inside { .. } => (root.clone(), None),
        };
        let mut builder = ChartBuilder::on(&area);
        builder
            .caption(self.title, ("sans-serif", self.title_size))
            .margin(self.margin)
            .x_label_area_size(self.label_areas.0)
            .y_label_area_size(self.label_areas.1);
        let (xs, ys) = (self.x.range.clone(), self.y.range.clone());
        if self.x.log {
            let chart = builder.build_cartesian_2d(xs.log_scale(), ys).map_err(PlotError::draw)?;
            self.draw(chart, beside.as_ref(), lines)?;
        } else {
            let chart = builder.build_cartesian_2d(xs, ys).map_err(PlotError::draw)?;
            self.draw(chart, beside.as_ref(), lines)?;
        }
        root.present().map_err(PlotError::draw)
    }

    /// The mesh, the lines with their dots, and the legend.
    fn draw<'b, X>(
        &self,
        mut chart: ChartContext<'b, SVGBackend<'b>, Cartesian2d<X, RangedCoordf64>>,
        beside: Option<&Area<'b>>,
        lines: &[Line],
    ) -> Result<(), PlotError>
    where
        X: Ranged<ValueType = f64> + ValueFormatter<f64>,
    {
        let mut mesh = chart.configure_mesh();
        mesh.x_desc(self.x.desc).y_desc(self.y.desc);
        if let Some(n) = self.x.labels {
            mesh.x_labels(n);
        }
        if let Some(n) = self.y.labels {
            mesh.y_labels(n);
        }
        if let Some(f) = self.x.format {
            mesh.x_label_formatter(f);
        }
        if let Some(f) = self.y.format {
            mesh.y_label_formatter(f);
        }
        match self.grid {
            Grid::Default => {}
            Grid::Hidden => {
                mesh.light_line_style(WHITE.mix(0.0));
            }
            Grid::Color(c) => {
                mesh.light_line_style(c);
            }
        }
        mesh.draw().map_err(PlotError::draw)?;
        for (i, line) in lines.iter().enumerate() {
            let (color, width) = (line.color, line.width);
            let drawn = chart
                .draw_series(LineSeries::new(line.points.iter().copied(), color.stroke_width(width)))
                .map_err(PlotError::draw)?;
            if let Legend::Inside { key, .. } = self.legend {
                drawn.label(line.label.clone()).legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + key, y)], color.stroke_width(width))
                });
            }
            chart
                .draw_series(line.points.iter().map(|&p| Circle::new(p, line.dot, color.filled())))
                .map_err(PlotError::draw)?;
            if let Some(area) = beside {
                legend_entry(area, i, line)?;
            }
        }
        if let Legend::Inside { corner, background, .. } = self.legend {
            chart
                .configure_series_labels()
                .position(corner.position())
                .background_style(WHITE.mix(background))
                .border_style(BLACK)
                .draw()
                .map_err(PlotError::draw)?;
        }
        Ok(())
    }
}

/// Entry `i` of a legend column: the line's key with its dot, and its label.
fn legend_entry(area: &Area<'_>, i: usize, line: &Line) -> Result<(), PlotError> {
    let y = 60 + 24 * i as i32;
    let color = line.color;
    area.draw(&PathElement::new(vec![(8, y), (36, y)], color.stroke_width(line.width)))
        .map_err(PlotError::draw)?;
    area.draw(&Circle::new((22, y), line.dot, color.filled())).map_err(PlotError::draw)?;
    area.draw(&Text::new(line.label.clone(), (44, y - 7), ("sans-serif", 14))).map_err(PlotError::draw)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::line::palette99;

    fn chart<'a>(legend: Legend, log: bool) -> Chart<'a> {
        Chart {
            title: "Throughput",
            title_size: 20,
            size: (820, 560),
            margin: 14,
            label_areas: (44, 72),
            x: Axis { log, ..Axis::new("nodes", 1.0..16.0) },
            y: Axis::new("requests/s", 0.0..100.0),
            grid: Grid::Hidden,
            legend,
        }
    }

    fn lines() -> Vec<Line> {
        vec![
            Line::new("LARD", vec![(1.0, 10.0), (4.0, 40.0)], palette99(0)),
            Line::new("WRR", vec![(1.0, 9.0), (4.0, 20.0)], palette99(1)),
        ]
    }

    #[test]
    fn a_chart_has_a_line_and_a_legend_key_per_series_and_its_axis_texts() {
        let inside = Legend::Inside { corner: Corner::UpperLeft, background: 0.85, key: 20 };
        for legend in [inside, Legend::Beside { width: 250 }] {
            let svg = chart(legend, false).to_svg(&lines()).unwrap();
            assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
            assert!(svg.contains("LARD") && svg.contains("WRR"), "legend labels");
            assert!(svg.matches("<polyline").count() >= 4, "a line per series, and its legend key");
            assert!(svg.contains("requests/s") && svg.contains("nodes") && svg.contains("Throughput"));
        }
    }

    #[test]
    fn a_log_axis_and_no_lines_still_draw_and_a_file_is_written() {
        let inside = Legend::Inside { corner: Corner::LowerLeft, background: 0.8, key: 18 };
        assert!(chart(inside, true).to_svg(&[]).unwrap().contains("<svg"));
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.svg");
        chart(inside, true).to_file(&path, &lines()).unwrap();
        assert!(std::fs::read_to_string(&path).unwrap().contains("<svg"));
        assert!(chart(inside, false).to_file(&dir.path().join("no/such/dir.svg"), &lines()).is_err());
    }
}
