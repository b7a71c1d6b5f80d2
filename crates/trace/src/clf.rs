//! `ClfReader` for the Common and Combined Log Formats (Apache/NCSA access logs), and
//! `ClfWriter` for writing a trace back as Common Log Format lines. Also reading and writing
//! `[10/Oct/2000:13:55:36 -0700]` timestamps (the calendar is the `time` crate's).

use std::collections::HashMap;
use std::io::{BufRead, Write};

use locus_core::Method;
use time::{Date, Month, OffsetDateTime};

use crate::error::TraceError;
use crate::line_reader::LineReader;
use crate::record::{TimeOrigin, TraceRecord, target_from_bytes, wire_target};
use crate::record_reader::{RecordFormat, RecordReader};
use crate::record_sink::RecordSink;

/// Streaming reader of Common / Combined Log Format lines:
/// `host ident authuser [date] "request" status bytes ["referer" "user-agent"]`.
///
/// Sizes come from `%b` (`-` is 0); times are seconds relative to the first record (so a
/// log out of time order yields negative times); clients are numbered 0, 1, … in the order
/// their host first appears. Blank lines are ignored.
pub type ClfReader<R> = RecordReader<LineReader<R>, ClfFormat>;

impl<R: BufRead> ClfReader<R> {
    /// A reader of `input`, called `path` in errors, tolerating `max_malformed` bad lines and
    /// lines of at most `max_line_bytes` bytes.
    pub fn new(input: R, path: impl Into<String>, max_malformed: u64, max_line_bytes: usize) -> Self {
        let lines = LineReader::new(input, max_line_bytes);
        RecordReader::with_format(lines, ClfFormat::default(), path, max_malformed)
    }

    /// Distinct hosts seen so far.
    pub fn hosts(&self) -> usize {
        self.format().clients.len()
    }
}

/// How `ClfReader` reads a line: the client number of each host, the time of the first record.
#[derive(Debug, Default)]
pub struct ClfFormat {
    clients: HashMap<Vec<u8>, u32>,
    times: TimeOrigin,
}

impl RecordFormat<[u8]> for ClfFormat {
    fn passes_over(&mut self, line: &[u8]) -> Result<bool, String> {
        Ok(line.iter().all(u8::is_ascii_whitespace))
    }

    fn parse(&mut self, line: &[u8]) -> Result<TraceRecord, String> {
        let p = parse_clf_line(line)?;
        let next_id = self.clients.len() as u32;
        let client = match self.clients.get(p.host) {
            Some(&id) => id,
            None => {
                self.clients.insert(p.host.to_vec(), next_id);
                next_id
            }
        };
        Ok(TraceRecord {
            time: Some(self.times.seconds_since_first(p.unix_time)),
            client,
            method: p.method,
            target: p.target,
            size: p.size,
            status: p.status,
            class: None,
        })
    }
}

/// The fields of one parsed log line.
#[derive(Debug, PartialEq)]
pub(crate) struct ClfLine<'a> {
    pub(crate) host: &'a [u8],
    pub(crate) unix_time: i64,
    pub(crate) method: Method,
    pub(crate) target: String,
    pub(crate) status: u16,
    pub(crate) size: u64,
}

/// Parse one Common or Combined Log Format line; anything after the size is ignored.
pub(crate) fn parse_clf_line(line: &[u8]) -> Result<ClfLine<'_>, String> {
    let host_end = line.iter().position(|&b| b == b' ').ok_or("no space after the host")?;
    let host = &line[..host_end];
    if host.is_empty() {
        return Err("empty host".into());
    }
    let rest = &line[host_end..];
    let open = rest.iter().position(|&b| b == b'[').ok_or("no `[date]`")?;
    let close = rest[open..].iter().position(|&b| b == b']').ok_or("no `]` closing the date")? + open;
    let date = std::str::from_utf8(&rest[open + 1..close]).map_err(|_| "date is not text".to_string())?;
    let unix_time = parse_clf_time(date).ok_or_else(|| format!("bad date `{date}`"))?;
    let rest = trim_start(&rest[close + 1..]);
    let rest = rest.strip_prefix(b"\"").ok_or("no quoted request after the date")?;
    let (request, rest) = quoted(rest).ok_or("request line has no closing quote")?;
    let (method, target) = split_request(&request)?;
    let rest = trim_start(rest);
    let (status_tok, rest) = token(rest);
    let status = match status_tok {
        b"-" => 0,
        t if t.len() == 3 && t.iter().all(u8::is_ascii_digit) => {
            t.iter().fold(0u16, |acc, &d| acc * 10 + u16::from(d - b'0'))
        }
        t => return Err(format!("bad status `{}`", String::from_utf8_lossy(t))),
    };
    let (size_tok, _) = token(trim_start(rest));
    let size = match size_tok {
        b"-" => 0,
        t => std::str::from_utf8(t)
            .ok()
            .and_then(|s| s.parse::<u64>().ok())
            .ok_or_else(|| format!("bad size `{}`", String::from_utf8_lossy(t)))?,
    };
    Ok(ClfLine { host, unix_time, method, target, status, size })
}

fn trim_start(s: &[u8]) -> &[u8] {
    let n = s.iter().take_while(|&&b| b == b' ' || b == b'\t').count();
    &s[n..]
}

fn token(s: &[u8]) -> (&[u8], &[u8]) {
    let n = s.iter().position(|&b| b == b' ' || b == b'\t').unwrap_or(s.len());
    (&s[..n], &s[n..])
}

/// The contents of a quoted string whose opening quote is already consumed, with `\"` and
/// `\\` unescaped (Apache escapes both); the rest after the closing quote.
fn quoted(s: &[u8]) -> Option<(Vec<u8>, &[u8])> {
    let mut out = Vec::with_capacity(64);
    let mut i = 0;
    while i < s.len() {
        match s[i] {
            b'\\' if i + 1 < s.len() && (s[i + 1] == b'"' || s[i + 1] == b'\\') => {
                out.push(s[i + 1]);
                i += 2;
            }
            b'"' => return Some((out, &s[i + 1..])),
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    None
}

/// `METHOD target [HTTP/x.y]`; a target with spaces in it is kept whole (encoded as `%20`).
fn split_request(request: &[u8]) -> Result<(Method, String), String> {
    let request = trim_start(request);
    let (method, rest) = token(request);
    if method.is_empty() || !method.iter().all(|b| b.is_ascii_alphabetic() || *b == b'-' || *b == b'_') {
        return Err(format!("request line `{}` has no method", String::from_utf8_lossy(request)));
    }
    let mut rest = trim_start(rest);
    while rest.last().is_some_and(|b| *b == b' ' || *b == b'\t') {
        rest = &rest[..rest.len() - 1];
    }
    if let Some(sp) = rest.iter().rposition(|&b| b == b' ')
        && rest[sp + 1..].starts_with(b"HTTP/")
    {
        rest = &rest[..sp];
        while rest.last() == Some(&b' ') {
            rest = &rest[..rest.len() - 1];
        }
    }
    if rest.is_empty() {
        return Err(format!("request line `{}` has no target", String::from_utf8_lossy(request)));
    }
    let method = std::str::from_utf8(method).expect("checked ASCII");
    Ok((Method::from_token(method), target_from_bytes(rest)))
}

const MONTHS: [&str; 12] =
    ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];

/// Seconds since the Unix epoch of a CLF date `10/Oct/2000:13:55:36 -0700` (a leap second
/// `:60` counts as the next minute's first).
pub fn parse_clf_time(s: &str) -> Option<i64> {
    let b = s.as_bytes();
    if b.len() != 26 || b[2] != b'/' || b[6] != b'/' || b[11] != b':' || b[14] != b':' || b[17] != b':' {
        return None;
    }
    if b[20] != b' ' || (b[21] != b'+' && b[21] != b'-') {
        return None;
    }
    let num = |r: std::ops::Range<usize>| -> Option<i64> {
        let t = &s[r];
        t.bytes().all(|c| c.is_ascii_digit()).then(|| t.parse().ok())?
    };
    let day = u8::try_from(num(0..2)?).ok()?;
    let month = MONTHS.iter().position(|m| *m == &s[3..6])? as u8 + 1;
    let year = i32::try_from(num(7..11)?).ok()?;
    let (hh, mm, ss) = (num(12..14)?, num(15..17)?, num(18..20)?);
    let (zh, zm) = (num(22..24)?, num(24..26)?);
    if hh > 23 || mm > 59 || ss > 60 || zm > 59 {
        return None;
    }
    let date = Date::from_calendar_date(year, Month::try_from(month).ok()?, day).ok()?;
    let offset = (zh * 3600 + zm * 60) * if b[21] == b'-' { -1 } else { 1 };
    Some(date.midnight().assume_utc().unix_timestamp() + hh * 3600 + mm * 60 + ss - offset)
}

/// The CLF date (in UTC, `+0000`) of `unix` seconds since the epoch, or `None` beyond the
/// years ±999,999.
pub fn format_clf_time(unix: i64) -> Option<String> {
    let t = OffsetDateTime::from_unix_timestamp(unix).ok()?;
    Some(format!(
        "{:02}/{}/{:04}:{:02}:{:02}:{:02} +0000",
        t.day(),
        MONTHS[usize::from(u8::from(t.month())) - 1],
        t.year(),
        t.hour(),
        t.minute(),
        t.second()
    ))
}

/// Writer of Common Log Format lines: host `c<client>`, the record's time added to a base
/// Unix time (whole seconds, UTC), `HTTP/1.1`, `-` for a zero size. Lossy: fractions of a
/// second, classes and client numbering do not survive a round trip.
pub struct ClfWriter<W: Write> {
    sink: RecordSink<W>,
    base_unix: i64,
}

/// Default base time of `ClfWriter`: 2000-01-01T00:00:00Z.
pub const CLF_DEFAULT_BASE_UNIX: i64 = 946_684_800;

impl<W: Write> ClfWriter<W> {
    /// A writer to `out` (called `path` in errors) placing time 0 at `base_unix`.
    pub fn new(out: W, path: impl Into<String>, base_unix: i64) -> Self {
        ClfWriter { sink: RecordSink::new(out, path, "clf"), base_unix }
    }

    /// Write one record.
    pub fn write(&mut self, r: &TraceRecord) -> Result<(), TraceError> {
        let out_of_range = |t: f64| format!("time {t} is out of range");
        let secs = match r.time {
            Some(t) if !t.is_finite() || t.abs() > 1e12 => return Err(self.sink.unwritable(out_of_range(t))),
            Some(t) => t.floor() as i64,
            None => 0,
        };
        let Some(stamp) = self.base_unix.checked_add(secs).and_then(format_clf_time) else {
            return Err(self.sink.unwritable(out_of_range(r.time.unwrap_or(0.0))));
        };
        let target = wire_target(&r.target);
        let target = target.replace('"', "%22");
        let size = if r.size == 0 { "-".to_string() } else { r.size.to_string() };
        writeln!(
            self.sink.line(),
            "c{} - - [{}] \"{} {} HTTP/1.1\" {:03} {}",
            r.client,
            stamp,
            r.method,
            target,
            r.status.min(999),
            size
        )
        .expect("writing to memory");
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

    const LOG: &str = concat!(
        "127.0.0.1 - frank [10/Oct/2000:13:55:36 -0700] \"GET /apache_pb.gif HTTP/1.0\" 200 2326\n",
        "10.0.0.2 - - [10/Oct/2000:13:55:40 -0700] \"HEAD /index.html HTTP/1.1\" 304 - \"http://ref/\" \"Mozilla/4.0 (compatible)\"\n",
        "garbage line\n",
        "127.0.0.1 - - [10/Oct/2000:20:56:00 +0000] \"GET /a b.html HTTP/1.0\" 404 12\n",
        "127.0.0.1 - - [10/Oct/2000:13:55:37 -0700] \"-\" 408 -\n",
        "10.0.0.3 - - [31/Feb/2000:13:55:37 -0700] \"GET / HTTP/1.0\" 200 1\n",
        "10.0.0.3 - - [10/Oct/2000:13:56:36 -0700] \"GET /q?x=\\\"y\\\" HTTP/1.0\" 200 7\n",
    );

    #[test]
    fn clf_and_combined_lines_give_sizes_statuses_relative_times_and_host_clients() {
        let mut reader = ClfReader::new(LOG.as_bytes(), "access.log", 10, 1 << 16);
        let recs: Vec<TraceRecord> = reader.by_ref().collect::<Result<_, _>>().unwrap();
        assert_eq!(recs.len(), 4);
        assert_eq!(recs[0], TraceRecord { time: Some(0.0), ..TraceRecord::get("/apache_pb.gif", 2326) });
        assert_eq!(recs[1].method, Method::Head);
        assert_eq!((recs[1].status, recs[1].size, recs[1].client), (304, 0, 1));
        assert_eq!(recs[1].time, Some(4.0));
        // 20:56:00 UTC is 13:56:00 -0700: 24 s after the first record.
        assert_eq!(recs[2].time, Some(24.0));
        assert_eq!((recs[2].target.as_str(), recs[2].client, recs[2].status), ("/a%20b.html", 0, 404));
        assert_eq!(recs[3].target, "/q?x=\"y\"");
        assert_eq!((recs[3].client, recs[3].time), (2, Some(60.0)));
        assert_eq!(reader.malformed(), 3);
        let lines: Vec<u64> = reader
            .malformed_samples()
            .iter()
            .map(|e| match e {
                TraceError::Malformed { line, .. } => *line,
                other => panic!("{other}"),
            })
            .collect();
        assert_eq!(lines, [3, 5, 6]);
        assert!(reader.malformed_samples()[2].to_string().contains("bad date"));
    }

    #[test]
    fn clf_reader_fails_once_malformed_lines_exceed_the_limit() {
        let mut reader = ClfReader::new(LOG.as_bytes(), "access.log", 2, 1 << 16);
        let results: Vec<_> = reader.by_ref().collect();
        assert!(
            matches!(results.last(), Some(Err(TraceError::TooManyMalformed { line: 6, .. }))),
            "{results:?}"
        );
        assert!(reader.next().is_none());
    }

    #[test]
    fn clf_dates_convert_both_ways_including_leap_days_and_offsets() {
        assert_eq!(parse_clf_time("01/Jan/1970:00:00:00 +0000"), Some(0));
        assert_eq!(parse_clf_time("10/Oct/2000:13:55:36 -0700"), Some(971_211_336));
        assert_eq!(parse_clf_time("29/Feb/2000:00:00:00 +0100"), Some(951_778_800));
        assert_eq!(parse_clf_time("29/Feb/1999:00:00:00 +0000"), None);
        assert_eq!(parse_clf_time("10/Oct/2000:13:55:36"), None);
        for t in [0, 951_782_400, 971_211_336, 4_102_444_799, -86_401] {
            assert_eq!(parse_clf_time(&format_clf_time(t).unwrap()), Some(t), "{t}");
        }
    }

    /// Fixed dates, leap years (2000 and 2024 are, 1900 and 2100 are not) and the extremes,
    /// byte for byte as the hand-written calendar gave them before the `time` crate.
    #[test]
    fn clf_dates_are_those_of_the_proleptic_gregorian_calendar() {
        for (unix, stamp) in [
            (0, "01/Jan/1970:00:00:00 +0000"),
            (-1, "31/Dec/1969:23:59:59 +0000"),
            (971_186_136, "10/Oct/2000:13:55:36 +0000"),
            (951_868_799, "29/Feb/2000:23:59:59 +0000"),
            (951_868_800, "01/Mar/2000:00:00:00 +0000"),
            (1_709_210_096, "29/Feb/2024:12:34:56 +0000"),
            (1_735_689_599, "31/Dec/2024:23:59:59 +0000"),
            (-2_203_977_600, "28/Feb/1900:00:00:00 +0000"),
            (-2_203_891_200, "01/Mar/1900:00:00:00 +0000"),
            (4_107_456_000, "28/Feb/2100:00:00:00 +0000"),
            (4_107_542_400, "01/Mar/2100:00:00:00 +0000"),
            (253_402_300_799, "31/Dec/9999:23:59:59 +0000"),
            (253_402_300_800, "01/Jan/10000:00:00:00 +0000"),
            (1_000_000_000_000, "27/Sep/33658:01:46:40 +0000"),
            (-1_000_000_000_000, "05/Apr/-29719:22:13:20 +0000"),
            (-62_167_219_200, "01/Jan/0000:00:00:00 +0000"),
            (-62_167_219_201, "31/Dec/-001:23:59:59 +0000"),
        ] {
            assert_eq!(format_clf_time(unix).as_deref(), Some(stamp), "{unix}");
        }
        assert_eq!(format_clf_time(i64::MAX), None);
        for (stamp, unix) in [
            ("29/Feb/1900:00:00:00 +0000", None),
            ("29/Feb/2100:00:00:00 +0000", None),
            ("29/Feb/2024:12:34:56 +9959", Some(1_708_850_156)),
            ("28/Feb/1900:23:59:60 +0000", Some(-2_203_891_200)),
            ("31/Dec/9999:23:59:59 -0000", Some(253_402_300_799)),
            ("01/Jan/0000:00:00:00 +0000", Some(-62_167_219_200)),
            ("00/Jan/2000:00:00:00 +0000", None),
            ("31/Apr/2000:00:00:00 +0000", None),
            ("30/Apr/2000:24:00:00 +0000", None),
            ("10/oct/2000:13:55:36 -0700", None),
            ("10/Oct/+200:13:55:36 -0700", None),
        ] {
            assert_eq!(parse_clf_time(stamp), unix, "{stamp}");
        }
    }

    #[test]
    fn clf_writer_output_reads_back_with_whole_second_times() {
        let mut w = ClfWriter::new(Vec::new(), "out", CLF_DEFAULT_BASE_UNIX);
        w.write(&TraceRecord { time: Some(1.7), client: 4, ..TraceRecord::get("/a\"b", 10) }).unwrap();
        w.write(&TraceRecord { time: Some(3.2), status: 404, ..TraceRecord::get("/c", 0) }).unwrap();
        let bytes = w.finish().unwrap();
        let text = String::from_utf8(bytes.clone()).unwrap();
        assert!(
            text.starts_with("c4 - - [01/Jan/2000:00:00:01 +0000] \"GET /a%22b HTTP/1.1\" 200 10\n"),
            "{text}"
        );
        let back: Vec<TraceRecord> =
            ClfReader::new(&bytes[..], "out", 0, 1 << 16).collect::<Result<_, _>>().unwrap();
        assert_eq!(
            back[1],
            TraceRecord { time: Some(2.0), client: 1, status: 404, ..TraceRecord::get("/c", 0) }
        );
    }
}
