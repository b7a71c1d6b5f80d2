//! `SiteError`: a document tree that could not be scanned, naming the path that failed.

use std::io;
use std::path::{Path, PathBuf};

/// Why a document tree could not be scanned.
#[derive(Debug, thiserror::Error)]
pub enum SiteError {
    /// Reading `path` failed.
    #[error("{path}: {error}")]
    Io {
        /// The file or directory being read.
        path: PathBuf,
        error: io::Error,
    },
    /// The root cannot be used (not a directory, or more than the scan's limits).
    #[error("{path}: {message}")]
    Directory {
        /// The root directory.
        path: PathBuf,
        /// What is wrong with it.
        message: String,
    },
}

impl SiteError {
    /// `Io` for a file system path.
    pub(crate) fn fs(path: &Path, error: io::Error) -> SiteError {
        SiteError::Io { path: path.to_path_buf(), error }
    }
}
