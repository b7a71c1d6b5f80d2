//! The cooperative-caching requests between nodes, all plain `GET`s on the main HTTP
//! listener under `/locus/coop/`:
//! `lookup?k=KEY&v=VALIDATOR&from=HOST:PORT` (to a document's home: 200 with the document
//! if the home holds that version, else 404 with `X-Locus-Coop-Holders: host:port,…`),
//! `fetch?k=KEY&v=VALIDATOR` (to a holder: 200 with the document or 404; memory only), and
//! `notice?from=HOST:PORT&i=KEY&e=KEY…` (inserts `i` and evictions `e`, in order; 204).
//! A 200 carries `X-Locus-Coop-Validator`. The validator is the file's length and mtime
//! (`LEN-MTIME_NS`), from the requester's own `stat` of its storage.

use std::borrow::Cow;
use std::fmt;
use std::str::FromStr;
use std::time::{SystemTime, UNIX_EPOCH};

use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, percent_decode_str, utf8_percent_encode};

use crate::doc_store::DocSource;

pub const PREFIX: &str = "/locus/coop/";
pub const VALIDATOR_HEADER: &str = "X-Locus-Coop-Validator";
pub const HOLDERS_HEADER: &str = "X-Locus-Coop-Holders";

/// Characters left as they are in a key in a query.
const KEY_SET: &AsciiSet = &NON_ALPHANUMERIC.remove(b'/').remove(b'-').remove(b'_').remove(b'.').remove(b'~');

/// The identity of one version of a document: its length and modification time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Validator {
    pub len: u64,
    pub mtime_ns: u128,
}

impl Validator {
    pub fn new(len: u64, mtime: SystemTime) -> Validator {
        Validator { len, mtime_ns: mtime.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos()) }
    }

    /// The validator of a cached document read from a file (none for other sources).
    pub fn of_source(source: &DocSource) -> Option<Validator> {
        match source {
            DocSource::File { len, mtime, .. } => Some(Validator::new(*len, *mtime)),
            DocSource::Origin => None,
        }
    }
}

impl fmt::Display for Validator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.len, self.mtime_ns)
    }
}

impl FromStr for Validator {
    type Err = ();

    fn from_str(s: &str) -> Result<Validator, ()> {
        let (len, mtime) = s.trim().split_once('-').ok_or(())?;
        Ok(Validator { len: len.parse().map_err(|_| ())?, mtime_ns: mtime.parse().map_err(|_| ())? })
    }
}

/// What a coop request asks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CoopAsk {
    Lookup,
    Fetch,
}

/// The target of a lookup or fetch.
pub fn document_target(ask: CoopAsk, key: &str, v: Validator, from: &str) -> String {
    let key = utf8_percent_encode(key, KEY_SET);
    match ask {
        CoopAsk::Lookup => format!("{PREFIX}lookup?k={key}&v={v}&from={from}"),
        CoopAsk::Fetch => format!("{PREFIX}fetch?k={key}&v={v}"),
    }
}

/// Notice targets from `from` carrying `notices` (insert?, key) in order, each target at
/// most about `max_len` bytes long.
pub fn notice_targets<'a>(
    from: &str,
    notices: impl IntoIterator<Item = (bool, &'a str)>,
    max_len: usize,
) -> Vec<String> {
    let start = format!("{PREFIX}notice?from={from}");
    let mut targets = Vec::new();
    let mut current = start.clone();
    for (insert, key) in notices {
        let item = format!("&{}={}", if insert { 'i' } else { 'e' }, utf8_percent_encode(key, KEY_SET));
        if current.len() + item.len() > max_len && current.len() > start.len() {
            targets.push(std::mem::replace(&mut current, start.clone()));
        }
        current.push_str(&item);
    }
    if current.len() > start.len() {
        targets.push(current);
    }
    targets
}

/// The `name=value` pairs of a query, values percent-decoded (`None` if one is not UTF-8).
pub fn query_pairs(query: &str) -> Option<Vec<(&str, Cow<'_, str>)>> {
    query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (name, value) = p.split_once('=').unwrap_or((p, ""));
            percent_decode_str(value).decode_utf8().ok().map(|v| (name, v))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validators_round_trip_and_refuse_garbage() {
        let v = Validator::new(1234, UNIX_EPOCH + std::time::Duration::new(1_700_000_000, 5));
        assert_eq!(v.to_string(), "1234-1700000000000000005");
        assert_eq!(v.to_string().parse(), Ok(v));
        for bad in ["", "12", "a-1", "1-b", "-1-2"] {
            assert!(bad.parse::<Validator>().is_err(), "{bad}");
        }
    }

    #[test]
    fn keys_survive_the_query_with_any_character() {
        let key = "/a b/ü&v=1?x%2F.html";
        let v = Validator { len: 1, mtime_ns: 2 };
        let target = document_target(CoopAsk::Lookup, key, v, "h:1");
        let (path, query) = target.split_once('?').unwrap();
        assert_eq!(path, "/locus/coop/lookup");
        let pairs = query_pairs(query).unwrap();
        assert_eq!(pairs[0], ("k", Cow::Borrowed(key)));
        assert_eq!(pairs[1].1.parse::<Validator>(), Ok(v));
        assert_eq!(pairs[2].1, "h:1");
    }

    #[test]
    fn notices_are_split_into_bounded_targets_in_order() {
        let keys: Vec<String> = (0..50).map(|i| format!("/doc/{i:03}.html")).collect();
        let targets = notice_targets("h:1", keys.iter().map(|k| (true, k.as_str())), 200);
        assert!(targets.len() > 3);
        let mut seen = Vec::new();
        for t in &targets {
            assert!(t.len() <= 200, "{t}");
            let pairs = query_pairs(t.split_once('?').unwrap().1).unwrap();
            assert_eq!(pairs[0], ("from", Cow::Borrowed("h:1")));
            seen.extend(pairs[1..].iter().map(|(_, k)| k.to_string()));
        }
        assert_eq!(seen, keys);
        assert!(notice_targets("h:1", [], 200).is_empty());
    }
}
