//! The `Date` header value, formatted at most once per second per thread.

use std::cell::RefCell;
use std::time::{SystemTime, UNIX_EPOCH};

thread_local! {
    static CACHED: RefCell<(u64, String)> = const { RefCell::new((u64::MAX, String::new())) };
}

/// The current time as an IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`), cached per second.
pub fn http_date_now(out: &mut Vec<u8>) {
    let now = SystemTime::now();
    let secs = now.duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    CACHED.with(|c| {
        let mut c = c.borrow_mut();
        if c.0 != secs {
            c.1 = httpdate::fmt_http_date(now);
            c.0 = secs;
        }
        out.extend_from_slice(c.1.as_bytes());
    });
}

#[cfg(test)]
mod tests {
    #[test]
    fn date_is_imf_fixdate_and_parses_back() {
        let mut v = Vec::new();
        super::http_date_now(&mut v);
        let s = String::from_utf8(v).unwrap();
        assert!(s.ends_with(" GMT") && s.len() == 29, "{s}");
        assert!(httpdate::parse_http_date(&s).is_ok());
    }
}
