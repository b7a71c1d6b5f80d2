//! The rustls server configuration of a TLS listener: TLS 1.3 and 1.2 with the ring provider,
//! certificates by SNI, the listener's ALPN protocols, no client certificates, 0-RTT off, and
//! session tickets sealed with the cluster's shared keys when it has a key file (otherwise
//! resumption only through this process's session cache).

use std::sync::Arc;

use rustls::ServerConfig;

use crate::error::TlsError;
use crate::sni::SniCertificates;
use crate::tickets::TicketKeys;

/// Sessions the stateful resumption cache holds (the oldest go first).
pub const SESSION_CACHE: usize = 20_000;

/// ALPN's name of HTTP/1.1.
pub const ALPN_HTTP1: &[u8] = b"http/1.1";

/// ALPN's name of HTTP/2 over TLS.
pub const ALPN_H2: &[u8] = b"h2";

/// A server configuration offering `alpn` (in preference order), with tickets under `tickets`.
pub fn server_config(
    certs: SniCertificates,
    alpn: &[&[u8]],
    tickets: Option<Arc<TicketKeys>>,
) -> Result<Arc<ServerConfig>, TlsError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
        .map_err(|e| TlsError::Config(e.to_string()))?
        .with_no_client_auth()
        .with_cert_resolver(Arc::new(certs));
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    // 0-RTT data can be replayed: never accepted.
    config.max_early_data_size = 0;
    // Stateful resumption (TLS 1.2 session ids; TLS 1.3 without ticket keys): a bounded
    // in-process cache, about 200 bytes a session.
    config.session_storage = rustls::server::ServerSessionMemoryCache::new(SESSION_CACHE);
    if let Some(t) = tickets {
        config.ticketer = t;
    }
    Ok(Arc::new(config))
}
