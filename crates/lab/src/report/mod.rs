//! The lab's report: the Markdown document with its tables, plots and notes (`lab_report`),
//! its set-up section (`setup`) and the best configuration of each balancer (`best_of`).

pub mod best_of;
mod lab_report;
mod setup;

pub use best_of::{Best, best_series};
#[cfg(test)]
pub(crate) use lab_report::tests;
pub use lab_report::{LabReport, PairedRatio, PlotFile, SeedRun, Series, SeriesPoint, median, ratio_text};
