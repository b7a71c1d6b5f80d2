//! `LineReader`: reads a text trace one line at a time into a reused buffer, numbering the
//! lines, stripping `\n` / `\r\n`, and refusing to grow past a length limit (a binary file or
//! a line without an end must not eat the memory).

use std::io::{self, BufRead};

/// Reads lines of bytes from a `BufRead` into a buffer it owns.
pub(crate) struct LineReader<R> {
    inner: R,
    buf: Vec<u8>,
    line: u64,
    max_len: usize,
    overlong: bool,
}

impl<R: BufRead> LineReader<R> {
    /// A reader keeping at most `max_len` bytes of each line.
    pub(crate) fn new(inner: R, max_len: usize) -> LineReader<R> {
        LineReader { inner, buf: Vec::with_capacity(256), line: 0, max_len: max_len.max(1), overlong: false }
    }

    /// Read the next line; `false` at the end of the input. The line is then in `line()`.
    pub(crate) fn advance(&mut self) -> io::Result<bool> {
        self.buf.clear();
        self.overlong = false;
        let mut any = false;
        loop {
            let available = match self.inner.fill_buf() {
                Ok(b) => b,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            if available.is_empty() {
                break;
            }
            any = true;
            let (chunk, used, end) = match available.iter().position(|&b| b == b'\n') {
                Some(i) => (&available[..i], i + 1, true),
                None => (available, available.len(), false),
            };
            let room = self.max_len.saturating_sub(self.buf.len());
            if chunk.len() > room {
                self.overlong = true;
                self.buf.extend_from_slice(&chunk[..room]);
            } else {
                self.buf.extend_from_slice(chunk);
            }
            self.inner.consume(used);
            if end {
                break;
            }
        }
        if !any {
            return Ok(false);
        }
        self.line += 1;
        if !self.overlong && self.buf.last() == Some(&b'\r') {
            self.buf.pop();
        }
        Ok(true)
    }

    /// The current line, without its line end.
    pub(crate) fn line(&self) -> &[u8] {
        &self.buf
    }

    /// 1-based number of the current line.
    pub(crate) fn line_number(&self) -> u64 {
        self.line
    }

    /// Whether the current line was longer than the limit (and was cut).
    pub(crate) fn overlong(&self) -> bool {
        self.overlong
    }

    /// The length limit.
    pub(crate) fn max_len(&self) -> usize {
        self.max_len
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(input: &[u8], max: usize) -> Vec<(u64, Vec<u8>, bool)> {
        // A tiny BufReader capacity makes lines span several fill_buf calls.
        let mut r = LineReader::new(io::BufReader::with_capacity(3, input), max);
        let mut out = Vec::new();
        while r.advance().unwrap() {
            out.push((r.line_number(), r.line().to_vec(), r.overlong()));
        }
        out
    }

    #[test]
    fn lines_are_numbered_and_stripped_of_crlf_across_buffer_refills() {
        let got = lines(b"abcdef\r\n\nxyz", 100);
        assert_eq!(
            got,
            vec![(1, b"abcdef".to_vec(), false), (2, b"".to_vec(), false), (3, b"xyz".to_vec(), false)]
        );
    }

    #[test]
    fn overlong_lines_are_cut_at_the_limit_and_flagged_and_the_next_line_is_intact() {
        let got = lines(b"0123456789\nok\n", 4);
        assert_eq!(got, vec![(1, b"0123".to_vec(), true), (2, b"ok".to_vec(), false)]);
    }
}
