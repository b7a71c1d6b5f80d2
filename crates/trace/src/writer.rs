//! `TraceWriter`: one writer over the formats this crate writes (Locus, JSON lines, CLF).

use std::io::Write;

use crate::clf::{CLF_DEFAULT_BASE_UNIX, ClfWriter};
use crate::error::TraceError;
use crate::json_lines::JsonLinesWriter;
use crate::locus_format::LocusWriter;
use crate::reader::TraceFormat;
use crate::record::TraceRecord;

/// A writer of records in one format. Call `finish` to flush.
pub enum TraceWriter<W: Write> {
    /// Locus text format (lossless).
    Locus(LocusWriter<W>),
    /// JSON lines (lossless).
    Jsonl(JsonLinesWriter<W>),
    /// Common Log Format (lossy: whole seconds, no classes).
    Clf(ClfWriter<W>),
}

impl<W: Write> TraceWriter<W> {
    /// A writer of `format` to `out`, called `path` in errors. WC98 cannot be written.
    pub fn new(out: W, format: TraceFormat, path: impl Into<String>) -> Result<Self, TraceError> {
        Ok(match format {
            TraceFormat::Locus => TraceWriter::Locus(LocusWriter::new(out, path)?),
            TraceFormat::Jsonl => TraceWriter::Jsonl(JsonLinesWriter::new(out, path)),
            TraceFormat::Clf => TraceWriter::Clf(ClfWriter::new(out, path, CLF_DEFAULT_BASE_UNIX)),
            TraceFormat::Wc98 => {
                return Err(TraceError::Unwritable {
                    index: 0,
                    format: "wc98",
                    message: "the WC98 binary format is read-only here (its object ids and types cannot be made from targets)"
                        .into(),
                });
            }
        })
    }

    /// Write one record.
    pub fn write(&mut self, r: &TraceRecord) -> Result<(), TraceError> {
        match self {
            TraceWriter::Locus(w) => w.write(r),
            TraceWriter::Jsonl(w) => w.write(r),
            TraceWriter::Clf(w) => w.write(r),
        }
    }

    /// Flush and return the output.
    pub fn finish(self) -> Result<W, TraceError> {
        match self {
            TraceWriter::Locus(w) => w.finish(),
            TraceWriter::Jsonl(w) => w.finish(),
            TraceWriter::Clf(w) => w.finish(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reader::{ReadOptions, TraceReader};
    use std::io::Cursor;

    #[test]
    fn every_writable_format_reads_back_through_detection() {
        let recs = vec![
            TraceRecord { time: Some(0.0), client: 0, ..TraceRecord::get("/a", 10) },
            TraceRecord { time: Some(2.0), client: 1, ..TraceRecord::get("/b", 20) },
        ];
        for format in [TraceFormat::Locus, TraceFormat::Jsonl, TraceFormat::Clf] {
            let mut w = TraceWriter::new(Vec::new(), format, "mem").unwrap();
            for r in &recs {
                w.write(r).unwrap();
            }
            let bytes = w.finish().unwrap();
            let reader =
                TraceReader::from_reader(Cursor::new(bytes), "mem", &ReadOptions::default()).unwrap();
            assert_eq!(reader.format(), format);
            assert_eq!(reader.read_all().unwrap(), recs, "{format}");
        }
        assert!(TraceWriter::new(Vec::new(), TraceFormat::Wc98, "mem").is_err());
    }
}
