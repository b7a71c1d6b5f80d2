//! Pieces shared by request and response heads: byte spans into the read buffer, the HTTP
//! version, the scan for the end of a head that refuses bare CR and bare LF, and
//! comma-separated token lists.

use std::ops::Range;

/// A byte range into the buffer a head was parsed from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Span {
    pub start: u32,
    pub end: u32,
}

impl Span {
    /// The span of `part`, a sub-slice of `buf`.
    pub(crate) fn of(buf: &[u8], part: &[u8]) -> Span {
        let start = part.as_ptr() as usize - buf.as_ptr() as usize;
        debug_assert!(start + part.len() <= buf.len());
        Span { start: start as u32, end: (start + part.len()) as u32 }
    }

    /// The bytes of the span in `buf`.
    pub fn get<'a>(&self, buf: &'a [u8]) -> &'a [u8] {
        &buf[self.range()]
    }

    /// The span as a range.
    pub fn range(&self) -> Range<usize> {
        self.start as usize..self.end as usize
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        (self.end - self.start) as usize
    }

    /// Whether the span is empty.
    pub fn is_empty(&self) -> bool {
        self.start == self.end
    }
}

/// One header line: name and value (value trimmed of surrounding whitespace).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HeaderSpan {
    pub name: Span,
    pub value: Span,
}

/// HTTP version of a message.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub enum Version {
    Http10,
    #[default]
    Http11,
}

impl Version {
    /// The version as on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            Version::Http10 => "HTTP/1.0",
            Version::Http11 => "HTTP/1.1",
        }
    }
}

/// A line-ending fault found while scanning a head.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LineFault {
    /// A CR not followed by LF.
    BareCr,
    /// An LF not preceded by CR.
    BareLf,
    /// A header line starting with whitespace (obsolete line folding).
    ObsFold,
    /// Too many empty lines before the start line.
    LeadingBlankLines,
}

/// Scan `buf` for the end of a head (an empty line after at least one non-empty line).
///
/// Returns `Ok(Some((skip, end)))`: `skip` bytes of leading empty lines (RFC 9112 §2.2 lets a
/// server ignore them), and the head ends at `end` (just past the blank line's LF).
/// `Ok(None)` when more bytes are needed. Every line must end in CRLF: a bare CR or bare LF
/// anywhere in the head is an error, and so is a line after the start line that begins with
/// whitespace (obsolete folding) — the line-ending tricks behind request smuggling. One pass,
/// jumping between CR and LF bytes with `memchr2`.
pub fn find_header_end(buf: &[u8]) -> Result<Option<(usize, usize)>, LineFault> {
    let mut line_start = 0;
    let mut skip = 0;
    let mut seen_line = false;
    while let Some(off) = memchr::memchr2(b'\r', b'\n', &buf[line_start..]) {
        let cr = line_start + off;
        if buf[cr] == b'\n' {
            return Err(LineFault::BareLf);
        }
        match buf.get(cr + 1) {
            None => return Ok(None),
            Some(b'\n') => {}
            Some(_) => return Err(LineFault::BareCr),
        }
        let next = cr + 2;
        if cr == line_start {
            if seen_line {
                return Ok(Some((skip, next)));
            }
            skip = next;
            if skip > 64 {
                return Err(LineFault::LeadingBlankLines);
            }
        } else {
            if seen_line && matches!(buf[line_start], b' ' | b'\t') {
                return Err(LineFault::ObsFold);
            }
            seen_line = true;
        }
        line_start = next;
    }
    Ok(None)
}

/// Whether the comma-separated list `value` contains `token` (ASCII case-insensitive).
pub fn has_token(value: &[u8], token: &str) -> bool {
    value.split(|&b| b == b',').any(|item| trim(item).eq_ignore_ascii_case(token.as_bytes()))
}

/// `bytes` without leading and trailing spaces and tabs.
pub(crate) fn trim(bytes: &[u8]) -> &[u8] {
    let start = bytes.iter().position(|&b| b != b' ' && b != b'\t').unwrap_or(bytes.len());
    let end = bytes.iter().rposition(|&b| b != b' ' && b != b'\t').map_or(start, |e| e + 1);
    &bytes[start..end]
}

/// Parse a Content-Length value: one or more ASCII digits, no sign, no list, fits in u64.
pub(crate) fn parse_content_length(value: &[u8]) -> Option<u64> {
    if value.is_empty() || value.len() > 19 || !value.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(value).ok()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_end_found_after_blank_line_and_leading_blank_lines_skipped() {
        assert_eq!(find_header_end(b"GET / HTTP/1.1\r\n\r\n"), Ok(Some((0, 18))));
        assert_eq!(find_header_end(b"\r\nGET / HTTP/1.1\r\n\r\nrest"), Ok(Some((2, 20))));
        assert_eq!(find_header_end(b"GET / HTTP/1.1\r\nHost: a\r\n"), Ok(None));
        assert_eq!(find_header_end(b"GET / HTTP/1.1\r"), Ok(None));
    }

    #[test]
    fn header_scan_refuses_bare_cr_and_bare_lf() {
        assert_eq!(find_header_end(b"GET / HTTP/1.1\nHost: a\r\n\r\n"), Err(LineFault::BareLf));
        assert_eq!(find_header_end(b"GET / HTTP/1.1\r\nHost: a\n\n"), Err(LineFault::BareLf));
        assert_eq!(find_header_end(b"GET / HTTP/1.1\r\nX: a\rb\r\n\r\n"), Err(LineFault::BareCr));
        assert_eq!(find_header_end(b"GET / HTTP/1.1\r\nX: a\rb"), Err(LineFault::BareCr));
        assert_eq!(find_header_end(b"\n"), Err(LineFault::BareLf));
        assert_eq!(find_header_end(b"GET / HTTP/1.1\r\nA: b\r\n c\r\n\r\n"), Err(LineFault::ObsFold));
        assert_eq!(find_header_end(&b"\r\n".repeat(40)), Err(LineFault::LeadingBlankLines));
    }

    #[test]
    fn tokens_match_case_insensitively_in_lists() {
        assert!(has_token(b"keep-alive, Close", "close"));
        assert!(has_token(b" chunked ", "chunked"));
        assert!(!has_token(b"closed", "close"));
    }

    #[test]
    fn content_length_accepts_only_plain_digits() {
        assert_eq!(parse_content_length(b"0"), Some(0));
        assert_eq!(parse_content_length(b"12345"), Some(12345));
        for bad in [&b""[..], b"+5", b"-1", b"5,5", b"5 5", b"0x10", b"99999999999999999999", b" 5"] {
            assert_eq!(parse_content_length(bad), None, "{:?}", String::from_utf8_lossy(bad));
        }
    }
}
