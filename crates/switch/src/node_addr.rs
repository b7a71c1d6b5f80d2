//! A node's address as written in the switch's configuration or `--node`: `IP:PORT` or
//! `HOST:PORT`, a host name resolved once, at start-up, with an error naming the host when
//! it does not resolve.

use serde::Deserialize;
use std::net::{SocketAddr, ToSocketAddrs};

/// `IP:PORT` as is, or `HOST:PORT` resolved now: the host's first IPv4 address if it has one
/// (nodes and the handoff forwarder are reached over IPv4; `localhost` often lists `::1`
/// first), else its first address. Resolved once: a later DNS change needs a restart.
pub fn resolve_node_addr(text: &str) -> Result<SocketAddr, String> {
    if let Ok(addr) = text.parse::<SocketAddr>() {
        return Ok(addr);
    }
    let (host, port) = text
        .rsplit_once(':')
        .and_then(|(h, p)| Some((h, p.parse::<u16>().ok()?)))
        .filter(|(h, _)| !h.is_empty() && !h.contains(['/', '@', '=', '*', ' ']))
        .ok_or_else(|| format!("`{text}` is not IP:PORT or HOST:PORT"))?;
    let addrs: Vec<SocketAddr> = (host, port)
        .to_socket_addrs()
        .map_err(|e| format!("cannot resolve host `{host}` (in `{text}`): {e}"))?
        .collect();
    addrs
        .iter()
        .find(|a| a.is_ipv4())
        .or(addrs.first())
        .copied()
        .ok_or_else(|| format!("host `{host}` (in `{text}`) has no address"))
}

/// Serde `deserialize_with` for a node address (`IP:PORT` or `HOST:PORT`).
pub fn deserialize<'de, D: serde::Deserializer<'de>>(d: D) -> Result<SocketAddr, D::Error> {
    resolve_node_addr(&String::deserialize(d)?).map_err(serde::de::Error::custom)
}

/// Serde `deserialize_with` for an optional node address.
pub fn deserialize_opt<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<SocketAddr>, D::Error> {
    deserialize(d).map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ip_literals_pass_and_host_names_resolve_preferring_ipv4() {
        assert_eq!(resolve_node_addr("10.0.0.2:80").unwrap(), "10.0.0.2:80".parse().unwrap());
        assert_eq!(resolve_node_addr("[::1]:80").unwrap(), "[::1]:80".parse().unwrap());
        let a = resolve_node_addr("localhost:8080").unwrap();
        assert!(a.ip().is_loopback() && a.port() == 8080, "{a}");
        if "localhost:1".to_socket_addrs().unwrap().any(|a| a.is_ipv4()) {
            assert!(a.is_ipv4(), "{a}");
        }
    }

    #[test]
    fn an_unresolvable_host_is_named_and_a_missing_port_is_refused() {
        // `.invalid` never resolves (RFC 6761).
        let e = resolve_node_addr("node1.invalid:80").unwrap_err();
        assert!(e.contains("cannot resolve host `node1.invalid`"), "{e}");
        for bad in ["localhost", "localhost:http", ":80", "a b:80"] {
            let e = resolve_node_addr(bad).unwrap_err();
            assert!(e.contains("is not IP:PORT or HOST:PORT"), "{bad}: {e}");
        }
    }

    #[test]
    fn node_addresses_in_the_file_take_host_names_resolved_at_load() {
        let text = "[[node]]\naddr = \"localhost:8001\"\nhandoff = \"localhost:7100\"\n";
        let c = crate::SwitchConfig::from_toml_str(text, "s.toml").unwrap();
        assert!(c.nodes[0].addr.ip().is_loopback() && c.nodes[0].addr.port() == 8001);
        assert_eq!(c.nodes[0].handoff.map(|a| a.port()), Some(7100));
        let text = "[[node]]\naddr = \"127.0.0.1:1\"\n[[node]]\naddr = \"web2.invalid:80\"\n";
        let err = crate::SwitchConfig::from_toml_str(text, "s.toml").unwrap_err().to_string();
        assert!(err.contains("line 4") && err.contains("cannot resolve host `web2.invalid`"), "{err}");
    }
}
