//! `RigError`: why the rig could not do what it was asked — no root or no `ip`, a congestion
//! control the kernel refused, a command that failed, a program not installed, a server that
//! did not start or whose address stayed held, a file or system call that failed, no cgroup
//! cpu controller for a CPU limit, or an interrupt.

use std::io;
use std::path::PathBuf;

/// An error of the rig.
#[derive(Debug, thiserror::Error)]
pub enum RigError {
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
    /// No cgroup `cpu` controller to enforce a node's CPU limit with.
    #[error("no cgroup cpu controller: looked for {looked_for}; `node.cpu_limit` needs one")]
    NoCpuController {
        /// What was looked for, and where.
        looked_for: String,
    },
    /// The lab is being torn down (after SIGINT or SIGTERM): nothing new may start.
    #[error("the lab was interrupted and is being torn down")]
    Interrupted,
}

impl RigError {
    /// An I/O error about `path`.
    pub fn io(path: impl Into<PathBuf>, source: io::Error) -> RigError {
        RigError::Io { path: path.into(), error: source }
    }

    /// A failed system call.
    pub fn system(call: impl Into<String>, source: io::Error) -> RigError {
        RigError::System { call: call.into(), error: source }
    }
}
