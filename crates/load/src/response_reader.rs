//! `ResponseReader`: one connection's reusable read buffer and the state of the response
//! being read. Heads are parsed in place with locus-http's strict `parse_response`, bodies
//! followed with `BodyTracker` and hashed (XXH3-64) as their bytes pass — a body is never
//! buffered whole — so pipelined responses come out one by one, in order, from any split of
//! the byte stream. No I/O here: the connection reads into `read_space` and calls `commit`.
//! A surfer passes a `BodyCapture` to keep HTML bodies (which it parses) and DC headers.

use locus_http::{BodyError, BodyKind, BodyTracker, ResponseError, ResponseHead, parse_response};
use xxhash_rust::xxh3::{Xxh3, xxh3_64};

/// Read buffer size; the largest response head accepted is half of it.
pub const READ_BUFFER_BYTES: usize = 64 * 1024;
const MAX_HEAD_BYTES: usize = READ_BUFFER_BYTES / 2;
/// Compact the buffer before a read when less than this is free at its end.
const MIN_READ_SPACE: usize = 8 * 1024;

/// A response that could not be framed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FramingError {
    #[error("bad response head: {0}")]
    Head(ResponseError),
    #[error("bad response body: {0}")]
    Body(BodyError),
    #[error("unexpected 101 Switching Protocols")]
    Upgrade,
    #[error("connection closed in the middle of a response head")]
    TruncatedHead,
}

// By hand, not `#[from]`: the message already carries the cause, so it is no `source()`
// (which would print it twice in a `{:#}` chain).
impl From<ResponseError> for FramingError {
    fn from(e: ResponseError) -> FramingError {
        FramingError::Head(e)
    }
}

impl From<BodyError> for FramingError {
    fn from(e: BodyError) -> FramingError {
        FramingError::Body(e)
    }
}

impl FramingError {
    /// Whether the fault is the peer closing early rather than bytes that break the framing.
    pub fn is_truncation(self) -> bool {
        matches!(self, FramingError::Body(BodyError::Truncated) | FramingError::TruncatedHead)
    }
}

/// What was learnt from one complete response.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ResponseSummary {
    pub status: u16,
    /// The Content-Length header, if any.
    pub content_length: Option<u64>,
    /// Body bytes received (decoded, without chunk framing).
    pub body_len: u64,
    /// XXH3-64 of the body, when hashing was asked for.
    pub xxh3: Option<u64>,
    /// The server allows the connection to be reused.
    pub keep_alive: bool,
    /// Bytes the response took on the wire (head, body and any interim responses).
    pub wire_bytes: u64,
}

/// What a surfer keeps of a response besides its summary: whether it is HTML, whether a
/// DC co-op marked it as a replica (`X-Locus-DC: replica`), and an HTML body up to `limit`.
#[derive(Clone, Debug, Default)]
pub struct BodyCapture {
    /// Keep HTML bodies up to this many bytes (0: keep none).
    pub limit: usize,
    /// Keep the next body whatever its Content-Type (a page of the site).
    pub force: bool,
    /// The response's Content-Type is `text/html`.
    pub html: bool,
    /// The response carried `X-Locus-DC: replica`.
    pub replica: bool,
    /// The HTML body (its first `limit` bytes).
    pub body: Vec<u8>,
    /// The HTML body was longer than `limit`.
    pub overflow: bool,
    keeping: bool,
}

impl BodyCapture {
    /// A capture keeping HTML bodies up to `limit` bytes.
    pub fn new(limit: usize) -> BodyCapture {
        BodyCapture { limit, ..BodyCapture::default() }
    }

    fn start(&mut self, head: &ResponseHead, window: &[u8], request_was_head: bool) {
        let value = |name| head.header(window, name).map(<[u8]>::trim_ascii);
        self.html =
            value("content-type").is_some_and(|v| v.len() >= 9 && v[..9].eq_ignore_ascii_case(b"text/html"));
        self.replica = value("x-locus-dc").is_some_and(|v| v.eq_ignore_ascii_case(b"replica"));
        self.body.clear();
        self.overflow = false;
        self.keeping = (self.html || self.force) && !request_was_head && self.limit > 0;
    }

    fn keep(&mut self, data: &[u8]) {
        if self.keeping {
            let room = self.limit.saturating_sub(self.body.len());
            self.overflow |= data.len() > room;
            self.body.extend_from_slice(&data[..data.len().min(room)]);
        }
    }
}

#[derive(Debug)]
struct BodyInProgress {
    tracker: BodyTracker,
    status: u16,
    content_length: Option<u64>,
    keep_alive: bool,
    hashing: bool,
    body_len: u64,
    wire_bytes: u64,
}

/// Reads responses off one connection; see the module documentation.
pub struct ResponseReader {
    buf: Box<[u8]>,
    start: usize,
    end: usize,
    head: ResponseHead,
    body: Option<BodyInProgress>,
    hasher: Box<Xxh3>,
    /// Wire bytes of interim (1xx) responses before the final one.
    interim_bytes: u64,
}

impl Default for ResponseReader {
    fn default() -> Self {
        ResponseReader::new()
    }
}

impl ResponseReader {
    /// A reader with an empty buffer of `READ_BUFFER_BYTES`.
    pub fn new() -> ResponseReader {
        ResponseReader {
            buf: vec![0u8; READ_BUFFER_BYTES].into_boxed_slice(),
            start: 0,
            end: 0,
            head: ResponseHead { headers: Vec::with_capacity(32), ..ResponseHead::default() },
            body: None,
            hasher: Box::new(Xxh3::new()),
            interim_bytes: 0,
        }
    }

    /// Forget buffered bytes and any response in progress (a new connection).
    pub fn reset(&mut self) {
        self.start = 0;
        self.end = 0;
        self.body = None;
        self.interim_bytes = 0;
    }

    /// Bytes received and not yet consumed by a response.
    pub fn buffered(&self) -> usize {
        self.end - self.start
    }

    /// Whether a response has started (head or body bytes seen) but not ended.
    pub fn in_response(&self) -> bool {
        self.body.is_some() || self.start != self.end
    }

    /// Free space to read into (never empty).
    pub fn read_space(&mut self) -> &mut [u8] {
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
        } else if self.buf.len() - self.end < MIN_READ_SPACE && self.start > 0 {
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        &mut self.buf[self.end..]
    }

    /// `n` bytes were read into `read_space`.
    pub fn commit(&mut self, n: usize) {
        self.end = (self.end + n).min(self.buf.len());
    }

    /// Copy `bytes` in as if read (for tests and replays); returns how many fitted.
    pub fn push_bytes(&mut self, bytes: &[u8]) -> usize {
        let space = self.read_space();
        let n = space.len().min(bytes.len());
        space[..n].copy_from_slice(&bytes[..n]);
        self.commit(n);
        n
    }

    /// Advance over the buffered bytes. `request_was_head` and `hash` describe the request
    /// this response answers (used when its head is parsed). `Ok(Some)` when a response
    /// completed (bytes after it stay buffered for the next one), `Ok(None)` when more bytes
    /// are needed.
    pub fn poll_response(
        &mut self,
        request_was_head: bool,
        hash: bool,
    ) -> Result<Option<ResponseSummary>, FramingError> {
        self.poll_inner(request_was_head, hash, None)
    }

    /// `poll_response`, filling `capture` as the response's head and body pass.
    pub fn poll_response_capturing(
        &mut self,
        request_was_head: bool,
        hash: bool,
        capture: &mut BodyCapture,
    ) -> Result<Option<ResponseSummary>, FramingError> {
        self.poll_inner(request_was_head, hash, Some(capture))
    }

    fn poll_inner(
        &mut self,
        request_was_head: bool,
        hash: bool,
        mut capture: Option<&mut BodyCapture>,
    ) -> Result<Option<ResponseSummary>, FramingError> {
        loop {
            if self.body.is_none() {
                if self.start == self.end {
                    return Ok(None);
                }
                let window = &self.buf[self.start..self.end];
                if !parse_response(window, MAX_HEAD_BYTES, request_was_head, &mut self.head)? {
                    return Ok(None);
                }
                let head_len = self.head.head_len;
                if let Some(c) = capture.as_deref_mut()
                    && !self.head.is_interim()
                {
                    c.start(&self.head, window, request_was_head);
                }
                self.start += head_len;
                if self.head.is_interim() {
                    self.interim_bytes += head_len as u64;
                    continue;
                }
                if self.head.status == 101 {
                    return Err(FramingError::Upgrade);
                }
                let hashing = hash && !request_was_head;
                let mut body = BodyInProgress {
                    tracker: BodyTracker::new(self.head.body),
                    status: self.head.status,
                    content_length: self.head.content_length,
                    keep_alive: self.head.keep_alive,
                    hashing,
                    body_len: 0,
                    wire_bytes: head_len as u64 + std::mem::take(&mut self.interim_bytes),
                };
                // Fast path: a Content-Length body already wholly in the buffer.
                if let BodyKind::Length(n) = self.head.body
                    && n <= (self.end - self.start) as u64
                {
                    let n = n as usize;
                    let data = &self.buf[self.start..self.start + n];
                    let xxh3 = hashing.then(|| xxh3_64(data));
                    if let Some(c) = capture.as_deref_mut() {
                        c.keep(data);
                    }
                    self.start += n;
                    body.body_len = n as u64;
                    body.wire_bytes += n as u64;
                    return Ok(Some(ResponseSummary {
                        status: body.status,
                        content_length: body.content_length,
                        body_len: body.body_len,
                        xxh3,
                        keep_alive: body.keep_alive,
                        wire_bytes: body.wire_bytes,
                    }));
                }
                if hashing {
                    self.hasher.reset();
                }
                self.body = Some(body);
            }
            let Some(body) = self.body.as_mut() else { continue };
            let hasher = &mut self.hasher;
            let (hashing, body_len) = (body.hashing, &mut body.body_len);
            let progress = body.tracker.advance_with(&self.buf[self.start..self.end], |data| {
                *body_len += data.len() as u64;
                if hashing {
                    hasher.update(data);
                }
                if let Some(c) = capture.as_deref_mut() {
                    c.keep(data);
                }
            })?;
            self.start += progress.consumed;
            body.wire_bytes += progress.consumed as u64;
            if !progress.done {
                return Ok(None);
            }
            return Ok(self.finish());
        }
    }

    /// The peer closed the connection: completes a body that runs until close; an error if
    /// a response was cut short; `Ok(None)` if no response was in progress.
    pub fn at_eof(&mut self) -> Result<Option<ResponseSummary>, FramingError> {
        match self.body.as_mut() {
            Some(body) => {
                body.tracker.eof()?;
                Ok(self.finish())
            }
            None if self.start != self.end => Err(FramingError::TruncatedHead),
            None => Ok(None),
        }
    }

    fn finish(&mut self) -> Option<ResponseSummary> {
        let body = self.body.take()?;
        Some(ResponseSummary {
            status: body.status,
            content_length: body.content_length,
            body_len: body.body_len,
            xxh3: body.hashing.then(|| self.hasher.digest()),
            keep_alive: body.keep_alive && !body.tracker.is_until_close(),
            wire_bytes: body.wire_bytes,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn response(status: u16, body: &[u8]) -> Vec<u8> {
        let mut r = format!("HTTP/1.1 {status} X\r\nContent-Length: {}\r\n\r\n", body.len()).into_bytes();
        r.extend_from_slice(body);
        r
    }

    fn chunked(body: &[u8], chunk: usize) -> Vec<u8> {
        let mut r = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
        for c in body.chunks(chunk.max(1)) {
            r.extend_from_slice(format!("{:x}\r\n", c.len()).as_bytes());
            r.extend_from_slice(c);
            r.extend_from_slice(b"\r\n");
        }
        r.extend_from_slice(b"0\r\n\r\n");
        r
    }

    /// Feed `wire` in pieces of the given sizes, collecting every response completed.
    fn read_all(
        wire: &[u8],
        cuts: &[usize],
        was_head: &[bool],
    ) -> Result<Vec<ResponseSummary>, FramingError> {
        let mut r = ResponseReader::new();
        let mut out = Vec::new();
        let mut pos = 0;
        let mut cut = cuts.iter().cycle();
        loop {
            while let Some(s) = r.poll_response(was_head.get(out.len()).copied().unwrap_or(false), true)? {
                out.push(s);
            }
            if pos == wire.len() {
                if let Some(s) = r.at_eof()? {
                    out.push(s);
                }
                return Ok(out);
            }
            let n = (*cut.next().unwrap_or(&usize::MAX)).min(wire.len() - pos);
            let pushed = r.push_bytes(&wire[pos..pos + n]);
            pos += pushed;
        }
    }

    #[test]
    fn pipelined_responses_come_out_in_order_with_their_own_hashes() {
        let bodies: Vec<Vec<u8>> = (0..5).map(|i| vec![b'a' + i as u8; 100 * i + 1]).collect();
        let mut wire = Vec::new();
        for b in &bodies {
            wire.extend_from_slice(&response(200, b));
        }
        let got = read_all(&wire, &[usize::MAX], &[]).unwrap();
        assert_eq!(got.len(), 5);
        for (s, b) in got.iter().zip(&bodies) {
            assert_eq!((s.status, s.body_len, s.xxh3), (200, b.len() as u64, Some(xxh3_64(b))));
            assert!(s.keep_alive);
        }
        assert_eq!(got.iter().map(|s| s.wire_bytes).sum::<u64>(), wire.len() as u64);
    }

    #[test]
    fn head_response_has_no_body_even_with_a_content_length() {
        let mut wire = b"HTTP/1.1 200 OK\r\nContent-Length: 1234\r\n\r\n".to_vec();
        wire.extend_from_slice(&response(404, b"nope"));
        let got = read_all(&wire, &[7], &[true, false]).unwrap();
        assert_eq!(got[0].content_length, Some(1234));
        assert_eq!((got[0].body_len, got[0].xxh3), (0, None));
        assert_eq!((got[1].status, got[1].body_len), (404, 4));
    }

    #[test]
    fn interim_responses_are_skipped_and_counted_in_wire_bytes() {
        let mut wire = b"HTTP/1.1 100 Continue\r\n\r\n".to_vec();
        wire.extend_from_slice(&response(200, b"x"));
        let got = read_all(&wire, &[3], &[]).unwrap();
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].wire_bytes, wire.len() as u64);
    }

    #[test]
    fn until_close_body_ends_at_eof_and_truncated_bodies_are_errors() {
        let got = read_all(b"HTTP/1.1 200 OK\r\n\r\nhello", &[2], &[]).unwrap();
        assert_eq!((got[0].body_len, got[0].keep_alive), (5, false));
        assert_eq!(got[0].xxh3, Some(xxh3_64(b"hello")));
        let err = read_all(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc", &[2], &[]).unwrap_err();
        assert!(err.is_truncation(), "{err}");
        let err = read_all(b"HTTP/1.1 200 OK\r\nContent-Len", &[4], &[]).unwrap_err();
        assert_eq!(err, FramingError::TruncatedHead);
    }

    #[test]
    fn malformed_framing_is_an_error_not_a_panic() {
        for bad in [
            &b"HTTP/1.1 200 OK\nContent-Length: 1\r\n\r\nx"[..],
            b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nxx",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
            b"garbage garbage\r\n\r\n",
            b"HTTP/1.1 101 Switching Protocols\r\n\r\n",
        ] {
            let err = read_all(bad, &[5], &[]).unwrap_err();
            assert!(!err.is_truncation(), "{err}");
        }
        let huge = format!("HTTP/1.1 200 OK\r\nX: {}\r\n\r\n", "a".repeat(2 * MAX_HEAD_BYTES));
        assert!(matches!(read_all(huge.as_bytes(), &[4096], &[]), Err(FramingError::Head(_))));
    }

    #[test]
    fn capture_keeps_html_bodies_up_to_its_limit_and_reads_the_replica_header() {
        let mut wire = b"HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\nX-Locus-DC: replica\r\nContent-Length: 6\r\n\r\n<html>".to_vec();
        wire.extend_from_slice(&response(200, b"GIF89a"));
        wire.extend_from_slice(b"HTTP/1.1 200 OK\r\nContent-Type: TEXT/HTML\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n4\r\ndefg\r\n0\r\n\r\n");
        let mut r = ResponseReader::new();
        r.push_bytes(&wire);
        let mut c = BodyCapture::new(5);
        r.poll_response_capturing(false, true, &mut c).unwrap().unwrap();
        assert!(c.html && c.replica && c.overflow);
        assert_eq!(c.body, b"<html");
        r.poll_response_capturing(false, true, &mut c).unwrap().unwrap();
        assert!(!c.html && !c.replica && c.body.is_empty(), "not HTML: nothing kept");
        c.force = true;
        c.limit = 100;
        let s = r.poll_response_capturing(false, true, &mut c).unwrap().unwrap();
        assert_eq!(
            (c.body.as_slice(), c.overflow, s.xxh3),
            (&b"abcdefg"[..], false, Some(xxh3_64(b"abcdefg")))
        );
    }

    #[test]
    fn a_large_body_streams_through_a_small_buffer() {
        let body: Vec<u8> = (0..(3 * READ_BUFFER_BYTES + 17)).map(|i| (i * 7 % 251) as u8).collect();
        let got = read_all(&response(200, &body), &[10_000], &[]).unwrap();
        assert_eq!(got[0].body_len, body.len() as u64);
        assert_eq!(got[0].xxh3, Some(xxh3_64(&body)));
        let got = read_all(&chunked(&body, 5000), &[777], &[]).unwrap();
        assert_eq!((got[0].body_len, got[0].xxh3), (body.len() as u64, Some(xxh3_64(&body))));
    }

    proptest! {
        #[test]
        fn pipelined_responses_split_anywhere_match_requests_in_order(
            bodies in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..300), 1..8),
            chunked_mask in proptest::collection::vec(any::<bool>(), 8),
            head_mask in proptest::collection::vec(any::<bool>(), 8),
            cuts in proptest::collection::vec(1usize..64, 1..20),
        ) {
            // Statuses that have a body (not 1xx, 204 or 304).
            const STATUSES: [u16; 8] = [200, 201, 202, 203, 206, 404, 500, 503];
            let mut wire = Vec::new();
            for (i, b) in bodies.iter().enumerate() {
                if head_mask[i] {
                    wire.extend_from_slice(format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n", b.len()).as_bytes());
                } else if chunked_mask[i] {
                    wire.extend_from_slice(&chunked(b, 1 + i * 13));
                } else {
                    wire.extend_from_slice(&response(STATUSES[i], b));
                }
            }
            let got = read_all(&wire, &cuts, &head_mask[..bodies.len()]).unwrap();
            prop_assert_eq!(got.len(), bodies.len());
            for (i, (s, b)) in got.iter().zip(&bodies).enumerate() {
                if head_mask[i] {
                    prop_assert_eq!((s.body_len, s.content_length, s.xxh3), (0, Some(b.len() as u64), None));
                } else {
                    prop_assert_eq!(s.body_len, b.len() as u64);
                    prop_assert_eq!(s.xxh3, Some(xxh3_64(b)));
                    if !chunked_mask[i] {
                        prop_assert_eq!(s.status, STATUSES[i]);
                    }
                }
            }
            prop_assert_eq!(got.iter().map(|s| s.wire_bytes).sum::<u64>(), wire.len() as u64);
        }
    }
}
