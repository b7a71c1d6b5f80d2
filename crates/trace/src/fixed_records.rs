//! `FixedRecords`: the units of a binary trace made of `N`-byte records. Reads one record at a
//! time into a buffer it owns, numbering the records; a short last record is truncated, and
//! nothing is read after it.

use std::io::{self, Read};

use crate::record_reader::RecordUnits;

/// Reads `N`-byte records from a `Read`.
pub struct FixedRecords<R, const N: usize> {
    inner: R,
    buf: [u8; N],
    /// Bytes in `buf`: `N`, or fewer for a record truncated by the end of the input.
    filled: usize,
    record: u64,
    ended: bool,
}

impl<R: Read, const N: usize> FixedRecords<R, N> {
    /// A reader of the records of `inner`.
    pub(crate) fn new(inner: R) -> FixedRecords<R, N> {
        FixedRecords { inner, buf: [0; N], filled: 0, record: 0, ended: false }
    }

    /// Fill `buf`; the number of bytes read (less than `N` only at the end of the input).
    fn fill(&mut self) -> io::Result<usize> {
        let mut filled = 0;
        while filled < N {
            match self.inner.read(&mut self.buf[filled..]) {
                Ok(0) => break,
                Ok(n) => filled += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(filled)
    }
}

impl<R: Read, const N: usize> RecordUnits for FixedRecords<R, N> {
    type Unit = [u8; N];

    /// Read the next record; `false` at the end of the input or after a truncated record.
    fn advance(&mut self) -> io::Result<bool> {
        if self.ended {
            return Ok(false);
        }
        self.filled = self.fill()?;
        if self.filled < N {
            self.ended = true;
            if self.filled == 0 {
                return Ok(false);
            }
        }
        self.record += 1;
        Ok(true)
    }

    /// The current record (its first bytes only are meaningful if it was truncated).
    fn unit(&self) -> &[u8; N] {
        &self.buf
    }

    /// 1-based number of the current record.
    fn number(&self) -> u64 {
        self.record
    }

    /// `truncated record: …` if the input ended inside the current record.
    fn framing_error(&self) -> Option<String> {
        (self.filled < N).then(|| {
            let offset = (self.record - 1) * N as u64;
            format!("truncated record: {} of {N} bytes at byte offset {offset}", self.filled)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Hands out at most two bytes per read, with an interruption before each.
    struct Trickle<'a> {
        bytes: &'a [u8],
        interrupt: bool,
    }

    impl Read for Trickle<'_> {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            self.interrupt = !self.interrupt;
            if self.interrupt {
                return Err(io::ErrorKind::Interrupted.into());
            }
            let n = buf.len().min(2).min(self.bytes.len());
            buf[..n].copy_from_slice(&self.bytes[..n]);
            self.bytes = &self.bytes[n..];
            Ok(n)
        }
    }

    #[test]
    fn records_are_numbered_across_short_and_interrupted_reads_and_a_short_tail_is_truncated() {
        let mut r = FixedRecords::<_, 3>::new(Trickle { bytes: b"abcdefgh", interrupt: false });
        let mut got = Vec::new();
        while r.advance().unwrap() {
            got.push((r.number(), *r.unit(), r.framing_error()));
        }
        assert_eq!(got[..2], [(1, *b"abc", None), (2, *b"def", None)]);
        assert_eq!((got[2].0, &got[2].1[..2]), (3, &b"gh"[..]));
        assert_eq!(got[2].2.as_deref(), Some("truncated record: 2 of 3 bytes at byte offset 6"));
        assert_eq!(got.len(), 3);
    }

    #[test]
    fn an_exact_multiple_of_the_record_size_ends_cleanly() {
        let mut r = FixedRecords::<_, 2>::new(&b"abcd"[..]);
        assert!(r.advance().unwrap() && r.framing_error().is_none());
        assert!(r.advance().unwrap() && r.framing_error().is_none());
        assert!(!r.advance().unwrap());
        assert!(!r.advance().unwrap());
    }
}
