//! `Wc98Reader` for the 1998 World Cup web site's binary access logs (Arlitt & Jin):
//! 20-byte big-endian records (timestamp, clientID, objectID, size: u32; method, status,
//! type, server: u8), decoded with the tables of the WC98 tools' README and definitions.

use std::io::Read;

use locus_core::Method;

use crate::fixed_records::FixedRecords;
use crate::record::{TimeOrigin, TraceRecord};
use crate::record_reader::{RecordFormat, RecordReader};

/// Size of one WC98 record in bytes.
pub const WC98_RECORD_BYTES: usize = 20;

/// Methods by the WC98 `method` byte (`enum {GET = 0, HEAD, POST, PUT, DELETE, TRACE,
/// OPTIONS, CONNECT, OTHER_METHODS}`).
const WC98_METHODS: [Method; 9] = [
    Method::Get,
    Method::Head,
    Method::Post,
    Method::Put,
    Method::Delete,
    Method::Trace,
    Method::Options,
    Method::Connect,
    Method::Other,
];

/// Status codes by the low 6 bits of the WC98 `status` byte (`SC_100 = 0` … `SC_505 = 36`);
/// index 37 is the tools' "other" code, read as 0 (unknown).
const WC98_STATUS_CODES: [u16; 38] = [
    100, 101, // 0-1
    200, 201, 202, 203, 204, 205, 206, // 2-8
    300, 301, 302, 303, 304, 305, // 9-14
    400, 401, 402, 403, 404, 405, 406, 407, 408, 409, 410, 411, 412, 413, 414, 415, // 15-30
    500, 501, 502, 503, 504, 505, // 31-36
    0,   // 37: other
];

/// Target suffixes by the WC98 `type` byte (`HTML = 0, IMAGE, AUDIO, VIDEO, JAVA, FORMATTED,
/// DYNAMIC, TEXT, COMPRESSED, PROGRAMS, DIRECTORY, ICL, OTHER_TYPES`).
const WC98_TYPE_SUFFIXES: [&str; 13] =
    [".html", ".gif", ".wav", ".mpg", ".class", ".pdf", ".cgi", ".txt", ".zip", ".exe", "/", ".icl", ""];

/// The `size` value the WC98 logs use for "no size logged" (the tools print `-`).
const WC98_NO_SIZE: u32 = u32::MAX;

/// One decoded WC98 record, before it becomes a `TraceRecord`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Wc98Record {
    /// Seconds since the Unix epoch (GMT).
    pub timestamp: u32,
    /// Client id (one per IP address, stable across the whole data set).
    pub client_id: u32,
    /// Object (URL) id, stable across the whole data set.
    pub object_id: u32,
    /// Response bytes (`u32::MAX` = none logged).
    pub size: u32,
    /// Method byte.
    pub method: u8,
    /// HTTP version (high 2 bits) and status index (low 6 bits).
    pub status: u8,
    /// File type byte.
    pub file_type: u8,
    /// Region (high 3 bits) and server number.
    pub server: u8,
}

impl Wc98Record {
    /// Decode 20 big-endian bytes.
    pub fn from_bytes(b: &[u8; WC98_RECORD_BYTES]) -> Wc98Record {
        let u32_at = |i: usize| u32::from_be_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        Wc98Record {
            timestamp: u32_at(0),
            client_id: u32_at(4),
            object_id: u32_at(8),
            size: u32_at(12),
            method: b[16],
            status: b[17],
            file_type: b[18],
            server: b[19],
        }
    }

    /// Encode as 20 big-endian bytes (for fixtures and tools).
    pub fn to_bytes(&self) -> [u8; WC98_RECORD_BYTES] {
        let mut b = [0u8; WC98_RECORD_BYTES];
        b[0..4].copy_from_slice(&self.timestamp.to_be_bytes());
        b[4..8].copy_from_slice(&self.client_id.to_be_bytes());
        b[8..12].copy_from_slice(&self.object_id.to_be_bytes());
        b[12..16].copy_from_slice(&self.size.to_be_bytes());
        b[16] = self.method;
        b[17] = self.status;
        b[18] = self.file_type;
        b[19] = self.server;
        b
    }

    /// Whether every byte field is inside the WC98 tables.
    pub fn is_plausible(&self) -> bool {
        usize::from(self.method) < WC98_METHODS.len()
            && usize::from(self.status & 0x3f) < WC98_STATUS_CODES.len()
            && usize::from(self.file_type) < WC98_TYPE_SUFFIXES.len()
    }

    /// The HTTP status code (0 for the tools' "other").
    pub fn status_code(&self) -> Option<u16> {
        WC98_STATUS_CODES.get(usize::from(self.status & 0x3f)).copied()
    }

    /// The request target synthesised for this object: `/obj/<objectID>` plus a suffix for
    /// its type (`.html`, `.gif`, …; `/` for a directory).
    pub fn target(&self) -> Option<String> {
        let suffix = WC98_TYPE_SUFFIXES.get(usize::from(self.file_type))?;
        Some(format!("/obj/{}{}", self.object_id, suffix))
    }
}

/// Streaming reader of WC98 binary logs (uncompressed: pipe `.gz` files through `gunzip -c`).
/// Times are seconds relative to the first record; `client` is the WC98 client id.
/// A record whose method, status or type byte is outside the tables, or a truncated last
/// record, is malformed (its "line" is the 1-based record number).
pub type Wc98Reader<R> = RecordReader<FixedRecords<R, WC98_RECORD_BYTES>, Wc98Format>;

impl<R: Read> Wc98Reader<R> {
    /// A reader of `input`, called `path` in errors, tolerating `max_malformed` bad records.
    pub fn new(input: R, path: impl Into<String>, max_malformed: u64) -> Self {
        RecordReader::with_format(FixedRecords::new(input), Wc98Format::default(), path, max_malformed)
    }
}

/// How `Wc98Reader` reads a record: decoded with the WC98 tables, timed from the first record.
#[derive(Debug, Default)]
pub struct Wc98Format {
    times: TimeOrigin,
}

impl RecordFormat<[u8; WC98_RECORD_BYTES]> for Wc98Format {
    fn passes_over(&mut self, _: &[u8; WC98_RECORD_BYTES]) -> Result<bool, String> {
        Ok(false)
    }

    fn parse(&mut self, bytes: &[u8; WC98_RECORD_BYTES]) -> Result<TraceRecord, String> {
        let w = Wc98Record::from_bytes(bytes);
        let (Some(status), Some(target), Some(&method)) =
            (w.status_code(), w.target(), WC98_METHODS.get(usize::from(w.method)))
        else {
            return Err(format!(
                "record outside the WC98 tables (method {}, status index {}, type {})",
                w.method,
                w.status & 0x3f,
                w.file_type
            ));
        };
        Ok(TraceRecord {
            time: Some(self.times.seconds_since_first(i64::from(w.timestamp))),
            client: w.client_id,
            method,
            target,
            size: if w.size == WC98_NO_SIZE { 0 } else { u64::from(w.size) },
            status,
            class: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::TraceError;

    /// A hand-written fixture: three good records (one with no size), one with a method byte
    /// out of the table, and a truncated tail.
    fn fixture() -> Vec<u8> {
        let mut bytes = Vec::new();
        // June 1998, client 7, object 42 (HTML), 1500 bytes, GET, HTTP/1.0 200.
        bytes.extend_from_slice(&[
            0x35, 0x7E, 0x74, 0x40, 0, 0, 0, 7, 0, 0, 0, 42, 0, 0, 0x05, 0xDC, 0, 0x42, 0, 0x21,
        ]);
        // 3 s later, client 9, object 43 (IMAGE), no size, HEAD, HTTP/1.1 304 (index 13).
        bytes.extend_from_slice(&[
            0x35, 0x7E, 0x74, 0x43, 0, 0, 0, 9, 0, 0, 0, 43, 0xFF, 0xFF, 0xFF, 0xFF, 1, 0x8D, 1, 0x60,
        ]);
        // Method byte 9 is outside the table.
        bytes
            .extend_from_slice(&[0x35, 0x7E, 0x74, 0x44, 0, 0, 0, 9, 0, 0, 0, 44, 0, 0, 0, 1, 9, 0x42, 0, 0]);
        // 5 s after the first, object 44 is a DIRECTORY, 404 (index 19), "other" method.
        bytes.extend_from_slice(&[
            0x35, 0x7E, 0x74, 0x45, 0, 0, 0, 7, 0, 0, 0, 44, 0, 0, 0, 100, 8, 0x53, 10, 0,
        ]);
        bytes.extend_from_slice(&[0x35, 0x7E, 0x74]);
        bytes
    }

    #[test]
    fn wc98_fixture_decodes_times_sizes_statuses_targets_and_skips_bad_records() {
        let bytes = fixture();
        let mut reader = Wc98Reader::new(&bytes[..], "wc_day46_1", 10);
        let recs: Vec<TraceRecord> = reader.by_ref().collect::<Result<_, _>>().unwrap();
        assert_eq!(recs.len(), 3);
        assert_eq!(
            recs[0],
            TraceRecord { time: Some(0.0), client: 7, ..TraceRecord::get("/obj/42.html", 1500) }
        );
        assert_eq!(
            recs[1],
            TraceRecord {
                time: Some(3.0),
                client: 9,
                method: Method::Head,
                status: 304,
                ..TraceRecord::get("/obj/43.gif", 0)
            }
        );
        assert_eq!(
            (recs[2].target.as_str(), recs[2].status, recs[2].method),
            ("/obj/44/", 404, Method::Other)
        );
        assert_eq!(recs[2].time, Some(5.0));
        assert_eq!(reader.malformed(), 2);
        let msgs: Vec<String> = reader.malformed_samples().iter().map(|e| e.to_string()).collect();
        assert!(msgs[0].starts_with("wc_day46_1:3: record outside the WC98 tables (method 9"), "{msgs:?}");
        assert!(
            msgs[1].starts_with("wc_day46_1:5: truncated record: 3 of 20 bytes at byte offset 80"),
            "{msgs:?}"
        );
    }

    #[test]
    fn wc98_record_bytes_round_trip_and_status_table_matches_the_tools() {
        let r = Wc98Record {
            timestamp: 898_000_000,
            client_id: 1,
            object_id: 2,
            size: 3,
            method: 2,
            status: 0x80 | 36,
            file_type: 6,
            server: 0x61,
        };
        assert_eq!(Wc98Record::from_bytes(&r.to_bytes()), r);
        assert_eq!(r.status_code(), Some(505));
        assert_eq!(r.target().as_deref(), Some("/obj/2.cgi"));
        assert_eq!(Wc98Record { status: 15, ..r }.status_code(), Some(400));
        assert_eq!(Wc98Record { status: 37, ..r }.status_code(), Some(0));
        assert_eq!(Wc98Record { status: 38, ..r }.status_code(), None);
    }

    #[test]
    fn wc98_reader_fails_when_malformed_records_exceed_the_limit() {
        let bytes = fixture();
        let results: Vec<_> = Wc98Reader::new(&bytes[..], "w", 0).collect();
        assert!(matches!(results.last(), Some(Err(TraceError::TooManyMalformed { line: 3, .. }))));
    }
}
