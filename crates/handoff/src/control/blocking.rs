//! `BlockingControlChannel`: an authenticated control channel, after its handshake, on a
//! blocking std socket — the same frames, tags and sequence numbers as `ControlChannel`, for
//! a thread that does nothing else (a reactor's wake-up, poll and timer cost several µs per
//! message), optionally busy-polling for a while before it sleeps.

use std::io;
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use crate::control::auth::{FrameOpener, FrameSealer};
use crate::control::channel::{ControlConfig, Inbox, io_error, seal_message};
use crate::control::message::HandoffMessage;
use crate::error::ControlError;

/// An authenticated control connection on a blocking socket, made from a [`ControlChannel`]
/// (after its handshake) with [`ControlChannel::into_blocking`].
///
/// `send` writes one frame (each write waits at most `send_timeout`); `recv` waits at most
/// `recv_timeout` (if configured; plus any busy-poll time) for a whole frame. With
/// [`set_busy_poll`] a `recv` first polls the socket without sleeping for up to the given
/// time: a thread with a CPU to itself then needs no wake-up when a message comes (on a VM a
/// wake-up across CPUs costs tens of µs), at the price of that CPU time.
///
/// [`ControlChannel`]: crate::ControlChannel
/// [`ControlChannel::into_blocking`]: crate::ControlChannel::into_blocking
/// [`set_busy_poll`]: BlockingControlChannel::set_busy_poll
pub struct BlockingControlChannel {
    stream: TcpStream,
    sealer: FrameSealer,
    opener: FrameOpener,
    frame: Vec<u8>,
    inbox: Inbox,
    config: ControlConfig,
    /// SO_RCVTIMEO as set on the socket now (`None`: none).
    read_timeout: Option<Duration>,
    busy_poll: Option<Duration>,
    /// A send failed half-way: the stream is out of step.
    send_failed: bool,
    /// A frame failed authentication or framing: the connection was dropped.
    recv_failed: bool,
    peer: SocketAddr,
}

impl BlockingControlChannel {
    pub(crate) fn from_parts(
        stream: TcpStream,
        sealer: FrameSealer,
        opener: FrameOpener,
        pending: Vec<u8>,
        config: ControlConfig,
        peer: SocketAddr,
    ) -> Result<BlockingControlChannel, ControlError> {
        stream.set_nonblocking(false).map_err(io_error("into_blocking"))?;
        stream.set_write_timeout(Some(config.send_timeout)).map_err(io_error("into_blocking"))?;
        let mut channel = BlockingControlChannel {
            stream,
            sealer,
            opener,
            frame: Vec::new(),
            inbox: Inbox::new(pending),
            config,
            read_timeout: None,
            busy_poll: None,
            send_failed: false,
            recv_failed: false,
            peer,
        };
        channel.set_read_timeout(config.recv_timeout)?;
        Ok(channel)
    }

    /// The peer's address.
    pub fn peer_addr(&self) -> SocketAddr {
        self.peer
    }

    /// Busy-poll for up to `spin` in every `recv` before sleeping (`None`, the default: sleep
    /// at once). Worth it only on a thread with a CPU to itself.
    pub fn set_busy_poll(&mut self, spin: Option<Duration>) {
        self.busy_poll = spin.filter(|spin| !spin.is_zero());
    }

    /// Send one message: one frame, one write. A send that fails half-way leaves the channel
    /// unusable for sending (`Poisoned`).
    pub fn send(&mut self, message: &HandoffMessage) -> Result<(), ControlError> {
        if self.send_failed {
            return Err(ControlError::Poisoned);
        }
        seal_message(&mut self.frame, &mut self.sealer, message, self.config.max_frame_len)?;
        self.send_failed = true;
        let fd = self.stream.as_raw_fd();
        let mut done = 0;
        while done < self.frame.len() {
            let rest = &self.frame[done..];
            // SAFETY: `rest` is a live slice; the kernel only reads `rest.len()` bytes of it.
            let n = unsafe { libc::send(fd, rest.as_ptr().cast(), rest.len(), libc::MSG_NOSIGNAL) };
            if n < 0 {
                let error = io::Error::last_os_error();
                match error.kind() {
                    io::ErrorKind::Interrupted => continue,
                    io::ErrorKind::WouldBlock => {
                        return Err(ControlError::Timeout {
                            during: "send",
                            after: self.config.send_timeout,
                        });
                    }
                    _ => return Err(io_error("send")(error)),
                }
            }
            done += n as usize;
        }
        self.send_failed = false;
        if self.frame.capacity() > 1 << 20 {
            self.frame = Vec::new();
        }
        Ok(())
    }

    /// Receive one message, waiting at most `recv_timeout` (if configured).
    pub fn recv(&mut self) -> Result<HandoffMessage, ControlError> {
        self.receive(self.config.recv_timeout)
    }

    /// Receive one message, waiting at most `limit`.
    pub fn recv_within(&mut self, limit: Duration) -> Result<HandoffMessage, ControlError> {
        self.receive(Some(limit))
    }

    fn receive(&mut self, limit: Option<Duration>) -> Result<HandoffMessage, ControlError> {
        if self.recv_failed {
            return Err(ControlError::Poisoned);
        }
        let mut started: Option<Instant> = None;
        loop {
            match self.inbox.take_frame(&mut self.opener, self.config.max_frame_len) {
                Ok(Some(message)) => return message.map_err(ControlError::Decode),
                Ok(None) => {}
                Err(error) => {
                    self.drop_connection();
                    return Err(error);
                }
            }
            let first = started.is_none();
            let start = *started.get_or_insert_with(Instant::now);
            if let Some(spin) = self.busy_poll
                && self.poll_for(start + limit.map_or(spin, |limit| limit.min(spin)))?
            {
                continue;
            }
            // The first read waits the whole limit (already set on the socket, mostly); a
            // frame that comes in pieces gets what is left of it for the next ones.
            let wait = match limit {
                None => None,
                Some(limit) if first => Some(limit),
                Some(limit) => match limit.checked_sub(start.elapsed()) {
                    Some(left) if !left.is_zero() => Some(left),
                    _ => return Err(ControlError::Timeout { during: "recv", after: limit }),
                },
            };
            self.set_read_timeout(wait)?;
            match self.read(0) {
                Ok(()) => {}
                Err(error) if error.kind() == io::ErrorKind::WouldBlock => {
                    return Err(ControlError::Timeout { during: "recv", after: limit.unwrap_or_default() });
                }
                Err(error) if error.kind() == io::ErrorKind::UnexpectedEof => {
                    return Err(ControlError::Closed { during: "recv" });
                }
                Err(error) => return Err(io_error("recv")(error)),
            }
        }
    }

    /// Read without sleeping until something comes (`true`) or `until` passes (`false`).
    fn poll_for(&mut self, until: Instant) -> Result<bool, ControlError> {
        loop {
            match self.read(libc::MSG_DONTWAIT) {
                Ok(()) => return Ok(true),
                Err(error) if error.kind() == io::ErrorKind::WouldBlock => {
                    if Instant::now() >= until {
                        return Ok(false);
                    }
                    std::hint::spin_loop();
                }
                Err(error) if error.kind() == io::ErrorKind::UnexpectedEof => {
                    return Err(ControlError::Closed { during: "recv" });
                }
                Err(error) => return Err(io_error("recv")(error)),
            }
        }
    }

    /// One `recv` with `flags` into the inbox; the end of the stream is `UnexpectedEof`.
    fn read(&mut self, flags: libc::c_int) -> io::Result<()> {
        let fd = self.stream.as_raw_fd();
        loop {
            let result = self.inbox.read_with(|room| {
                // SAFETY: `room` is writable memory of `room.len()` bytes; the kernel writes
                // at most that many bytes into it.
                let n = unsafe { libc::recv(fd, room.as_mut_ptr().cast(), room.len(), flags) };
                if n < 0 { Err(io::Error::last_os_error()) } else { Ok(n as usize) }
            });
            return match result {
                Ok(0) => Err(io::ErrorKind::UnexpectedEof.into()),
                Ok(_) => Ok(()),
                Err(error) if error.kind() == io::ErrorKind::Interrupted => continue,
                Err(error) => Err(error),
            };
        }
    }

    /// SO_RCVTIMEO, set only when it changes.
    fn set_read_timeout(&mut self, timeout: Option<Duration>) -> Result<(), ControlError> {
        if timeout != self.read_timeout {
            self.stream.set_read_timeout(timeout).map_err(io_error("recv"))?;
            self.read_timeout = timeout;
        }
        Ok(())
    }

    /// After a failed frame: refuse everything further and close the connection both ways,
    /// so the peer sees it dropped.
    fn drop_connection(&mut self) {
        self.recv_failed = true;
        self.send_failed = true;
        self.inbox.discard();
        let _ = self.stream.shutdown(Shutdown::Both);
    }
}

impl std::fmt::Debug for BlockingControlChannel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BlockingControlChannel").field("peer", &self.peer).finish_non_exhaustive()
    }
}
