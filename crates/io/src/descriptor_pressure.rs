//! Running short of descriptors: `is_out_of_descriptors` tells EMFILE/ENFILE (the process's or
//! the system's limit, never the peer's fault) from other errors; `leaves_too_few_descriptors`
//! sees from an accepted descriptor's number that the table is nearly full; `SpareDescriptor` lets
//! an accept loop with none left still take a waiting connection and refuse it; `Shedding`
//! puts them together for one accept loop.

use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::task::Poll;
use std::time::{Duration, Instant};
use tokio::net::{TcpListener, TcpStream};

/// Whether `e` says this process (EMFILE) or the system (ENFILE) has no descriptor left: the
/// local side's shortage, which says nothing about the peer being connected to or accepted.
pub fn is_out_of_descriptors(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE))
}

/// The descriptors kept free under a soft limit of `limit`: a thirty-second of it, 16 to
/// 1,024. A connection accepted into them is refused.
pub fn headroom(limit: u64) -> u64 {
    (limit / 32).clamp(16, 1024)
}

/// Whether `fd`, a descriptor just allocated, leaves fewer than the headroom free. Linux hands
/// out the lowest free number, so a descriptor numbered `n` means `0..n` were all in use: with
/// `n` within the headroom of the soft limit, taking more connections would starve what the
/// open ones still need (a node connection, a file). The limit is read each time (one cheap
/// system call), so a limit changed while running counts at once.
pub fn leaves_too_few_descriptors(fd: RawFd) -> bool {
    let limit = crate::open_files::open_file_limit().map_or(u64::MAX, |l| l.soft);
    is_near(fd, limit)
}

/// Whether descriptor number `fd` lies within the headroom of `limit`.
fn is_near(fd: RawFd, limit: u64) -> bool {
    (fd.max(0) as u64).saturating_add(headroom(limit)) >= limit
}

/// A descriptor held in reserve (`/dev/null`), one per accept loop: out of descriptors, the
/// loop gives it back, takes one waiting connection off the listen queue, refuses it, and
/// takes the spare again. Without it an accept loop can only leave connections waiting.
pub struct SpareDescriptor(Option<OwnedFd>);

/// What `SpareDescriptor::refuse_waiting` did.
#[derive(Debug)]
pub enum Refusal {
    /// A waiting connection was answered and closed.
    Refused,
    /// No connection was waiting (the listener's readiness is cleared).
    NoneWaiting,
    /// No spare descriptor to give back, or accepting failed even so: back off.
    CannotAccept(Option<io::Error>),
    /// Descriptors were free again by the time the connection was taken (the spare was
    /// taken back with plenty to spare): serve it.
    Admitted(TcpStream, std::net::SocketAddr),
}

impl SpareDescriptor {
    /// Open the spare (if that fails, `refuse_waiting` tries again each time).
    pub fn open() -> SpareDescriptor {
        SpareDescriptor(open_dev_null())
    }

    /// Whether the spare is held.
    pub fn is_held(&self) -> bool {
        self.0.is_some()
    }

    /// Out of descriptors: release the spare, accept one waiting connection on `listener`,
    /// take the spare again, and write `answer` to the connection (without waiting) and close
    /// it — unless descriptors turn out to be plentiful again (the limit was raised, or many
    /// were freed meanwhile), in which case the connection is `Admitted`.
    pub async fn refuse_waiting(&mut self, listener: &TcpListener, answer: &[u8]) -> Refusal {
        if self.0.is_none() {
            self.0 = open_dev_null();
            if self.0.is_none() {
                return Refusal::CannotAccept(None);
            }
        }
        self.0 = None;
        // One try, no waiting: a WouldBlock clears the readiness, so the caller's next
        // `accept().await` sleeps until a connection comes.
        let once = std::future::poll_fn(|cx| Poll::Ready(listener.poll_accept(cx))).await;
        self.0 = open_dev_null();
        match once {
            Poll::Ready(Ok((stream, peer))) => {
                let plenty =
                    self.0.as_ref().is_some_and(|spare| !leaves_too_few_descriptors(spare.as_raw_fd()));
                if plenty {
                    return Refusal::Admitted(stream, peer);
                }
                if let Ok(stream) = stream.into_std() {
                    refuse_now(stream, answer);
                }
                if self.0.is_none() {
                    self.0 = open_dev_null();
                }
                Refusal::Refused
            }
            Poll::Ready(Err(e)) => Refusal::CannotAccept(Some(e)),
            Poll::Pending => Refusal::NoneWaiting,
        }
    }
}

/// One accept loop's shedding of new connections when descriptors run short: a connection
/// accepted into the last few free descriptors is answered (a 503) and closed at once, and
/// when accepting fails with EMFILE or ENFILE the spare descriptor takes a waiting connection
/// to answer it the same way (or to serve it, if descriptors are free again by then). The descriptors left go to the connections already open (a
/// switch's node connections, a node's files), and the loop takes connections again as soon
/// as some are free. Warnings are logged at most every five seconds.
pub struct Shedding {
    spare: SpareDescriptor,
    answer: Vec<u8>,
    last_warning: Option<Instant>,
}

impl Shedding {
    /// Shed with `answer` (a complete response that closes the connection).
    pub fn new(answer: Vec<u8>) -> Shedding {
        Shedding { spare: SpareDescriptor::open(), answer, last_warning: None }
    }

    /// `stream`, just accepted, unless it took one of the last free descriptors: then it is
    /// answered and closed, and `None` returned.
    pub fn admit(&mut self, stream: TcpStream) -> Option<TcpStream> {
        if !leaves_too_few_descriptors(stream.as_raw_fd()) {
            return Some(stream);
        }
        self.warn("few descriptors left: refusing new connections");
        if let Ok(stream) = stream.into_std() {
            refuse_now(stream, &self.answer);
        }
        None
    }

    /// Accepting on `listener` failed with `e`, which `is_out_of_descriptors`: refuse a
    /// waiting connection with the spare descriptor. On `CannotAccept` the caller backs off.
    pub async fn out_of_descriptors(&mut self, listener: &TcpListener, e: &io::Error) -> Refusal {
        self.warn(&format!("accept failed: {e}; refusing new connections"));
        self.spare.refuse_waiting(listener, &self.answer).await
    }

    fn warn(&mut self, what: &str) {
        let now = Instant::now();
        if self.last_warning.is_none_or(|t| now.duration_since(t) > Duration::from_secs(5)) {
            tracing::warn!("{what}");
            self.last_warning = Some(now);
        }
    }
}

fn open_dev_null() -> Option<OwnedFd> {
    std::fs::File::open("/dev/null").ok().map(OwnedFd::from)
}

/// Refuse a connection without waiting on it: read what it already sent (so closing does not
/// reset it before the answer is read), write `answer` as far as the socket takes it, close.
/// The socket must be non-blocking.
pub fn refuse_now(mut stream: std::net::TcpStream, answer: &[u8]) {
    let mut sink = [0u8; 4096];
    for _ in 0..4 {
        match stream.read(&mut sink) {
            Ok(n) if n > 0 => continue,
            _ => break,
        }
    }
    let _ = stream.write(answer);
    let _ = stream.shutdown(std::net::Shutdown::Write);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn emfile_and_enfile_are_out_of_descriptors_and_other_errors_are_not() {
        assert!(is_out_of_descriptors(&io::Error::from_raw_os_error(libc::EMFILE)));
        assert!(is_out_of_descriptors(&io::Error::from_raw_os_error(libc::ENFILE)));
        assert!(!is_out_of_descriptors(&io::Error::from_raw_os_error(libc::ECONNREFUSED)));
        assert!(!is_out_of_descriptors(&io::Error::from(io::ErrorKind::TimedOut)));
    }

    #[test]
    fn headroom_is_a_thirty_second_of_the_limit_within_bounds() {
        assert_eq!(headroom(256), 16);
        assert_eq!(headroom(1024), 32);
        assert_eq!(headroom(20_000), 625);
        assert_eq!(headroom(1 << 20), 1024);
    }

    #[test]
    fn a_descriptor_numbered_within_the_headroom_of_the_limit_is_near_it_and_a_lower_one_is_not() {
        assert!(!is_near(3, 1024));
        assert!(!is_near(1024 - 32 - 1, 1024));
        assert!(is_near(1024 - 32, 1024));
        assert!(is_near(2000, 1024), "past a lowered limit");
        assert!(!is_near(5, u64::MAX), "an unlimited table is never short");
    }

    #[test]
    fn a_low_descriptor_is_not_short_under_the_live_limit() {
        assert!(!leaves_too_few_descriptors(3));
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_spare_with_nothing_waiting_is_taken_back_and_says_so() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let mut spare = SpareDescriptor::open();
        assert!(spare.is_held());
        assert!(matches!(spare.refuse_waiting(&listener, b"no").await, Refusal::NoneWaiting));
        assert!(spare.is_held());
    }
}
