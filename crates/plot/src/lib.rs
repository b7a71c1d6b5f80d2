//! `locus-plot`: the one SVG line chart of the workspace — named lines with dots over a linear
//! or log x axis, the legend in a corner of the chart or in a column beside it — drawn with
//! plotters' SVG backend (text is left to the SVG viewer: no font files). The simulator, the
//! lab and the benchmarks describe their figures with it.

mod chart;
mod error;
mod line;

pub use chart::{Axis, Chart, Corner, Grid, Legend};
pub use error::PlotError;
pub use line::{Line, palette99};
pub use plotters::style::RGBColor;
