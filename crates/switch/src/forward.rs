//! Head rewriting at the switch: the request head sent to a node (origin-form target, HTTP/1.1,
//! hop-by-hop headers and headers named by `Connection` dropped, `X-Forwarded-For` and
//! `X-Forwarded-Proto` added), the response head sent to a client when the node's head cannot
//! pass through unchanged, and the switch's own responses (errors, the redirect to HTTPS).

use locus_http::{RequestHead, ResponseHead, TargetForm, Version, has_token, is_hop_by_hop, reason_phrase};
use std::io::Write;
use std::net::IpAddr;

/// Request headers never forwarded to a node (besides the hop-by-hop ones).
fn is_dropped_request_header(name: &[u8]) -> bool {
    is_hop_by_hop(name) && !name.eq_ignore_ascii_case(b"transfer-encoding")
        || name.eq_ignore_ascii_case(b"expect")
}

/// Whether the client's `Connection` header names `name` as hop-by-hop.
fn named_by_connection(head: &RequestHead, buf: &[u8], name: &[u8]) -> bool {
    let Ok(name) = std::str::from_utf8(name) else { return false };
    head.headers
        .iter()
        .filter(|h| h.name.get(buf).eq_ignore_ascii_case(b"connection"))
        .any(|h| has_token(h.value.get(buf), name))
}

/// Write the request head for the node into `out`.
///
/// `default_host` is used when the client sent none (HTTP/1.0); an absolute-form target's
/// authority replaces the Host header.
pub fn write_request_head(
    out: &mut Vec<u8>,
    head: &RequestHead,
    buf: &[u8],
    client_ip: Option<IpAddr>,
    proto: Option<&str>,
    default_host: &str,
) {
    out.extend_from_slice(head.method_span.get(buf));
    out.push(b' ');
    match head.form {
        TargetForm::Absolute => out.extend_from_slice(head.path_str(buf).as_bytes()),
        _ => out.extend_from_slice(head.target.get(buf)),
    }
    out.extend_from_slice(b" HTTP/1.1\r\n");
    let has_connection_header =
        head.headers.iter().any(|h| h.name.get(buf).eq_ignore_ascii_case(b"connection"));
    let mut forwarded_done = false;
    let mut host_done = false;
    for h in &head.headers {
        let name = h.name.get(buf);
        if is_dropped_request_header(name) {
            continue;
        }
        if has_connection_header && named_by_connection(head, buf, name) {
            continue;
        }
        // The client's own claim is not passed on when the switch states the scheme.
        if proto.is_some() && name.eq_ignore_ascii_case(b"x-forwarded-proto") {
            continue;
        }
        if name.eq_ignore_ascii_case(b"host") {
            host_done = true;
            if let (TargetForm::Absolute, Some(auth)) = (head.form, head.authority) {
                out.extend_from_slice(b"Host: ");
                out.extend_from_slice(auth.get(buf));
                out.extend_from_slice(b"\r\n");
                continue;
            }
        }
        out.extend_from_slice(name);
        out.extend_from_slice(b": ");
        out.extend_from_slice(h.value.get(buf));
        if name.eq_ignore_ascii_case(b"x-forwarded-for")
            && let Some(ip) = client_ip
            && !forwarded_done
        {
            let _ = write!(out, ", {ip}");
            forwarded_done = true;
        }
        out.extend_from_slice(b"\r\n");
    }
    if !host_done {
        out.extend_from_slice(b"Host: ");
        match (head.form, head.authority) {
            (TargetForm::Absolute, Some(auth)) => out.extend_from_slice(auth.get(buf)),
            _ => out.extend_from_slice(default_host.as_bytes()),
        }
        out.extend_from_slice(b"\r\n");
    }
    if let Some(ip) = client_ip
        && !forwarded_done
    {
        let _ = write!(out, "X-Forwarded-For: {ip}\r\n");
    }
    if let Some(proto) = proto {
        let _ = write!(out, "X-Forwarded-Proto: {proto}\r\n");
    }
    out.extend_from_slice(b"\r\n");
}

/// A 308 to `path` (with its query) on `host` (its port dropped) over HTTPS on `port`.
pub fn https_redirect(host: &str, path: &str, port: u16) -> Vec<u8> {
    let name = match host.strip_prefix('[') {
        Some(v6) => format!("[{}]", v6.split(']').next().unwrap_or("")),
        None => host.split(':').next().unwrap_or("").to_string(),
    };
    let location =
        if port == 443 { format!("https://{name}{path}") } else { format!("https://{name}:{port}{path}") };
    let mut out = Vec::with_capacity(200 + location.len());
    let _ = write!(out, "HTTP/1.1 308 Permanent Redirect\r\nServer: locus\r\nDate: ");
    locus_http::http_date_now(&mut out);
    let _ = write!(out, "\r\nLocation: {location}\r\nContent-Length: 0\r\n\r\n");
    out
}

/// How the switch sends the node's response body on to the client.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BodyRelay {
    /// Bytes unchanged.
    AsIs,
    /// Chunked from the node, decoded for an HTTP/1.0 client (the connection then closes).
    Dechunk,
}

/// Write the response head for the client into `out`: the node's status and end-to-end
/// headers, plus the switch's own `Connection` header.
pub fn write_response_head(
    out: &mut Vec<u8>,
    resp: &ResponseHead,
    buf: &[u8],
    client_version: Version,
    keep_alive: bool,
    relay: BodyRelay,
) {
    let _ = write!(out, "HTTP/1.1 {} ", resp.status);
    let reason = resp.reason.get(buf);
    if reason.is_empty() {
        out.extend_from_slice(reason_phrase(resp.status).as_bytes());
    } else {
        out.extend_from_slice(reason);
    }
    out.extend_from_slice(b"\r\n");
    for h in &resp.headers {
        let name = h.name.get(buf);
        if is_hop_by_hop(name)
            && !(name.eq_ignore_ascii_case(b"transfer-encoding") && relay == BodyRelay::AsIs)
        {
            continue;
        }
        out.extend_from_slice(name);
        out.extend_from_slice(b": ");
        out.extend_from_slice(h.value.get(buf));
        out.extend_from_slice(b"\r\n");
    }
    if !keep_alive {
        out.extend_from_slice(b"Connection: close\r\n");
    } else if client_version == Version::Http10 {
        out.extend_from_slice(b"Connection: keep-alive\r\n");
    }
    out.extend_from_slice(b"\r\n");
}

/// A complete short response generated by the switch itself (errors, 100 Continue excluded).
pub fn write_error_response(out: &mut Vec<u8>, status: u16, close: bool) {
    let reason = reason_phrase(status);
    let body_len = reason.len() + 1;
    let _ = write!(out, "HTTP/1.1 {status} {reason}\r\nServer: locus\r\nDate: ");
    locus_http::http_date_now(out);
    let _ = write!(out, "\r\nContent-Type: text/plain\r\nContent-Length: {body_len}\r\n");
    if close {
        out.extend_from_slice(b"Connection: close\r\n");
    }
    let _ = write!(out, "\r\n{reason}\n");
}

#[cfg(test)]
mod tests {
    use super::*;
    use locus_http::{Limits, parse_request, parse_response};

    fn request(raw: &str, ip: Option<IpAddr>) -> String {
        let mut head = RequestHead::default();
        assert!(parse_request(raw.as_bytes(), &Limits::default(), &mut head).unwrap());
        let mut out = Vec::new();
        write_request_head(&mut out, &head, raw.as_bytes(), ip, None, "10.0.0.1:80");
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn request_head_drops_hop_by_hop_and_connection_named_headers() {
        let out = request(
            "GET /a HTTP/1.1\r\nHost: h\r\nConnection: keep-alive, X-Secret\r\nKeep-Alive: 5\r\nX-Secret: s\r\nUpgrade: ws\r\nTE: trailers\r\nAccept: */*\r\n\r\n",
            None,
        );
        assert_eq!(out, "GET /a HTTP/1.1\r\nHost: h\r\nAccept: */*\r\n\r\n");
    }

    #[test]
    fn request_head_adds_forwarded_for_and_host_for_http10() {
        let ip: IpAddr = "192.0.2.7".parse().unwrap();
        let out = request("GET /a HTTP/1.0\r\n\r\n", Some(ip));
        assert_eq!(out, "GET /a HTTP/1.1\r\nHost: 10.0.0.1:80\r\nX-Forwarded-For: 192.0.2.7\r\n\r\n");
        let out = request("GET /a HTTP/1.1\r\nHost: h\r\nX-Forwarded-For: 1.2.3.4\r\n\r\n", Some(ip));
        assert_eq!(out, "GET /a HTTP/1.1\r\nHost: h\r\nX-Forwarded-For: 1.2.3.4, 192.0.2.7\r\n\r\n");
    }

    #[test]
    fn absolute_form_becomes_origin_form_with_the_authority_as_host() {
        let out = request("GET http://site.example/x?y=1 HTTP/1.1\r\nHost: other\r\n\r\n", None);
        assert_eq!(out, "GET /x?y=1 HTTP/1.1\r\nHost: site.example\r\n\r\n");
    }

    #[test]
    fn chunked_request_keeps_transfer_encoding_and_drops_expect() {
        let out = request(
            "POST /u HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\nExpect: 100-continue\r\n\r\n",
            None,
        );
        assert_eq!(out, "POST /u HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n");
    }

    #[test]
    fn response_head_rebuild_strips_hop_by_hop_and_sets_connection() {
        let raw = "HTTP/1.1 200 OK\r\nConnection: keep-alive\r\nKeep-Alive: timeout=5\r\nContent-Length: 3\r\nX-A: b\r\n\r\n";
        let mut resp = ResponseHead::default();
        assert!(parse_response(raw.as_bytes(), 16384, false, &mut resp).unwrap());
        let mut out = Vec::new();
        write_response_head(&mut out, &resp, raw.as_bytes(), Version::Http10, true, BodyRelay::AsIs);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nX-A: b\r\nConnection: keep-alive\r\n\r\n"
        );
        let raw = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";
        assert!(parse_response(raw.as_bytes(), 16384, false, &mut resp).unwrap());
        let mut out = Vec::new();
        write_response_head(&mut out, &resp, raw.as_bytes(), Version::Http10, false, BodyRelay::Dechunk);
        assert_eq!(String::from_utf8(out).unwrap(), "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n");
    }

    #[test]
    fn error_response_is_complete_and_framed() {
        let mut out = Vec::new();
        write_error_response(&mut out, 503, true);
        let text = String::from_utf8(out).unwrap();
        assert!(text.starts_with("HTTP/1.1 503 Service Unavailable\r\n"));
        assert!(text.contains("Content-Length: 20\r\n"));
        assert!(text.ends_with("\r\n\r\nService Unavailable\n"));
    }

    #[test]
    fn forwarded_proto_replaces_the_clients_own_claim() {
        let raw = "GET /a HTTP/1.1\r\nHost: h\r\nX-Forwarded-Proto: https\r\n\r\n";
        let mut head = RequestHead::default();
        assert!(parse_request(raw.as_bytes(), &Limits::default(), &mut head).unwrap());
        let mut out = Vec::new();
        write_request_head(&mut out, &head, raw.as_bytes(), None, Some("http"), "n:80");
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "GET /a HTTP/1.1\r\nHost: h\r\nX-Forwarded-Proto: http\r\n\r\n"
        );
    }

    #[test]
    fn the_https_redirect_keeps_path_and_query_and_swaps_the_port() {
        let location = |host: &str, port: u16| {
            let out = String::from_utf8(https_redirect(host, "/a/b?x=1", port)).unwrap();
            assert!(out.starts_with("HTTP/1.1 308 "), "{out}");
            out.lines().find_map(|l| l.strip_prefix("Location: ")).unwrap().to_string()
        };
        assert_eq!(location("example.com:8080", 443), "https://example.com/a/b?x=1");
        assert_eq!(location("example.com", 8443), "https://example.com:8443/a/b?x=1");
        assert_eq!(location("[::1]:80", 8443), "https://[::1]:8443/a/b?x=1");
    }
}
