//! `LabError`: why an experiment could not run — a bad experiment file, a load run that could
//! not start or returned wrong bytes, a site that could not be generated, a point that failed,
//! a plot that could not be drawn, or what the rig reports (no root, a server that did not
//! start, an interrupt).

use std::io;
use std::path::PathBuf;

use locus_rig::RigError;

/// An error of the lab library.
#[derive(Debug, thiserror::Error)]
pub enum LabError {
    /// An experiment file that cannot be read, parsed or accepted.
    #[error("experiment {source_name}: {message}")]
    Experiment {
        /// The file (or `built-in demo`).
        source_name: String,
        /// What is wrong, naming the key (and its line for parse errors).
        message: String,
    },
    /// A load run could not start.
    #[error(transparent)]
    Load(#[from] locus_load::LoadError),
    /// The site could not be generated.
    #[error(transparent)]
    Trace(#[from] locus_trace::TraceError),
    /// A measurement went wrong (wrong bytes, a server that died, an admin that did not answer).
    #[error("{point}: {message}")]
    Point {
        /// The point, as `switch policy mode nodes`.
        point: String,
        /// What went wrong.
        message: String,
    },
    /// Drawing a plot failed.
    #[error("plot {name}: {message}")]
    Plot {
        /// The plot's file name.
        name: String,
        /// The drawing error.
        message: String,
    },
    /// Points that failed twice; the run measured the others.
    #[error("{failed} of {total} points failed, each tried twice (first: {first})")]
    PointsFailed {
        /// How many failed.
        failed: usize,
        /// How many the experiment has.
        total: usize,
        /// The first failure.
        first: String,
    },
    /// The rig failed: namespaces, processes, servers, files.
    #[error(transparent)]
    Rig(#[from] RigError),
}

impl LabError {
    /// An I/O error about `path`.
    pub fn io(path: impl Into<PathBuf>, source: io::Error) -> LabError {
        LabError::Rig(RigError::io(path, source))
    }

    /// A failed system call.
    pub fn system(call: impl Into<String>, source: io::Error) -> LabError {
        LabError::Rig(RigError::system(call, source))
    }
}
