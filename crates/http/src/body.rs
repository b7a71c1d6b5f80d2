//! Message body framing. `BodyTracker` follows a body of any size as its bytes stream past —
//! Content-Length, chunked (sizes, extensions, trailers, strictly CRLF) or until close — and
//! says how many bytes of each read belong to the body and when it ends, so a relay can pass
//! bytes through unchanged without buffering the body; `advance_with` also yields the data.

/// How a message body is delimited.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum BodyKind {
    /// No body.
    #[default]
    Empty,
    /// Exactly this many bytes.
    Length(u64),
    /// Chunked transfer coding.
    Chunked,
    /// Everything until the peer closes (responses only).
    UntilClose,
}

/// A framing fault in a body.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BodyError {
    #[error("invalid chunk size line")]
    InvalidChunkSize,
    #[error("chunk size line too long")]
    ChunkLineTooLong,
    #[error("chunk data not followed by CRLF")]
    BadChunkTerminator,
    #[error("chunked trailer section too large")]
    TrailersTooLarge,
    #[error("bare CR or LF in chunked trailer section")]
    BadTrailer,
    #[error("connection closed before the end of the body")]
    Truncated,
}

/// Result of feeding bytes to a tracker.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BodyProgress {
    /// Bytes at the front of the input that belong to the body.
    pub consumed: usize,
    /// The body ended within them (the rest of the input is the next message).
    pub done: bool,
}

const MAX_CHUNK_LINE: usize = 4096;
const MAX_TRAILERS: usize = 16 * 1024;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum SizeLine {
    Digits,
    Space,
    Extension,
    Cr,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Done,
    Length { remaining: u64 },
    UntilClose,
    Size { value: u64, digits: u8, line: usize, part: SizeLine },
    Data { remaining: u64 },
    DataCr,
    DataLf,
    Trailer { line: usize, total: usize, cr: bool },
}

/// Follows one message body through a stream of reads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BodyTracker {
    state: State,
}

impl BodyTracker {
    /// A tracker for a body delimited as `kind`.
    pub fn new(kind: BodyKind) -> BodyTracker {
        let state = match kind {
            BodyKind::Empty | BodyKind::Length(0) => State::Done,
            BodyKind::Length(n) => State::Length { remaining: n },
            BodyKind::Chunked => State::Size { value: 0, digits: 0, line: 0, part: SizeLine::Digits },
            BodyKind::UntilClose => State::UntilClose,
        };
        BodyTracker { state }
    }

    /// Whether the body has ended.
    pub fn is_done(&self) -> bool {
        self.state == State::Done
    }

    /// Whether the body runs until the connection closes.
    pub fn is_until_close(&self) -> bool {
        self.state == State::UntilClose
    }

    /// Bytes that are certainly body data and may be moved without parsing (the rest of a
    /// Content-Length body or of the current chunk); `None` until close.
    pub fn raw_remaining(&self) -> Option<u64> {
        match self.state {
            State::Length { remaining } | State::Data { remaining } => Some(remaining),
            State::UntilClose => None,
            _ => Some(0),
        }
    }

    /// Account for `n` bytes moved without passing through `advance` (e.g. by splice); `n`
    /// must not exceed `raw_remaining()`.
    pub fn skip_raw(&mut self, n: u64) {
        match &mut self.state {
            State::Length { remaining } => {
                *remaining -= n.min(*remaining);
                if *remaining == 0 {
                    self.state = State::Done;
                }
            }
            State::Data { remaining } => {
                *remaining -= n.min(*remaining);
                if *remaining == 0 {
                    self.state = State::DataCr;
                }
            }
            _ => {}
        }
    }

    /// The peer closed the connection: fine for a body that runs until close, an error for
    /// any body still expecting bytes.
    pub fn eof(&mut self) -> Result<(), BodyError> {
        match self.state {
            State::Done => Ok(()),
            State::UntilClose => {
                self.state = State::Done;
                Ok(())
            }
            _ => Err(BodyError::Truncated),
        }
    }

    /// Feed `buf`; see [`BodyProgress`].
    pub fn advance(&mut self, buf: &[u8]) -> Result<BodyProgress, BodyError> {
        self.advance_with(buf, |_| {})
    }

    /// Feed `buf`, handing every run of decoded body data (without chunk framing) to `on_data`.
    pub fn advance_with(
        &mut self,
        buf: &[u8],
        on_data: impl FnMut(&[u8]),
    ) -> Result<BodyProgress, BodyError> {
        self.advance_parts(buf, on_data, |_| {})
    }

    /// Feed `buf`, handing runs of decoded data to `on_data` and the bytes of a chunked body's
    /// trailer section (its field lines and the final empty line, CRLFs included) to
    /// `on_trailer`, so a relay that re-frames the body can pass its trailers on.
    pub fn advance_parts(
        &mut self,
        buf: &[u8],
        mut on_data: impl FnMut(&[u8]),
        mut on_trailer: impl FnMut(&[u8]),
    ) -> Result<BodyProgress, BodyError> {
        let mut i = 0;
        // The trailer section is the body's last part: once entered, it runs to the end.
        let mut trailer_from = None;
        while i < buf.len() {
            match &mut self.state {
                State::Done => break,
                State::UntilClose => {
                    on_data(&buf[i..]);
                    i = buf.len();
                }
                State::Length { remaining } | State::Data { remaining } => {
                    let take = (*remaining).min((buf.len() - i) as u64) as usize;
                    on_data(&buf[i..i + take]);
                    i += take;
                    *remaining -= take as u64;
                    if *remaining == 0 {
                        self.state = match self.state {
                            State::Length { .. } => State::Done,
                            _ => State::DataCr,
                        };
                    }
                }
                State::DataCr => {
                    if buf[i] != b'\r' {
                        return Err(BodyError::BadChunkTerminator);
                    }
                    i += 1;
                    self.state = State::DataLf;
                }
                State::DataLf => {
                    if buf[i] != b'\n' {
                        return Err(BodyError::BadChunkTerminator);
                    }
                    i += 1;
                    self.state = State::Size { value: 0, digits: 0, line: 0, part: SizeLine::Digits };
                }
                State::Size { value, digits, line, part } => {
                    let b = buf[i];
                    i += 1;
                    *line += 1;
                    if *line > MAX_CHUNK_LINE {
                        return Err(BodyError::ChunkLineTooLong);
                    }
                    match (*part, b) {
                        (SizeLine::Cr, b'\n') => {
                            self.state = if *value == 0 {
                                State::Trailer { line: 0, total: 0, cr: false }
                            } else {
                                State::Data { remaining: *value }
                            };
                        }
                        (SizeLine::Cr, _) => return Err(BodyError::InvalidChunkSize),
                        (SizeLine::Digits, _) if b.is_ascii_hexdigit() => {
                            if *digits >= 16 {
                                return Err(BodyError::InvalidChunkSize);
                            }
                            *digits += 1;
                            *value = (*value << 4) | (b as char).to_digit(16).unwrap_or(0) as u64;
                        }
                        (_, _) if *digits == 0 => return Err(BodyError::InvalidChunkSize),
                        (SizeLine::Digits | SizeLine::Space, b' ' | b'\t') => *part = SizeLine::Space,
                        (SizeLine::Digits | SizeLine::Space, b';') => *part = SizeLine::Extension,
                        (SizeLine::Extension, _) if b == b'\t' || (0x20..0x7f).contains(&b) || b >= 0x80 => {}
                        (SizeLine::Digits | SizeLine::Space | SizeLine::Extension, b'\r') => {
                            *part = SizeLine::Cr
                        }
                        _ => return Err(BodyError::InvalidChunkSize),
                    }
                }
                State::Trailer { line, total, cr } => {
                    trailer_from.get_or_insert(i);
                    let b = buf[i];
                    i += 1;
                    *total += 1;
                    if *total > MAX_TRAILERS {
                        return Err(BodyError::TrailersTooLarge);
                    }
                    if *cr {
                        if b != b'\n' {
                            return Err(BodyError::BadTrailer);
                        }
                        if *line == 0 {
                            self.state = State::Done;
                        } else {
                            *line = 0;
                            *cr = false;
                        }
                    } else if b == b'\r' {
                        *cr = true;
                    } else if b == b'\n' {
                        return Err(BodyError::BadTrailer);
                    } else {
                        *line += 1;
                    }
                }
            }
        }
        if let Some(from) = trailer_from {
            on_trailer(&buf[from..i]);
        }
        Ok(BodyProgress { consumed: i, done: self.state == State::Done })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn run(kind: BodyKind, input: &[u8]) -> Result<(BodyProgress, Vec<u8>), BodyError> {
        let mut t = BodyTracker::new(kind);
        let mut data = Vec::new();
        let p = t.advance_with(input, |d| data.extend_from_slice(d))?;
        Ok((p, data))
    }

    #[test]
    fn content_length_body_ends_exactly_at_its_length() {
        let (p, data) = run(BodyKind::Length(5), b"helloGET /").unwrap();
        assert_eq!(p, BodyProgress { consumed: 5, done: true });
        assert_eq!(data, b"hello");
        assert!(BodyTracker::new(BodyKind::Empty).is_done());
        assert!(BodyTracker::new(BodyKind::Length(0)).is_done());
    }

    #[test]
    fn chunked_body_decodes_and_stops_before_the_next_message() {
        let input = b"5\r\nhello\r\n6;ext=1\r\n world\r\n0\r\nX-T: v\r\n\r\nNEXT";
        let (p, data) = run(BodyKind::Chunked, input).unwrap();
        assert!(p.done);
        assert_eq!(p.consumed, input.len() - 4);
        assert_eq!(data, b"hello world");
    }

    #[test]
    fn chunked_trailer_section_is_handed_over_whole_however_the_input_is_cut() {
        let input = b"5\r\nhello\r\n0\r\nX-T: v\r\nX-U: w\r\n\r\nNEXT";
        for cut in 0..input.len() {
            let mut t = BodyTracker::new(BodyKind::Chunked);
            let (mut data, mut trailer) = (Vec::new(), Vec::new());
            let mut consumed = 0;
            for part in [&input[..cut], &input[cut..]] {
                let p = t
                    .advance_parts(part, |d| data.extend_from_slice(d), |x| trailer.extend_from_slice(x))
                    .unwrap();
                consumed += p.consumed;
                if p.done {
                    break;
                }
            }
            assert_eq!(consumed, input.len() - 4, "cut at {cut}");
            assert_eq!(data, b"hello");
            assert_eq!(trailer, b"X-T: v\r\nX-U: w\r\n\r\n", "cut at {cut}");
        }
    }

    #[test]
    fn chunked_body_accepts_uppercase_hex_and_whitespace_before_extension() {
        let (p, data) = run(BodyKind::Chunked, b"A \r\n0123456789\r\n0\r\n\r\n").unwrap();
        assert!(p.done);
        assert_eq!(data.len(), 10);
    }

    #[test]
    fn invalid_chunk_framing_is_refused() {
        for bad in [
            &b"x\r\n"[..],
            b"\r\n",
            b"5\nhello\r\n",
            b"5\r\nhelloX\r\n",
            b"0x5\r\n",
            b"-5\r\n",
            b" 5\r\n",
            b"11111111111111111\r\n",
            b"5\rX",
            b"0\r\nX-T: v\n\r\n",
            b"0\r\n\n",
        ] {
            assert!(run(BodyKind::Chunked, bad).is_err(), "{:?}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn truncated_bodies_are_errors_at_eof_and_until_close_is_not() {
        let mut t = BodyTracker::new(BodyKind::Length(10));
        t.advance(b"abc").unwrap();
        assert_eq!(t.eof(), Err(BodyError::Truncated));
        let mut t = BodyTracker::new(BodyKind::UntilClose);
        assert_eq!(t.advance(b"abc").unwrap(), BodyProgress { consumed: 3, done: false });
        assert_eq!(t.eof(), Ok(()));
        assert!(t.is_done());
    }

    #[test]
    fn skip_raw_accounts_for_bytes_moved_elsewhere() {
        let mut t = BodyTracker::new(BodyKind::Chunked);
        t.advance(b"a\r\n").unwrap();
        assert_eq!(t.raw_remaining(), Some(10));
        t.skip_raw(10);
        assert_eq!(t.advance(b"\r\n0\r\n\r\n").unwrap(), BodyProgress { consumed: 7, done: true });
    }

    proptest! {
        #[test]
        fn chunked_split_anywhere_gives_same_data(
            chunks in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 1..50), 0..8),
            cuts in proptest::collection::vec(1usize..20, 1..40),
        ) {
            let mut wire = Vec::new();
            let mut expect = Vec::new();
            for c in &chunks {
                wire.extend_from_slice(format!("{:x}\r\n", c.len()).as_bytes());
                wire.extend_from_slice(c);
                wire.extend_from_slice(b"\r\n");
                expect.extend_from_slice(c);
            }
            wire.extend_from_slice(b"0\r\n\r\n");
            let total = wire.len();
            wire.extend_from_slice(b"TAIL");
            let mut t = BodyTracker::new(BodyKind::Chunked);
            let mut data = Vec::new();
            let mut pos = 0;
            let mut cut = cuts.iter().cycle();
            while !t.is_done() {
                let end = (pos + cut.next().unwrap()).min(wire.len());
                let p = t.advance_with(&wire[pos..end], |d| data.extend_from_slice(d)).unwrap();
                pos += p.consumed;
            }
            prop_assert_eq!(pos, total);
            prop_assert_eq!(data, expect);
        }
    }
}
