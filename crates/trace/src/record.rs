//! `TraceRecord`: one request of a trace, the unit every reader yields and every writer,
//! generator and statistic consumes; and `TimeOrigin`, which makes a log's times relative.

use locus_core::{Method, RequestInfo, target_hash};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// One request of a trace.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TraceRecord {
    /// Arrival time in seconds since the start of the trace (the first record of a log),
    /// if the trace has times. May be negative for a log that is not in time order.
    #[serde(default)]
    pub time: Option<f64>,
    /// Client (or session) id: small integers assigned per distinct host, WC98 client id,
    /// or the generator's client number.
    #[serde(default)]
    pub client: u32,
    /// Request method.
    #[serde(default, with = "method_token")]
    pub method: Method,
    /// Request target as sent on the wire (origin-form: path and query).
    pub target: String,
    /// Response size in bytes (body bytes as logged); 0 if unknown.
    #[serde(default)]
    pub size: u64,
    /// HTTP status code; 0 if unknown.
    #[serde(default = "default_status")]
    pub status: u16,
    /// Dynamic cost class, for requests that run code rather than read a file.
    #[serde(default)]
    pub class: Option<u16>,
}

fn default_status() -> u16 {
    200
}

impl TraceRecord {
    /// A GET of `target` answered with `size` bytes and status 200, client 0, no time.
    pub fn get(target: impl Into<String>, size: u64) -> TraceRecord {
        TraceRecord {
            time: None,
            client: 0,
            method: Method::Get,
            target: target.into(),
            size,
            status: 200,
            class: None,
        }
    }

    /// The request as a policy sees it: size hint from `size` (if non-zero) and the class.
    pub fn request_info(&self) -> RequestInfo<'_> {
        RequestInfo {
            method: self.method,
            target: &self.target,
            target_hash: target_hash(&self.target),
            size_hint: (self.size > 0).then_some(self.size),
            class: self.class,
            if_modified_since: None,
        }
    }
}

/// The request target for raw bytes from a log, as it would go on the wire: ASCII control
/// characters, space, DEL and bytes that are not UTF-8 are percent-encoded (`%09`); all
/// else, including `%` and non-ASCII UTF-8, is kept as is. Idempotent on its own output.
pub fn target_from_bytes(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len());
    for chunk in bytes.utf8_chunks() {
        for c in chunk.valid().chars() {
            if c.is_ascii_control() || c == ' ' {
                push_percent(&mut out, c as u8);
            } else {
                out.push(c);
            }
        }
        for &b in chunk.invalid() {
            push_percent(&mut out, b);
        }
    }
    out
}

/// `target_from_bytes` for a string, borrowing it when nothing needs encoding.
pub fn wire_target(target: &str) -> std::borrow::Cow<'_, str> {
    if target.bytes().any(|b| b.is_ascii_control() || b == b' ') {
        std::borrow::Cow::Owned(target_from_bytes(target.as_bytes()))
    } else {
        std::borrow::Cow::Borrowed(target)
    }
}

fn push_percent(out: &mut String, b: u8) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    out.push('%');
    out.push(HEX[(b >> 4) as usize] as char);
    out.push(HEX[(b & 15) as usize] as char);
}

/// Serde for `Method` as its token (`"GET"`), since `locus_core::Method` has no serde.
mod method_token {
    use super::*;

    pub fn serialize<S: Serializer>(method: &Method, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(method)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Method, D::Error> {
        let token = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        Ok(Method::from_token(&token))
    }
}

/// The time of a log's first record, from which its records' times are counted.
#[derive(Debug, Default)]
pub(crate) struct TimeOrigin {
    first: Option<i64>,
}

impl TimeOrigin {
    /// Seconds from the first time given (which this call sets, giving 0) to `unix`.
    pub(crate) fn seconds_since_first(&mut self, unix: i64) -> f64 {
        let first = *self.first.get_or_insert(unix);
        (unix - first) as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_info_carries_size_hint_only_when_known_and_class() {
        let mut r = TraceRecord::get("/a.html", 0);
        assert_eq!(r.request_info().size_hint, None);
        r.size = 10;
        r.class = Some(3);
        let info = r.request_info();
        assert_eq!(info.size_hint, Some(10));
        assert_eq!(info.class, Some(3));
        assert_eq!(info.target_hash, target_hash("/a.html"));
    }

    #[test]
    fn target_from_bytes_encodes_controls_space_and_invalid_utf8_only() {
        assert_eq!(target_from_bytes(b"/a b\tc%20\xff\xc3\xa9"), "/a%20b%09c%20%FF\u{e9}");
        assert_eq!(wire_target("/plain?q=1"), "/plain?q=1");
        let once = target_from_bytes(b"/x y\n");
        assert_eq!(wire_target(&once), once);
    }

    #[test]
    fn json_uses_method_token_and_defaults_missing_fields() {
        let r = TraceRecord { method: Method::Head, ..TraceRecord::get("/x", 5) };
        let json = serde_json::to_string(&r).unwrap();
        assert!(json.contains("\"method\":\"HEAD\""), "{json}");
        let back: TraceRecord = serde_json::from_str(&json).unwrap();
        assert_eq!(back, r);
        let minimal: TraceRecord = serde_json::from_str(r#"{"target":"/y"}"#).unwrap();
        assert_eq!(minimal, TraceRecord::get("/y", 0));
    }

    #[test]
    fn times_count_from_the_first_one_given_and_may_be_negative() {
        let mut origin = TimeOrigin::default();
        assert_eq!(origin.seconds_since_first(1_000), 0.0);
        assert_eq!(origin.seconds_since_first(1_024), 24.0);
        assert_eq!(origin.seconds_since_first(990), -10.0);
    }
}
