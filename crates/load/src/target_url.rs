//! `TargetUrl`: an `http://` or `https://host[:port][/path]` URL the load is sent to (or an
//! admin listener is read from), with its `Host` header value and its resolved socket address.

use std::fmt;
use std::net::{SocketAddr, ToSocketAddrs};
use std::str::FromStr;

use crate::error::LoadError;

/// A parsed `http://` or `https://` URL.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TargetUrl {
    /// Host name or address as written (IPv6 without brackets).
    pub host: String,
    /// Port (80, or 443 for `https`, when not written).
    pub port: u16,
    /// `https`: the requests go over TLS.
    pub tls: bool,
    /// Path and query (origin-form, `/` when not written).
    pub path: String,
}

impl TargetUrl {
    /// The `Host` header value: `host:port`, or just `host` for the scheme's default port.
    pub fn host_header(&self) -> String {
        let host = if self.host.contains(':') { format!("[{}]", self.host) } else { self.host.clone() };
        if self.port == self.default_port() { host } else { format!("{host}:{}", self.port) }
    }

    /// `http` or `https`.
    pub fn scheme(&self) -> &'static str {
        if self.tls { "https" } else { "http" }
    }

    fn default_port(&self) -> u16 {
        if self.tls { 443 } else { 80 }
    }

    /// Resolve the host to its first socket address (blocking name lookup).
    pub fn resolve(&self) -> Result<SocketAddr, LoadError> {
        let hostport = (self.host.as_str(), self.port);
        let resolved = hostport
            .to_socket_addrs()
            .map_err(|source| LoadError::Resolve { host: self.host_header(), error: source })?;
        let mut addrs: Vec<SocketAddr> = resolved.collect();
        // Prefer IPv4 like most tools do for `localhost`.
        addrs.sort_by_key(|a| !a.is_ipv4());
        addrs.into_iter().next().ok_or_else(|| LoadError::Resolve {
            host: self.host_header(),
            error: std::io::Error::new(std::io::ErrorKind::NotFound, "no address"),
        })
    }
}

impl fmt::Display for TargetUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let host = if self.host.contains(':') { format!("[{}]", self.host) } else { self.host.clone() };
        write!(f, "{}://{host}:{}{}", self.scheme(), self.port, self.path)
    }
}

impl FromStr for TargetUrl {
    type Err = LoadError;

    fn from_str(url: &str) -> Result<TargetUrl, LoadError> {
        let bad = |message: &str| LoadError::Url { url: url.to_string(), message: message.to_string() };
        let (tls, rest) = if url.get(..7).is_some_and(|s| s.eq_ignore_ascii_case("http://")) {
            (false, &url[7..])
        } else if url.get(..8).is_some_and(|s| s.eq_ignore_ascii_case("https://")) {
            (true, &url[8..])
        } else if url.contains("://") {
            return Err(bad("only http:// and https:// URLs are supported"));
        } else {
            (false, url)
        };
        let (authority, path) = match rest.find(['/', '?']) {
            Some(i) if rest.as_bytes()[i] == b'/' => (&rest[..i], &rest[i..]),
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, "/"),
        };
        let path = if path.starts_with('?') { format!("/{path}") } else { path.to_string() };
        if path.bytes().any(|b| b.is_ascii_control() || b == b' ' || b == b'#') {
            return Err(bad("the path has spaces, control characters or a fragment"));
        }
        if authority.contains('@') {
            return Err(bad("user information is not supported"));
        }
        let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
            let (host, after) = v6.split_once(']').ok_or_else(|| bad("unclosed `[` in the host"))?;
            let port = match after {
                "" => None,
                p => Some(p.strip_prefix(':').ok_or_else(|| bad("junk after `]`"))?),
            };
            (host, port)
        } else {
            match authority.rsplit_once(':') {
                Some((h, p)) => (h, Some(p)),
                None => (authority, None),
            }
        };
        if host.is_empty() {
            return Err(bad("no host"));
        }
        let bracketed = authority.starts_with('[');
        if !host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-._".contains(&b) || (bracketed && b"%:".contains(&b)))
        {
            return Err(bad("the host has characters a host name or address cannot have"));
        }
        let port = match port {
            None if tls => 443,
            None => 80,
            Some(p) => p.parse::<u16>().ok().filter(|&p| p != 0).ok_or_else(|| bad("invalid port"))?,
        };
        Ok(TargetUrl { host: host.to_string(), port, tls, path })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_parse_into_host_port_and_path() {
        let u: TargetUrl = "http://127.0.0.1:8080/a/b.html?x=1".parse().unwrap();
        assert_eq!((u.host.as_str(), u.port, u.path.as_str()), ("127.0.0.1", 8080, "/a/b.html?x=1"));
        assert_eq!(u.host_header(), "127.0.0.1:8080");
        let u: TargetUrl = "localhost".parse().unwrap();
        assert_eq!((u.port, u.path.as_str(), u.host_header().as_str()), (80, "/", "localhost"));
        let u: TargetUrl = "http://[::1]:9000".parse().unwrap();
        assert_eq!((u.host.as_str(), u.port), ("::1", 9000));
        assert_eq!(u.host_header(), "[::1]:9000");
        assert_eq!(u.to_string(), "http://[::1]:9000/");
        let u: TargetUrl = "https://example.com/x".parse().unwrap();
        assert_eq!((u.tls, u.port, u.host_header().as_str()), (true, 443, "example.com"));
        let u: TargetUrl = "HTTPS://h:8443".parse().unwrap();
        assert_eq!(
            (u.tls, u.host_header().as_str(), u.to_string().as_str()),
            (true, "h:8443", "https://h:8443/")
        );
    }

    #[test]
    fn bad_urls_are_refused_with_a_reason() {
        for bad in [
            "ftp://x:1/",
            "http://:80/",
            "http://h:0/",
            "http://h:99999/",
            "http://h/a b",
            "http://[::1",
            "ééééé://x",
            "é:1",
            "http://a:b:1/",
            "http://h_ st/",
        ] {
            assert!(bad.parse::<TargetUrl>().is_err(), "{bad}");
        }
    }

    #[test]
    fn loopback_resolves_without_the_network() {
        let u: TargetUrl = "http://127.0.0.1:1".parse().unwrap();
        assert_eq!(u.resolve().unwrap(), "127.0.0.1:1".parse::<SocketAddr>().unwrap());
    }
}
