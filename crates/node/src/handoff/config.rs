//! The handoff agent's configuration (`[handoff]`): `HandoffConfig`, its control key, and
//! `RehandoffPolicy`, what a node does with a request the switch routes elsewhere.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::config::{ConfigError, read_file};

/// What a node does with a request on a handed-off connection that the switch routes to
/// another node.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RehandoffPolicy {
    /// Give the connection back to the switch (`Rehandoff`), which hands it to that node.
    #[default]
    Handoff,
    /// Keep the connection and fetch the response from that node over HTTP (back-end
    /// forwarding).
    Forward,
}

impl FromStr for RehandoffPolicy {
    type Err = String;

    fn from_str(s: &str) -> Result<RehandoffPolicy, String> {
        match s {
            "handoff" => Ok(RehandoffPolicy::Handoff),
            "forward" => Ok(RehandoffPolicy::Forward),
            other => Err(format!("unknown rehandoff policy {other:?} (handoff, forward)")),
        }
    }
}

/// The handoff agent: a control listener for the one-way switch, which hands live client
/// connections to this node (TCP_REPAIR; needs CAP_NET_ADMIN).
#[derive(Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HandoffConfig {
    /// Address of the control listener the switch connects to.
    pub listen: SocketAddr,
    /// File holding the shared control key in hex (relative to the configuration file).
    pub key_file: Option<PathBuf>,
    /// The shared control key in hex, inline (`key_file` is preferred; never printed).
    #[serde(skip_serializing)]
    pub key: Option<String>,
    /// Relay handed-off connections to this unmodified HTTP server (e.g. NGINX on the node)
    /// instead of serving them here; no per-request routing then.
    pub upstream: Option<SocketAddr>,
    /// L4 mode with socket cloning: connections accepted by the node's own listener ask the
    /// switch where each request goes, from the first one.
    pub clone: bool,
    /// With `clone`: only connections to this address (the l4 service, the virtual IP and
    /// port) are cloned; others — the switch's health checks, peers — are served here, since
    /// no other node has their address. `None`: every connection.
    pub clone_service: Option<SocketAddr>,
    /// What to do with a request the switch routes to another node.
    pub rehandoff: RehandoffPolicy,
    /// How long a restored connection waits for `Go` before it is dropped.
    pub go_timeout_ms: u64,
    /// How long a connection waits for `RouteTo` before serving the request itself.
    pub route_timeout_ms: u64,
    /// Sockets kept made ahead for restores.
    pub prepared_sockets: usize,
    /// Most `Closed` reports kept while no switch is connected (the oldest are dropped).
    pub closed_queue: usize,
    /// Restore with IP_FREEBIND, so the virtual IP need not be configured on this host.
    pub freebind: bool,
}

impl Default for HandoffConfig {
    fn default() -> HandoffConfig {
        HandoffConfig {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            key_file: None,
            key: None,
            upstream: None,
            clone: false,
            clone_service: None,
            rehandoff: RehandoffPolicy::Handoff,
            go_timeout_ms: 5_000,
            route_timeout_ms: 1_000,
            prepared_sockets: 4,
            closed_queue: 65_536,
            freebind: false,
        }
    }
}

impl std::fmt::Debug for HandoffConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HandoffConfig")
            .field("listen", &self.listen)
            .field("key_file", &self.key_file)
            .field("key", &self.key.as_ref().map(|_| "<redacted>"))
            .field("upstream", &self.upstream)
            .field("clone", &self.clone)
            .field("clone_service", &self.clone_service)
            .field("rehandoff", &self.rehandoff)
            .field("go_timeout_ms", &self.go_timeout_ms)
            .field("route_timeout_ms", &self.route_timeout_ms)
            .field("prepared_sockets", &self.prepared_sockets)
            .field("closed_queue", &self.closed_queue)
            .field("freebind", &self.freebind)
            .finish()
    }
}

impl HandoffConfig {
    /// The control key, from `key_file` (first) or `key`. Errors never contain the key.
    pub fn control_key(&self) -> Result<locus_handoff::ControlKey, ConfigError> {
        let text = match (&self.key_file, &self.key) {
            (Some(path), _) => read_file(path)?,
            (None, Some(key)) => key.clone(),
            (None, None) => {
                return Err(ConfigError::Invalid(
                    "handoff needs key_file or key (the shared control key)".into(),
                ));
            }
        };
        locus_handoff::ControlKey::from_hex(&text)
            .map_err(|e| ConfigError::Invalid(format!("handoff control key: {e}")))
    }

    /// Check values that parse but cannot be used (the key is checked when the node starts).
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.go_timeout_ms == 0 || self.route_timeout_ms == 0 {
            return Err(ConfigError::Invalid(
                "handoff.go_timeout_ms and route_timeout_ms must be at least 1".into(),
            ));
        }
        if self.upstream.is_some() && self.clone {
            return Err(ConfigError::Invalid(
                "handoff.upstream and handoff.clone exclude each other (an upstream gets no per-request routing)"
                    .into(),
            ));
        }
        Ok(())
    }
}
