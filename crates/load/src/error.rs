//! `LoadError`: why a load run could not start — a bad setting, a URL that does not parse or
//! resolve, an unreadable trace, manifest or document root, or threads that would not start.
//! Bad server behaviour is never an error here: it is counted in the report.

use std::io;
use std::path::PathBuf;

/// An error of the load generator's library.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// Settings that contradict each other or are out of range.
    #[error("invalid load settings: {0}")]
    InvalidConfig(String),
    /// A URL that is not `http://host[:port][/path]`.
    #[error("invalid URL `{url}`: {message}")]
    Url {
        /// The URL as given.
        url: String,
        /// What is wrong with it.
        message: String,
    },
    /// A host name that does not resolve.
    #[error("cannot resolve `{host}`: {error}")]
    Resolve {
        /// `host:port`.
        host: String,
        error: io::Error,
    },
    /// Reading or parsing a trace or a site manifest failed.
    #[error(transparent)]
    Trace(#[from] locus_trace::TraceError),
    /// Reading the document root for verification failed.
    #[error("{}: {error}", path.display())]
    Io {
        /// The file or directory.
        path: PathBuf,
        error: io::Error,
    },
    /// The TLS trust file (`--tls-ca`) cannot be used.
    #[error("TLS trust file {path}: {message}")]
    Tls {
        /// The file.
        path: String,
        /// What is wrong with it.
        message: String,
    },
    /// A worker thread or its runtime could not be started, or a worker died.
    #[error("load worker: {0}")]
    Worker(String),
}

impl LoadError {
    pub(crate) fn config(message: impl Into<String>) -> LoadError {
        LoadError::InvalidConfig(message.into())
    }
}
