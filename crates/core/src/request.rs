//! `RequestInfo`: what a policy sees of a request — method, request target, a stable hash of
//! the target, an optional size hint, an optional cost class and the conditional date.

use std::fmt;

/// HTTP request method, as far as policies and nodes care.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Method {
    #[default]
    Get,
    Head,
    Post,
    Put,
    Delete,
    Options,
    Patch,
    Trace,
    Connect,
    /// Any other token.
    Other,
}

impl Method {
    /// Parse a method token (case-sensitive, as HTTP requires).
    pub fn from_token(token: &str) -> Method {
        match token {
            "GET" => Method::Get,
            "HEAD" => Method::Head,
            "POST" => Method::Post,
            "PUT" => Method::Put,
            "DELETE" => Method::Delete,
            "OPTIONS" => Method::Options,
            "PATCH" => Method::Patch,
            "TRACE" => Method::Trace,
            "CONNECT" => Method::Connect,
            _ => Method::Other,
        }
    }

    /// Idempotent methods (RFC 9110 §9.2.2): safe to retry on another node.
    pub fn is_idempotent(self) -> bool {
        matches!(
            self,
            Method::Get | Method::Head | Method::Put | Method::Delete | Method::Options | Method::Trace
        )
    }
}

impl fmt::Display for Method {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = match self {
            Method::Get => "GET",
            Method::Head => "HEAD",
            Method::Post => "POST",
            Method::Put => "PUT",
            Method::Delete => "DELETE",
            Method::Options => "OPTIONS",
            Method::Patch => "PATCH",
            Method::Trace => "TRACE",
            Method::Connect => "CONNECT",
            Method::Other => "OTHER",
        };
        f.write_str(s)
    }
}

/// Stable 64-bit hash of a request target (XXH3, seed 0): the same in every process and
/// run, so hashing policies keep their mapping across switch restarts and in the simulator.
pub fn target_hash(target: &str) -> u64 {
    xxhash_rust::xxh3::xxh3_64(target.as_bytes())
}

/// The request as a policy sees it.
#[derive(Clone, Copy, Debug)]
pub struct RequestInfo<'a> {
    pub method: Method,
    /// The request target: path and query (origin-form), as the client sent it.
    pub target: &'a str,
    /// `target_hash(target)`, computed once by whoever builds the `RequestInfo`.
    pub target_hash: u64,
    /// Expected response size in bytes, if known (e.g. from a file table).
    pub size_hint: Option<u64>,
    /// Cost class (e.g. a dynamic-content class from a class table), if known.
    pub class: Option<u16>,
    /// The `If-Modified-Since` date, seconds since the Unix epoch, if the request is
    /// conditional (a content sniffer tells an IMS request from a full one by it).
    pub if_modified_since: Option<u64>,
}

impl<'a> RequestInfo<'a> {
    /// A request for `target` with its hash computed; no size hint or class.
    pub fn new(method: Method, target: &'a str) -> RequestInfo<'a> {
        RequestInfo {
            method,
            target,
            target_hash: target_hash(target),
            size_hint: None,
            class: None,
            if_modified_since: None,
        }
    }

    /// A GET for `target`.
    pub fn get(target: &'a str) -> RequestInfo<'a> {
        RequestInfo::new(Method::Get, target)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn target_hash_is_stable_across_calls_and_distinguishes_targets() {
        assert_eq!(target_hash("/a.html"), target_hash("/a.html"));
        assert_ne!(target_hash("/a.html"), target_hash("/b.html"));
        // Pin one value so an accidental change of hash function (which would remap every
        // consistent-hash deployment) fails loudly.
        assert_eq!(target_hash(""), xxhash_rust::xxh3::xxh3_64(b""));
    }

    #[test]
    fn method_round_trips_and_idempotence_matches_rfc() {
        for m in ["GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS", "PATCH", "TRACE", "CONNECT"] {
            assert_eq!(Method::from_token(m).to_string(), m);
        }
        assert_eq!(Method::from_token("get"), Method::Other);
        assert!(Method::Get.is_idempotent());
        assert!(!Method::Post.is_idempotent());
        assert!(!Method::Patch.is_idempotent());
    }
}
