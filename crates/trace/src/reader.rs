//! `TraceReader`: one streaming iterator over every trace format this crate reads, with the
//! format told from the first bytes of the content (`TraceFormat::detect`) unless given.

use std::fmt;
use std::fs::File;
use std::io::{self, BufReader, Cursor, Read};
use std::path::Path;

use crate::clf::ClfReader;
use crate::error::TraceError;
use crate::json_lines::JsonLinesReader;
use crate::locus_format::{LOCUS_HEADER, LocusReader};
use crate::record::TraceRecord;
use crate::wc98::{WC98_RECORD_BYTES, Wc98Reader, Wc98Record};

/// A trace format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum TraceFormat {
    /// Locus text trace (`#locus-trace v1`, tab-separated): read and write.
    Locus,
    /// Common or Combined Log Format: read, and write (lossy).
    Clf,
    /// World Cup 98 binary log: read only.
    Wc98,
    /// One JSON object per line: read and write.
    Jsonl,
}

impl TraceFormat {
    /// Short lower-case name (`locus`, `clf`, `wc98`, `jsonl`).
    pub fn name(self) -> &'static str {
        match self {
            TraceFormat::Locus => "locus",
            TraceFormat::Clf => "clf",
            TraceFormat::Wc98 => "wc98",
            TraceFormat::Jsonl => "jsonl",
        }
    }

    /// Tell the format from the first bytes of a trace (a few KiB are plenty):
    /// the Locus header; a `{` first; a text line with `[date]` and a quoted request; or
    /// 20-byte records whose byte fields fit the WC98 tables. Empty input counts as Locus.
    pub fn detect(prefix: &[u8]) -> Result<TraceFormat, String> {
        if prefix.is_empty()
            || prefix.starts_with(LOCUS_HEADER.as_bytes())
            || prefix.starts_with(b"#locus-trace")
        {
            return Ok(TraceFormat::Locus);
        }
        let first = prefix.iter().find(|b| !b.is_ascii_whitespace());
        match first {
            None => return Ok(TraceFormat::Clf),
            Some(b'{') => return Ok(TraceFormat::Jsonl),
            _ => {}
        }
        let text_lines = prefix
            .split(|&b| b == b'\n')
            .filter(|l| !l.iter().all(u8::is_ascii_whitespace))
            .take(5)
            .take_while(|l| !l.iter().any(|&b| b < 0x20 && b != b'\t' && b != b'\r'));
        for line in text_lines {
            let open = line.windows(2).position(|w| w == b" [");
            if let Some(open) = open
                && line[open..].contains(&b']')
                && line[open..].contains(&b'"')
            {
                return Ok(TraceFormat::Clf);
            }
        }
        let records: Vec<Wc98Record> = prefix
            .chunks_exact(WC98_RECORD_BYTES)
            .take(64)
            .map(|c| Wc98Record::from_bytes(c.try_into().expect("exact chunk")))
            .collect();
        if !records.is_empty() && records.iter().all(Wc98Record::is_plausible) {
            return Ok(TraceFormat::Wc98);
        }
        let line = prefix.split(|&b| b == b'\n').next().unwrap_or_default();
        let shown: String = String::from_utf8_lossy(&line[..line.len().min(60)]).escape_debug().collect();
        Err(format!(
            "cannot tell the trace format (not a Locus, CLF, JSON-lines or WC98 trace); it starts with \"{shown}\"; give the format explicitly"
        ))
    }
}

impl fmt::Display for TraceFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// How to read a trace.
#[derive(Clone, Debug)]
pub struct ReadOptions {
    /// The format, or `None` to detect it from the content.
    pub format: Option<TraceFormat>,
    /// Malformed records skipped before reading fails with `TooManyMalformed`.
    pub max_malformed: u64,
    /// Longest line kept by the text readers; longer lines are malformed.
    pub max_line_bytes: usize,
}

impl Default for ReadOptions {
    fn default() -> Self {
        ReadOptions { format: None, max_malformed: 1000, max_line_bytes: 1 << 20 }
    }
}

type Input = BufReader<Box<dyn Read + Send>>;

enum FormatReader {
    Locus(LocusReader<Input>),
    Clf(ClfReader<Input>),
    Wc98(Wc98Reader<Input>),
    Jsonl(JsonLinesReader<Input>),
}

/// Streaming reader of a trace in any supported format: an iterator of records. After an
/// `Err` (I/O failure, a wrong header, or too many malformed records) it yields nothing more.
pub struct TraceReader {
    reader: FormatReader,
    format: TraceFormat,
    records: u64,
}

/// Bytes read ahead to detect the format.
const DETECT_BYTES: usize = 8192;

impl TraceReader {
    /// Open the trace at `path` (`-` for standard input).
    pub fn open(path: &Path, options: &ReadOptions) -> Result<TraceReader, TraceError> {
        if path == Path::new("-") {
            return TraceReader::from_reader(io::stdin(), "-", options);
        }
        let file = File::open(path).map_err(|e| TraceError::fs(path, e))?;
        TraceReader::from_reader(file, path.display().to_string(), options)
    }

    /// Read a trace from `input`, called `name` in errors.
    pub fn from_reader(
        mut input: impl Read + Send + 'static,
        name: impl Into<String>,
        options: &ReadOptions,
    ) -> Result<TraceReader, TraceError> {
        let name = name.into();
        let mut prefix = Vec::with_capacity(DETECT_BYTES);
        (&mut input)
            .take(DETECT_BYTES as u64)
            .read_to_end(&mut prefix)
            .map_err(|e| TraceError::io(&name, e))?;
        let format = match options.format {
            Some(f) => f,
            None => TraceFormat::detect(&prefix)
                .map_err(|message| TraceError::Format { path: name.clone(), message })?,
        };
        let chained: Box<dyn Read + Send> = Box::new(Cursor::new(prefix).chain(input));
        let input = BufReader::with_capacity(1 << 16, chained);
        let (max, line) = (options.max_malformed, options.max_line_bytes);
        let reader = match format {
            TraceFormat::Locus => FormatReader::Locus(LocusReader::new(input, name, max, line)),
            TraceFormat::Clf => FormatReader::Clf(ClfReader::new(input, name, max, line)),
            TraceFormat::Wc98 => FormatReader::Wc98(Wc98Reader::new(input, name, max)),
            TraceFormat::Jsonl => FormatReader::Jsonl(JsonLinesReader::new(input, name, max, line)),
        };
        Ok(TraceReader { reader, format, records: 0 })
    }

    /// The format being read.
    pub fn format(&self) -> TraceFormat {
        self.format
    }

    /// Records yielded so far.
    pub fn records(&self) -> u64 {
        self.records
    }

    /// Malformed records skipped so far.
    pub fn malformed(&self) -> u64 {
        match &self.reader {
            FormatReader::Locus(r) => r.malformed(),
            FormatReader::Clf(r) => r.malformed(),
            FormatReader::Wc98(r) => r.malformed(),
            FormatReader::Jsonl(r) => r.malformed(),
        }
    }

    /// The first few malformed-record errors (file and line of each).
    pub fn malformed_samples(&self) -> &[TraceError] {
        match &self.reader {
            FormatReader::Locus(r) => r.malformed_samples(),
            FormatReader::Clf(r) => r.malformed_samples(),
            FormatReader::Wc98(r) => r.malformed_samples(),
            FormatReader::Jsonl(r) => r.malformed_samples(),
        }
    }

    /// Read every remaining record into memory (for traces known to be small).
    pub fn read_all(self) -> Result<Vec<TraceRecord>, TraceError> {
        self.collect()
    }
}

impl Iterator for TraceReader {
    type Item = Result<TraceRecord, TraceError>;

    fn next(&mut self) -> Option<Self::Item> {
        let item = match &mut self.reader {
            FormatReader::Locus(r) => r.next(),
            FormatReader::Clf(r) => r.next(),
            FormatReader::Wc98(r) => r.next(),
            FormatReader::Jsonl(r) => r.next(),
        };
        if let Some(Ok(_)) = item {
            self.records += 1;
        }
        item
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wc98::Wc98Record;

    #[test]
    fn detect_tells_each_format_from_its_first_bytes() {
        assert_eq!(TraceFormat::detect(b"#locus-trace v1\n"), Ok(TraceFormat::Locus));
        assert_eq!(TraceFormat::detect(b"  {\"target\":\"/\"}\n"), Ok(TraceFormat::Jsonl));
        let clf = b"1.2.3.4 - - [10/Oct/2000:13:55:36 -0700] \"GET / HTTP/1.0\" 200 1\n";
        assert_eq!(TraceFormat::detect(clf), Ok(TraceFormat::Clf));
        let wc = Wc98Record {
            timestamp: 897_000_000,
            client_id: 5,
            object_id: 10,
            size: 300,
            method: 0,
            status: 0x42,
            file_type: 1,
            server: 0,
        };
        let mut bytes = wc.to_bytes().to_vec();
        bytes.extend_from_slice(&wc.to_bytes());
        assert_eq!(TraceFormat::detect(&bytes), Ok(TraceFormat::Wc98));
        assert_eq!(TraceFormat::detect(b""), Ok(TraceFormat::Locus));
        let err = TraceFormat::detect(b"hello world, this is not a trace\n").unwrap_err();
        assert!(err.contains("hello world"), "{err}");
    }

    #[test]
    fn trace_reader_detects_reads_counts_and_reports_malformed_lines() {
        let log = "1.2.3.4 - - [10/Oct/2000:13:55:36 -0700] \"GET /a HTTP/1.0\" 200 10\nbad\n\
                   1.2.3.5 - - [10/Oct/2000:13:55:38 -0700] \"GET /b HTTP/1.0\" 200 20\n";
        let mut reader =
            TraceReader::from_reader(Cursor::new(log.as_bytes().to_vec()), "log", &ReadOptions::default())
                .unwrap();
        assert_eq!(reader.format(), TraceFormat::Clf);
        let recs: Vec<TraceRecord> = reader.by_ref().collect::<Result<_, _>>().unwrap();
        assert_eq!(recs.iter().map(|r| r.size).collect::<Vec<_>>(), [10, 20]);
        assert_eq!((reader.records(), reader.malformed()), (2, 1));
        assert_eq!(reader.malformed_samples()[0].to_string(), "log:2: no space after the host");
    }

    #[test]
    fn trace_reader_reads_past_the_detection_prefix() {
        let mut text = String::from("#locus-trace v1\n");
        for i in 0..5000 {
            text.push_str(&format!("{i}\t0\tGET\t/doc/{i}\t{i}\t200\t-\n"));
        }
        assert!(text.len() > 2 * DETECT_BYTES);
        let reader =
            TraceReader::from_reader(Cursor::new(text.into_bytes()), "big", &ReadOptions::default()).unwrap();
        let recs = reader.read_all().unwrap();
        assert_eq!(recs.len(), 5000);
        assert_eq!(recs[4999].target, "/doc/4999");
    }

    #[test]
    fn unknown_content_is_a_format_error_naming_the_file() {
        let err = match TraceReader::from_reader(
            Cursor::new(b"nonsense\n".to_vec()),
            "x.bin",
            &ReadOptions::default(),
        ) {
            Err(e) => e,
            Ok(_) => panic!("nonsense was accepted"),
        };
        assert!(err.to_string().starts_with("x.bin: cannot tell the trace format"), "{err}");
    }
}
