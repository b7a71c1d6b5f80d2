//! One `GET` to a node on a fresh connection, shared by the health checks (status only) and
//! the metrics poller (status and a bounded body): build the request, send it, parse the
//! response head, and read a `Content-Length` or until-close body.

use locus_http::{BodyKind, ResponseHead, parse_response};
use std::io;
use std::net::SocketAddr;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Largest response head read.
const MAX_HEAD: usize = 8192;

/// The request bytes of `GET path` to a node whose Host is `host`, from `agent`.
pub fn get_request(path: &str, host: &str, agent: &str) -> String {
    format!("GET {path} HTTP/1.1\r\nHost: {host}\r\nUser-Agent: {agent}\r\nConnection: close\r\n\r\n")
}

/// A node's answer: its status and, when asked for, its body.
pub struct NodeAnswer {
    pub status: u16,
    pub body: Vec<u8>,
}

/// Connect to `addr`, send `request` and read the response head; with `max_body > 0` also
/// its body (chunked bodies and bodies over `max_body` bytes are errors).
pub async fn get(addr: SocketAddr, request: &[u8], max_body: usize) -> io::Result<NodeAnswer> {
    let invalid = |what: &str| io::Error::new(io::ErrorKind::InvalidData, what.to_string());
    let mut s = TcpStream::connect(addr).await?;
    s.write_all(request).await?;
    let mut buf = Vec::with_capacity(1024);
    let mut head = ResponseHead::default();
    loop {
        if s.read_buf(&mut buf).await? == 0 {
            return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "closed before a response"));
        }
        match parse_response(&buf, MAX_HEAD, false, &mut head) {
            Ok(true) => break,
            Ok(false) if buf.len() < MAX_HEAD => continue,
            _ => return Err(invalid("malformed response")),
        }
    }
    if max_body == 0 {
        return Ok(NodeAnswer { status: head.status, body: Vec::new() });
    }
    let mut body = buf.split_off(head.head_len);
    let want = match head.body {
        BodyKind::Empty => 0,
        BodyKind::Length(n) if n <= max_body as u64 => n as usize,
        BodyKind::UntilClose => max_body + 1,
        BodyKind::Length(_) => return Err(invalid("response body too large")),
        BodyKind::Chunked => return Err(invalid("chunked response body")),
    };
    while body.len() < want {
        let n = (&mut s).take((want - body.len()) as u64).read_to_end(&mut body).await?;
        if n == 0 {
            break;
        }
    }
    if body.len() > max_body {
        return Err(invalid("response body too large"));
    }
    if matches!(head.body, BodyKind::Length(_)) && body.len() < want {
        return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "closed within the body"));
    }
    body.truncate(want);
    Ok(NodeAnswer { status: head.status, body })
}
