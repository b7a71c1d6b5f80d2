//! `SimError`: what can go wrong setting up or running a simulation — an invalid
//! configuration, a policy that cannot be built, a trace that cannot be read, an output that
//! cannot be written — each naming what failed.

use std::path::PathBuf;

/// An error of the simulator library.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    /// A configuration value that cannot be used.
    #[error("invalid simulation configuration: {0}")]
    Config(String),
    /// The policy configuration does not build for this cluster.
    #[error(transparent)]
    Policy(#[from] locus_policy::PolicyConfigError),
    /// Reading or making the trace failed.
    #[error(transparent)]
    Trace(#[from] locus_trace::TraceError),
    /// The trace has no requests.
    #[error("the trace has no requests")]
    EmptyTrace,
    /// A configuration file could not be parsed.
    #[error("{origin}: {message}")]
    Parse { origin: String, message: String },
    /// Reading or writing a file failed.
    #[error("{}: {error}", path.display())]
    Io { path: PathBuf, error: std::io::Error },
    /// Drawing a plot failed.
    #[error("plot {}: {message}", path.display())]
    Plot { path: PathBuf, message: String },
}

impl SimError {
    /// An I/O error on `path`.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> SimError {
        SimError::Io { path: path.into(), error: source }
    }
}
