//! A node's HTTPS connection before its first request: the TLS handshake under the header
//! timeout (counted by the listener's `TlsService`), and cleartext HTTP sent to the TLS port —
//! served when it comes from a configured peer's address (co-operative caching and DC traffic
//! between nodes stays cleartext), otherwise answered 400 in cleartext, as NGINX does, instead
//! of a handshake that hangs or an alert the client cannot read.

use std::net::{IpAddr, ToSocketAddrs};

use locus_tls::{HandshakeFailure, TlsService};
use tokio::net::TcpStream;
use tokio::time::Instant;

use crate::config::NodeConfig;
use crate::connection::Transport;
use crate::context::NodeContext;

/// Handshake on `stream`: the session (or the socket itself, for a peer speaking
/// cleartext), or `None` when there is nothing to serve (the failure is counted, a cleartext
/// request answered).
pub async fn tls_handshake(tls: &TlsService, stream: TcpStream, node: &NodeContext) -> Option<Transport> {
    let settings = node.settings();
    match tls.accept(stream, Instant::now() + settings.header_timeout).await {
        Ok(session) => Some(Transport::Tls(Box::new(session))),
        Err(HandshakeFailure::Cleartext(tcp)) => {
            if tcp.peer_addr().is_ok_and(|a| settings.cleartext_peers.contains(&a.ip())) {
                return Some(Transport::Plain(tcp));
            }
            locus_tls::answer_cleartext(tcp, &node.node_headers).await;
            None
        }
        Err(e) => {
            tracing::debug!(error = %e, "TLS handshake failed");
            None
        }
    }
}

/// The addresses of the peers `config` names (co-operative caching's, DC mode's servers),
/// whose cleartext requests a TLS listener serves. A name that does not resolve is left out
/// (its requests get the 400 until the node restarts or reloads).
pub fn cleartext_peers(config: &NodeConfig) -> Vec<IpAddr> {
    let mut authorities: Vec<String> = Vec::new();
    if let Some(coop) = &config.coop {
        authorities.extend(
            coop.peers
                .iter()
                .filter_map(|url| url.parse::<crate::origin::OriginAddr>().ok())
                .map(|a| a.authority()),
        );
    }
    if let Some(dc) = &config.dc {
        authorities.extend(dc.entries().unwrap_or_default().into_iter().map(|e| e.addr.authority()));
    }
    let mut ips: Vec<IpAddr> =
        authorities.iter().filter_map(|a| a.to_socket_addrs().ok()).flatten().map(|a| a.ip()).collect();
    ips.sort();
    ips.dedup();
    ips
}
