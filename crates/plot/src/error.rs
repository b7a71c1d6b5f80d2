//! `PlotError`: a chart that could not be drawn or written, with what failed.

use std::path::PathBuf;

/// Why a chart was not drawn.
#[derive(Debug, thiserror::Error)]
pub enum PlotError {
    /// plotters refused to draw (an empty range, a backend error).
    #[error("drawing: {0}")]
    Draw(String),
    /// The SVG file could not be written.
    #[error("writing {path}: {source}")]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl PlotError {
    pub(crate) fn draw(e: impl std::fmt::Display) -> PlotError {
        PlotError::Draw(e.to_string())
    }
}
