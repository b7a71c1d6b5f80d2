//! The Locus text trace format (`#locus-trace v1`): `LocusReader` and `LocusWriter`.
//!
//! One header line `#locus-trace v1`, then one record per line, seven tab-separated fields:
//! `time client method target size status class` (`-` for a missing time or class). Lines
//! starting with `#` and empty lines are ignored. Writing then reading gives the same records.

use std::io::{BufRead, Write};

use locus_core::Method;

use crate::error::TraceError;
use crate::line_reader::LineReader;
use crate::record::{TraceRecord, wire_target};
use crate::record_reader::{RecordFormat, RecordReader};
use crate::record_sink::RecordSink;

/// The first line of every Locus trace.
pub const LOCUS_HEADER: &str = "#locus-trace v1";

/// Streaming reader of the Locus trace format. A first line other than `LOCUS_HEADER` is a
/// `TraceError::Format`.
pub type LocusReader<R> = RecordReader<LineReader<R>, LocusFormat>;

impl<R: BufRead> LocusReader<R> {
    /// A reader of `input`, called `path` in errors, tolerating `max_malformed` bad lines and
    /// lines of at most `max_line_bytes` bytes.
    pub fn new(input: R, path: impl Into<String>, max_malformed: u64, max_line_bytes: usize) -> Self {
        let lines = LineReader::new(input, max_line_bytes);
        RecordReader::with_format(lines, LocusFormat { header_seen: false }, path, max_malformed)
    }
}

/// How `LocusReader` reads a line: the header first, then records, comments and empty lines.
#[derive(Debug)]
pub struct LocusFormat {
    header_seen: bool,
}

impl RecordFormat<[u8]> for LocusFormat {
    #[inline]
    fn passes_over(&mut self, line: &[u8]) -> Result<bool, String> {
        if !self.header_seen {
            self.header_seen = true;
            let first = String::from_utf8_lossy(line);
            let first = first.trim_end();
            if first == LOCUS_HEADER {
                return Ok(true);
            }
            return Err(if first.starts_with("#locus-trace") {
                format!("unsupported Locus trace version `{first}` (this reader knows `{LOCUS_HEADER}`)")
            } else {
                format!("line 1 is not the `{LOCUS_HEADER}` header")
            });
        }
        Ok(line.is_empty() || line[0] == b'#')
    }

    fn parse(&mut self, line: &[u8]) -> Result<TraceRecord, String> {
        match std::str::from_utf8(line) {
            Ok(text) => parse_locus_line(text),
            Err(e) => Err(format!("not UTF-8: {e}")),
        }
    }
}

/// Parse one record line (without its line end).
pub fn parse_locus_line(line: &str) -> Result<TraceRecord, String> {
    let mut fields = line.split('\t');
    let mut next = |name: &str| {
        fields.next().ok_or_else(|| format!("missing field `{name}` (expected 7 tab-separated fields)"))
    };
    let time = next("time")?;
    let client = next("client")?;
    let method = next("method")?;
    let target = next("target")?;
    let size = next("size")?;
    let status = next("status")?;
    let class = next("class")?;
    if fields.next().is_some() {
        return Err("more than 7 tab-separated fields".into());
    }
    let time = match time {
        "-" => None,
        t => {
            let v: f64 = t.parse().map_err(|_| format!("time `{t}` is not a number of seconds or `-`"))?;
            if !v.is_finite() {
                return Err(format!("time `{t}` is not finite"));
            }
            Some(v)
        }
    };
    let client = client.parse().map_err(|_| format!("client `{client}` is not an integer 0..=4294967295"))?;
    if method.is_empty() || !method.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(format!("method `{method}` is not a token"));
    }
    if target.is_empty() {
        return Err("empty target".into());
    }
    if target.bytes().any(|b| b.is_ascii_control() || b == b' ') {
        return Err("target contains a space or control character (write them as %XX)".into());
    }
    let size = size.parse().map_err(|_| format!("size `{size}` is not a byte count"))?;
    let status = status.parse().map_err(|_| format!("status `{status}` is not an integer 0..=65535"))?;
    let class = match class {
        "-" => None,
        c => Some(c.parse().map_err(|_| format!("class `{c}` is not an integer 0..=65535 or `-`"))?),
    };
    Ok(TraceRecord {
        time,
        client,
        method: Method::from_token(method),
        target: target.to_string(),
        size,
        status,
        class,
    })
}

/// Writer of the Locus trace format. Call `finish` to flush.
pub struct LocusWriter<W: Write> {
    sink: RecordSink<W>,
}

impl<W: Write> LocusWriter<W> {
    /// A writer to `out` (called `path` in errors); writes the header at once.
    pub fn new(mut out: W, path: impl Into<String>) -> Result<Self, TraceError> {
        let path = path.into();
        writeln!(out, "{LOCUS_HEADER}").map_err(|e| TraceError::io(&path, e))?;
        Ok(LocusWriter { sink: RecordSink::new(out, path, "locus") })
    }

    /// Write one record. The target is written as on the wire (`wire_target`); a time that is
    /// not finite, or an empty target, cannot be written.
    pub fn write(&mut self, r: &TraceRecord) -> Result<(), TraceError> {
        if r.target.is_empty() {
            return Err(self.sink.unwritable("empty target"));
        }
        if r.time.is_some_and(|t| !t.is_finite()) {
            return Err(self.sink.unwritable("time is not finite"));
        }
        let line = self.sink.line();
        match r.time {
            Some(t) => write!(line, "{t}").expect("writing to memory"),
            None => line.push(b'-'),
        }
        let target = wire_target(&r.target);
        write!(line, "\t{}\t{}\t{}\t{}\t{}\t", r.client, r.method, target, r.size, r.status)
            .expect("writing to memory");
        match r.class {
            Some(c) => write!(line, "{c}").expect("writing to memory"),
            None => line.push(b'-'),
        }
        line.push(b'\n');
        self.sink.send_line()
    }

    /// Flush and return the output.
    pub fn finish(self) -> Result<W, TraceError> {
        self.sink.finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn read_all(text: &str, max_malformed: u64) -> (Vec<TraceRecord>, Option<TraceError>, u64) {
        let mut reader = LocusReader::new(text.as_bytes(), "t.trace", max_malformed, 1 << 16);
        let mut out = Vec::new();
        let mut err = None;
        for r in reader.by_ref() {
            match r {
                Ok(r) => out.push(r),
                Err(e) => err = Some(e),
            }
        }
        let malformed = reader.malformed();
        (out, err, malformed)
    }

    #[test]
    fn valid_lines_parse_with_times_sizes_and_classes() {
        let text = "#locus-trace v1\n# comment\n0.5\t3\tGET\t/a.html\t1024\t200\t-\n\n-\t0\tPOST\t/cgi-bin/class2?id=7\t0\t201\t2\r\n";
        let (recs, err, malformed) = read_all(text, 0);
        assert!(err.is_none(), "{err:?}");
        assert_eq!(malformed, 0);
        assert_eq!(recs.len(), 2);
        assert_eq!(recs[0], TraceRecord { time: Some(0.5), client: 3, ..TraceRecord::get("/a.html", 1024) });
        assert_eq!(recs[1].time, None);
        assert_eq!(recs[1].method, Method::Post);
        assert_eq!(recs[1].status, 201);
        assert_eq!(recs[1].class, Some(2));
    }

    #[test]
    fn malformed_lines_are_skipped_and_counted_with_line_numbers() {
        let text = "#locus-trace v1\n1\t0\tGET\t/a\t1\t200\t-\nnot a record\n2\t0\tGET\t/b\tbig\t200\t-\n3\t0\tGET\t/c\t3\t200\t-\n";
        let mut reader = LocusReader::new(text.as_bytes(), "t.trace", 10, 1 << 16);
        let targets: Vec<String> = reader.by_ref().map(|r| r.unwrap().target).collect();
        assert_eq!(targets, ["/a", "/c"]);
        assert_eq!(reader.malformed(), 2);
        let msgs: Vec<String> = reader.malformed_samples().iter().map(|e| e.to_string()).collect();
        assert!(msgs[0].starts_with("t.trace:3: "), "{msgs:?}");
        assert!(msgs[1].starts_with("t.trace:4: size `big`"), "{msgs:?}");
    }

    #[test]
    fn too_many_malformed_lines_fail_after_the_limit() {
        let text = "#locus-trace v1\nx\ny\n1\t0\tGET\t/a\t1\t200\t-\n";
        let (recs, err, _) = read_all(text, 1);
        assert!(recs.is_empty());
        assert!(matches!(err, Some(TraceError::TooManyMalformed { line: 3, limit: 1, .. })), "{err:?}");
    }

    #[test]
    fn missing_or_wrong_header_is_a_format_error_and_empty_input_is_empty() {
        let (_, err, _) = read_all("1\t0\tGET\t/a\t1\t200\t-\n", 10);
        assert!(matches!(err, Some(TraceError::Format { .. })), "{err:?}");
        let (_, err, _) = read_all("#locus-trace v9\n", 10);
        assert!(err.unwrap().to_string().contains("unsupported"));
        let (recs, err, _) = read_all("", 0);
        assert!(recs.is_empty() && err.is_none());
    }

    #[test]
    fn writer_encodes_spaces_and_tabs_in_targets_and_refuses_nan_times() {
        let mut w = LocusWriter::new(Vec::new(), "out").unwrap();
        w.write(&TraceRecord::get("/a b\tc", 1)).unwrap();
        let err = w.write(&TraceRecord { time: Some(f64::NAN), ..TraceRecord::get("/x", 1) }).unwrap_err();
        assert!(matches!(err, TraceError::Unwritable { index: 1, .. }));
        let text = String::from_utf8(w.finish().unwrap()).unwrap();
        assert_eq!(text, "#locus-trace v1\n-\t0\tGET\t/a%20b%09c\t1\t200\t-\n");
    }

    fn method_strategy() -> impl Strategy<Value = Method> {
        prop::sample::select(vec![
            Method::Get,
            Method::Head,
            Method::Post,
            Method::Put,
            Method::Delete,
            Method::Options,
            Method::Patch,
            Method::Trace,
            Method::Connect,
            Method::Other,
        ])
    }

    fn record_strategy() -> impl Strategy<Value = TraceRecord> {
        (
            prop::option::of(prop::num::f64::NORMAL | prop::num::f64::ZERO | prop::num::f64::SUBNORMAL),
            any::<u32>(),
            method_strategy(),
            "/[!-~\u{a0}-\u{2fff}]{0,40}",
            any::<u64>(),
            any::<u16>(),
            prop::option::of(any::<u16>()),
        )
            .prop_map(|(time, client, method, target, size, status, class)| TraceRecord {
                time,
                client,
                method,
                target,
                size,
                status,
                class,
            })
    }

    proptest! {
        #[test]
        fn locus_format_round_trips_every_writable_record_exactly(records in prop::collection::vec(record_strategy(), 0..20)) {
            let mut w = LocusWriter::new(Vec::new(), "mem").unwrap();
            for r in &records {
                w.write(r).unwrap();
            }
            let bytes = w.finish().unwrap();
            let back: Vec<TraceRecord> =
                LocusReader::new(&bytes[..], "mem", 0, 1 << 20).collect::<Result<_, _>>().unwrap();
            prop_assert_eq!(back.len(), records.len());
            for (a, b) in back.iter().zip(&records) {
                prop_assert_eq!(a.time.map(f64::to_bits), b.time.map(f64::to_bits));
                prop_assert_eq!(a, b);
            }
        }
    }
}
