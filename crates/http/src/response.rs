//! Response heads: `parse_response` parses a response head from a node (or any origin) and
//! works out its body framing from the request method and status (RFC 9112 §6.3), whether the
//! connection may be reused, and whether hop-by-hop headers must be stripped before relaying.

use crate::body::BodyKind;
use crate::head::{self, HeaderSpan, LineFault, Span, Version};

/// Why a response head could not be used.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ResponseError {
    #[error("response head larger than {0} bytes")]
    HeadTooLarge(usize),
    #[error("malformed response head: {0}")]
    Malformed(&'static str),
}

/// A parsed response head; spans point into the buffer given to `parse_response`.
#[derive(Clone, Debug, Default)]
pub struct ResponseHead {
    pub version: Version,
    pub status: u16,
    pub reason: Span,
    pub headers: Vec<HeaderSpan>,
    pub head_len: usize,
    pub body: BodyKind,
    /// The sender allows the connection to be reused after this response.
    pub keep_alive: bool,
    /// Connection, Keep-Alive, Proxy-Connection, Upgrade or TE present: a relay must rebuild
    /// the head without them.
    pub hop_by_hop: bool,
    pub content_length: Option<u64>,
}

impl ResponseHead {
    /// The first header named `name` (ASCII case-insensitive).
    pub fn header<'a>(&self, buf: &'a [u8], name: &str) -> Option<&'a [u8]> {
        self.headers
            .iter()
            .find(|h| h.name.get(buf).eq_ignore_ascii_case(name.as_bytes()))
            .map(|h| h.value.get(buf))
    }

    /// Whether this is an interim (1xx) response that a final response will follow.
    pub fn is_interim(&self) -> bool {
        (100..200).contains(&self.status) && self.status != 101
    }
}

/// Whether a header is hop-by-hop (not to be forwarded by a relay).
pub fn is_hop_by_hop(name: &[u8]) -> bool {
    [&b"connection"[..], b"keep-alive", b"proxy-connection", b"upgrade", b"te", b"transfer-encoding"]
        .iter()
        .any(|h| name.eq_ignore_ascii_case(h))
}

/// Parse a response head from the start of `buf` into `head`. `request_was_head` tells
/// whether the request was HEAD (then no body follows whatever the headers say).
/// `Ok(true)`: complete; `Ok(false)`: need more bytes.
pub fn parse_response(
    buf: &[u8],
    max_head_bytes: usize,
    request_was_head: bool,
    head: &mut ResponseHead,
) -> Result<bool, ResponseError> {
    let (skip, end) = match head::find_header_end(buf) {
        Ok(Some(found)) => found,
        Ok(None) => {
            if buf.len() > max_head_bytes {
                return Err(ResponseError::HeadTooLarge(max_head_bytes));
            }
            return Ok(false);
        }
        Err(LineFault::BareCr) => return Err(ResponseError::Malformed("bare CR")),
        Err(LineFault::BareLf) => return Err(ResponseError::Malformed("bare LF")),
        Err(LineFault::ObsFold) => return Err(ResponseError::Malformed("obsolete line folding")),
        Err(LineFault::LeadingBlankLines) => {
            return Err(ResponseError::Malformed("empty lines before the status line"));
        }
    };
    if skip != 0 {
        return Err(ResponseError::Malformed("empty line before status line"));
    }
    let mut raw = [httparse::EMPTY_HEADER; 128];
    let mut resp = httparse::Response::new(&mut raw);
    match resp.parse(&buf[..end]) {
        Ok(httparse::Status::Complete(n)) if n == end => {}
        Ok(_) => return Err(ResponseError::Malformed("incomplete head")),
        Err(httparse::Error::TooManyHeaders) => return Err(ResponseError::Malformed("too many headers")),
        Err(_) => return Err(ResponseError::Malformed("invalid status line or header")),
    }
    head.version = if resp.version == Some(0) { Version::Http10 } else { Version::Http11 };
    head.status = resp.code.unwrap_or(0);
    if head.status < 100 {
        // httparse takes any three digits; below 100 is no status (RFC 9110 §15), and relayed
        // as `{status}` it would not even be three digits.
        return Err(ResponseError::Malformed("status code below 100"));
    }
    head.reason = reason_span(&buf[..end]);
    head.head_len = end;
    head.headers.clear();
    head.hop_by_hop = false;
    head.content_length = None;
    let mut chunked = false;
    let mut te = false;
    let mut close = false;
    let mut keep_alive_token = false;
    for h in resp.headers.iter() {
        let value = head::trim(h.value);
        let name = h.name.as_bytes();
        head.headers.push(HeaderSpan { name: Span::of(buf, name), value: Span::of(buf, value) });
        if name.eq_ignore_ascii_case(b"content-length") {
            let n = head::parse_content_length(value)
                .ok_or(ResponseError::Malformed("invalid Content-Length"))?;
            if head.content_length.is_some_and(|prev| prev != n) {
                return Err(ResponseError::Malformed("conflicting Content-Length"));
            }
            head.content_length = Some(n);
        } else if name.eq_ignore_ascii_case(b"transfer-encoding") {
            te = true;
            chunked = value
                .rsplit(|&b| b == b',')
                .next()
                .is_some_and(|last| head::trim(last).eq_ignore_ascii_case(b"chunked"));
        } else if name.eq_ignore_ascii_case(b"connection") {
            close |= head::has_token(value, "close");
            keep_alive_token |= head::has_token(value, "keep-alive");
        }
        if is_hop_by_hop(name) && !name.eq_ignore_ascii_case(b"transfer-encoding") {
            head.hop_by_hop = true;
        }
    }
    if te && head.content_length.is_some() {
        return Err(ResponseError::Malformed("both Content-Length and Transfer-Encoding"));
    }
    let no_body =
        request_was_head || (100..200).contains(&head.status) || head.status == 204 || head.status == 304;
    head.body = if no_body {
        BodyKind::Empty
    } else if te {
        if chunked { BodyKind::Chunked } else { BodyKind::UntilClose }
    } else if let Some(n) = head.content_length {
        BodyKind::Length(n)
    } else {
        BodyKind::UntilClose
    };
    head.keep_alive = match head.version {
        Version::Http11 => !close,
        Version::Http10 => keep_alive_token && !close,
    } && head.body != BodyKind::UntilClose;
    Ok(true)
}

/// The reason phrase of a status line httparse accepted (`HTTP/1.x NNN reason`, or
/// `HTTP/1.x NNN` without one), read from the bytes: httparse hands back a phrase that is not
/// UTF-8 (obs-text is allowed) as a static `""`, not as a slice of the buffer.
fn reason_span(head: &[u8]) -> Span {
    const PHRASE_START: usize = "HTTP/1.1 200 ".len();
    let line_end = memchr::memchr(b'\r', head).unwrap_or(head.len());
    Span { start: PHRASE_START.min(line_end) as u32, end: line_end as u32 }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(raw: &str, was_head: bool) -> Result<Option<ResponseHead>, ResponseError> {
        let mut h = ResponseHead::default();
        parse_response(raw.as_bytes(), 16384, was_head, &mut h).map(|d| d.then_some(h))
    }

    #[test]
    fn framing_follows_rfc_9112_section_6_3() {
        let h = parse("HTTP/1.1 200 OK\r\nContent-Length: 12\r\n\r\n", false).unwrap().unwrap();
        assert_eq!((h.status, h.body, h.keep_alive, h.hop_by_hop), (200, BodyKind::Length(12), true, false));
        let h = parse("HTTP/1.1 200 OK\r\nContent-Length: 12\r\n\r\n", true).unwrap().unwrap();
        assert_eq!(h.body, BodyKind::Empty);
        let h = parse("HTTP/1.1 304 Not Modified\r\nContent-Length: 12\r\n\r\n", false).unwrap().unwrap();
        assert_eq!(h.body, BodyKind::Empty);
        let h = parse("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", false).unwrap().unwrap();
        assert_eq!(h.body, BodyKind::Chunked);
        let h = parse("HTTP/1.1 200 OK\r\n\r\n", false).unwrap().unwrap();
        assert_eq!((h.body, h.keep_alive), (BodyKind::UntilClose, false));
        let h = parse("HTTP/1.0 200 OK\r\nContent-Length: 1\r\n\r\n", false).unwrap().unwrap();
        assert!(!h.keep_alive);
        let h = parse("HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 1\r\n\r\n", false)
            .unwrap()
            .unwrap();
        assert!(!h.keep_alive && h.hop_by_hop);
        let h = parse("HTTP/1.1 100 Continue\r\n\r\n", false).unwrap().unwrap();
        assert!(h.is_interim());
    }

    #[test]
    fn ambiguous_response_framing_is_refused() {
        assert!(parse("HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", false).is_err());
        assert!(
            parse("HTTP/1.1 200 OK\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n", false)
                .is_err()
        );
        assert!(parse("HTTP/1.1 200 OK\nContent-Length: 1\r\n\r\n", false).is_err());
        assert!(parse("HTTP/1.1 2000 OK\r\n\r\n", false).is_err());
        assert!(parse("HTTP/1.1 200 OK\r\nContent-Length: 1", false).unwrap().is_none());
    }

    /// Found by the `response_head` fuzz target: httparse takes any three digits, and a
    /// status such as `057` was accepted (the switch would relay it as `HTTP/1.1 57`).
    #[test]
    fn a_status_code_below_100_is_refused() {
        let mut h = ResponseHead::default();
        for raw in
            [&b"HTTP/1.0 057 Not Modified\r\n\r\n"[..], b"HTTP/1.1 000 X\r\n\r\n", b"HTTP/1.1 099\r\n\r\n"]
        {
            assert!(parse_response(raw, 16384, false, &mut h).is_err(), "{:?}", String::from_utf8_lossy(raw));
        }
        assert_eq!(parse_response(b"HTTP/1.1 100 Continue\r\n\r\n", 16384, false, &mut h), Ok(true));
        assert_eq!(parse_response(b"HTTP/1.1 999 Odd\r\n\r\n", 16384, false, &mut h), Ok(true));
    }

    /// Found by the `response_head` fuzz target: a reason phrase with obs-text (bytes over
    /// 0x7f, not UTF-8) got a span pointing outside the buffer, and the switch, which copies
    /// the phrase into the head it relays, would have panicked on it.
    #[test]
    fn a_reason_phrase_that_is_not_utf8_is_spanned_in_the_buffer() {
        let raw = b"HTTP/1.0 304 Not Modi\xa5\xa5fied\r\nKeep-Alive: teep-alive\r\n\r\n";
        let mut h = ResponseHead::default();
        assert_eq!(parse_response(raw, 16384, false, &mut h), Ok(true));
        assert_eq!(h.reason.get(raw), b"Not Modi\xa5\xa5fied");
        for (raw, reason) in [(&b"HTTP/1.1 200 OK\r\n\r\n"[..], &b"OK"[..]), (b"HTTP/1.1 200\r\n\r\n", b"")] {
            assert_eq!(parse_response(raw, 16384, false, &mut h), Ok(true));
            assert_eq!(h.reason.get(raw), reason);
        }
        let raw = b"HTTP/1.1 404 Not  Found \r\n\r\n";
        assert_eq!(parse_response(raw, 16384, false, &mut h), Ok(true));
        assert_eq!(h.reason.get(raw), b"Not  Found ");
    }
}
