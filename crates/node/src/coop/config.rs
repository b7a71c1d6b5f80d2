//! `[coop]`: cooperative caching between nodes — the other nodes' HTTP listeners (`peers`),
//! this node as they reach it (`self`, default the listen address), the time a peer gets to
//! answer (`timeout_ms`) and whether a document fetched from a peer is kept here
//! (`keep_copy`). Checked entry by entry, so an error names the entry it is about.

use std::net::{SocketAddr, ToSocketAddrs};

use serde::{Deserialize, Serialize};

use crate::origin::OriginAddr;

/// Cooperative caching (`[coop]`): on a local miss, fetch a document from a peer's memory
/// before reading storage.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CoopConfig {
    /// The other nodes' main HTTP listeners, `http://host:port`.
    pub peers: Vec<String>,
    /// This node as its peers reach it (`http://host:port`); default: the listen address.
    #[serde(rename = "self")]
    pub self_url: Option<String>,
    /// Time a peer gets to answer one cooperative request before storage is read instead.
    pub timeout_ms: u64,
    /// Keep a copy of a document fetched from a peer under this node's own replacement.
    pub keep_copy: bool,
    /// How long a peer that timed out, refused or answered garbage is left alone.
    pub backoff_ms: u64,
}

impl Default for CoopConfig {
    fn default() -> CoopConfig {
        CoopConfig { peers: Vec::new(), self_url: None, timeout_ms: 200, keep_copy: true, backoff_ms: 1000 }
    }
}

/// A peer named in `peers`, parsed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PeerEntry {
    /// The entry as written.
    pub url: String,
    pub addr: OriginAddr,
}

impl CoopConfig {
    /// The peers, parsed; an entry that is not `http://host:port`, or is given twice, is
    /// refused naming it.
    pub fn peer_entries(&self) -> Result<Vec<PeerEntry>, String> {
        let mut entries: Vec<PeerEntry> = Vec::with_capacity(self.peers.len());
        for (i, url) in self.peers.iter().enumerate() {
            let addr = url.parse::<OriginAddr>().map_err(|e| format!("coop.peers[{i}]: {e}"))?;
            if entries.iter().any(|p| p.addr == addr) {
                return Err(format!("coop.peers[{i}] {url:?} is listed twice"));
            }
            entries.push(PeerEntry { url: url.clone(), addr });
        }
        Ok(entries)
    }

    /// This node's address as peers reach it: `self`, or else `listen` (refused when its
    /// address is unspecified, like 0.0.0.0, since peers cannot reach that).
    pub fn self_addr(&self, listen: SocketAddr) -> Result<OriginAddr, String> {
        match &self.self_url {
            Some(url) => url.parse::<OriginAddr>().map_err(|e| format!("coop.self: {e}")),
            None if listen.ip().is_unspecified() => Err(format!(
                "coop.self is needed: the listen address {listen} does not say how peers reach this node"
            )),
            None => Ok(OriginAddr { host: listen.ip().to_string(), port: listen.port() }),
        }
    }

    /// Check what can be checked without the network: the peers' syntax, `timeout_ms`, and
    /// that no peer is this node (`listen` is the configured listen address).
    pub fn validate(&self, listen: SocketAddr) -> Result<(), String> {
        if self.timeout_ms == 0 || self.timeout_ms > 60_000 {
            return Err(format!("coop.timeout_ms must be in 1..=60000, not {}", self.timeout_ms));
        }
        if self.backoff_ms > 3_600_000 {
            return Err(format!("coop.backoff_ms must be in 0..=3600000, not {}", self.backoff_ms));
        }
        let peers = self.peer_entries()?;
        let me = self.self_addr(listen)?;
        // A listen port of 0 is chosen at start; the check is repeated then (`refuse_self`).
        if listen.port() != 0 {
            refuse_self(&peers, &me, listen)?;
        }
        Ok(())
    }
}

/// Refuse a peer entry that names this node: its `self` address, or the address it listens
/// on (when that is not a wildcard), written the same or resolving to the same socket.
pub fn refuse_self(peers: &[PeerEntry], me: &OriginAddr, listen: SocketAddr) -> Result<(), String> {
    let own: Vec<SocketAddr> =
        resolve(me).into_iter().chain((!listen.ip().is_unspecified()).then_some(listen)).collect();
    for (i, p) in peers.iter().enumerate() {
        let names_me = p.addr == *me || resolve(&p.addr).iter().any(|a| own.contains(a));
        if names_me {
            return Err(format!(
                "coop.peers[{i}] {:?} is this node itself (it is reached at http://{}); list only the other nodes",
                p.url,
                me.authority()
            ));
        }
    }
    Ok(())
}

/// The socket addresses `addr` resolves to (none when it does not resolve).
pub fn resolve(addr: &OriginAddr) -> Vec<SocketAddr> {
    (addr.host.as_str(), addr.port).to_socket_addrs().map(Iterator::collect).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(peers: &[&str]) -> CoopConfig {
        CoopConfig { peers: peers.iter().map(|s| s.to_string()).collect(), ..CoopConfig::default() }
    }

    #[test]
    fn malformed_or_repeated_peer_entries_are_refused_naming_the_entry() {
        let listen: SocketAddr = "127.0.0.1:8000".parse().unwrap();
        let e = config(&["http://127.0.0.1:8001", "127.0.0.1:8002"]).validate(listen).unwrap_err();
        assert!(e.contains("coop.peers[1]") && e.contains("127.0.0.1:8002"), "{e}");
        let e = config(&["http://127.0.0.1:8001", "http://127.0.0.1:8001/"]).validate(listen).unwrap_err();
        assert!(e.contains("coop.peers[1]") && e.contains("twice"), "{e}");
        config(&["http://127.0.0.1:8001", "http://127.0.0.1:8002"]).validate(listen).unwrap();
    }

    #[test]
    fn a_peer_naming_this_node_is_refused_naming_the_entry() {
        let listen: SocketAddr = "127.0.0.1:8000".parse().unwrap();
        let e = config(&["http://127.0.0.1:8001", "http://127.0.0.1:8000"]).validate(listen).unwrap_err();
        assert!(e.contains("coop.peers[1]") && e.contains("itself"), "{e}");
        let mut c = config(&["http://localhost:8000"]);
        assert!(c.validate(listen).unwrap_err().contains("coop.peers[0]"));
        c.self_url = Some("http://10.1.1.1:80".into());
        c.peers = vec!["http://10.1.1.1:80".into()];
        assert!(c.validate("0.0.0.0:80".parse().unwrap()).unwrap_err().contains("itself"));
    }

    #[test]
    fn self_defaults_to_the_listen_address_unless_it_is_a_wildcard() {
        let c = config(&[]);
        assert_eq!(c.self_addr("127.0.0.1:81".parse().unwrap()).unwrap().authority(), "127.0.0.1:81");
        let e = c.self_addr("0.0.0.0:81".parse().unwrap()).unwrap_err();
        assert!(e.contains("coop.self") && e.contains("0.0.0.0:81"), "{e}");
        let c = CoopConfig { self_url: Some("http://node-a:81".into()), ..c };
        assert_eq!(c.self_addr("0.0.0.0:81".parse().unwrap()).unwrap().authority(), "node-a:81");
        let c = CoopConfig { timeout_ms: 0, ..c };
        assert!(c.validate("0.0.0.0:81".parse().unwrap()).unwrap_err().contains("timeout_ms"));
    }
}
