//! The new switch's side of a binary upgrade: ask the running switch for its sockets, start
//! on them, and confirm; the connection then stays open as the sign that the predecessor is
//! still draining (its end is read as the predecessor's exit).

use super::MAX_FDS;
use crate::listeners::{ListenerCounts, Listeners};
use crate::state::Shared;
use sendfd::RecvWithFd;
use std::io::{Read, Write};
use std::os::fd::{FromRawFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Why the sockets could not be taken over (the running switch serves on).
#[derive(Debug, thiserror::Error)]
pub enum TakeoverError {
    #[error("cannot reach the running switch at {path}: {error}")]
    Connect { path: PathBuf, error: std::io::Error },
    #[error("the running switch refused the takeover: {0}")]
    Refused(String),
    #[error("takeover from {path}: {error}")]
    Exchange { path: PathBuf, error: std::io::Error },
}

/// A takeover in progress: the sockets received, the connection to the old switch.
pub struct Takeover {
    pub listeners: Option<Listeners>,
    stream: UnixStream,
    pub predecessor_pid: u32,
    handoff_vip: Option<std::net::Ipv4Addr>,
    path: PathBuf,
}

/// The old switch's answer to `takeover`.
#[derive(serde::Deserialize)]
struct Offer {
    ok: bool,
    #[serde(default)]
    error: Option<String>,
    #[serde(default)]
    pid: u32,
    #[serde(default)]
    counts: Option<ListenerCounts>,
    /// Handoff mode: the address clients connect to, so that connections handed off before
    /// the upgrade are routed (and moved on) by the new switch.
    #[serde(default)]
    handoff_vip: Option<std::net::Ipv4Addr>,
}

impl Takeover {
    /// Ask the switch serving the control socket `from` for its listening sockets.
    pub fn request(from: &Path) -> Result<Takeover, TakeoverError> {
        let connect_err = |error| TakeoverError::Connect { path: from.to_path_buf(), error };
        let mut stream = UnixStream::connect(from).map_err(connect_err)?;
        let exchange = |error| TakeoverError::Exchange { path: from.to_path_buf(), error };
        stream.set_read_timeout(Some(Duration::from_secs(30))).map_err(exchange)?;
        stream.write_all(format!("{}\n", super::TAKEOVER).as_bytes()).map_err(exchange)?;
        let line = read_line(&mut stream).map_err(exchange)?;
        let offer: Offer = serde_json::from_str(&line)
            .map_err(|e| exchange(std::io::Error::other(format!("unreadable offer {line:?}: {e}"))))?;
        let counts = match (offer.ok, offer.counts) {
            (true, Some(c)) if c.total() <= MAX_FDS && c.clients > 0 => c,
            (true, _) => {
                return Err(TakeoverError::Refused(format!("an offer this switch cannot take: {line}")));
            }
            (false, _) => return Err(TakeoverError::Refused(offer.error.unwrap_or(line))),
        };
        stream.write_all(b"fds\n").map_err(exchange)?;
        let fds = receive_fds(&stream, counts.total()).map_err(exchange)?;
        let listeners = Listeners::from_fds(counts, fds).map_err(exchange)?;
        tracing::info!(from = %from.display(), pid = offer.pid, ?counts, "upgrade: listening sockets taken over");
        Ok(Takeover {
            listeners: Some(listeners),
            stream,
            predecessor_pid: offer.pid,
            handoff_vip: offer.handoff_vip,
            path: from.to_path_buf(),
        })
    }

    /// The new switch is serving: tell the old one, which stops accepting and drains; keep
    /// the connection in `shared` (its end tells that the old one has exited).
    pub fn confirm(self, shared: &Shared) -> Result<(), TakeoverError> {
        if let (Some(plane), Some(vip)) = (&shared.handoff, self.handoff_vip) {
            plane.adopt_vip(vip);
        }
        let handoff = &shared.config().handoff;
        if handoff.interface.is_some() && handoff.pin_dir.is_none() {
            tracing::warn!(
                "upgrade: the forwarder's maps are not pinned (handoff.pin_dir): connections handed \
                 off before this upgrade have no forwarding entries in this switch's maps"
            );
        }
        let mut stream = self.stream;
        let exchange = |error| TakeoverError::Exchange { path: self.path.clone(), error };
        stream.write_all(b"ready\n").map_err(exchange)?;
        stream.set_nonblocking(true).map_err(exchange)?;
        *shared.predecessor.lock() = Some((self.predecessor_pid, stream));
        Ok(())
    }
}

/// One line (without its newline), read a byte at a time: nothing past it is consumed, so
/// the descriptors that follow are read by `recvmsg`.
fn read_line(stream: &mut UnixStream) -> std::io::Result<String> {
    let mut line = Vec::new();
    let mut byte = [0u8; 1];
    while line.len() <= super::super::control::command::MAX_LINE {
        match stream.read(&mut byte)? {
            0 => return Err(std::io::ErrorKind::UnexpectedEof.into()),
            _ if byte[0] == b'\n' => return Ok(String::from_utf8_lossy(&line).into_owned()),
            _ => line.push(byte[0]),
        }
    }
    Err(std::io::Error::other("answer line too long"))
}

/// The `expected` descriptors sent with one byte.
fn receive_fds(stream: &UnixStream, expected: usize) -> std::io::Result<Vec<OwnedFd>> {
    let mut byte = [0u8; 1];
    let mut raw = [-1; MAX_FDS];
    let (n, count) = stream.recv_with_fd(&mut byte, &mut raw)?;
    // SAFETY: recvmsg installed `count` new descriptors in this process; each is owned once.
    let fds: Vec<OwnedFd> = raw[..count].iter().map(|&fd| unsafe { OwnedFd::from_raw_fd(fd) }).collect();
    if n != 1 || count != expected {
        return Err(std::io::Error::other(format!("{count} descriptors received, {expected} announced")));
    }
    Ok(fds)
}
