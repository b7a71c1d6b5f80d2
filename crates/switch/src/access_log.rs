//! Combined Log Format access log. Each worker formats lines into its own buffer and writes
//! whole lines with one `write` on an O_APPEND file (or standard output), flushing when the
//! buffer fills and on a short timer, so logging never takes a lock on the request path.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::net::IpAddr;
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use time::OffsetDateTime;

/// Where lines go.
pub enum LogSink {
    Stdout,
    File(File),
}

/// Open the sink named in the configuration (`-` is standard output).
pub fn open_sink(path: &Path) -> std::io::Result<LogSink> {
    if path.as_os_str() == "-" {
        return Ok(LogSink::Stdout);
    }
    OpenOptions::new().create(true).append(true).open(path).map(LogSink::File)
}

/// One worker's log buffer.
pub struct AccessLog {
    sink: LogSink,
    buf: Vec<u8>,
    stamp_secs: u64,
    stamp: String,
}

/// What one log line records.
pub struct LogRecord<'a> {
    pub client: IpAddr,
    pub method: &'a [u8],
    pub target: &'a [u8],
    pub version: &'a str,
    pub status: u16,
    pub body_bytes: u64,
    pub referer: Option<&'a [u8]>,
    pub user_agent: Option<&'a [u8]>,
}

const FLUSH_AT: usize = 32 * 1024;

impl AccessLog {
    pub fn new(sink: LogSink) -> AccessLog {
        AccessLog {
            sink,
            buf: Vec::with_capacity(FLUSH_AT + 1024),
            stamp_secs: u64::MAX,
            stamp: String::new(),
        }
    }

    /// Append a Combined Log Format line.
    pub fn record(&mut self, r: &LogRecord<'_>) {
        let now = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
        if now != self.stamp_secs {
            self.stamp = clf_time(now);
            self.stamp_secs = now;
        }
        let b = &mut self.buf;
        let _ = write!(b, "{} - - [{}] \"", r.client, self.stamp);
        escape_into(b, r.method);
        b.push(b' ');
        escape_into(b, r.target);
        if r.status == 0 {
            // A tunnel (splice mode) relays the response without reading its status.
            let _ = write!(b, " {}\" - ", r.version);
        } else {
            let _ = write!(b, " {}\" {} ", r.version, r.status);
        }
        if r.body_bytes == 0 {
            b.push(b'-');
        } else {
            let _ = write!(b, "{}", r.body_bytes);
        }
        for v in [r.referer, r.user_agent] {
            b.extend_from_slice(b" \"");
            match v {
                Some(v) => escape_into(b, v),
                None => b.push(b'-'),
            }
            b.push(b'"');
        }
        b.push(b'\n');
        if self.buf.len() >= FLUSH_AT {
            self.flush();
        }
    }

    /// Write out buffered lines.
    pub fn flush(&mut self) {
        if self.buf.is_empty() {
            return;
        }
        let result = match &mut self.sink {
            LogSink::Stdout => std::io::stdout().lock().write_all(&self.buf),
            LogSink::File(f) => f.write_all(&self.buf),
        };
        if let Err(e) = result {
            tracing::warn!("access log write failed: {e}");
        }
        self.buf.clear();
    }
}

impl Drop for AccessLog {
    fn drop(&mut self) {
        self.flush();
    }
}

/// Quote-safe copy: `"` and `\` are escaped, control and non-ASCII bytes written as `\xHH`.
fn escape_into(out: &mut Vec<u8>, bytes: &[u8]) {
    for &c in bytes {
        match c {
            b'"' | b'\\' => {
                out.push(b'\\');
                out.push(c);
            }
            0x20..=0x7e => out.push(c),
            _ => {
                let _ = write!(out, "\\x{c:02x}");
            }
        }
    }
}

/// `10/Oct/2000:13:55:36 +0000` for a Unix time (UTC; the calendar is the `time` crate's).
fn clf_time(secs: u64) -> String {
    const MONTHS: [&str; 12] =
        ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
    let t = i64::try_from(secs)
        .ok()
        .and_then(|s| OffsetDateTime::from_unix_timestamp(s).ok())
        .unwrap_or(OffsetDateTime::UNIX_EPOCH);
    format!(
        "{:02}/{}/{}:{:02}:{:02}:{:02} +0000",
        t.day(),
        MONTHS[usize::from(u8::from(t.month())) - 1],
        t.year(),
        t.hour(),
        t.minute(),
        t.second()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clf_time_matches_known_dates() {
        assert_eq!(clf_time(0), "01/Jan/1970:00:00:00 +0000");
        assert_eq!(clf_time(971_186_136), "10/Oct/2000:13:55:36 +0000");
        assert_eq!(clf_time(1_709_210_096), "29/Feb/2024:12:34:56 +0000");
        assert_eq!(clf_time(951_868_799), "29/Feb/2000:23:59:59 +0000");
        assert_eq!(clf_time(951_868_800), "01/Mar/2000:00:00:00 +0000");
        assert_eq!(clf_time(4_107_456_000), "28/Feb/2100:00:00:00 +0000");
        assert_eq!(clf_time(4_107_542_400), "01/Mar/2100:00:00:00 +0000");
        assert_eq!(clf_time(1_735_689_599), "31/Dec/2024:23:59:59 +0000");
        assert_eq!(clf_time(253_402_300_799), "31/Dec/9999:23:59:59 +0000");
    }

    #[test]
    fn combined_line_has_every_field_and_escapes_quotes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("access.log");
        {
            let mut log = AccessLog::new(open_sink(&path).unwrap());
            log.record(&LogRecord {
                client: "192.0.2.1".parse().unwrap(),
                method: b"GET",
                target: b"/a\"b",
                version: "HTTP/1.1",
                status: 200,
                body_bytes: 1234,
                referer: None,
                user_agent: Some(b"curl/8"),
            });
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let re_prefix = "192.0.2.1 - - [";
        assert!(text.starts_with(re_prefix), "{text}");
        assert!(text.ends_with("] \"GET /a\\\"b HTTP/1.1\" 200 1234 \"-\" \"curl/8\"\n"), "{text}");
    }
}
