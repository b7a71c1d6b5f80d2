//! `TraceError`: everything that can go wrong reading, writing or making a trace, each
//! variant naming what failed and where (file and line for parse errors).

use std::io;
use std::path::PathBuf;

/// An error of this crate.
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    /// Reading or writing `path` failed.
    #[error("{path}: {error}")]
    Io {
        /// The file (or `-` for standard input/output) being read or written.
        path: String,
        error: io::Error,
    },
    /// One record of a trace could not be parsed. Readers count and skip these until
    /// their error budget runs out; see `ReadOptions::max_malformed`.
    #[error("{path}:{line}: {message}")]
    Malformed {
        /// The file being read.
        path: String,
        /// 1-based line number (record number for the binary WC98 format).
        line: u64,
        /// What was wrong with it.
        message: String,
    },
    /// More malformed records than the reader tolerates.
    #[error(
        "{path}: giving up after {count} malformed records (tolerated: {limit}); the last was line {line}: {message}"
    )]
    TooManyMalformed {
        /// The file being read.
        path: String,
        /// Malformed records seen, including the one that broke the limit.
        count: u64,
        /// How many malformed records were tolerated.
        limit: u64,
        /// Line (record) number of the last malformed record.
        line: u64,
        /// What was wrong with the last one.
        message: String,
    },
    /// The format of a trace could not be told from its first bytes, or a header was wrong.
    #[error("{path}: {message}")]
    Format {
        /// The file being read.
        path: String,
        /// What was found instead.
        message: String,
    },
    /// A record cannot be written in the requested format.
    #[error("cannot write record {index} as {format}: {message}")]
    Unwritable {
        /// 0-based index of the record in the output.
        index: u64,
        /// The output format's name.
        format: &'static str,
        /// Why not.
        message: String,
    },
    /// A specification (of a synthetic trace, a site or a surf) is inconsistent.
    #[error("invalid {what}: {message}")]
    InvalidSpec {
        /// Which specification.
        what: &'static str,
        /// What is wrong with it.
        message: String,
    },
    /// A directory cannot be used (missing, empty, not a directory, not empty when it must be).
    #[error("{path}: {message}")]
    Directory {
        /// The directory.
        path: PathBuf,
        /// What is wrong with it.
        message: String,
    },
}

impl From<locus_site::SiteError> for TraceError {
    /// A document tree that could not be scanned: the same path and message.
    fn from(e: locus_site::SiteError) -> TraceError {
        match e {
            locus_site::SiteError::Io { path, error } => TraceError::fs(&path, error),
            locus_site::SiteError::Directory { path, message } => TraceError::Directory { path, message },
        }
    }
}

impl TraceError {
    /// `Io` for `path`.
    pub(crate) fn io(path: impl Into<String>, source: io::Error) -> TraceError {
        TraceError::Io { path: path.into(), error: source }
    }

    /// `InvalidSpec` for `what`.
    pub(crate) fn spec(what: &'static str, message: impl Into<String>) -> TraceError {
        TraceError::InvalidSpec { what, message: message.into() }
    }

    /// `Io` for a file system path.
    pub(crate) fn fs(path: &std::path::Path, source: io::Error) -> TraceError {
        TraceError::Io { path: path.display().to_string(), error: source }
    }
}
