//! `LabError`: why a lab could not be built or an experiment could not run — no root or no
//! `ip`, a command that failed, a server that did not start, a bad experiment file, a load
//! run that could not start or returned wrong bytes, or an interrupt.

use std::io;
use std::path::PathBuf;

/// An error of the lab library.
#[derive(Debug, thiserror::Error)]
pub enum LabError {
    /// Network namespaces cannot be made here.
    #[error("network namespaces are not available: {0}")]
    Unavailable(String),
    /// A congestion control the kernel refused (unknown, or not built in).
    #[error("TCP congestion control `{name}` could not be set ({message}); this kernel has: {available}")]
    CongestionControl { name: String, message: String, available: String },
    /// An external command (`ip`, `locus switch --check`) failed.
    #[error("`{command}` failed: {message}")]
    Command {
        /// The command line.
        command: String,
        /// Its error output or the reason it could not run.
        message: String,
    },
    /// A program the experiment needs is not installed.
    #[error("{program} is not installed (apt-get install {package})")]
    MissingProgram {
        /// The program looked for.
        program: String,
        /// The Debian package that has it.
        package: String,
    },
    /// A server process did not come up.
    #[error("{name} did not start: {message}; see {}", log.display())]
    ServerStart {
        /// Which server.
        name: String,
        /// What went wrong.
        message: String,
        /// Its log file.
        log: PathBuf,
    },
    /// An experiment file that cannot be read, parsed or accepted.
    #[error("experiment {source_name}: {message}")]
    Experiment {
        /// The file (or `built-in demo`).
        source_name: String,
        /// What is wrong, naming the key (and its line for parse errors).
        message: String,
    },
    /// Reading or writing a file or directory failed.
    #[error("{}: {error}", path.display())]
    Io {
        /// The path involved.
        path: PathBuf,
        error: io::Error,
    },
    /// A system call failed.
    #[error("{call}: {error}")]
    System {
        /// What was being done.
        call: String,
        error: io::Error,
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
    /// A server's address was still held by another socket in its host.
    #[error("{addr} is still held after {waited:?}: {holders}")]
    PortHeld {
        /// The address the server is to listen on.
        addr: std::net::SocketAddr,
        /// How long the lab waited for it.
        waited: std::time::Duration,
        /// Each socket listening there, with the process that holds it.
        holders: String,
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
    /// The lab is being torn down (after SIGINT or SIGTERM): nothing new may start.
    #[error("the lab was interrupted and is being torn down")]
    Interrupted,
}

impl LabError {
    /// An I/O error about `path`.
    pub fn io(path: impl Into<PathBuf>, source: io::Error) -> LabError {
        LabError::Io { path: path.into(), error: source }
    }

    /// A failed system call.
    pub fn system(call: impl Into<String>, source: io::Error) -> LabError {
        LabError::System { call: call.into(), error: source }
    }
}
