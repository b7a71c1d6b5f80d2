//! JSON-lines traces: one `TraceRecord` object per line (`{"time":0.5,"client":1,
//! "method":"GET","target":"/a","size":10,"status":200,"class":null}`); `JsonLinesReader`
//! and `JsonLinesWriter`. Only `target` is required when reading.

use std::io::{BufRead, Write};

use crate::error::TraceError;
use crate::line_reader::LineReader;
use crate::record::TraceRecord;
use crate::record_reader::{RecordFormat, RecordReader};
use crate::record_sink::RecordSink;

/// Streaming reader of JSON-lines traces. Empty lines are ignored.
pub type JsonLinesReader<R> = RecordReader<LineReader<R>, JsonLinesFormat>;

impl<R: BufRead> JsonLinesReader<R> {
    /// A reader of `input`, called `path` in errors, tolerating `max_malformed` bad lines and
    /// lines of at most `max_line_bytes` bytes.
    pub fn new(input: R, path: impl Into<String>, max_malformed: u64, max_line_bytes: usize) -> Self {
        RecordReader::with_format(
            LineReader::new(input, max_line_bytes),
            JsonLinesFormat,
            path,
            max_malformed,
        )
    }
}

/// How `JsonLinesReader` reads a line: a `TraceRecord` object with a finite time, if any,
/// and a target.
#[derive(Debug)]
pub struct JsonLinesFormat;

impl RecordFormat<[u8]> for JsonLinesFormat {
    fn passes_over(&mut self, line: &[u8]) -> Result<bool, String> {
        Ok(line.iter().all(u8::is_ascii_whitespace))
    }

    fn parse(&mut self, line: &[u8]) -> Result<TraceRecord, String> {
        let r = serde_json::from_slice::<TraceRecord>(line).map_err(|e| e.to_string())?;
        match r.time {
            Some(t) if !t.is_finite() => Err("time is not finite".to_string()),
            _ if r.target.is_empty() => Err("empty target".to_string()),
            _ => Ok(r),
        }
    }
}

/// Writer of JSON-lines traces. Call `finish` to flush.
pub struct JsonLinesWriter<W: Write> {
    sink: RecordSink<W>,
}

impl<W: Write> JsonLinesWriter<W> {
    /// A writer to `out`, called `path` in errors.
    pub fn new(out: W, path: impl Into<String>) -> Self {
        JsonLinesWriter { sink: RecordSink::new(out, path, "jsonl") }
    }

    /// Write one record (a time that is not finite cannot be written).
    pub fn write(&mut self, r: &TraceRecord) -> Result<(), TraceError> {
        if r.time.is_some_and(|t| !t.is_finite()) {
            return Err(self.sink.unwritable("time is not finite"));
        }
        let line = self.sink.line();
        let rendered = serde_json::to_writer(&mut *line, r);
        line.push(b'\n');
        rendered.map_err(|e| self.sink.unwritable(e.to_string()))?;
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

    #[test]
    fn json_lines_round_trip_and_bad_lines_are_counted_with_line_numbers() {
        let recs = vec![
            TraceRecord { time: Some(0.125), client: 2, class: Some(4), ..TraceRecord::get("/a b", 7) },
            TraceRecord::get("/c", 0),
        ];
        let mut w = JsonLinesWriter::new(Vec::new(), "out");
        for r in &recs {
            w.write(r).unwrap();
        }
        let mut bytes = w.finish().unwrap();
        bytes.extend_from_slice(b"\n{\"time\":1}\n[1,2]\n{\"target\":\"/d\",\"size\":3}\n");
        let mut reader = JsonLinesReader::new(&bytes[..], "t.jsonl", 5, 1 << 16);
        let back: Vec<TraceRecord> = reader.by_ref().collect::<Result<_, _>>().unwrap();
        assert_eq!(&back[..2], &recs[..]);
        assert_eq!(back[2], TraceRecord::get("/d", 3));
        assert_eq!(reader.malformed(), 2);
        assert!(reader.malformed_samples()[0].to_string().starts_with("t.jsonl:4: missing field `target`"));
        assert!(reader.malformed_samples()[1].to_string().starts_with("t.jsonl:5: "));
    }
}
