//! `ForwarderError`: what failed while loading, attaching, pinning or driving the forwarder, or
//! while looking up interfaces and neighbours — each variant names the object and the step.

use std::io;
use std::net::Ipv4Addr;
use std::path::PathBuf;

use crate::maps::ConnKey;

/// An error of the forwarder library.
#[derive(Debug, thiserror::Error)]
pub enum ForwarderError {
    /// The embedded object could not be parsed or its maps created or adopted.
    #[error("load the forwarder's BPF object: {0}")]
    Load(aya::EbpfError),
    /// The kernel refused the program (the verifier's log is in the message).
    #[error("load the forwarder program into the kernel: {0}")]
    Verify(aya::programs::ProgramError),
    /// The clsact qdisc could not be added.
    #[error("add a clsact qdisc on {iface}: {error}")]
    Qdisc {
        /// The interface.
        iface: String,
        /// Why.
        error: aya::programs::tc::TcError,
    },
    /// The program could not be attached to the interface's ingress.
    #[error("attach clsact ingress on {iface}: {error}")]
    Attach {
        /// The interface.
        iface: String,
        /// Why.
        error: aya::programs::ProgramError,
    },
    /// The pin directory is unusable.
    #[error("pin directory {}: {message}", path.display())]
    PinDir {
        /// The directory.
        path: PathBuf,
        /// What is wrong with it.
        message: String,
    },
    /// A pinned map that was adopted does not have the shape this forwarder needs.
    #[error(
        "pinned map {} does not fit this forwarder: {detail}; remove the pins in {} to start over \
         (the connections they hold are lost)",
        path.display(), dir.display()
    )]
    PinnedMismatch {
        /// The pin file.
        path: PathBuf,
        /// The pin directory.
        dir: PathBuf,
        /// What differs.
        detail: String,
    },
    /// `keep_running` on a forwarder without a pin directory.
    #[error("keep the forwarder running: it has no pin directory, so no later process could adopt its maps")]
    NotPinned,
    /// A map command (`bpf(2)`) failed.
    #[error("{op} in map `{map}`: {error}")]
    Map {
        /// The operation (`update`, `lookup`, ...).
        op: &'static str,
        /// The map's name.
        map: &'static str,
        /// The kernel's error.
        error: io::Error,
    },
    /// An operation on an existing entry found none.
    #[error("no forwarder entry for {0}")]
    NoEntry(ConnKey),
    /// A table, node list or service list that does not fit its map.
    #[error("{what}: {detail}")]
    Invalid {
        /// What was refused.
        what: &'static str,
        /// Why.
        detail: String,
    },
    /// An interface could not be looked up.
    #[error("interface {name}: {error}")]
    Interface {
        /// Its name (or `#index`).
        name: String,
        /// Why.
        error: io::Error,
    },
    /// A neighbour's MAC could not be found.
    #[error("neighbour {ip}: {message}")]
    Neighbour {
        /// Its address.
        ip: Ipv4Addr,
        /// Why.
        message: String,
    },
    /// Entering or leaving the forwarder's network namespace failed.
    #[error("network namespace of the forwarder: {0}")]
    Namespace(io::Error),
    /// `BPF_PROG_TEST_RUN` failed.
    #[error("run a frame through the program (BPF_PROG_TEST_RUN): {0}")]
    TestRun(aya::programs::ProgramError),
}

/// A result of this library.
pub type Result<T, E = ForwarderError> = std::result::Result<T, E>;
