//! `LiveSettings`: the part of a node's configuration its connections read per request —
//! limits and timeouts, the class table, the hosts accepted in absolute-form targets, the
//! peers whose cleartext requests a TLS listener serves — built from a `NodeConfig` and
//! swapped whole by a reload (`NodeContext::settings`), so a request sees one consistent set.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use locus_http::Limits;

use crate::class_table::ClassTable;
use crate::config::{NodeConfig, NodeLimits};
use crate::tls_accept::cleartext_peers;

/// What a node's connections read per request; see the module documentation.
#[derive(Debug)]
pub struct LiveSettings {
    pub limits: NodeLimits,
    pub parse_limits: Limits,
    pub header_timeout: Duration,
    pub keepalive_timeout: Duration,
    /// Dynamic classes, matched before static files (shared with the next settings when a
    /// reload leaves the classes and the seed as they were, so the cost draws go on).
    pub classes: Arc<ClassTable>,
    /// Hosts accepted in absolute-form targets besides the request's own Host.
    pub server_names: Vec<String>,
    /// Peers' addresses, whose cleartext requests the TLS listener serves.
    pub cleartext_peers: Vec<IpAddr>,
}

impl LiveSettings {
    /// The settings of `config` (its class file loaded) with `classes` built from it.
    pub fn new(config: &NodeConfig, classes: Arc<ClassTable>) -> LiveSettings {
        let l = &config.limits;
        LiveSettings {
            limits: l.clone(),
            parse_limits: Limits {
                max_head_bytes: l.max_head_bytes.bytes() as usize,
                max_headers: l.max_headers,
            },
            header_timeout: Duration::from_millis(l.header_timeout_ms),
            keepalive_timeout: Duration::from_millis(l.keepalive_timeout_ms),
            classes,
            server_names: config.server_names.clone(),
            cleartext_peers: if config.tls.is_some() { cleartext_peers(config) } else { Vec::new() },
        }
    }

    /// How long in-flight requests may take to finish at shutdown.
    pub fn drain_timeout(&self) -> Duration {
        Duration::from_millis(self.limits.drain_timeout_ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use locus_classify::ByteSize;

    #[test]
    fn settings_follow_the_configuration() {
        let mut config = NodeConfig::default();
        config.limits.max_head_bytes = ByteSize::kib(8);
        config.limits.header_timeout_ms = 1500;
        config.limits.drain_timeout_ms = 250;
        config.server_names = vec!["www.example.com".into()];
        let s = LiveSettings::new(&config, Arc::new(ClassTable::default()));
        assert_eq!((s.parse_limits.max_head_bytes, s.parse_limits.max_headers), (8192, 100));
        assert_eq!(
            (s.header_timeout, s.keepalive_timeout),
            (Duration::from_millis(1500), Duration::from_secs(60))
        );
        assert_eq!(s.drain_timeout(), Duration::from_millis(250));
        assert_eq!(s.server_names, vec!["www.example.com".to_string()]);
        assert!(s.cleartext_peers.is_empty(), "no TLS: every request is served in cleartext anyway");
    }
}
