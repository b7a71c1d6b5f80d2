//! `ListenQueue`: the length of the kernel's accept queue summed over the node's HTTP
//! listeners (one per worker with SO_REUSEPORT), read on demand from each listening socket's
//! TCP_INFO, where Linux reports the current accept-queue length as `tcpi_unacked` (and its
//! limit, the listen backlog, as `tcpi_sacked`). Workers register their listener while they
//! accept and withdraw it before closing it, so a descriptor is never read after its close.

use std::os::fd::RawFd;

use parking_lot::Mutex;

/// Connections completed by the kernel on the listening socket `fd` and not yet accepted.
/// `None` if `fd` is not a TCP socket (or TCP_INFO fails).
pub fn accept_queue_len(fd: RawFd) -> Option<u32> {
    // SAFETY: `tcp_info` is plain integers, valid when zeroed.
    let mut info: libc::tcp_info = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::tcp_info>() as libc::socklen_t;
    // SAFETY: `info` is a live, writable `tcp_info` of `len` bytes; the kernel writes at most
    // `len` bytes and updates `len`. A closed or foreign `fd` only makes the call fail.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_TCP,
            libc::TCP_INFO,
            (&mut info as *mut libc::tcp_info).cast(),
            &mut len,
        )
    };
    (rc == 0 && len as usize >= std::mem::offset_of!(libc::tcp_info, tcpi_sacked))
        .then_some(info.tcpi_unacked)
}

/// The node's listening sockets that are accepting now.
#[derive(Debug, Default)]
pub struct ListenQueue {
    fds: Mutex<Vec<RawFd>>,
}

/// A listener counted in a `ListenQueue` until this is dropped; drop it before closing the
/// listener.
#[must_use = "the listener is withdrawn when this is dropped"]
pub struct ListenerRegistration<'a> {
    queue: &'a ListenQueue,
    fd: RawFd,
}

impl Drop for ListenerRegistration<'_> {
    fn drop(&mut self) {
        let mut fds = self.queue.fds.lock();
        if let Some(i) = fds.iter().position(|&f| f == self.fd) {
            fds.swap_remove(i);
        }
    }
}

impl ListenQueue {
    /// Count the listening socket `fd` until the registration is dropped. The caller keeps
    /// `fd` open for at least that long.
    pub fn register(&self, fd: RawFd) -> ListenerRegistration<'_> {
        self.fds.lock().push(fd);
        ListenerRegistration { queue: self, fd }
    }

    /// Connections waiting in the accept queues of the registered listeners, summed.
    pub fn queued(&self) -> u32 {
        // The lock is held across the reads so no registration ends (and no fd closes) meanwhile.
        let fds = self.fds.lock();
        fds.iter().filter_map(|&fd| accept_queue_len(fd)).fold(0u32, u32::saturating_add)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{TcpListener, TcpStream};
    use std::os::fd::AsRawFd;
    use std::time::{Duration, Instant};

    /// Wait until `read` gives `want` (the kernel completes handshakes on loopback at once,
    /// but give it time rather than race it); returns the last value read.
    fn settle(want: u32, read: impl Fn() -> u32) -> u32 {
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let v = read();
            if v == want || Instant::now() > deadline {
                return v;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    #[test]
    fn accept_queue_len_counts_connections_not_yet_accepted() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let fd = listener.as_raw_fd();
        assert_eq!(accept_queue_len(fd), Some(0));
        let clients: Vec<TcpStream> = (0..5).map(|_| TcpStream::connect(addr).unwrap()).collect();
        assert_eq!(settle(5, || accept_queue_len(fd).unwrap()), 5);
        for _ in 0..2 {
            listener.accept().unwrap();
        }
        assert_eq!(accept_queue_len(fd), Some(3), "accepting takes connections off the queue");
        drop(clients);
    }

    #[test]
    fn accept_queue_len_is_none_for_a_socket_that_is_not_tcp() {
        let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        assert_eq!(accept_queue_len(udp.as_raw_fd()), None);
    }

    #[test]
    fn listen_queue_sums_registered_listeners_and_forgets_withdrawn_ones() {
        let queue = ListenQueue::default();
        let a = TcpListener::bind("127.0.0.1:0").unwrap();
        let b = TcpListener::bind("127.0.0.1:0").unwrap();
        let ra = queue.register(a.as_raw_fd());
        let rb = queue.register(b.as_raw_fd());
        let _c1 = TcpStream::connect(a.local_addr().unwrap()).unwrap();
        let _c2 = TcpStream::connect(b.local_addr().unwrap()).unwrap();
        let _c3 = TcpStream::connect(b.local_addr().unwrap()).unwrap();
        assert_eq!(settle(3, || queue.queued()), 3);
        drop(rb);
        assert_eq!(queue.queued(), 1);
        drop(ra);
        assert_eq!(queue.queued(), 0);
    }
}
