//! Requests between the nodes of a cluster (cooperative caching's, DC mode's): the cluster's
//! shared peer key (`key`), the signature every request carries under it (`mac`) with the
//! nonces that catch a replay (`replay`), the receiving side's check (`gate`: by signature
//! with a key, by source address without), and the sending side (`outgoing`: signed, from
//! the node's own listen address).

pub mod gate;
pub mod key;
pub mod mac;
pub mod outgoing;
pub mod replay;

pub use gate::PeerGate;
pub use key::{PeerKey, PeerKeyError, SecretText, configured_peer_key};
pub use outgoing::PeerLink;

/// The `X-Locus-Peer-Auth` value a member `from` (coop: its `host:port`; DC: its name) sends
/// with a `method` request of `target` to the member reached at `to` (`host:port`), signed
/// now with a fresh nonce: for tools and tests that speak to a node as a member.
pub fn peer_auth_value(key: &PeerKey, method: &str, target: &str, to: &str, from: &str) -> String {
    let request = mac::SignedRequest { method, target, to };
    mac::sign(key, request, from, gate::unix_ms(), rand::random())
}
