//! What an accept loop does when accepting fails: `AcceptBackoff::recover` sheds a waiting
//! connection when the process is out of descriptors (see `Shedding`), and otherwise tells an
//! error that concerns one connection (try again at once) from one that concerns the process
//! (no descriptor and no spare to shed with, ENFILE, ENOMEM, ENOBUFS: pause, so the loop does
//! not spin), and says so at most once a second.

use crate::descriptor_pressure::{Refusal, Shedding, is_out_of_descriptors};
use std::io;
use std::net::SocketAddr;
use std::time::{Duration, Instant};
use tokio::net::{TcpListener, TcpStream};

/// How long an accept loop pauses after an error that concerns the process.
///
/// Such an error clears only as connections close, and connections waiting in the backlog sit
/// out the whole pause: 20 ms is short against a client's patience and the switch's former
/// value, while a loop stuck in the shortage still wakes only 50 times a second, two failing
/// system calls each (an accept and the spare's open) — CPU time too small to measure
/// (the node's accept test counts a loop's failed accepts while it is out of descriptors).
/// The node paused 50 ms, which only made recovery slower.
pub const ACCEPT_BACKOFF: Duration = Duration::from_millis(20);

/// How often a failing accept loop says so at most.
const WARNING_EVERY: Duration = Duration::from_secs(1);

/// Whether accepting failed for one connection only (it was reset or aborted before it was
/// taken, or the call was interrupted): the next accept may well succeed at once.
pub fn is_connection_error(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionAborted | io::ErrorKind::ConnectionReset | io::ErrorKind::Interrupted
    ) || e.raw_os_error() == Some(libc::EPROTO)
}

/// What came of a failed accept (see [`AcceptBackoff::recover`]).
#[derive(Debug)]
pub enum AcceptRecovery {
    /// Out of descriptors, a waiting connection was answered 503 and closed: count it.
    Shed,
    /// Out of descriptors, a waiting connection was taken, and descriptors were free again by
    /// then: serve it as if just accepted.
    Admitted(TcpStream, SocketAddr),
    /// Accept again at once.
    AcceptAgain,
    /// Accept again; the error concerned the process, and the loop paused first.
    Paused,
}

/// One accept loop's back-off: see the module documentation.
#[derive(Debug, Default)]
pub struct AcceptBackoff {
    last_warning: Option<Instant>,
}

impl AcceptBackoff {
    pub fn new() -> AcceptBackoff {
        AcceptBackoff::default()
    }

    /// Accepting on `listener` (called `what` in the log) failed with `e`. Out of
    /// descriptors, `shedding` refuses a waiting connection with its spare descriptor (or
    /// takes it, if descriptors are free again by then); when it cannot, or for any other
    /// error, [`after`](Self::after) decides whether to pause.
    pub async fn recover(
        &mut self,
        what: &str,
        shedding: &mut Shedding,
        listener: &TcpListener,
        e: io::Error,
    ) -> AcceptRecovery {
        if is_out_of_descriptors(&e) {
            match shedding.out_of_descriptors(listener, &e).await {
                Refusal::Refused => return AcceptRecovery::Shed,
                Refusal::Admitted(stream, peer) => return AcceptRecovery::Admitted(stream, peer),
                Refusal::NoneWaiting => return AcceptRecovery::AcceptAgain,
                Refusal::CannotAccept(_) => {}
            }
        }
        if self.after(what, &e).await { AcceptRecovery::Paused } else { AcceptRecovery::AcceptAgain }
    }

    /// Accepting on the listener called `what` failed with `e`: return at once for an error
    /// of one connection, else log it (at most once a second) and pause [`ACCEPT_BACKOFF`].
    /// Returns whether it paused.
    pub async fn after(&mut self, what: &str, e: &io::Error) -> bool {
        if !self.should_pause(what, e, Instant::now()) {
            return false;
        }
        tokio::time::sleep(ACCEPT_BACKOFF).await;
        true
    }

    /// Whether `e` calls for a pause; logs it if no warning was given within a second of `now`.
    fn should_pause(&mut self, what: &str, e: &io::Error, now: Instant) -> bool {
        if is_connection_error(e) {
            return false;
        }
        if self.last_warning.is_none_or(|t| now.duration_since(t) >= WARNING_EVERY) {
            tracing::warn!(error = %e, "{what}: accept failed; backing off");
            self.last_warning = Some(now);
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_aborted_or_reset_connection_is_retried_at_once_and_a_process_shortage_is_not() {
        for kind in
            [io::ErrorKind::ConnectionAborted, io::ErrorKind::ConnectionReset, io::ErrorKind::Interrupted]
        {
            assert!(is_connection_error(&io::Error::from(kind)), "{kind:?}");
        }
        assert!(is_connection_error(&io::Error::from_raw_os_error(libc::EPROTO)));
        for errno in [libc::EMFILE, libc::ENFILE, libc::ENOMEM, libc::ENOBUFS] {
            assert!(!is_connection_error(&io::Error::from_raw_os_error(errno)), "{errno}");
        }
    }

    #[test]
    fn a_shortage_is_warned_about_at_most_once_a_second_and_paused_after_each_time() {
        let mut backoff = AcceptBackoff::new();
        let e = io::Error::from_raw_os_error(libc::ENOBUFS);
        let start = Instant::now();
        assert!(backoff.should_pause("test", &e, start));
        assert_eq!(backoff.last_warning, Some(start));
        assert!(backoff.should_pause("test", &e, start + Duration::from_millis(500)));
        assert_eq!(backoff.last_warning, Some(start), "no second warning within the second");
        assert!(backoff.should_pause("test", &e, start + WARNING_EVERY));
        assert_eq!(backoff.last_warning, Some(start + WARNING_EVERY));
    }

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn a_process_shortage_pauses_the_back_off_and_a_connection_error_does_not() {
        let mut backoff = AcceptBackoff::new();
        let start = tokio::time::Instant::now();
        assert!(!backoff.after("test", &io::Error::from(io::ErrorKind::ConnectionAborted)).await);
        assert_eq!(start.elapsed(), Duration::ZERO);
        assert!(backoff.after("test", &io::Error::from_raw_os_error(libc::ENOMEM)).await);
        assert_eq!(start.elapsed(), ACCEPT_BACKOFF);
    }

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn out_of_descriptors_a_waiting_connection_is_taken_when_descriptors_are_free_again() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let mut shedding = Shedding::new(b"HTTP/1.1 503 x\r\n\r\n".to_vec());
        let mut backoff = AcceptBackoff::new();
        let emfile = || io::Error::from_raw_os_error(libc::EMFILE);
        let start = tokio::time::Instant::now();
        let none = backoff.recover("test", &mut shedding, &listener, emfile()).await;
        assert!(matches!(none, AcceptRecovery::AcceptAgain), "{none:?}");
        let _client = TcpStream::connect(listener.local_addr().unwrap()).await.unwrap();
        tokio::task::yield_now().await;
        let mut taken = backoff.recover("test", &mut shedding, &listener, emfile()).await;
        for _ in 0..100 {
            if !matches!(taken, AcceptRecovery::AcceptAgain) {
                break;
            }
            tokio::task::yield_now().await;
            taken = backoff.recover("test", &mut shedding, &listener, emfile()).await;
        }
        assert!(matches!(taken, AcceptRecovery::Admitted(..)), "{taken:?}");
        assert_eq!(start.elapsed(), Duration::ZERO, "shedding does not pause");
    }
}
