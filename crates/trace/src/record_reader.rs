//! `RecordReader`: the reading loop every trace reader shares. It takes units (text lines or
//! fixed-size binary records) from a `RecordUnits` source, lets a `RecordFormat` pass over or
//! parse each, counts and skips malformed ones within a `MalformedBudget`, puts the file name
//! and line (record) number into errors, and stops for good at the end or at the first error.

use std::io;

use crate::error::TraceError;
use crate::malformed::MalformedBudget;
use crate::record::TraceRecord;

/// A source of the units a trace is made of, read one at a time into a buffer it owns.
pub trait RecordUnits {
    /// What a unit is (`[u8]` for a line, `[u8; N]` for a fixed-size record).
    type Unit: ?Sized;

    /// Read the next unit; `false` at the end of the input.
    fn advance(&mut self) -> io::Result<bool>;

    /// The current unit.
    fn unit(&self) -> &Self::Unit;

    /// 1-based number of the current unit: its line (record) number in errors.
    fn number(&self) -> u64;

    /// What is wrong with how the current unit was framed (a line cut at the length limit, a
    /// record truncated by the end of the input), if anything: the unit is then malformed.
    fn framing_error(&self) -> Option<String>;
}

/// What one trace format adds to the reading loop: which units carry no record, and how a
/// unit becomes a `TraceRecord`.
pub trait RecordFormat<U: ?Sized> {
    /// Whether `unit` carries no record and is passed over (a blank line, a comment, a
    /// header); `Err(message)` when it shows the input is not in this format at all. Asked
    /// before the unit's framing is checked.
    fn passes_over(&mut self, unit: &U) -> Result<bool, String>;

    /// The record in a well-framed `unit`; `Err(message)` if it is malformed.
    fn parse(&mut self, unit: &U) -> Result<TraceRecord, String>;
}

/// Streaming reader of a trace: an iterator of records read from units `S` in format `F`.
/// After an `Err` (I/O failure, input not in the format, or too many malformed units) it
/// yields nothing more.
pub struct RecordReader<S, F> {
    units: S,
    format: F,
    budget: MalformedBudget,
    done: bool,
}

impl<S, F> RecordReader<S, F> {
    /// A reader of `units` in `format`, called `path` in errors, tolerating `max_malformed`
    /// malformed units.
    pub(crate) fn with_format(units: S, format: F, path: impl Into<String>, max_malformed: u64) -> Self {
        RecordReader { units, format, budget: MalformedBudget::new(path, max_malformed), done: false }
    }

    /// Malformed lines (records) skipped so far.
    pub fn malformed(&self) -> u64 {
        self.budget.count()
    }

    /// The first few malformed-line (record) errors.
    pub fn malformed_samples(&self) -> &[TraceError] {
        self.budget.samples()
    }

    /// The format's own state.
    pub(crate) fn format(&self) -> &F {
        &self.format
    }
}

impl<S: RecordUnits, F: RecordFormat<S::Unit>> RecordReader<S, F> {
    fn next_record(&mut self) -> Result<Option<TraceRecord>, TraceError> {
        loop {
            if !self.units.advance().map_err(|e| TraceError::io(self.budget.path(), e))? {
                return Ok(None);
            }
            let unit = self.units.unit();
            match self.format.passes_over(unit) {
                Ok(true) => continue,
                Ok(false) => {}
                Err(message) => {
                    return Err(TraceError::Format { path: self.budget.path().to_string(), message });
                }
            }
            let parsed = match self.units.framing_error() {
                Some(message) => Err(message),
                None => self.format.parse(unit),
            };
            match parsed {
                Ok(record) => return Ok(Some(record)),
                Err(message) => self.budget.skip(self.units.number(), message)?,
            }
        }
    }
}

impl<S: RecordUnits, F: RecordFormat<S::Unit>> Iterator for RecordReader<S, F> {
    type Item = Result<TraceRecord, TraceError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        match self.next_record() {
            Ok(Some(record)) => Some(Ok(record)),
            Ok(None) => {
                self.done = true;
                None
            }
            Err(e) => {
                self.done = true;
                Some(Err(e))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::line_reader::LineReader;

    /// Lines holding a size; `-` lines are passed over; a line `stop` is not of the format.
    struct Sizes;

    impl RecordFormat<[u8]> for Sizes {
        fn passes_over(&mut self, line: &[u8]) -> Result<bool, String> {
            match line {
                b"stop" => Err("not a sizes file".into()),
                _ => Ok(line.starts_with(b"-")),
            }
        }

        fn parse(&mut self, line: &[u8]) -> Result<TraceRecord, String> {
            let text = std::str::from_utf8(line).map_err(|e| e.to_string())?;
            let size = text.parse().map_err(|_| format!("bad size `{text}`"))?;
            Ok(TraceRecord::get("/", size))
        }
    }

    fn reader(input: &'static [u8], max_malformed: u64) -> RecordReader<LineReader<&'static [u8]>, Sizes> {
        RecordReader::with_format(LineReader::new(input, 8), Sizes, "sizes.txt", max_malformed)
    }

    fn sizes(results: &[Result<TraceRecord, TraceError>]) -> Vec<u64> {
        results.iter().filter_map(|r| r.as_ref().ok()).map(|r| r.size).collect()
    }

    #[test]
    fn a_malformed_unit_is_counted_and_skipped_with_its_file_and_line_number() {
        let mut r = reader(b"1\nx\n3\n", 10);
        let results: Vec<_> = r.by_ref().collect();
        assert_eq!(sizes(&results), [1, 3]);
        assert!(results.iter().all(Result::is_ok));
        assert_eq!(r.malformed(), 1);
        assert_eq!(r.malformed_samples()[0].to_string(), "sizes.txt:2: bad size `x`");
    }

    #[test]
    fn a_framing_error_makes_the_unit_malformed_without_parsing_it() {
        let mut r = reader(b"123456789\n5\n", 10);
        let results: Vec<_> = r.by_ref().collect();
        assert_eq!(sizes(&results), [5]);
        assert_eq!(r.malformed_samples()[0].to_string(), "sizes.txt:1: line longer than 8 bytes");
    }

    #[test]
    fn passed_over_units_are_neither_records_nor_malformed_even_when_cut() {
        let mut r = reader(b"-\n-123456789\n7\n", 0);
        let results: Vec<_> = r.by_ref().collect();
        assert_eq!(sizes(&results), [7]);
        assert_eq!(r.malformed(), 0);
    }

    #[test]
    fn the_malformed_limit_stops_the_read_with_an_error_naming_the_file_and_nothing_follows() {
        let mut r = reader(b"x\n2\ny\n4\n", 1);
        let results: Vec<_> = r.by_ref().collect();
        assert_eq!(sizes(&results), [2]);
        let err = results.last().unwrap().as_ref().unwrap_err();
        assert!(matches!(err, TraceError::TooManyMalformed { count: 2, limit: 1, line: 3, .. }), "{err}");
        assert!(err.to_string().starts_with("sizes.txt: giving up after 2 malformed records"), "{err}");
        assert!(r.next().is_none());
    }

    #[test]
    fn a_unit_not_of_the_format_is_a_format_error_naming_the_file_and_ends_the_read() {
        let mut r = reader(b"1\nstop\n3\n", 10);
        assert_eq!(r.next().unwrap().unwrap().size, 1);
        let err = r.next().unwrap().unwrap_err();
        assert_eq!(err.to_string(), "sizes.txt: not a sizes file");
        assert!(r.next().is_none());
    }

    #[test]
    fn an_io_error_names_the_file_and_ends_the_read() {
        struct Failing;
        impl io::Read for Failing {
            fn read(&mut self, _: &mut [u8]) -> io::Result<usize> {
                Err(io::Error::other("disk on fire"))
            }
        }
        let mut r =
            RecordReader::with_format(LineReader::new(io::BufReader::new(Failing), 8), Sizes, "sizes.txt", 0);
        let err = r.next().unwrap().unwrap_err();
        assert_eq!(err.to_string(), "sizes.txt: disk on fire");
        assert!(r.next().is_none());
    }
}
