//! Requests the switch answers itself, before any node is chosen, in every mode that parses
//! requests (proxy; splice and handoff on the first request of a connection): CONNECT (405),
//! a path that climbs above the root once percent-decoded (400), and an absolute-form target
//! naming a host the switch does not serve (404). No back-end is ever asked for these.
//!
//! The hosts the switch serves, for an absolute-form target (`GET http://host/x`; its host
//! replaces the Host header, RFC 9112 §3.2.2, so the Host header is not consulted): the
//! configured `server_names`, the IP address the client connected to, and `localhost` when
//! that address is a loopback one. Names compare case-insensitively; the port is not compared.

use crate::state::Shared;
use locus_core::Method;
use locus_http::{RequestHead, TargetForm, authority_host, climbs_above_root};
use std::net::{IpAddr, SocketAddr};
use tokio::net::TcpStream;

/// The status the switch answers `head` (read from `client`) with itself, or `None` to route it.
pub fn refusal(head: &RequestHead, buf: &[u8], shared: &Shared, client: &TcpStream) -> Option<u16> {
    refusal_for(head, buf, &shared.config().server_names, || client.local_addr())
}

/// `refusal` for a request that came over a connection to `local` (an HTTP/2 stream's).
pub fn refusal_at(head: &RequestHead, buf: &[u8], shared: &Shared, local: Option<SocketAddr>) -> Option<u16> {
    refusal_for(head, buf, &shared.config().server_names, || {
        local.ok_or_else(|| std::io::Error::other("no local address"))
    })
}

/// `refusal` for these server names; `local` gives the address the client connected to
/// (asked only for an absolute-form target).
fn refusal_for(
    head: &RequestHead,
    buf: &[u8],
    server_names: &[String],
    local: impl FnOnce() -> std::io::Result<SocketAddr>,
) -> Option<u16> {
    if head.method == Method::Connect {
        return Some(405);
    }
    if climbs_above_root(head.path.get(buf)) {
        tracing::debug!(target = head.target_str(buf), "refused: the path climbs above the root");
        return Some(400);
    }
    if head.form == TargetForm::Absolute {
        let host = head.authority.map(|a| authority_host(a.get(buf))).unwrap_or_default();
        let local = local().ok().map(|a| a.ip().to_canonical());
        if !is_served_host(host, server_names, local) {
            tracing::debug!(target = head.target_str(buf), "refused: a host the switch does not serve");
            return Some(404);
        }
    }
    None
}

/// Whether `host` (an authority's host, `[v6]` in brackets) is one the switch serves.
fn is_served_host(host: &[u8], server_names: &[String], local: Option<IpAddr>) -> bool {
    let host = std::str::from_utf8(host).unwrap_or_default();
    if server_names.iter().any(|n| n.eq_ignore_ascii_case(host)) {
        return true;
    }
    let Some(local) = local else { return false };
    let literal = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')).unwrap_or(host);
    match literal.parse::<IpAddr>() {
        Ok(ip) => ip.to_canonical() == local,
        Err(_) => local.is_loopback() && host.eq_ignore_ascii_case("localhost"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use locus_http::{Limits, parse_request};

    fn check(raw: &str, names: &[&str], local: &str) -> Option<u16> {
        let mut head = RequestHead::default();
        assert!(parse_request(raw.as_bytes(), &Limits::default(), &mut head).unwrap(), "{raw}");
        let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        let local: SocketAddr = local.parse().unwrap();
        refusal_for(&head, raw.as_bytes(), &names, || Ok(local))
    }

    #[test]
    fn a_path_above_the_root_is_400_in_origin_and_absolute_form() {
        for target in ["/../x", "/%2e%2e/x", "/%2E%2E/x", "/a/../../b", "http://10.0.0.1/../x"] {
            let raw = format!("GET {target} HTTP/1.1\r\nHost: h\r\n\r\n");
            assert_eq!(check(&raw, &[], "10.0.0.1:80"), Some(400), "{target}");
        }
        assert_eq!(check("GET /a/../b HTTP/1.1\r\nHost: h\r\n\r\n", &[], "10.0.0.1:80"), None);
    }

    #[test]
    fn an_absolute_target_must_name_a_server_name_or_the_address_connected_to() {
        let get = |target: &str| format!("GET {target} HTTP/1.1\r\nHost: other.example\r\n\r\n");
        let served = ["www.example.com"];
        assert_eq!(check(&get("http://other.example/x"), &served, "10.0.0.1:80"), Some(404));
        assert_eq!(check(&get("http://WWW.Example.com:8080/x"), &served, "10.0.0.1:80"), None);
        assert_eq!(check(&get("http://10.0.0.1/x"), &[], "10.0.0.1:80"), None);
        assert_eq!(check(&get("http://10.0.0.2/x"), &[], "10.0.0.1:80"), Some(404));
        assert_eq!(check(&get("http://[::1]:80/x"), &[], "[::1]:80"), None);
        assert_eq!(check(&get("http://127.0.0.1/x"), &[], "[::ffff:127.0.0.1]:80"), None);
        assert_eq!(check(&get("http://localhost/x"), &[], "127.0.0.1:80"), None);
        assert_eq!(check(&get("http://localhost/x"), &[], "10.0.0.1:80"), Some(404));
        assert_eq!(check(&get("/x"), &[], "10.0.0.1:80"), None, "origin form: Host is not checked");
    }

    #[test]
    fn connect_is_405() {
        assert_eq!(
            check("CONNECT a.example:443 HTTP/1.1\r\nHost: a.example\r\n\r\n", &[], "10.0.0.1:80"),
            Some(405)
        );
    }
}
