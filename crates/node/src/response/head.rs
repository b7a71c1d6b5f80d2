//! Writing response heads into an `OutQueue`: the status line with the current `Date`, the
//! node's fixed lines (`Server`, `X-Locus-Node`), `Content-Length`, the `Connection` line
//! that matches the request's persistence, and short text responses for errors.

use std::io::Write;

use locus_http::{RequestHead, Version, http_date_now, reason_phrase};

use crate::out_queue::OutQueue;

/// What the `Connection` header of a response says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Persistence {
    /// HTTP/1.1 keep-alive: no header needed.
    KeepAlive,
    /// HTTP/1.0 keep-alive: `Connection: keep-alive`.
    KeepAlive10,
    /// `Connection: close`, and the connection closes after the response.
    Close,
}

impl Persistence {
    /// What the answer to `head` says: close when the client asked to or `close` holds (the
    /// node is shutting down, or a body was left unread), else keep-alive in the request's
    /// HTTP version.
    pub fn of(head: &RequestHead, close: bool) -> Persistence {
        if !head.keep_alive || close {
            Persistence::Close
        } else if head.version == Version::Http10 {
            Persistence::KeepAlive10
        } else {
            Persistence::KeepAlive
        }
    }

    pub fn keeps_open(self) -> bool {
        self != Persistence::Close
    }

    fn header_line(self) -> &'static [u8] {
        match self {
            Persistence::KeepAlive => b"",
            Persistence::KeepAlive10 => b"Connection: keep-alive\r\n",
            Persistence::Close => b"Connection: close\r\n",
        }
    }
}

/// `HTTP/1.1 <status> <reason>`, `Date`, then the node's fixed lines.
pub fn start_head(out: &mut OutQueue, status: u16, node_headers: &[u8]) {
    let buf = out.buf();
    buf.extend_from_slice(b"HTTP/1.1 ");
    if status == 200 {
        buf.extend_from_slice(b"200 OK");
    } else {
        let _ = write!(buf, "{status} {}", reason_phrase(status));
    }
    buf.extend_from_slice(b"\r\nDate: ");
    http_date_now(buf);
    buf.extend_from_slice(b"\r\n");
    buf.extend_from_slice(node_headers);
}

/// `Content-Length: n`.
pub fn content_length(out: &mut OutQueue, n: u64) {
    let _ = write!(out.buf(), "Content-Length: {n}\r\n");
}

/// The `Connection` line (if any) and the blank line that ends the head.
pub fn end_head(out: &mut OutQueue, persistence: Persistence) {
    let buf = out.buf();
    buf.extend_from_slice(persistence.header_line());
    buf.extend_from_slice(b"\r\n");
}

/// A complete short response: `<status> <reason>\n` as text/plain, after `extra` header lines.
pub fn simple(
    out: &mut OutQueue,
    node_headers: &[u8],
    status: u16,
    persistence: Persistence,
    head_only: bool,
    extra: &[u8],
) {
    start_head(out, status, node_headers);
    let reason = reason_phrase(status);
    let body_len = 3 + 1 + reason.len() + 1;
    out.extend(b"Content-Type: text/plain\r\n");
    out.extend(extra);
    content_length(out, body_len as u64);
    end_head(out, persistence);
    if !head_only {
        out.extend_body(format!("{status} {reason}\n").as_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(out: &mut OutQueue) -> String {
        String::from_utf8(out.buf().clone()).unwrap()
    }

    #[test]
    fn simple_response_has_status_date_length_and_connection_lines() {
        let mut out = OutQueue::default();
        simple(&mut out, b"Server: locus\r\n", 404, Persistence::Close, false, b"");
        let t = text(&mut out);
        assert!(t.starts_with("HTTP/1.1 404 Not Found\r\nDate: "), "{t}");
        assert!(t.contains("\r\nServer: locus\r\n"));
        assert!(t.contains("Content-Length: 14\r\nConnection: close\r\n\r\n404 Not Found\n"), "{t}");
        let mut out = OutQueue::default();
        simple(&mut out, b"", 405, Persistence::KeepAlive10, true, b"Allow: GET, HEAD\r\n");
        let t = text(&mut out);
        assert!(t.contains("Allow: GET, HEAD\r\n") && t.ends_with("Connection: keep-alive\r\n\r\n"), "{t}");
    }
}
