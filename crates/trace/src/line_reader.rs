//! `LineReader`: the units of a text trace. Reads one line at a time into a reused buffer,
//! numbering the lines, stripping `\n` / `\r\n`, and refusing to grow past a length limit (a
//! binary file or a line without an end must not eat the memory).

use std::io::{self, BufRead};

use crate::record_reader::RecordUnits;

/// Reads lines of bytes from a `BufRead` into a buffer it owns.
pub struct LineReader<R> {
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
}

impl<R: BufRead> RecordUnits for LineReader<R> {
    type Unit = [u8];

    /// Read the next line; `false` at the end of the input. The line is then in `unit()`.
    #[inline]
    fn advance(&mut self) -> io::Result<bool> {
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
    fn unit(&self) -> &[u8] {
        &self.buf
    }

    /// 1-based number of the current line.
    fn number(&self) -> u64 {
        self.line
    }

    /// `line longer than N bytes` if the current line was longer than the limit (and was cut).
    fn framing_error(&self) -> Option<String> {
        self.overlong.then(|| format!("line longer than {} bytes", self.max_len))
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
            out.push((r.number(), r.unit().to_vec(), r.framing_error().is_some()));
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
        let mut r = LineReader::new(&b"0123456789\n"[..], 4);
        assert!(r.advance().unwrap());
        assert_eq!(r.framing_error().as_deref(), Some("line longer than 4 bytes"));
    }
}
