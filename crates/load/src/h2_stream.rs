//! One HTTP/2 exchange as the load client's streams make it: the request for a template
//! (`H2Origin`: scheme and authority of a server; `sendable_path`: which targets HTTP/2 carries
//! unchanged as `:path`), the response read with its body hashed (XXH3-64) as DATA frames
//! arrive and their flow-control capacity released at once, and `error_kind` (with
//! `had_goaway`): an h2 error as the report counts it.

use std::task::{Context, Poll, Waker};

use bytes::Bytes;
use h2::client::{ResponseFuture, SendRequest};
use http::uri::{Authority, PathAndQuery, Scheme};
use http::{Request, Uri};
use xxhash_rust::xxh3::Xxh3;

use crate::error::LoadError;
use crate::response_reader::ResponseSummary;
use crate::stats::ErrorKind;

/// The `:scheme` and `:authority` of one server's requests.
#[derive(Clone, Debug)]
pub struct H2Origin {
    scheme: Scheme,
    authority: Authority,
}

impl H2Origin {
    /// The origin of `base` (`http://host[:port]` or `https://…`, as `ServerTarget::base`).
    pub(crate) fn of(base: &str) -> Result<H2Origin, LoadError> {
        let bad = |message: &str| LoadError::Url { url: base.to_string(), message: message.to_string() };
        let parts = base.parse::<Uri>().map_err(|e| bad(&e.to_string()))?.into_parts();
        match (parts.scheme, parts.authority) {
            (Some(scheme), Some(authority)) => Ok(H2Origin { scheme, authority }),
            _ => Err(bad("an HTTP/2 origin needs a scheme and an authority")),
        }
    }

    /// The request for `method` and `target` on this origin, without a body; `None` when
    /// HTTP/2 cannot carry them (plans leave such targets out before the run).
    pub(crate) fn request(&self, method: locus_core::Method, target: &str) -> Option<Request<()>> {
        let path = h2_path(target)?;
        let uri = Uri::builder()
            .scheme(self.scheme.clone())
            .authority(self.authority.clone())
            .path_and_query(path)
            .build()
            .ok()?;
        Request::builder().method(http_method(method)?).uri(uri).body(()).ok()
    }
}

/// Whether HTTP/2 can send `target` as its `:path` unchanged (the `http` crate refuses some
/// bytes HTTP/1.1 lines carry, and cuts a `#fragment` off).
pub(crate) fn sendable_path(target: &str) -> bool {
    h2_path(target).is_some()
}

/// `target` as HTTP/2's `:path`, when it carries it unchanged.
fn h2_path(target: &str) -> Option<PathAndQuery> {
    PathAndQuery::try_from(target).ok().filter(|p| p.as_str() == target)
}

fn http_method(method: locus_core::Method) -> Option<http::Method> {
    use locus_core::Method as M;
    Some(match method {
        M::Get => http::Method::GET,
        M::Head => http::Method::HEAD,
        M::Post => http::Method::POST,
        M::Put => http::Method::PUT,
        M::Delete => http::Method::DELETE,
        M::Options => http::Method::OPTIONS,
        M::Patch => http::Method::PATCH,
        M::Trace => http::Method::TRACE,
        M::Connect | M::Other => return None,
    })
}

/// Wait for the response on a stream and read its body to the end, hashing it into `hasher`
/// when given and releasing each DATA frame's flow-control capacity as soon as it is hashed.
/// `wire_bytes` is left 0 (the connection counts what it reads).
pub(crate) async fn read_response(
    response: ResponseFuture,
    mut hasher: Option<&mut Xxh3>,
) -> Result<ResponseSummary, h2::Error> {
    let response = response.await?;
    let status = response.status().as_u16();
    let content_length = response
        .headers()
        .get(http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    let mut body = response.into_body();
    if let Some(h) = hasher.as_deref_mut() {
        h.reset();
    }
    let mut body_len = 0u64;
    while let Some(data) = body.data().await {
        let data = data?;
        body_len += data.len() as u64;
        if let Some(h) = hasher.as_deref_mut() {
            h.update(&data);
        }
        body.flow_control().release_capacity(data.len())?;
    }
    Ok(ResponseSummary {
        status,
        content_length,
        body_len,
        xxh3: hasher.map(|h| h.digest()),
        keep_alive: true,
        wire_bytes: 0,
    })
}

/// Whether the connection `send` opens streams on has had a GOAWAY from the server: once one
/// came, the connection's error is the GOAWAY's (a socket closed after it does not replace it).
pub(crate) fn had_goaway(send: &mut SendRequest<Bytes>) -> bool {
    let mut cx = Context::from_waker(Waker::noop());
    matches!(send.poll_ready(&mut cx), Poll::Ready(Err(e)) if e.is_go_away() && e.is_remote())
}

/// How an h2 error on a request is counted: the socket failing is `Closed`; the server's
/// RST_STREAM `Reset`; the server's GOAWAY `GoAway`; a stream the client reset because the
/// response broke the protocol `Framing`; a connection the client gave up on because the
/// server broke HTTP/2 (its own GOAWAY) `Protocol`.
pub(crate) fn error_kind(e: &h2::Error) -> ErrorKind {
    if e.is_io() {
        ErrorKind::Closed
    } else if e.is_go_away() {
        if e.is_remote() { ErrorKind::GoAway } else { ErrorKind::Protocol }
    } else if e.is_reset() {
        if e.is_remote() { ErrorKind::Reset } else { ErrorKind::Framing }
    } else {
        ErrorKind::Closed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_carry_the_origin_method_and_target_unchanged() {
        let origin = H2Origin::of("https://localhost:8443").unwrap();
        let r = origin.request(locus_core::Method::Head, "/a%20b.html?x=1").unwrap();
        assert_eq!(r.method(), http::Method::HEAD);
        assert_eq!(r.uri().to_string(), "https://localhost:8443/a%20b.html?x=1");
        let v6 = H2Origin::of("http://[::1]:8080").unwrap();
        assert_eq!(
            v6.request(locus_core::Method::Get, "/").unwrap().uri().authority().unwrap(),
            "[::1]:8080"
        );
        assert!(origin.request(locus_core::Method::Other, "/").is_none());
        assert!(origin.request(locus_core::Method::Get, "/a#frag").is_none(), "a fragment would be cut");
        assert!(H2Origin::of("/just/a/path").is_err());
    }

    #[test]
    fn sendable_paths_are_those_http2_carries_unchanged() {
        for ok in ["/", "/doc/17", "/a%20b?x=1&y=2", "/~migrate/3/n1/p.html"] {
            assert!(sendable_path(ok), "{ok}");
        }
        for bad in ["/a b", "/a#b", "/\u{1}", ""] {
            assert!(!sendable_path(bad), "{bad:?}");
        }
    }

    #[test]
    fn errors_that_are_not_the_servers_stream_or_goaway_count_as_closed() {
        // Resets and GOAWAYs are counted by kind in the tests against a real server (tests/h2.rs).
        assert_eq!(error_kind(&h2::Error::from(h2::Reason::INTERNAL_ERROR)), ErrorKind::Closed);
    }
}
