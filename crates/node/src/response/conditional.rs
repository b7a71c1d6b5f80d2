//! Conditional requests on a representation's modification time: `If-Modified-Since`
//! (304 when not modified since the given date) and a date-valued `If-Range`.

use std::time::{SystemTime, UNIX_EPOCH};

/// Parse an HTTP date into seconds since the epoch.
pub fn parse_http_date_secs(value: &[u8]) -> Option<u64> {
    let text = std::str::from_utf8(value).ok()?;
    let t = httpdate::parse_http_date(text.trim()).ok()?;
    t.duration_since(UNIX_EPOCH).ok().map(|d| d.as_secs())
}

/// Seconds since the epoch of a file time (0 for times before the epoch).
pub fn unix_secs(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// Whether a GET or HEAD with `If-Modified-Since: if_modified_since` is answered 304 for a
/// representation last modified at `modified_secs`. An unparsable date is ignored, and so is
/// the header when `If-None-Match` is present (RFC 9110 §13.1.3; this server has no ETags).
pub fn not_modified(
    if_modified_since: Option<&[u8]>,
    if_none_match: bool,
    modified_secs: Option<u64>,
) -> bool {
    if if_none_match {
        return false;
    }
    match (if_modified_since.and_then(parse_http_date_secs), modified_secs) {
        (Some(since), Some(modified)) => modified <= since,
        _ => false,
    }
}

/// Whether a `Range` may be honoured given `If-Range` (`None`: no header). Only a date equal
/// to the representation's modification time allows it; an entity tag never matches.
pub fn if_range_allows(if_range: Option<&[u8]>, modified_secs: Option<u64>) -> bool {
    match if_range {
        None => true,
        Some(v) => parse_http_date_secs(v).is_some_and(|d| Some(d) == modified_secs),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: u64 = 784_111_777; // Sun, 06 Nov 1994 08:49:37 GMT

    #[test]
    fn if_modified_since_gives_304_only_when_not_modified_after_the_date() {
        let d = b"Sun, 06 Nov 1994 08:49:37 GMT";
        assert!(not_modified(Some(d), false, Some(T)));
        assert!(not_modified(Some(d), false, Some(T - 100)));
        assert!(!not_modified(Some(d), false, Some(T + 1)));
        assert!(not_modified(Some(b"Sunday, 06-Nov-94 08:49:37 GMT"), false, Some(T)));
        assert!(not_modified(Some(b"Sun Nov  6 08:49:37 1994"), false, Some(T)));
    }

    #[test]
    fn bad_dates_missing_times_and_if_none_match_disable_304() {
        assert!(!not_modified(Some(b"yesterday"), false, Some(T)));
        assert!(!not_modified(None, false, Some(T)));
        assert!(!not_modified(Some(b"Sun, 06 Nov 1994 08:49:37 GMT"), false, None));
        assert!(!not_modified(Some(b"Sun, 06 Nov 1994 08:49:37 GMT"), true, Some(T)));
    }

    #[test]
    fn if_range_allows_a_range_only_for_the_exact_date() {
        assert!(if_range_allows(None, Some(T)));
        assert!(if_range_allows(Some(b"Sun, 06 Nov 1994 08:49:37 GMT"), Some(T)));
        assert!(!if_range_allows(Some(b"Sun, 06 Nov 1994 08:49:38 GMT"), Some(T)));
        assert!(!if_range_allows(Some(b"\"etag\""), Some(T)));
    }
}
