//! Stopping an accept loop gracefully: `drain` closes the listener (new connections are
//! refused) and waits for the connections in flight, tracked in a [`TaskTracker`], to end,
//! up to a timeout; what is still open then is the caller's to close (by dropping its event
//! loop, which cancels their tasks).
//!
//! A `TaskTracker` (tokio-util) rather than polling a count of open connections every few
//! milliseconds: `drain` returns the moment the last connection ends, and costs nothing
//! until then. Rather than a `JoinSet` too: tracking a task is an atomic add and subtract on
//! the tracker, where a `JoinSet` allocates an entry per task and keeps finished tasks'
//! results until the accept loop reaps them.

use std::time::Duration;
use tokio::net::TcpListener;
pub use tokio_util::task::TaskTracker;

/// How a drain ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Drained {
    /// Every tracked connection ended.
    Finished,
    /// The timeout came with this many still open.
    TimedOut { open: usize },
}

/// Stop accepting on `listener` and wait up to `timeout` for every task in `connections` to
/// end; says so in the log when the timeout comes first. No task can be tracked afterwards
/// that `drain` waits for: the tracker is closed.
pub async fn drain(listener: TcpListener, connections: &TaskTracker, timeout: Duration) -> Drained {
    drop(listener);
    connections.close();
    match tokio::time::timeout(timeout, connections.wait()).await {
        Ok(()) => Drained::Finished,
        Err(_) => {
            let open = connections.len();
            tracing::warn!(open, "drain timeout: closing the connections still open");
            Drained::TimedOut { open }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn listener() -> TcpListener {
        TcpListener::bind("127.0.0.1:0").await.unwrap()
    }

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn drain_returns_once_the_last_connection_ends() {
        let connections = TaskTracker::new();
        for ms in [10, 300] {
            connections.spawn(tokio::time::sleep(Duration::from_millis(ms)));
        }
        let start = tokio::time::Instant::now();
        let drained = drain(listener().await, &connections, Duration::from_secs(30)).await;
        assert_eq!(drained, Drained::Finished);
        assert_eq!(start.elapsed(), Duration::from_millis(300), "not before the last, not after it");
    }

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn drain_gives_up_at_the_timeout_and_says_how_many_are_open() {
        let connections = TaskTracker::new();
        connections.spawn(tokio::time::sleep(Duration::from_millis(10)));
        connections.spawn(std::future::pending::<()>());
        let start = tokio::time::Instant::now();
        let drained = drain(listener().await, &connections, Duration::from_secs(2)).await;
        assert_eq!(drained, Drained::TimedOut { open: 1 });
        assert_eq!(start.elapsed(), Duration::from_secs(2));
    }

    #[tokio::test(flavor = "current_thread")]
    async fn drain_with_nothing_in_flight_returns_at_once_and_new_connections_are_refused() {
        let l = listener().await;
        let addr = l.local_addr().unwrap();
        let drained = drain(l, &TaskTracker::new(), Duration::from_secs(30)).await;
        assert_eq!(drained, Drained::Finished);
        assert!(tokio::net::TcpStream::connect(addr).await.is_err(), "the listener is closed");
    }
}
