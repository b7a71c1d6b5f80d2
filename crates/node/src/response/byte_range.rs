//! The `Range` request header for one representation: a single byte range (`bytes=a-b`,
//! `a-`, `-n`) gives a partial response, an unsatisfiable one a 416, and anything else —
//! several ranges, other units, malformed syntax — the whole representation (RFC 9110 §14).

/// What to send for a `Range` header against a representation of a known length.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RangeOutcome {
    /// The whole representation (200).
    Full,
    /// Bytes `start..=end` (206 with `Content-Range: bytes start-end/len`).
    Partial { start: u64, end: u64 },
    /// No byte of the range exists (416 with `Content-Range: bytes */len`).
    Unsatisfiable,
}

fn number(s: &[u8]) -> Option<u64> {
    if s.is_empty() || s.len() > 19 || !s.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(s).ok()?.parse().ok()
}

fn trim(s: &[u8]) -> &[u8] {
    let start = s.iter().position(|&b| b != b' ' && b != b'\t').unwrap_or(s.len());
    let end = s.iter().rposition(|&b| b != b' ' && b != b'\t').map_or(start, |e| e + 1);
    &s[start..end]
}

/// Evaluate a `Range` header value (`None`: no header) for a representation of `len` bytes.
pub fn evaluate_range(header: Option<&[u8]>, len: u64) -> RangeOutcome {
    let Some(value) = header else { return RangeOutcome::Full };
    let value = trim(value);
    let Some(eq) = value.iter().position(|&b| b == b'=') else { return RangeOutcome::Full };
    if !trim(&value[..eq]).eq_ignore_ascii_case(b"bytes") {
        return RangeOutcome::Full;
    }
    let spec = trim(&value[eq + 1..]);
    if spec.contains(&b',') {
        // Several ranges: answered with the whole body (allowed by RFC 9110 §14.2).
        return RangeOutcome::Full;
    }
    let Some(dash) = spec.iter().position(|&b| b == b'-') else { return RangeOutcome::Full };
    let (first, last) = (&spec[..dash], &spec[dash + 1..]);
    if first.is_empty() {
        // Suffix range: the last n bytes.
        let Some(n) = number(last) else { return RangeOutcome::Full };
        if n == 0 || len == 0 {
            return RangeOutcome::Unsatisfiable;
        }
        return RangeOutcome::Partial { start: len - n.min(len), end: len - 1 };
    }
    let Some(start) = number(first) else { return RangeOutcome::Full };
    let end = if last.is_empty() {
        u64::MAX
    } else {
        match number(last) {
            Some(end) if end >= start => end,
            _ => return RangeOutcome::Full,
        }
    };
    if start >= len {
        return RangeOutcome::Unsatisfiable;
    }
    RangeOutcome::Partial { start, end: end.min(len - 1) }
}

#[cfg(test)]
mod tests {
    use super::RangeOutcome::*;
    use super::*;

    fn eval(h: &str, len: u64) -> RangeOutcome {
        evaluate_range(Some(h.as_bytes()), len)
    }

    #[test]
    fn single_ranges_give_partial_content_clamped_to_the_length() {
        assert_eq!(eval("bytes=0-99", 1000), Partial { start: 0, end: 99 });
        assert_eq!(eval("bytes=500-", 1000), Partial { start: 500, end: 999 });
        assert_eq!(eval("bytes=-100", 1000), Partial { start: 900, end: 999 });
        assert_eq!(eval("bytes=-5000", 1000), Partial { start: 0, end: 999 });
        assert_eq!(eval("bytes=990-2000", 1000), Partial { start: 990, end: 999 });
        assert_eq!(eval("bytes=999-999", 1000), Partial { start: 999, end: 999 });
        assert_eq!(eval(" Bytes = 1-2 ", 10), Partial { start: 1, end: 2 });
    }

    #[test]
    fn ranges_past_the_end_or_empty_suffixes_are_unsatisfiable() {
        assert_eq!(eval("bytes=1000-", 1000), Unsatisfiable);
        assert_eq!(eval("bytes=1000-1001", 1000), Unsatisfiable);
        assert_eq!(eval("bytes=-0", 1000), Unsatisfiable);
        assert_eq!(eval("bytes=0-", 0), Unsatisfiable);
        assert_eq!(eval("bytes=-10", 0), Unsatisfiable);
    }

    #[test]
    fn multiple_ranges_other_units_and_malformed_headers_give_the_whole_body() {
        assert_eq!(evaluate_range(None, 10), Full);
        for h in [
            "bytes=0-1,5-6",
            "items=0-1",
            "bytes=5-1",
            "bytes=a-b",
            "bytes=",
            "bytes=-",
            "bytes 0-1",
            "bytes=1-2-3",
            "bytes=+1-2",
            "bytes=99999999999999999999-",
        ] {
            assert_eq!(eval(h, 10), Full, "{h}");
        }
    }
}
