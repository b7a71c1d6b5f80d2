//! Relaying a handed-off connection to an unmodified HTTP server on the node (`--handoff-
//! upstream`): both directions move in the kernel with splice(2) through a pipe each, and each
//! half-close is passed on. Responses still go straight to the client: the socket lives here.
//!
//! Why splice and not `tokio::io::copy_bidirectional`: the copy moves every byte through a
//! user-space buffer (two copies and two syscalls per 8 KiB chunk); splice moves page
//! references (one syscall per pipe-full, up to 256 KiB), which is what this mode is for —
//! serving large responses from a server that knows nothing of Locus at the cost of a pipe.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::Duration;

use tokio::io::Interest;
use tokio::net::TcpStream;

/// Pipe capacity asked for (the kernel may round it).
const PIPE_BYTES: libc::c_int = 256 * 1024;

/// A non-blocking pipe used as a splice buffer.
struct Pipe {
    read: OwnedFd,
    write: OwnedFd,
    capacity: usize,
}

impl Pipe {
    fn new() -> io::Result<Pipe> {
        let mut fds = [0 as RawFd; 2];
        // SAFETY: pipe2 writes two descriptors into `fds`, which are owned from here on.
        let rc = unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_NONBLOCK | libc::O_CLOEXEC) };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: both descriptors were just created and nothing else owns them.
        let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        // SAFETY: F_SETPIPE_SZ on a pipe owned here; on failure the default size stays.
        let size = unsafe { libc::fcntl(write.as_raw_fd(), libc::F_SETPIPE_SZ, PIPE_BYTES) };
        let capacity = if size > 0 { size as usize } else { 64 * 1024 };
        Ok(Pipe { read, write, capacity })
    }
}

fn splice(from: RawFd, to: RawFd, len: usize) -> io::Result<usize> {
    // SAFETY: plain descriptors and null offsets (sockets and pipes have none).
    let n = unsafe {
        libc::splice(
            from,
            std::ptr::null_mut(),
            to,
            std::ptr::null_mut(),
            len,
            libc::SPLICE_F_MOVE | libc::SPLICE_F_NONBLOCK,
        )
    };
    if n < 0 { Err(io::Error::last_os_error()) } else { Ok(n as usize) }
}

/// One direction: `from` → pipe → `to`.
struct Direction<'a> {
    from: &'a TcpStream,
    to: &'a TcpStream,
    pipe: Pipe,
    in_pipe: usize,
    eof: bool,
    shut: bool,
}

impl Direction<'_> {
    fn wants_read(&self) -> bool {
        !self.eof && self.in_pipe == 0
    }

    fn wants_write(&self) -> bool {
        self.in_pipe > 0
    }

    /// Move what moves without waiting; true when anything happened.
    fn step(&mut self) -> io::Result<bool> {
        let mut progressed = false;
        // Only into an empty pipe: a part-full pipe can refuse with EAGAIN while the socket
        // still has data, and `try_io` would take that for "socket drained" and clear the
        // readiness that no new event would set again.
        if self.wants_read() {
            let (from, pipe) = (self.from, &self.pipe);
            match from.try_io(Interest::READABLE, || {
                splice(from.as_raw_fd(), pipe.write.as_raw_fd(), pipe.capacity)
            }) {
                Ok(0) => {
                    self.eof = true;
                    progressed = true;
                }
                Ok(n) => {
                    self.in_pipe = n;
                    progressed = true;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => return Err(e),
            }
        }
        if self.wants_write() {
            let (to, pipe, n) = (self.to, &self.pipe, self.in_pipe);
            match to.try_io(Interest::WRITABLE, || splice(pipe.read.as_raw_fd(), to.as_raw_fd(), n)) {
                Ok(k) => {
                    self.in_pipe -= k;
                    progressed |= k > 0;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => return Err(e),
            }
        }
        if self.eof && self.in_pipe == 0 && !self.shut {
            let _ = socket2::SockRef::from(self.to).shutdown(std::net::Shutdown::Write);
            self.shut = true;
            progressed = true;
        }
        Ok(progressed)
    }
}

/// Join `client` and `upstream` until both directions ended or nothing moved for
/// `idle_limit`.
pub async fn relay(client: &TcpStream, upstream: &TcpStream, idle_limit: Duration) -> io::Result<()> {
    let mut up =
        Direction { from: client, to: upstream, pipe: Pipe::new()?, in_pipe: 0, eof: false, shut: false };
    let mut down =
        Direction { from: upstream, to: client, pipe: Pipe::new()?, in_pipe: 0, eof: false, shut: false };
    while !(up.shut && down.shut) {
        let a = up.step()?;
        let b = down.step()?;
        if a || b {
            continue;
        }
        let (up_r, up_w, down_r, down_w) =
            (up.wants_read(), up.wants_write(), down.wants_read(), down.wants_write());
        let wait = async {
            tokio::select! {
                r = client.readable(), if up_r => r,
                r = upstream.writable(), if up_w => r,
                r = upstream.readable(), if down_r => r,
                r = client.writable(), if down_w => r,
            }
        };
        match tokio::time::timeout(idle_limit, wait).await {
            Ok(r) => r?,
            Err(_) => return Err(io::ErrorKind::TimedOut.into()),
        }
    }
    Ok(())
}
