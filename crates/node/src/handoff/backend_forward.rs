//! Back-end forwarding: a request on a handed-off connection that the switch routes to another
//! node is fetched from that node over a pooled keep-alive HTTP/1.1 connection, and its
//! response relayed byte for byte (so `X-Locus-Node` names the node that produced it).
//! `PeerConnections` is one worker's pool; `fetch_head` sends a request and reads the
//! response head.

use std::collections::HashMap;
use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use locus_http::{ResponseHead, parse_response};
use parking_lot::Mutex;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Idle connections kept per peer and worker.
const MAX_IDLE_PER_PEER: usize = 16;
/// Time for connecting to a peer.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// Time for each read or write of a forwarded exchange.
pub const PEER_IO_TIMEOUT: Duration = Duration::from_secs(30);
/// Largest response head accepted from a peer.
const MAX_RESPONSE_HEAD: usize = 64 * 1024;

/// Idle keep-alive connections to other nodes, for the connections of one worker thread.
#[derive(Default)]
pub struct PeerConnections {
    idle: Mutex<HashMap<SocketAddr, Vec<TcpStream>>>,
}

/// A response head read from a peer, with whatever of the body came with it.
pub struct PeerResponse {
    pub stream: TcpStream,
    /// `buf[..head.head_len]` is the head; `buf[head.head_len..filled]` the first body bytes.
    pub buf: Vec<u8>,
    pub filled: usize,
    pub head: ResponseHead,
}

async fn within<T>(limit: Duration, work: impl Future<Output = io::Result<T>>) -> io::Result<T> {
    tokio::time::timeout(limit, work).await.map_err(|_| io::Error::from(io::ErrorKind::TimedOut))?
}

impl PeerConnections {
    /// Give back a connection whose last response was read completely.
    pub fn put(&self, peer: SocketAddr, stream: TcpStream) {
        let mut idle = self.idle.lock();
        let list = idle.entry(peer).or_default();
        if list.len() < MAX_IDLE_PER_PEER {
            list.push(stream);
        }
    }

    fn take(&self, peer: SocketAddr) -> Option<TcpStream> {
        self.idle.lock().get_mut(&peer).and_then(Vec::pop)
    }

    /// Send `request` (a whole request head, no body) to `peer` and read the response head
    /// (interim 1xx responses skipped). A pooled connection that turns out closed before
    /// any response byte is replaced by a new one, once.
    pub async fn fetch_head(
        &self,
        peer: SocketAddr,
        request: &[u8],
        head_only: bool,
    ) -> io::Result<PeerResponse> {
        let mut fresh_tried = false;
        loop {
            let (stream, pooled) = match self.take(peer) {
                Some(s) => (s, true),
                None => {
                    fresh_tried = true;
                    let s = within(CONNECT_TIMEOUT, TcpStream::connect(peer)).await?;
                    let _ = s.set_nodelay(true);
                    (s, false)
                }
            };
            match exchange(stream, request, head_only).await {
                Ok(response) => return Ok(response),
                Err((e, before_response)) if pooled && before_response && !fresh_tried => {
                    tracing::debug!(%peer, error = %e, "stale peer connection; reconnecting");
                }
                Err((e, _)) => return Err(e),
            }
        }
    }
}

/// One exchange; on error also whether no response byte had arrived.
async fn exchange(
    mut stream: TcpStream,
    request: &[u8],
    head_only: bool,
) -> Result<PeerResponse, (io::Error, bool)> {
    within(PEER_IO_TIMEOUT, stream.write_all(request)).await.map_err(|e| (e, true))?;
    let mut buf = vec![0u8; 16 * 1024];
    let mut filled = 0;
    let mut head = ResponseHead::default();
    loop {
        if filled == buf.len() {
            if buf.len() >= MAX_RESPONSE_HEAD {
                return Err((
                    io::Error::new(io::ErrorKind::InvalidData, "peer response head too large"),
                    false,
                ));
            }
            buf.resize(buf.len() * 2, 0);
        }
        let n =
            within(PEER_IO_TIMEOUT, stream.read(&mut buf[filled..])).await.map_err(|e| (e, filled == 0))?;
        if n == 0 {
            return Err((io::Error::from(io::ErrorKind::UnexpectedEof), filled == 0));
        }
        filled += n;
        match parse_response(&buf[..filled], MAX_RESPONSE_HEAD, head_only, &mut head) {
            Ok(false) => {}
            Ok(true) if head.is_interim() => {
                buf.copy_within(head.head_len..filled, 0);
                filled -= head.head_len;
            }
            Ok(true) => return Ok(PeerResponse { stream, buf, filled, head }),
            Err(e) => return Err((io::Error::new(io::ErrorKind::InvalidData, e.to_string()), false)),
        }
    }
}
