//! Reaching a node for a client's request, in proxy and splice modes: a pooled keep-alive
//! connection (probed when the request must not be sent twice) or a fresh one, how talking
//! to a node failed (`NodeFailure`), and writing to it within the node timeout.

use crate::worker::Worker;
use locus_core::NodeId;
use std::io;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio::time::timeout;

/// How talking to a node failed.
#[derive(Debug)]
pub enum NodeFailure {
    Connect(io::Error),
    Io(io::Error),
    Closed,
    Timeout,
}

impl NodeFailure {
    pub fn describe(&self) -> String {
        match self {
            NodeFailure::Connect(e) => format!("connect failed: {e}"),
            NodeFailure::Io(e) => format!("connection failed: {e}"),
            NodeFailure::Closed => "connection closed before a response".to_string(),
            NodeFailure::Timeout => "timed out".to_string(),
        }
    }

    /// A failure on a connection that was `reused` from the pool which says the node had closed
    /// it while it was idle (a fresh connection to the same node is worth one more try).
    pub fn is_stale(&self, reused: bool) -> bool {
        reused && matches!(self, NodeFailure::Closed | NodeFailure::Io(_))
    }

    /// The switch had no descriptor for the connection: its own limit, not the node's fault.
    pub fn is_out_of_descriptors(&self) -> bool {
        matches!(self, NodeFailure::Connect(e) if locus_io::is_out_of_descriptors(e))
    }
}

/// A connection to `node`: a pooled one unless `fresh`; pooled ones are probed first
/// when the request must not be sent twice. The flag says whether it was pooled.
pub async fn node_connection(
    worker: &Worker,
    node: NodeId,
    fresh: bool,
    idempotent: bool,
) -> Result<(TcpStream, bool), NodeFailure> {
    let shared = &worker.shared;
    let info = &shared.nodes.get(node);
    if !fresh {
        let generation = info.generation.load(Relaxed);
        let pooled = worker.pool.borrow_mut().take(node.index(), generation, Instant::now());
        if let Some(s) = pooled
            && (idempotent || probe_alive(&s))
        {
            return Ok((s, true));
        }
    }
    match timeout(shared.config().limits.connect_timeout(), TcpStream::connect(info.addr)).await {
        Ok(Ok(s)) => {
            let _ = s.set_nodelay(true);
            Ok((s, false))
        }
        Ok(Err(e)) => Err(NodeFailure::Connect(e)),
        Err(_) => Err(NodeFailure::Connect(io::Error::new(io::ErrorKind::TimedOut, "connect timed out"))),
    }
}

/// Write all of `bytes` to a node within `t`.
pub async fn write_node(conn: &mut TcpStream, bytes: &[u8], t: Duration) -> Result<(), NodeFailure> {
    match timeout(t, conn.write_all(bytes)).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => Err(NodeFailure::Io(e)),
        Err(_) => Err(NodeFailure::Timeout),
    }
}

/// Whether a pooled connection still looks open: no EOF, error or stray bytes waiting. Asks
/// the socket itself (a non-blocking peek), not tokio's readiness, which a spliced response
/// leaves marked drained.
fn probe_alive(stream: &TcpStream) -> bool {
    use std::os::fd::AsRawFd;
    let mut byte = [0u8; 1];
    // SAFETY: `byte` is a live, writable buffer of one byte.
    let n = unsafe {
        libc::recv(stream.as_raw_fd(), byte.as_mut_ptr().cast(), 1, libc::MSG_PEEK | libc::MSG_DONTWAIT)
    };
    n < 0 && io::Error::last_os_error().kind() == io::ErrorKind::WouldBlock
}

#[cfg(test)]
mod tests {
    use super::*;
    use locus_io::mark_read_drained;
    use locus_test_support::tcp_pair as pair;

    #[tokio::test(flavor = "current_thread")]
    async fn probe_sees_stray_bytes_and_end_of_stream_even_on_a_socket_marked_drained() {
        let (mut node, pooled) = pair().await;
        assert!(probe_alive(&pooled), "a quiet open connection is alive");
        node.write_all(b"JUNK").await.unwrap();
        pooled.readable().await.unwrap();
        // As after a spliced body: the reactor is told the socket is drained.
        mark_read_drained(&pooled);
        assert!(!probe_alive(&pooled), "stray bytes make a pooled connection unusable");
        let (node, pooled) = pair().await;
        drop(node);
        pooled.readable().await.unwrap();
        mark_read_drained(&pooled);
        assert!(!probe_alive(&pooled), "a connection the node closed is not alive");
    }
}
