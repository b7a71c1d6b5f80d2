//! `Line`: one named series of a chart — its (x, y) points in drawing order, its colour, the
//! stroke width and the radius of the dot at each point — and `palette99`, plotters' palette
//! of distinct colours by index.

use plotters::style::{Color, Palette, Palette99, RGBColor};

/// One line of a chart.
#[derive(Clone, Debug, PartialEq)]
pub struct Line {
    pub label: String,
    pub points: Vec<(f64, f64)>,
    pub color: RGBColor,
    /// Stroke width of the line (and of its legend key), px.
    pub width: u32,
    /// Radius of the filled dot at each point, px.
    pub dot: u32,
}

impl Line {
    /// A line of width 2 with dots of radius 3.
    pub fn new(label: impl Into<String>, points: Vec<(f64, f64)>, color: RGBColor) -> Line {
        Line { label: label.into(), points, color, width: 2, dot: 3 }
    }
}

/// Colour `index` of plotters' 99-colour palette.
pub fn palette99(index: usize) -> RGBColor {
    let c = Palette99::pick(index).to_rgba();
    RGBColor(c.0, c.1, c.2)
}
