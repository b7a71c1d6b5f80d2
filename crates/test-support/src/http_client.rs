//! A raw HTTP/1.1 client for tests: it sends whatever bytes a test gives it (well-formed or
//! not, pipelined or not) on one connection and reads the responses one by one with the
//! workspace's own parser — interim responses skipped; Content-Length, chunked and
//! until-close bodies — with a timeout on every read and write.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use locus_http::{BodyTracker, ResponseHead, parse_response};

/// The timeout of every read and write (and of the connect) unless a test sets its own on
/// `Client::stream`.
pub const READ_TIMEOUT: Duration = Duration::from_secs(10);

/// The largest response head the client reads.
const MAX_HEAD_BYTES: usize = 1 << 20;

/// A response as the client saw it.
#[derive(Debug, Clone)]
pub struct Response {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Response {
    /// The value of the first header called `name` (any case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }

    /// The Locus node that served it (its `X-Locus-Node` header).
    pub fn served_by(&self) -> Option<&str> {
        self.header("x-locus-node")
    }

    /// The body as text (invalid UTF-8 replaced).
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// What a client connection runs over: the TCP socket, or a TLS session on it.
pub trait ClientStream: Read + Write {
    /// The socket under the stream (for timeouts).
    fn tcp(&self) -> &TcpStream;
}

impl ClientStream for TcpStream {
    fn tcp(&self) -> &TcpStream {
        self
    }
}

/// A TLS client session over a TCP socket.
pub type TlsClientStream = rustls::StreamOwned<rustls::ClientConnection, TcpStream>;

impl ClientStream for TlsClientStream {
    fn tcp(&self) -> &TcpStream {
        &self.sock
    }
}

/// One client connection: raw bytes out, parsed responses in.
pub struct Client<S: ClientStream = TcpStream> {
    pub stream: S,
    /// Read but not yet taken as part of a response.
    buf: Vec<u8>,
}

impl Client<TcpStream> {
    /// Connect to `addr` (Nagle off, `READ_TIMEOUT` on reads and writes).
    pub fn connect(addr: SocketAddr) -> Client {
        let stream = TcpStream::connect_timeout(&addr, READ_TIMEOUT)
            .unwrap_or_else(|e| panic!("connecting to {addr}: {e}"));
        stream.set_nodelay(true).expect("TCP_NODELAY");
        Client::from_stream(stream)
    }

    /// A client on an already connected stream (`READ_TIMEOUT` on reads and writes).
    pub fn from_stream(stream: TcpStream) -> Client {
        stream.set_read_timeout(Some(READ_TIMEOUT)).expect("read timeout");
        stream.set_write_timeout(Some(READ_TIMEOUT)).expect("write timeout");
        Client { stream, buf: Vec::new() }
    }

    /// Connect to `addr` and handshake TLS for `server_name` under `config` (timeouts as
    /// `connect`); panics when the handshake fails.
    pub fn connect_tls(
        addr: SocketAddr,
        config: std::sync::Arc<rustls::ClientConfig>,
        server_name: &str,
    ) -> Client<TlsClientStream> {
        let tcp = Client::connect(addr).stream;
        let name = rustls::pki_types::ServerName::try_from(server_name.to_string()).expect("a server name");
        let conn = rustls::ClientConnection::new(config, name).expect("a client session");
        let mut stream = rustls::StreamOwned::new(conn, tcp);
        while stream.conn.is_handshaking() {
            stream
                .conn
                .complete_io(&mut stream.sock)
                .unwrap_or_else(|e| panic!("TLS handshake with {addr}: {e}"));
        }
        Client::from_tls_stream(stream)
    }

    /// A client on a TLS session already set up (its socket's timeouts as the test left them).
    pub fn from_tls_stream(stream: TlsClientStream) -> Client<TlsClientStream> {
        Client { stream, buf: Vec::new() }
    }
}

impl<S: ClientStream> Client<S> {
    /// Write `raw` as it is.
    pub fn send(&mut self, raw: impl AsRef<[u8]>) {
        self.stream.write_all(raw.as_ref()).expect("writing a request");
    }

    /// GET `target` and read its response.
    pub fn get(&mut self, target: &str) -> Response {
        self.send(format!("GET {target} HTTP/1.1\r\nHost: localhost\r\n\r\n"));
        self.read_response(false).unwrap_or_else(|| panic!("no response for {target}"))
    }

    /// Read one response (`head_request`: it answers a HEAD, so no body follows), or panic
    /// when none comes whole.
    pub fn response(&mut self, head_request: bool) -> Response {
        self.read_response(head_request).unwrap_or_else(|| {
            panic!(
                "no whole response (closed, timed out or malformed) after {:?}",
                String::from_utf8_lossy(&self.buf)
            )
        })
    }

    /// Read one response (`head_request`: it answers a HEAD); `None` when the connection
    /// ends, fails or times out before it is whole, or it is malformed.
    pub fn read_response(&mut self, head_request: bool) -> Option<Response> {
        let mut head = ResponseHead::default();
        loop {
            if parse_response(&self.buf, MAX_HEAD_BYTES, head_request, &mut head).ok()? {
                if !head.is_interim() {
                    break;
                }
                self.buf.drain(..head.head_len);
                head = ResponseHead::default();
            } else if !self.fill() {
                return None;
            }
        }
        let headers = head
            .headers
            .iter()
            .map(|h| {
                (
                    String::from_utf8_lossy(h.name.get(&self.buf)).into_owned(),
                    String::from_utf8_lossy(h.value.get(&self.buf)).into_owned(),
                )
            })
            .collect();
        self.buf.drain(..head.head_len);
        let mut tracker = BodyTracker::new(head.body);
        let mut body = Vec::new();
        loop {
            let progress = tracker.advance_with(&self.buf, |d| body.extend_from_slice(d)).ok()?;
            self.buf.drain(..progress.consumed);
            if progress.done {
                break;
            }
            if !self.fill() {
                tracker.eof().ok()?;
                break;
            }
        }
        Some(Response { status: head.status, headers, body })
    }

    /// Read more into the buffer: false at the end of the stream, on an error or a timeout.
    fn fill(&mut self) -> bool {
        let mut chunk = [0u8; 65536];
        match self.stream.read(&mut chunk) {
            Ok(0) | Err(_) => false,
            Ok(n) => {
                self.buf.extend_from_slice(&chunk[..n]);
                true
            }
        }
    }

    /// Whether the server has closed the connection: nothing is left unread and the next
    /// read sees the end of the stream or a reset (not a timeout, not data).
    pub fn closed(&mut self) -> bool {
        if !self.buf.is_empty() {
            return false;
        }
        let mut byte = [0u8; 1];
        match self.stream.read(&mut byte) {
            Ok(0) => true,
            Ok(_) => {
                self.buf.push(byte[0]);
                false
            }
            Err(e) => e.kind() == std::io::ErrorKind::ConnectionReset,
        }
    }

    /// Whether the server closed the connection or sent nothing more within `limit` (a
    /// weaker check than `closed`: silence counts too). Sets the read timeout to `limit`.
    pub fn closed_or_silent(&mut self, limit: Duration) -> bool {
        self.stream.tcp().set_read_timeout(Some(limit)).expect("read timeout");
        let mut byte = [0u8; 1];
        matches!(self.stream.read(&mut byte), Ok(0) | Err(_))
    }
}

/// One GET on a fresh connection.
pub fn get(addr: SocketAddr, target: &str) -> Response {
    Client::connect(addr).get(target)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    /// A server that reads a little, answers `raw` and closes; the client connected to it.
    fn answered_with(raw: &'static [u8]) -> Client {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        std::thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            let mut request = [0u8; 1024];
            let _ = s.read(&mut request);
            s.write_all(raw).unwrap();
        });
        let mut client = Client::connect(addr);
        client.send("GET / HTTP/1.1\r\nHost: t\r\n\r\n");
        client
    }

    #[test]
    fn interim_responses_are_skipped_and_chunked_and_length_bodies_read_in_turn() {
        let mut c = answered_with(
            b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nX-Locus-Node: n2\r\nTransfer-Encoding: chunked\r\n\r\n\
              3\r\nabc\r\n0\r\n\r\nHTTP/1.1 404 Not Found\r\nContent-Length: 2\r\n\r\nno",
        );
        let r = c.response(false);
        assert_eq!((r.status, r.served_by(), r.text().as_str()), (200, Some("n2"), "abc"));
        let r = c.response(false);
        assert_eq!((r.status, r.header("content-length"), r.body.as_slice()), (404, Some("2"), &b"no"[..]));
        assert!(c.closed());
        assert!(c.read_response(false).is_none());
    }

    #[test]
    fn a_body_until_close_ends_with_the_connection_and_a_cut_one_is_no_response() {
        let mut c = answered_with(b"HTTP/1.1 200 OK\r\n\r\nall of it");
        assert_eq!(c.response(false).text(), "all of it");
        let mut c = answered_with(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort");
        assert!(c.read_response(false).is_none());
    }
}
