//! The lab's report: the Markdown document with its tables, plots and notes (`lab_report`) and
//! its set-up section (`setup`).

mod lab_report;
mod setup;

#[cfg(test)]
pub(crate) use lab_report::tests;
pub use lab_report::{LabReport, PlotFile, Series, SeriesPoint, ratio_text};
