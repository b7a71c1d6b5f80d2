//! A node's HTTP/1.1 response as an HTTP/2 client gets it: the status and the end-to-end
//! fields (hop-by-hop ones, those the node's `Connection` names, and `transfer-encoding`
//! dropped; names lowercased; a field HTTP/2 cannot carry left out), and a chunked body's
//! trailer section as HTTP/2 trailers. Values are slices of the head's own buffer, never copied.

use bytes::Bytes;
use http::{HeaderMap, HeaderName, HeaderValue, Response, StatusCode};
use locus_http::{ResponseHead, has_token, is_hop_by_hop};

/// The response head (`resp`, parsed from `buf`) for the client; `None` when the node's status
/// is not one HTTP/2 can carry (the caller answers 502).
pub fn to_h2(resp: &ResponseHead, buf: &Bytes) -> Option<Response<()>> {
    let status = StatusCode::from_u16(resp.status).ok()?;
    let mut out = Response::new(());
    *out.status_mut() = status;
    *out.headers_mut() = HeaderMap::with_capacity(resp.headers.len());
    let connection: Vec<&[u8]> = resp
        .headers
        .iter()
        .filter(|h| h.name.get(buf).eq_ignore_ascii_case(b"connection"))
        .map(|h| h.value.get(buf))
        .collect();
    let headers = out.headers_mut();
    for h in &resp.headers {
        let name = h.name.get(buf);
        let named = std::str::from_utf8(name).is_ok_and(|n| connection.iter().any(|c| has_token(c, n)));
        if is_hop_by_hop(name) || named {
            continue;
        }
        match (HeaderName::from_bytes(name), HeaderValue::from_maybe_shared(buf.slice(h.value.range()))) {
            (Ok(n), Ok(v)) => {
                headers.append(n, v);
            }
            _ => tracing::debug!("a response field HTTP/2 cannot carry was left out"),
        }
    }
    Some(out)
}

/// A chunked body's trailer section (field lines and the final empty line) as trailers;
/// `None` when it holds no field HTTP/2 may carry.
pub fn trailers(section: &[u8]) -> Option<HeaderMap> {
    let mut map = HeaderMap::new();
    for line in section.split(|&b| b == b'\n') {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let Some(colon) = line.iter().position(|&b| b == b':') else { continue };
        let name = &line[..colon];
        if is_hop_by_hop(name) || name.eq_ignore_ascii_case(b"content-length") {
            continue;
        }
        insert(&mut map, name, line[colon + 1..].trim_ascii());
    }
    (!map.is_empty()).then_some(map)
}

/// Add one field, lowercased; a name or value HTTP/2 cannot carry is left out.
fn insert(headers: &mut HeaderMap, name: &[u8], value: &[u8]) {
    match (HeaderName::from_bytes(name), HeaderValue::from_bytes(value)) {
        (Ok(n), Ok(v)) => {
            headers.append(n, v);
        }
        _ => tracing::debug!("a response field HTTP/2 cannot carry was left out"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use locus_http::parse_response;

    fn parsed(raw: &[u8]) -> ResponseHead {
        let mut head = ResponseHead::default();
        assert!(parse_response(raw, 8192, false, &mut head).unwrap());
        head
    }

    #[test]
    fn hop_by_hop_and_connection_named_fields_stay_behind() {
        let raw = b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nConnection: keep-alive, X-Hop\r\nX-Hop: 1\r\n\
Keep-Alive: timeout=5\r\nETag: \"a\"\r\nSet-Cookie: a=1\r\nSet-Cookie: b=2\r\n\r\nabc";
        let head = parsed(raw);
        let r = to_h2(&head, &Bytes::from_static(raw)).unwrap();
        assert_eq!(r.status(), 200);
        let h = r.headers();
        assert_eq!(h["content-length"], "3");
        assert_eq!(h["etag"], "\"a\"");
        assert_eq!(h.get_all("set-cookie").iter().count(), 2);
        for gone in ["connection", "x-hop", "keep-alive", "transfer-encoding"] {
            assert!(!h.contains_key(gone), "{gone}");
        }
        let chunked = b"HTTP/1.1 404 Not Found\r\nTransfer-Encoding: chunked\r\n\r\n";
        let r = to_h2(&parsed(chunked), &Bytes::from_static(chunked)).unwrap();
        assert_eq!(r.status(), 404);
        assert!(r.headers().is_empty());
    }

    #[test]
    fn a_trailer_section_becomes_trailers_without_framing_fields() {
        let t = trailers(b"X-Sum: abc\r\nContent-Length: 9\r\nX-Two:  2 \r\n\r\n").unwrap();
        assert_eq!(t["x-sum"], "abc");
        assert_eq!(t["x-two"], "2");
        assert!(!t.contains_key("content-length"));
        assert!(trailers(b"\r\n").is_none());
    }
}
