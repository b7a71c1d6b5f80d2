//! Fetching misses from an origin server (a node used as a cache in front of another web
//! server): `OriginAddr` parses `http://host:port`, `OriginPool` keeps idle keep-alive
//! connections (one pool per worker thread, as sockets belong to one event loop), and
//! `OriginPool::fetch` sends a GET and reads the response, buffering bodies up to a limit and
//! handing larger ones back to be relayed as they arrive. Peers answering cooperative fetches
//! and DC requests are reached the same way (`to_peer`: from the node's own address, every
//! request signed; `fetch_with`: extra request headers; the coop and DC reply headers kept).

use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use locus_http::{BodyKind, BodyTracker, ResponseHead, parse_response};
use parking_lot::Mutex;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::peer_link::PeerLink;

const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
const IO_TIMEOUT: Duration = Duration::from_secs(30);
const MAX_HEAD: usize = 64 * 1024;
/// Bodies without a Content-Length are buffered up to this size (or the object limit, if larger).
const MAX_UNSIZED_BODY: u64 = 8 * 1024 * 1024;
const MAX_IDLE: usize = 64;

/// An origin server address, written `http://host[:port][/]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OriginAddr {
    pub host: String,
    pub port: u16,
}

impl OriginAddr {
    /// `host:port`, as sent in `Host`.
    pub fn authority(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }
}

impl FromStr for OriginAddr {
    type Err = String;

    fn from_str(s: &str) -> Result<OriginAddr, String> {
        let bad = |why: &str| format!("invalid origin {s:?}: {why} (expected http://host:port)");
        let rest = s.strip_prefix("http://").ok_or_else(|| bad("only http:// is supported"))?;
        let authority = rest.strip_suffix('/').unwrap_or(rest);
        if authority.is_empty() || authority.contains(['/', '?', '#', '@', ' ']) {
            return Err(bad("expected only an authority"));
        }
        let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
            let (h, after) = v6.split_once(']').ok_or_else(|| bad("unclosed '['"))?;
            (h, after.strip_prefix(':'))
        } else {
            match authority.rsplit_once(':') {
                Some((h, p)) => (h, Some(p)),
                None => (authority, None),
            }
        };
        if host.is_empty() {
            return Err(bad("empty host"));
        }
        let port = match port {
            None => 80,
            Some(p) => p.parse().map_err(|_| bad("bad port"))?,
        };
        Ok(OriginAddr { host: host.to_string(), port })
    }
}

/// Why an origin fetch failed (answered 502).
#[derive(Debug, thiserror::Error)]
pub enum OriginError {
    #[error("connecting to origin: {0}")]
    Connect(std::io::Error),
    #[error("origin I/O: {0}")]
    Io(std::io::Error),
    #[error("origin timed out")]
    Timeout,
    #[error("origin closed the connection before responding")]
    ClosedEarly,
    #[error("malformed origin response: {0}")]
    Malformed(String),
    #[error("origin body without Content-Length is larger than {0} bytes")]
    TooLarge(u64),
    /// The connection closed before the body announced was complete.
    #[error("origin closed the connection inside the body")]
    Truncated,
}

// By hand, not `#[from]`: the message already carries the I/O error, so it is no `source()`
// (which would print it twice in a `{:#}` chain).
impl From<std::io::Error> for OriginError {
    fn from(e: std::io::Error) -> OriginError {
        OriginError::Io(e)
    }
}

/// The headers of an origin response that a relay keeps.
#[derive(Clone, Debug, Default)]
pub struct OriginHeaders {
    pub status: u16,
    pub content_type: Option<String>,
    pub last_modified: Option<String>,
    /// `X-Locus-Coop-Validator`, from a peer answering a cooperative fetch.
    pub coop_validator: Option<String>,
    /// `X-Locus-Coop-Holders`, from a home answering a cooperative lookup.
    pub coop_holders: Option<String>,
    /// `Content-Length`, when the body was framed by one.
    pub content_length: Option<u64>,
    /// DC mode's `X-DC-Load`, `X-DC-Map-Seq` and `X-DC-Version`.
    pub dc_load: Option<String>,
    pub dc_map_seq: Option<String>,
    pub dc_version: Option<String>,
    /// `X-Locus-Peer-Refused`: a peer refused the request as not a member's (the reason).
    pub peer_refused: Option<String>,
    /// Bytes followed the body on the connection: the peer sent more than it announced.
    pub overran: bool,
}

/// An origin response.
#[derive(Debug)]
pub enum OriginReply {
    /// The body was read completely.
    Buffered { headers: OriginHeaders, body: Bytes },
    /// The body (`len` bytes) is larger than the buffering limit: relay it from `body`.
    Streaming { headers: OriginHeaders, len: u64, body: OriginBody },
}

/// The unread rest of a streamed origin body.
#[derive(Debug)]
pub struct OriginBody {
    pub stream: TcpStream,
    /// Body bytes already read with the head.
    pub leftover: Vec<u8>,
    /// Body bytes still to read from `stream` after `leftover`.
    pub remaining: u64,
    /// The connection may be reused once the body has been read.
    pub reusable: bool,
}

async fn with_timeout<T>(fut: impl Future<Output = std::io::Result<T>>) -> Result<T, OriginError> {
    match tokio::time::timeout(IO_TIMEOUT, fut).await {
        Ok(r) => r.map_err(OriginError::Io),
        Err(_) => Err(OriginError::Timeout),
    }
}

/// Idle connections to one origin, for the tasks of one worker thread.
pub struct OriginPool {
    addr: OriginAddr,
    /// `addr.authority()`, what peer requests are signed for.
    authority: String,
    request_prefix: Bytes,
    idle: Mutex<Vec<TcpStream>>,
    /// To a peer: connect from the node's address and sign every request.
    peer: Option<Arc<PeerLink>>,
}

impl OriginPool {
    pub fn new(addr: OriginAddr) -> OriginPool {
        let authority = addr.authority();
        let request_prefix = Bytes::from(format!("Host: {authority}\r\nUser-Agent: locus-node\r\n\r\n"));
        OriginPool { addr, authority, request_prefix, idle: Mutex::new(Vec::new()), peer: None }
    }

    /// A pool of connections to the peer at `addr`, made and signed as `link` says.
    pub fn to_peer(addr: OriginAddr, link: Arc<PeerLink>) -> OriginPool {
        OriginPool { peer: Some(link), ..OriginPool::new(addr) }
    }

    /// The `host:port` requests are sent to.
    pub fn authority(&self) -> &str {
        &self.authority
    }

    /// Give back a connection whose last response was read completely.
    pub fn put(&self, stream: TcpStream) {
        let mut idle = self.idle.lock();
        if idle.len() < MAX_IDLE {
            idle.push(stream);
        }
    }

    async fn connect(&self) -> Result<TcpStream, OriginError> {
        let (host, port) = (self.addr.host.as_str(), self.addr.port);
        let connect = async {
            match &self.peer {
                Some(link) => link.connect(host, port).await,
                None => TcpStream::connect((host, port)).await,
            }
        };
        let stream = match tokio::time::timeout(CONNECT_TIMEOUT, connect).await {
            Ok(r) => r.map_err(OriginError::Connect)?,
            Err(_) => return Err(OriginError::Timeout),
        };
        let _ = stream.set_nodelay(true);
        Ok(stream)
    }

    /// GET `target` (path and query) from the origin. Bodies up to `buffer_limit` bytes (and
    /// bodies without a length) are read completely; larger ones are handed back to relay.
    /// A pooled connection that turns out to be closed is replaced once.
    pub async fn fetch(&self, target: &str, buffer_limit: u64) -> Result<OriginReply, OriginError> {
        self.fetch_with(target, b"", buffer_limit).await
    }

    /// `fetch` with `extra` header lines (each ending in CRLF) in the request.
    pub async fn fetch_with(
        &self,
        target: &str,
        extra: &[u8],
        buffer_limit: u64,
    ) -> Result<OriginReply, OriginError> {
        let mut retried = false;
        loop {
            let pooled = self.idle.lock().pop();
            let reused = pooled.is_some();
            let stream = match pooled {
                Some(s) => s,
                None => self.connect().await?,
            };
            match self.exchange(stream, target, extra, buffer_limit).await {
                Err(Exchange::BeforeResponse(e)) if reused && !retried => {
                    tracing::debug!(error = %e, "stale origin connection; reconnecting");
                    retried = true;
                }
                Err(Exchange::BeforeResponse(e) | Exchange::During(e)) => return Err(e),
                Ok(reply) => return Ok(reply),
            }
        }
    }

    async fn exchange(
        &self,
        mut stream: TcpStream,
        target: &str,
        extra: &[u8],
        buffer_limit: u64,
    ) -> Result<OriginReply, Exchange> {
        let mut request = Vec::with_capacity(target.len() + extra.len() + 80);
        request.extend_from_slice(b"GET ");
        request.extend_from_slice(target.as_bytes());
        request.extend_from_slice(b" HTTP/1.1\r\n");
        request.extend_from_slice(extra);
        if let Some(link) = &self.peer {
            // Signed per attempt: a retry on a fresh connection needs a fresh nonce.
            request.extend_from_slice(link.auth_line("GET", target, &self.authority).as_bytes());
        }
        request.extend_from_slice(&self.request_prefix);
        with_timeout(stream.write_all(&request)).await.map_err(Exchange::BeforeResponse)?;

        let mut buf = vec![0u8; 16 * 1024];
        let mut filled = 0;
        let mut head = ResponseHead::default();
        loop {
            if filled == buf.len() {
                buf.resize(buf.len() * 2, 0);
            }
            let n = with_timeout(stream.read(&mut buf[filled..]))
                .await
                .map_err(|e| if filled == 0 { Exchange::BeforeResponse(e) } else { Exchange::During(e) })?;
            if n == 0 {
                return Err(if filled == 0 {
                    Exchange::BeforeResponse(OriginError::ClosedEarly)
                } else {
                    Exchange::During(OriginError::Malformed("closed inside the response head".into()))
                });
            }
            filled += n;
            match parse_response(&buf[..filled], MAX_HEAD, false, &mut head) {
                Ok(false) => continue,
                Ok(true) if head.is_interim() => {
                    buf.copy_within(head.head_len..filled, 0);
                    filled -= head.head_len;
                    continue;
                }
                Ok(true) => break,
                Err(e) => return Err(Exchange::During(OriginError::Malformed(e.to_string()))),
            }
        }
        let text = |name: &str| {
            head.header(&buf, name).and_then(|v| std::str::from_utf8(v).ok()).map(str::to_string)
        };
        let mut headers = OriginHeaders {
            status: head.status,
            content_type: text("content-type"),
            last_modified: text("last-modified"),
            coop_validator: text("x-locus-coop-validator"),
            coop_holders: text("x-locus-coop-holders"),
            content_length: match head.body {
                BodyKind::Length(n) => Some(n),
                _ => None,
            },
            dc_load: text("x-dc-load"),
            dc_map_seq: text("x-dc-map-seq"),
            dc_version: text("x-dc-version"),
            peer_refused: text("x-locus-peer-refused"),
            overran: false,
        };
        let reusable = head.keep_alive;
        let after_head = head.head_len;
        if let BodyKind::Length(len) = head.body
            && len > buffer_limit
        {
            let mut leftover = buf[after_head..filled].to_vec();
            leftover.truncate(len.min(usize::MAX as u64) as usize);
            let remaining = len - leftover.len() as u64;
            return Ok(OriginReply::Streaming {
                headers,
                len,
                body: OriginBody { stream, leftover, remaining, reusable },
            });
        }
        let limit = buffer_limit.max(MAX_UNSIZED_BODY);
        let mut body = Vec::new();
        let mut tracker = BodyTracker::new(head.body);
        let mut too_large = false;
        let mut collect = |tracker: &mut BodyTracker, data: &[u8], body: &mut Vec<u8>| {
            tracker.advance_with(data, |d| {
                if body.len() as u64 + d.len() as u64 > limit {
                    too_large = true;
                } else {
                    body.extend_from_slice(d);
                }
            })
        };
        let progress = collect(&mut tracker, &buf[after_head..filled], &mut body)
            .map_err(|e| Exchange::During(OriginError::Malformed(e.to_string())))?;
        let mut trailing = progress.done && after_head + progress.consumed < filled;
        while !tracker.is_done() {
            let n = with_timeout(stream.read(&mut buf)).await.map_err(Exchange::During)?;
            if n == 0 {
                tracker.eof().map_err(|_| Exchange::During(OriginError::Truncated))?;
                break;
            }
            let p = collect(&mut tracker, &buf[..n], &mut body)
                .map_err(|e| Exchange::During(OriginError::Malformed(e.to_string())))?;
            trailing = p.done && p.consumed < n;
        }
        if too_large {
            return Err(Exchange::During(OriginError::TooLarge(limit)));
        }
        // Bytes already waiting after a complete body are more than was announced.
        let mut probe = [0u8; 1];
        let mut closed = false;
        if !trailing {
            match stream.try_read(&mut probe) {
                Ok(0) => closed = true,
                Ok(_) => trailing = true,
                Err(_) => {}
            }
        }
        headers.overran = trailing && matches!(head.body, BodyKind::Length(_));
        if reusable && !trailing && !closed && !tracker.is_until_close() {
            self.put(stream);
        }
        Ok(OriginReply::Buffered { headers, body: Bytes::from(body) })
    }
}

/// Where an exchange failed: before any response byte (a stale pooled connection, worth one
/// retry) or during the response.
enum Exchange {
    BeforeResponse(OriginError),
    During(OriginError),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origin_addresses_parse_host_and_port() {
        assert_eq!("http://127.0.0.1:8080".parse(), Ok(OriginAddr { host: "127.0.0.1".into(), port: 8080 }));
        assert_eq!("http://example.com/".parse(), Ok(OriginAddr { host: "example.com".into(), port: 80 }));
        assert_eq!("http://[::1]:81".parse(), Ok(OriginAddr { host: "::1".into(), port: 81 }));
        assert_eq!(OriginAddr { host: "::1".into(), port: 81 }.authority(), "[::1]:81");
        for bad in ["https://a", "a:1", "http://", "http://a:b", "http://a/b", "http://u@a"] {
            assert!(bad.parse::<OriginAddr>().is_err(), "{bad}");
        }
    }
}
