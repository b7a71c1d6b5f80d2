//! The errors of this crate: `RepairError` (which TCP_REPAIR step failed, with which errno),
//! `DumpError` (a failed dump, with the socket given back), `DecodeError` (bytes that are not
//! a valid state or message), and `ControlError` (the control channel: I/O, timeouts,
//! failed authentication, bad frames).

use std::fmt;
use std::io;
use std::os::fd::OwnedFd;
use std::time::Duration;

/// An `errno` value, shown by its symbolic name and description (`EINVAL (Invalid argument)`).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Errno(pub i32);

impl Errno {
    /// The errno of the calling thread's last failed libc call.
    pub fn last() -> Errno {
        Errno(io::Error::last_os_error().raw_os_error().unwrap_or(0))
    }

    /// The symbolic name (`EINVAL`), or `errno N` for one this table does not know.
    pub fn name(self) -> Option<&'static str> {
        Some(match self.0 {
            libc::EPERM => "EPERM",
            libc::ENOENT => "ENOENT",
            libc::EINTR => "EINTR",
            libc::EBADF => "EBADF",
            libc::EAGAIN => "EAGAIN",
            libc::ENOMEM => "ENOMEM",
            libc::EACCES => "EACCES",
            libc::EFAULT => "EFAULT",
            libc::EINVAL => "EINVAL",
            libc::EMFILE => "EMFILE",
            libc::ENFILE => "ENFILE",
            libc::EPIPE => "EPIPE",
            libc::ENOTSOCK => "ENOTSOCK",
            libc::ENOPROTOOPT => "ENOPROTOOPT",
            libc::EPROTONOSUPPORT => "EPROTONOSUPPORT",
            libc::EOPNOTSUPP => "EOPNOTSUPP",
            libc::EAFNOSUPPORT => "EAFNOSUPPORT",
            libc::EADDRINUSE => "EADDRINUSE",
            libc::EADDRNOTAVAIL => "EADDRNOTAVAIL",
            libc::ENETUNREACH => "ENETUNREACH",
            libc::ECONNABORTED => "ECONNABORTED",
            libc::ECONNRESET => "ECONNRESET",
            libc::ENOBUFS => "ENOBUFS",
            libc::EISCONN => "EISCONN",
            libc::ENOTCONN => "ENOTCONN",
            libc::ETIMEDOUT => "ETIMEDOUT",
            libc::ECONNREFUSED => "ECONNREFUSED",
            libc::EHOSTUNREACH => "EHOSTUNREACH",
            libc::EALREADY => "EALREADY",
            libc::EINPROGRESS => "EINPROGRESS",
            _ => return None,
        })
    }
}

impl fmt::Display for Errno {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let text = io::Error::from_raw_os_error(self.0).to_string();
        // std renders "Invalid argument (os error 22)"; keep the description only.
        let text = text.split(" (os error").next().unwrap_or(&text);
        match self.name() {
            Some(name) => write!(f, "{name} ({text})"),
            None => write!(f, "errno {} ({text})", self.0),
        }
    }
}

impl fmt::Debug for Errno {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// Why a dump or restore failed: the step (named as in the TCP_REPAIR order, e.g.
/// `TCP_REPAIR_WINDOW after connect`) and what went wrong in it.
#[derive(Debug, thiserror::Error)]
pub enum RepairError {
    /// A system call failed.
    #[error("{step}: {errno}")]
    Syscall {
        /// The step, e.g. `TCP_QUEUE_SEQ (receive queue)`.
        step: &'static str,
        /// What the kernel said.
        errno: Errno,
    },
    /// Only established connections are handed off.
    #[error("connection is not established (TCP state {0})")]
    NotEstablished(TcpStateName),
    /// The connection is not TCP over IPv4.
    #[error("{0}: not an IPv4 socket address")]
    NotIpv4(&'static str),
    /// A queue read or written in repair mode had another length than expected (the peer
    /// sent data during the dump: the forwarder must hold the connection's packets).
    #[error("{step}: {done} of {expected} bytes")]
    QueueLength {
        /// The step.
        step: &'static str,
        /// Bytes read or written.
        done: usize,
        /// Bytes expected.
        expected: usize,
    },
    /// The state to restore is inconsistent.
    #[error("invalid repair state: {0}")]
    InvalidState(&'static str),
}

impl RepairError {
    /// The errno of a failed system call, if that is what failed.
    pub fn errno(&self) -> Option<Errno> {
        match self {
            RepairError::Syscall { errno, .. } => Some(*errno),
            _ => None,
        }
    }

    /// The step that failed, if a system call failed.
    pub fn step(&self) -> Option<&'static str> {
        match self {
            RepairError::Syscall { step, .. } => Some(step),
            RepairError::QueueLength { step, .. } => Some(step),
            _ => None,
        }
    }
}

/// A TCP state number (`tcpi_state`) shown by name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TcpStateName(pub u8);

impl fmt::Display for TcpStateName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const NAMES: [&str; 13] = [
            "?",
            "ESTABLISHED",
            "SYN_SENT",
            "SYN_RECV",
            "FIN_WAIT1",
            "FIN_WAIT2",
            "TIME_WAIT",
            "CLOSE",
            "CLOSE_WAIT",
            "LAST_ACK",
            "LISTEN",
            "CLOSING",
            "NEW_SYN_RECV",
        ];
        match NAMES.get(usize::from(self.0)) {
            Some(name) if self.0 != 0 => f.write_str(name),
            _ => write!(f, "{}", self.0),
        }
    }
}

/// A dump that failed. When it failed before the socket was closed, repair mode has been
/// turned off again (without a window probe) and the socket is given back in `socket`, still
/// connected: the caller can serve or close it normally.
#[derive(Debug, thiserror::Error)]
#[error("dump failed: {error}")]
pub struct DumpError {
    /// What failed.
    pub error: RepairError,
    /// The socket, out of repair mode, if it could be given back.
    pub socket: Option<OwnedFd>,
}

/// Bytes that are not a valid encoded state or message.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// The input ends inside a field.
    #[error("truncated {what}: needs {needed} more bytes")]
    Truncated {
        /// The field being read.
        what: &'static str,
        /// How many more bytes it needs.
        needed: usize,
    },
    /// A version this build does not speak.
    #[error("unsupported {what} version {version}")]
    Version {
        /// What was being decoded.
        what: &'static str,
        /// The version byte found.
        version: u8,
    },
    /// An unknown message kind.
    #[error("unknown message kind {0}")]
    UnknownKind(u8),
    /// A field with an impossible value.
    #[error("invalid {0}")]
    Invalid(&'static str),
    /// Bytes left over after a complete message.
    #[error("{0} trailing bytes after the message")]
    Trailing(usize),
}

/// An error of the control channel.
#[derive(Debug, thiserror::Error)]
pub enum ControlError {
    /// A socket operation failed.
    #[error("control channel: {during}: {error}")]
    Io {
        /// What was being done (`connect`, `handshake`, `send`, `recv`).
        during: &'static str,
        /// The error.
        error: io::Error,
    },
    /// The peer did not answer in time.
    #[error("control channel: {during} timed out after {after:?}")]
    Timeout {
        /// What was being done.
        during: &'static str,
        /// The limit.
        after: Duration,
    },
    /// The peer closed the connection.
    #[error("control channel: peer closed the connection during {during}")]
    Closed {
        /// What was being done.
        during: &'static str,
    },
    /// The peer does not speak this protocol (or this version of it).
    #[error("control channel: peer does not speak the handoff control protocol v1")]
    BadGreeting,
    /// The peer could not prove it knows the shared key: wrong key, or not our peer.
    #[error("control channel: the {role} failed to prove knowledge of the control key (wrong key?)")]
    AuthenticationFailed {
        /// Which side failed: `initiator` or `responder`.
        role: &'static str,
    },
    /// A frame whose tag does not verify: forged or tampered with. The connection is dropped.
    #[error("control channel: frame {seq} failed authentication (tampered or forged); connection dropped")]
    BadTag {
        /// The sequence number the frame claimed.
        seq: u64,
    },
    /// A frame with a valid tag but the wrong sequence number: replayed or reordered. The
    /// connection is dropped.
    #[error(
        "control channel: frame out of sequence: got {got}, expected {expected} (replayed or reordered); connection dropped"
    )]
    OutOfSequence {
        /// The sequence number in the frame.
        got: u64,
        /// The next expected one.
        expected: u64,
    },
    /// A frame longer than the configured limit. The connection is dropped.
    #[error("control channel: frame of {len} bytes exceeds the limit of {limit}; connection dropped")]
    FrameTooLarge {
        /// The announced length.
        len: u64,
        /// The limit.
        limit: usize,
    },
    /// An authenticated frame that does not decode as a message (a peer bug, not an attack).
    #[error("control channel: bad message: {0}")]
    Decode(DecodeError),
    /// The channel failed earlier (authentication or framing) and was dropped.
    #[error("control channel: dropped after an earlier failure")]
    Poisoned,
    /// The shared key is unusable.
    #[error("control key: {0}")]
    Key(&'static str),
}

// By hand, not `#[from]`: the message already carries the cause, so it is no `source()`
// (which would print it twice in a `{:#}` chain).
impl From<DecodeError> for ControlError {
    fn from(e: DecodeError) -> ControlError {
        ControlError::Decode(e)
    }
}
