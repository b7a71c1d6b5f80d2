//! An HTTP/2 request as its node gets it. Its pseudo-headers and fields are checked against
//! HTTP/2's rules (RFC 9113 §8.2–8.3: no connection-specific field, `te` only `trailers`,
//! `:path` in origin form, `:authority` without user info and agreeing with any `host`), then
//! written as an HTTP/1.1 head — cookies joined, a body without a length sent chunked — and
//! parsed by the same strict `parse_request` every HTTP/1.1 request goes through.

use bytes::Bytes;
use h2::Reason;
use http::request::Parts;
use http::{HeaderMap, Method};
use locus_http::{Limits, RequestError, RequestHead, is_hop_by_hop, parse_request};

/// Why a stream is not forwarded.
#[derive(Debug, PartialEq, Eq)]
pub enum Refusal {
    /// A malformed request: reset the stream with this code.
    Reset(Reason, &'static str),
    /// Answer with this status (431 for a head over the limit, 405 for CONNECT, 417...).
    Status(u16),
}

/// A stream's request in HTTP/1.1 form: `buf` holds the head `head` was parsed from.
pub struct StreamRequest {
    pub buf: Vec<u8>,
    pub head: RequestHead,
    /// The body goes to the node in chunked framing (HTTP/2 gave no content-length).
    pub chunked: bool,
}

/// A field that only means something on one HTTP/1.1 connection, malformed in HTTP/2: the
/// hop-by-hop fields but `te` (RFC 9113 §8.2.2 allows `te: trailers`).
fn connection_specific(name: &http::HeaderName) -> bool {
    name != http::header::TE && is_hop_by_hop(name.as_str().as_bytes())
}

/// Check the request `parts` (`end_of_stream`: no body follows its head) and write it as
/// HTTP/1.1 under `limits`.
pub fn to_http1(parts: &Parts, end_of_stream: bool, limits: &Limits) -> Result<StreamRequest, Refusal> {
    let malformed = |why| Err(Refusal::Reset(Reason::PROTOCOL_ERROR, why));
    if parts.method == Method::CONNECT {
        return Err(Refusal::Status(405));
    }
    check_fields(&parts.headers)?;
    let target = match parts.uri.path_and_query().map(|p| p.as_str()) {
        Some(p) if p.starts_with('/') => p,
        Some("*") if parts.method == Method::OPTIONS => "*",
        _ => return malformed("a :path that is not in origin form"),
    };
    match parts.uri.scheme_str() {
        Some("http" | "https") => {}
        _ => return malformed("a :scheme other than http or https"),
    }
    let host = authority(parts)?;
    let chunked = !end_of_stream && !parts.headers.contains_key(http::header::CONTENT_LENGTH);
    let mut buf = Vec::with_capacity(512);
    buf.extend_from_slice(parts.method.as_str().as_bytes());
    buf.push(b' ');
    buf.extend_from_slice(target.as_bytes());
    buf.extend_from_slice(b" HTTP/1.1\r\nhost: ");
    buf.extend_from_slice(host.as_bytes());
    buf.extend_from_slice(b"\r\n");
    write_fields(&mut buf, &parts.headers);
    if chunked {
        buf.extend_from_slice(b"transfer-encoding: chunked\r\n");
    }
    buf.extend_from_slice(b"\r\n");
    let mut head = RequestHead::default();
    match parse_request(&buf, limits, &mut head) {
        Ok(true) => Ok(StreamRequest { buf, head, chunked }),
        Ok(false) => malformed("a head that does not end"),
        Err(
            e @ (RequestError::HeadTooLarge(_)
            | RequestError::TooManyHeaders(_)
            | RequestError::ExpectationFailed),
        ) => Err(Refusal::Status(e.status())),
        Err(e) => {
            tracing::debug!("HTTP/2 request refused: {e}");
            malformed("a field HTTP/1.1 refuses")
        }
    }
}

/// No connection-specific field; `te` only as `trailers`.
fn check_fields(headers: &HeaderMap) -> Result<(), Refusal> {
    if headers.keys().any(connection_specific) {
        return Err(Refusal::Reset(Reason::PROTOCOL_ERROR, "a connection-specific field"));
    }
    if headers.get_all(http::header::TE).iter().any(|v| !v.as_bytes().eq_ignore_ascii_case(b"trailers")) {
        return Err(Refusal::Reset(Reason::PROTOCOL_ERROR, "te other than trailers"));
    }
    Ok(())
}

/// The host the request names: `:authority` (without user info, agreeing with a `host`
/// field when both are sent), else the one `host` field.
fn authority(parts: &Parts) -> Result<String, Refusal> {
    let malformed = |why| Err(Refusal::Reset(Reason::PROTOCOL_ERROR, why));
    let hosts: Vec<_> = parts.headers.get_all(http::header::HOST).iter().collect();
    if hosts.len() > 1 {
        return malformed("more than one host field");
    }
    let host_field = hosts.first().map(|v| v.as_bytes());
    match parts.uri.authority() {
        Some(a) if a.as_str().contains('@') => malformed("user info in :authority"),
        Some(a) if a.as_str().is_empty() => malformed("an empty :authority"),
        Some(a) => match host_field {
            Some(h) if !h.eq_ignore_ascii_case(a.as_str().as_bytes()) => {
                malformed("a host field that differs from :authority")
            }
            _ => Ok(a.as_str().to_string()),
        },
        None => match host_field.and_then(|h| std::str::from_utf8(h).ok()) {
            Some(h) if !h.is_empty() => Ok(h.to_string()),
            _ => malformed("neither :authority nor host"),
        },
    }
}

/// The fields as HTTP/1.1 lines: `host` (written already) left out, `cookie` fields (HTTP/2
/// may split them) joined into one with "; " (RFC 9113 §8.2.3).
fn write_fields(buf: &mut Vec<u8>, headers: &HeaderMap) {
    let mut cookies = headers.get_all(http::header::COOKIE).iter();
    if let Some(first) = cookies.next() {
        buf.extend_from_slice(b"cookie: ");
        buf.extend_from_slice(first.as_bytes());
        for more in cookies {
            buf.extend_from_slice(b"; ");
            buf.extend_from_slice(more.as_bytes());
        }
        buf.extend_from_slice(b"\r\n");
    }
    for (name, value) in headers {
        if name == http::header::HOST || name == http::header::COOKIE {
            continue;
        }
        buf.extend_from_slice(name.as_str().as_bytes());
        buf.extend_from_slice(b": ");
        buf.extend_from_slice(value.as_bytes());
        buf.extend_from_slice(b"\r\n");
    }
}

/// A request's trailers as a chunked body's end: the last chunk, the fields, the empty line.
pub fn last_chunk(trailers: Option<&HeaderMap>) -> Bytes {
    let mut out = b"0\r\n".to_vec();
    for (name, value) in trailers.into_iter().flatten() {
        if connection_specific(name) || name == http::header::CONTENT_LENGTH {
            continue;
        }
        out.extend_from_slice(name.as_str().as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(value.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"\r\n");
    Bytes::from(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use locus_http::BodyKind;

    fn parts(build: http::request::Builder) -> Parts {
        build.body(()).unwrap().into_parts().0
    }

    fn get(path: &str) -> http::request::Builder {
        http::Request::get(format!("https://example.com{path}"))
    }

    #[test]
    fn a_request_becomes_the_http1_head_a_node_expects() {
        let p =
            parts(get("/a/b?c=1").header("cookie", "x=1").header("cookie", "y=2").header("accept", "*/*"));
        let r = to_http1(&p, true, &Limits::default()).unwrap();
        let text = String::from_utf8(r.buf.clone()).unwrap();
        assert_eq!(
            text,
            "GET /a/b?c=1 HTTP/1.1\r\nhost: example.com\r\ncookie: x=1; y=2\r\naccept: */*\r\n\r\n"
        );
        assert_eq!(r.head.path_str(&r.buf), "/a/b?c=1");
        assert_eq!(r.head.body, BodyKind::Empty);
        assert!(!r.chunked);
    }

    #[test]
    fn a_body_without_length_goes_chunked_and_one_with_a_length_keeps_it() {
        let p = parts(http::Request::post("https://h/up"));
        let r = to_http1(&p, false, &Limits::default()).unwrap();
        assert!(r.chunked);
        assert_eq!(r.head.body, BodyKind::Chunked);
        let p = parts(http::Request::post("https://h/up").header("content-length", "5"));
        let r = to_http1(&p, false, &Limits::default()).unwrap();
        assert!(!r.chunked);
        assert_eq!(r.head.body, BodyKind::Length(5));
    }

    #[test]
    fn connection_specific_fields_te_and_bad_hosts_are_malformed_never_forwarded() {
        let limits = Limits::default();
        for (name, value) in [
            ("connection", "close"),
            ("keep-alive", "5"),
            ("proxy-connection", "x"),
            ("transfer-encoding", "chunked"),
            ("upgrade", "websocket"),
            ("te", "gzip"),
            ("host", "other.example"),
        ] {
            let p = parts(get("/").header(name, value));
            assert!(
                matches!(to_http1(&p, true, &limits), Err(Refusal::Reset(Reason::PROTOCOL_ERROR, _))),
                "{name}"
            );
        }
        assert!(to_http1(&parts(get("/").header("te", "trailers")), true, &limits).is_ok());
        assert!(to_http1(&parts(get("/").header("host", "EXAMPLE.com")), true, &limits).is_ok());
        let userinfo = parts(http::Request::get("https://u:p@example.com/"));
        assert!(matches!(to_http1(&userinfo, true, &limits), Err(Refusal::Reset(..))));
        let ftp = parts(http::Request::get("ftp://example.com/"));
        assert!(matches!(to_http1(&ftp, true, &limits), Err(Refusal::Reset(..))));
    }

    #[test]
    fn connect_is_refused_and_a_head_over_the_limits_is_answered_431() {
        let limits = Limits { max_head_bytes: 256, max_headers: 4 };
        let connect = parts(http::Request::builder().method("CONNECT").uri("example.com:443"));
        assert_eq!(to_http1(&connect, true, &limits).err(), Some(Refusal::Status(405)));
        let big = parts(get("/").header("x-big", "v".repeat(300)));
        assert_eq!(to_http1(&big, true, &limits).err(), Some(Refusal::Status(431)));
        let mut many = get("/");
        for i in 0..5 {
            many = many.header(format!("x-{i}"), "v");
        }
        assert_eq!(to_http1(&parts(many), true, &limits).err(), Some(Refusal::Status(431)));
    }

    #[test]
    fn trailers_end_a_chunked_body_without_connection_fields() {
        let mut t = HeaderMap::new();
        t.insert("x-sum", "abc".parse().unwrap());
        t.insert("connection", "close".parse().unwrap());
        assert_eq!(&last_chunk(Some(&t))[..], b"0\r\nx-sum: abc\r\n\r\n");
        assert_eq!(&last_chunk(None)[..], b"0\r\n\r\n");
    }
}
