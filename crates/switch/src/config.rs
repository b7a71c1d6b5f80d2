//! Switch configuration: the TOML file (every table denies unknown keys, so a typo is an
//! error naming the key and its line), defaults, and validation with errors that say what is
//! wrong and where.

use locus_classify::ClassConfig;
use locus_policy::PolicyConfig;
use serde::Deserialize;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

// Part of the configuration: reachable from here as well as from `mode`.
pub use crate::discovery::DiscoveryEntry;
pub use crate::handoff::HandoffSettings;
pub use crate::mode::Mode;

/// One back-end node.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeEntry {
    /// Name used in logs, metrics and status (defaults to `node<i>`).
    #[serde(default)]
    pub name: Option<String>,
    /// Address of the node's HTTP listener (`IP:PORT`, or `HOST:PORT` resolved at start-up).
    #[serde(deserialize_with = "crate::node_addr::deserialize")]
    pub addr: SocketAddr,
    /// Weight for weighted policies.
    #[serde(default = "one")]
    pub weight: u32,
    /// Address of the node's handoff agent (control channel); handoff mode needs it.
    #[serde(default, deserialize_with = "crate::node_addr::deserialize_opt")]
    pub handoff: Option<SocketAddr>,
    /// Address of the node's admin listener (where `/locus/status` is); metric-fed policies
    /// poll it.
    #[serde(default, deserialize_with = "crate::node_addr::deserialize_opt")]
    pub admin: Option<SocketAddr>,
}

fn one() -> u32 {
    1
}

/// Active and passive health checking.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct HealthConfig {
    /// Time between active checks of each node.
    pub interval_ms: u64,
    /// A check that takes longer fails.
    pub timeout_ms: u64,
    /// Consecutive failed checks that take a node out of the view.
    pub fall: u32,
    /// Consecutive passed checks that bring it back.
    pub rise: u32,
    /// Path of the check request (`GET`); any status below 500 passes.
    pub path: String,
    /// A node that comes back ramps from a small share to its full share over this time.
    pub slow_start_ms: u64,
    /// Take a node out at once when a fresh connection to it fails (passive detection).
    pub passive: bool,
}

impl Default for HealthConfig {
    fn default() -> HealthConfig {
        HealthConfig {
            interval_ms: 200,
            timeout_ms: 300,
            fall: 2,
            rise: 2,
            path: "/".to_string(),
            slow_start_ms: 5000,
            passive: true,
        }
    }
}

/// Connection, size and time limits.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SwitchLimits {
    /// Client connections held at once; more are answered 503 and closed. Lowered at start,
    /// with a warning, to what the open-file limit holds (see `open_files::plan`).
    pub max_connections: usize,
    /// Largest request head in bytes (431 beyond).
    pub max_head_bytes: usize,
    /// Most header fields in a request (431 beyond).
    pub max_headers: usize,
    /// A client must finish sending a request head within this time once it started (408).
    pub header_timeout_ms: u64,
    /// An idle keep-alive client connection is closed after this time.
    pub keepalive_timeout_ms: u64,
    /// Connecting to a node.
    pub connect_timeout_ms: u64,
    /// Waiting for a node's response head, and between body reads either way.
    pub node_timeout_ms: u64,
    /// Longest wait in the front-end admission queue before 503.
    pub queue_timeout_ms: u64,
    /// On SIGTERM, longest wait for in-flight requests before exiting.
    pub drain_timeout_ms: u64,
    /// Idle pooled connections kept per node and worker.
    pub pool_per_node: usize,
    /// A pooled node connection idle longer than this is not reused.
    pub pool_idle_ms: u64,
    /// Relay buffer size in bytes.
    pub buffer_bytes: usize,
    /// Response body runs at least this long (the rest of a Content-Length body or of a
    /// chunk) move node→client with splice(2), never entering user space; 0 turns it off.
    pub splice_min_bytes: u64,
}

impl Default for SwitchLimits {
    fn default() -> SwitchLimits {
        SwitchLimits {
            max_connections: 10_000,
            max_head_bytes: 16 * 1024,
            max_headers: 100,
            header_timeout_ms: 10_000,
            keepalive_timeout_ms: 60_000,
            connect_timeout_ms: 1_000,
            node_timeout_ms: 30_000,
            queue_timeout_ms: 30_000,
            drain_timeout_ms: 10_000,
            pool_per_node: 256,
            pool_idle_ms: 20_000,
            buffer_bytes: 64 * 1024,
            splice_min_bytes: 16 * 1024,
        }
    }
}

impl SwitchLimits {
    pub fn header_timeout(&self) -> Duration {
        Duration::from_millis(self.header_timeout_ms)
    }
    pub fn keepalive_timeout(&self) -> Duration {
        Duration::from_millis(self.keepalive_timeout_ms)
    }
    pub fn connect_timeout(&self) -> Duration {
        Duration::from_millis(self.connect_timeout_ms)
    }
    pub fn node_timeout(&self) -> Duration {
        Duration::from_millis(self.node_timeout_ms)
    }
    pub fn queue_timeout(&self) -> Duration {
        Duration::from_millis(self.queue_timeout_ms)
    }
    pub fn drain_timeout(&self) -> Duration {
        Duration::from_millis(self.drain_timeout_ms)
    }
    pub fn pool_idle(&self) -> Duration {
        Duration::from_millis(self.pool_idle_ms)
    }
}

/// The whole switch configuration.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SwitchConfig {
    /// Client-facing listener.
    #[serde(default = "default_listen")]
    pub listen: SocketAddr,
    /// Admin listener (`/locus/status`, `/metrics`, and `POST /locus/ctl` from this host);
    /// none when absent.
    #[serde(default)]
    pub admin: Option<SocketAddr>,
    /// Unix socket of the runtime API (`locus ctl`), for root and the switch's own user;
    /// none when absent. Relative to the configuration file's directory.
    #[serde(default)]
    pub control_socket: Option<PathBuf>,
    #[serde(default)]
    pub mode: Mode,
    /// Worker threads, each accepting on its own SO_REUSEPORT listener; 0 = one per core.
    #[serde(default)]
    pub workers: usize,
    /// Combined Log Format access log: a file path, `-` for standard output; none when absent.
    #[serde(default)]
    pub access_log: Option<PathBuf>,
    /// Add the client address to `X-Forwarded-For` on requests to nodes.
    #[serde(default = "yes")]
    pub forwarded_for: bool,
    /// Set `X-Forwarded-Proto` (`http` or `https`, as the client connected) on requests to
    /// nodes, replacing any the client sent.
    #[serde(default = "yes")]
    pub forwarded_proto: bool,
    /// A second client-facing listener speaking HTTPS with the `[tls]` settings.
    #[serde(default)]
    pub listen_tls: Option<SocketAddr>,
    /// The TLS listener's certificates, ticket keys and bounds (`[tls]`); relative paths are
    /// taken relative to the configuration file's directory.
    #[serde(default)]
    pub tls: Option<locus_tls::TlsSettings>,
    /// Answer every cleartext request with a redirect (308) to the same URL over HTTPS.
    #[serde(default)]
    pub redirect_to_https: bool,
    /// Hosts an absolute-form request target may name besides the address the client
    /// connected to (see `target_check`); any other host is answered 404 by the switch.
    #[serde(default)]
    pub server_names: Vec<String>,
    #[serde(default = "default_policy")]
    pub policy: PolicyConfig,
    #[serde(default, rename = "node")]
    pub nodes: Vec<NodeEntry>,
    /// Sources of more nodes (`[[discovery]]`: DNS A/AAAA or SRV records, a watched file);
    /// their nodes follow `nodes` in the configuration in force (see `discovery`).
    #[serde(default)]
    pub discovery: Vec<DiscoveryEntry>,
    #[serde(default)]
    pub health: HealthConfig,
    #[serde(default)]
    pub limits: SwitchLimits,
    /// Handoff mode's settings.
    #[serde(default)]
    pub handoff: HandoffSettings,
    /// HTTP/2 to clients.
    #[serde(default)]
    pub http2: crate::h2::Http2Settings,
    /// Request classes (the nodes' `[[classes]]` schema): every request is classified, and
    /// content-aware policies read the classes' costs and resources.
    #[serde(default)]
    pub classes: Vec<ClassConfig>,
    /// A TOML file with more `[[classes]]`, appended to `classes` (relative to the
    /// configuration file's directory).
    #[serde(default)]
    pub class_file: Option<PathBuf>,
    /// The site's document root, scanned at start for every document's size and mtime (CSLD's
    /// file table); relative to the configuration file's directory.
    #[serde(default)]
    pub site_root: Option<PathBuf>,
    /// Most files `site_root` may hold; a larger tree is refused.
    #[serde(default = "default_site_max_files")]
    pub site_max_files: usize,
}

fn default_site_max_files() -> usize {
    1_000_000
}

fn yes() -> bool {
    true
}

fn default_listen() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], 8080))
}

fn default_policy() -> PolicyConfig {
    PolicyConfig::from_name("lard-r").expect("lard-r is a policy name")
}

impl Default for SwitchConfig {
    fn default() -> SwitchConfig {
        SwitchConfig {
            listen: default_listen(),
            admin: None,
            control_socket: None,
            mode: Mode::Proxy,
            workers: 0,
            access_log: None,
            forwarded_for: true,
            forwarded_proto: true,
            listen_tls: None,
            tls: None,
            redirect_to_https: false,
            server_names: Vec::new(),
            policy: default_policy(),
            nodes: Vec::new(),
            discovery: Vec::new(),
            health: HealthConfig::default(),
            limits: SwitchLimits::default(),
            handoff: HandoffSettings::default(),
            http2: crate::h2::Http2Settings::default(),
            classes: Vec::new(),
            class_file: None,
            site_root: None,
            site_max_files: default_site_max_files(),
        }
    }
}

/// A configuration that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read {path}: {error}")]
    Io { path: PathBuf, error: std::io::Error },
    #[error("{origin}: {message}")]
    Parse { origin: String, message: String },
    #[error("invalid configuration: {0}")]
    Invalid(String),
    #[error("TLS: {0}")]
    Tls(#[from] locus_tls::TlsError),
}

impl SwitchConfig {
    /// Parse TOML text; `origin` names it in errors (a path, or "<inline>").
    pub fn from_toml_str(text: &str, origin: &str) -> Result<SwitchConfig, ConfigError> {
        let config: SwitchConfig = toml::from_str(text)
            .map_err(|e| ConfigError::Parse { origin: origin.to_string(), message: e.to_string() })?;
        Ok(config)
    }

    /// Read and parse a TOML file; relative `class_file` and `site_root` are taken relative
    /// to the file's directory.
    pub fn from_file(path: &Path) -> Result<SwitchConfig, ConfigError> {
        let text = std::fs::read_to_string(path)
            .map_err(|source| ConfigError::Io { path: path.to_path_buf(), error: source })?;
        let mut config = SwitchConfig::from_toml_str(&text, &path.display().to_string())?;
        let dir = path.parent().unwrap_or(Path::new(""));
        let tls_files = config.tls.iter_mut().flat_map(|t| {
            let certs = t.certificates.iter_mut().flat_map(|c| [&mut c.cert, &mut c.key]);
            certs.chain(t.ticket_keys.as_mut())
        });
        let node_files = config.discovery.iter_mut().filter_map(|d| d.file.as_mut());
        let files = [&mut config.class_file, &mut config.site_root, &mut config.control_socket]
            .into_iter()
            .flatten()
            .chain(tls_files)
            .chain(node_files);
        for p in files {
            if p.is_relative() {
                *p = dir.join(&*p);
            }
        }
        Ok(config)
    }

    /// Check the parts serde cannot: at least one node (or a discovery source), unique names,
    /// sane limits, a policy that builds for these nodes.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.nodes.is_empty() && self.discovery.is_empty() {
            return Err(ConfigError::Invalid(
                "no nodes: add at least one [[node]] with an addr, or a [[discovery]] source".into(),
            ));
        }
        self.validate_discovery()?;
        let names = self.node_names();
        for (i, a) in names.iter().enumerate() {
            if names[..i].contains(a) {
                return Err(ConfigError::Invalid(format!("node name `{a}` is used twice")));
            }
        }
        for (i, n) in self.nodes.iter().enumerate() {
            if n.weight == 0 {
                return Err(ConfigError::Invalid(format!("node `{}`: weight must be at least 1", names[i])));
            }
        }
        self.validate_limits()?;
        if let Some(n) = self.server_names.iter().find(|n| n.is_empty() || n.contains(['/', ' ', '@', ':'])) {
            return Err(ConfigError::Invalid(format!("server name {n:?} is not a host name")));
        }
        if self.workers > 256 {
            return Err(ConfigError::Invalid("workers must be at most 256".into()));
        }
        if self.site_max_files == 0 {
            return Err(ConfigError::Invalid("site_max_files must be greater than 0".into()));
        }
        let site = crate::site::SiteInputs::classes_of(self)?;
        crate::site::check_policy_needs(self, &names, site.inputs.classes.len())?;
        // Without nodes of its own yet, the policy is checked when discovery brings some.
        if !self.nodes.is_empty() {
            locus_policy::build_with(&self.policy, &self.weights(), &site.inputs)
                .map_err(|e| ConfigError::Invalid(format!("policy: {e}")))?;
        }
        self.validate_tls()?;
        self.http2.check().map_err(ConfigError::Invalid)?;
        self.validate_mode(&names)
    }

    /// Each `[[discovery]]` entry, each source once, and what the mode and policy need of the
    /// nodes DNS names: their agents (handoff mode) and admin listeners (`wrr-metrics`).
    fn validate_discovery(&self) -> Result<(), ConfigError> {
        for (i, d) in self.discovery.iter().enumerate() {
            d.check().map_err(ConfigError::Invalid)?;
            if self.discovery[..i].iter().any(|other| other.key() == d.key()) {
                return Err(ConfigError::Invalid(format!("[[discovery]] {} is listed twice", d.key())));
            }
            let from_dns = d.kind() != crate::discovery::SourceKind::File;
            if from_dns && self.mode == Mode::Handoff && d.handoff_port.is_none() {
                return Err(ConfigError::Invalid(format!(
                    "[[discovery]] {}: handoff mode needs the nodes' agents (handoff_port = N)",
                    d.key()
                )));
            }
            if from_dns && matches!(self.policy, PolicyConfig::WrrMetrics { .. }) && d.admin_port.is_none() {
                return Err(ConfigError::Invalid(format!(
                    "[[discovery]] {}: policy wrr-metrics polls each node's admin listener (admin_port = N)",
                    d.key()
                )));
            }
        }
        Ok(())
    }

    /// `listen_tls` and `[tls]` come together, in a mode that terminates TLS at the switch.
    fn validate_tls(&self) -> Result<(), ConfigError> {
        let invalid = |m: &str| Err(ConfigError::Invalid(m.into()));
        match (&self.listen_tls, &self.tls) {
            (Some(_), None) => return invalid("listen_tls needs a [tls] table with the certificates"),
            (None, Some(_)) => return invalid("[tls] is set but no listen_tls address serves it"),
            (None, None) if self.redirect_to_https => {
                return invalid("redirect_to_https needs listen_tls and [tls]: nothing would serve HTTPS");
            }
            (Some(_), Some(t)) if t.certificates.is_empty() => {
                return invalid("[tls] has no certificates: add [[tls.certificates]] with cert and key");
            }
            _ => {}
        }
        if self.listen_tls.is_some() && self.mode == Mode::L4 {
            return invalid(
                "mode = \"l4\" cannot serve listen_tls: it never reads a request, so it cannot \
                 terminate TLS; use mode = \"handoff\" (the TLS session moves with the connection) \
                 or \"proxy\"",
            );
        }
        Ok(())
    }

    /// The limits and health-check settings.
    fn validate_limits(&self) -> Result<(), ConfigError> {
        let l = &self.limits;
        let positive = [
            ("limits.max_connections", l.max_connections as u64),
            ("limits.max_head_bytes", l.max_head_bytes as u64),
            ("limits.max_headers", l.max_headers as u64),
            ("limits.header_timeout_ms", l.header_timeout_ms),
            ("limits.keepalive_timeout_ms", l.keepalive_timeout_ms),
            ("limits.connect_timeout_ms", l.connect_timeout_ms),
            ("limits.node_timeout_ms", l.node_timeout_ms),
            ("limits.queue_timeout_ms", l.queue_timeout_ms),
            ("health.interval_ms", self.health.interval_ms),
            ("health.timeout_ms", self.health.timeout_ms),
            ("health.fall", self.health.fall as u64),
            ("health.rise", self.health.rise as u64),
        ];
        for (key, v) in positive {
            if v == 0 {
                return Err(ConfigError::Invalid(format!("{key} must be greater than 0")));
            }
        }
        if l.max_headers > 128 {
            return Err(ConfigError::Invalid("limits.max_headers must be at most 128".into()));
        }
        if l.buffer_bytes < 4096 {
            return Err(ConfigError::Invalid("limits.buffer_bytes must be at least 4096".into()));
        }
        if !self.health.path.starts_with('/') || self.health.path.bytes().any(|b| b <= b' ' || b == 0x7f) {
            return Err(ConfigError::Invalid(format!(
                "health.path `{}` must be an origin-form path starting with /",
                self.health.path
            )));
        }
        Ok(())
    }

    /// What the mode itself needs (`names`: the nodes' names).
    fn validate_mode(&self, names: &[String]) -> Result<(), ConfigError> {
        match self.mode {
            Mode::L4 => {
                if self.handoff.interface.is_none() {
                    return Err(ConfigError::Invalid(
                        "l4 mode needs handoff.interface (the forwarder directs the connections)".into(),
                    ));
                }
                if !matches!(self.listen, SocketAddr::V4(a) if !a.ip().is_unspecified()) {
                    return Err(ConfigError::Invalid(format!(
                        "l4 mode needs a listen address on the virtual IP (IPv4), not {}",
                        self.listen
                    )));
                }
                if self.nodes.iter().any(|n| n.handoff.is_some()) {
                    self.handoff.load_key()?;
                }
            }
            Mode::Handoff => {
                self.handoff.load_key()?;
                if let Some((i, _)) = self.nodes.iter().enumerate().find(|(_, n)| n.handoff.is_none()) {
                    return Err(ConfigError::Invalid(format!(
                        "node `{}`: handoff mode needs the address of its agent (handoff = \"ip:port\")",
                        names[i]
                    )));
                }
                let h = &self.handoff;
                for (key, v) in [
                    ("handoff.ready_timeout_ms", h.ready_timeout_ms),
                    ("handoff.expire_idle_s", h.expire_idle_s),
                    ("handoff.reconnect_ms", h.reconnect_ms),
                ] {
                    if v == 0 {
                        return Err(ConfigError::Invalid(format!("{key} must be greater than 0")));
                    }
                }
                if h.pin_dir.is_some() && h.interface.is_none() {
                    return Err(ConfigError::Invalid("handoff.pin_dir needs handoff.interface".into()));
                }
            }
            Mode::Proxy | Mode::Splice => {}
        }
        Ok(())
    }

    /// Each node's name (configured or `node<i>`, counting from 1).
    pub fn node_names(&self) -> Vec<String> {
        self.nodes
            .iter()
            .enumerate()
            .map(|(i, n)| n.name.clone().unwrap_or_else(|| format!("node{}", i + 1)))
            .collect()
    }

    /// Each node's weight.
    pub fn weights(&self) -> Vec<u32> {
        self.nodes.iter().map(|n| n.weight).collect()
    }

    /// Worker threads to run (the configured count, or one per core).
    pub fn worker_count(&self) -> usize {
        if self.workers > 0 {
            self.workers
        } else {
            std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn full_config_parses_with_defaults_filled_in() {
        let text = r#"
listen = "127.0.0.1:8000"
admin = "127.0.0.1:9000"
workers = 2
access_log = "-"

[policy]
name = "lard"
t_low = 10

[[node]]
name = "a"
addr = "127.0.0.1:8001"

[[node]]
addr = "127.0.0.1:8002"
weight = 3

[health]
fall = 3

[limits]
max_connections = 500
"#;
        let c = SwitchConfig::from_toml_str(text, "test.toml").unwrap();
        c.validate().unwrap();
        assert_eq!(c.node_names(), vec!["a".to_string(), "node2".to_string()]);
        assert_eq!(c.weights(), vec![1, 3]);
        assert_eq!(c.health.fall, 3);
        assert_eq!(c.health.rise, 2);
        assert_eq!(c.limits.max_connections, 500);
        assert_eq!(c.limits.max_head_bytes, 16 * 1024);
        assert_eq!(c.policy.name(), "lard");
        assert_eq!(c.worker_count(), 2);
    }

    #[test]
    fn unknown_key_error_names_the_key_and_line() {
        let text = "listen = \"127.0.0.1:1\"\n\n[limits]\nmax_conections = 5\n";
        let err = SwitchConfig::from_toml_str(text, "s.toml").unwrap_err().to_string();
        assert!(err.contains("max_conections"), "{err}");
        assert!(err.contains("line 4"), "{err}");
        assert!(err.starts_with("s.toml"), "{err}");
    }

    #[test]
    fn bad_values_are_refused_with_the_reason() {
        let err = SwitchConfig::from_toml_str("listen = \"nowhere\"\n", "x").unwrap_err().to_string();
        assert!(err.contains("line 1"), "{err}");
        let c = SwitchConfig::from_toml_str("", "x").unwrap();
        assert!(c.validate().unwrap_err().to_string().contains("no nodes"));
        let text = "[[node]]\nname=\"a\"\naddr=\"127.0.0.1:1\"\n[[node]]\nname=\"a\"\naddr=\"127.0.0.1:2\"\n";
        let c = SwitchConfig::from_toml_str(text, "x").unwrap();
        assert!(c.validate().unwrap_err().to_string().contains("used twice"));
        let text = "[[node]]\naddr=\"127.0.0.1:1\"\n[limits]\nheader_timeout_ms = 0\n";
        let c = SwitchConfig::from_toml_str(text, "x").unwrap();
        assert!(c.validate().unwrap_err().to_string().contains("header_timeout_ms"));
    }

    #[test]
    fn unknown_policy_name_points_at_the_name_line_and_lists_every_name() {
        let text = "[[node]]\naddr = \"127.0.0.1:1\"\n\n[policy]\nt_low = 5\nname = \"maglve\"\n";
        let err = SwitchConfig::from_toml_str(text, "s.toml").unwrap_err().to_string();
        assert!(err.starts_with("s.toml") && err.contains("line 6"), "{err}");
        for name in locus_policy::PolicyConfig::accepted_names() {
            assert!(err.contains(name), "{name} missing: {err}");
        }
        assert!(err.contains("maglev") && err.contains("lb"), "{err}");
    }

    #[test]
    fn handoff_mode_needs_a_key_and_an_agent_per_node() {
        let base = "mode = \"handoff\"\n[[node]]\naddr=\"127.0.0.1:1\"\n";
        let c = SwitchConfig::from_toml_str(base, "x").unwrap();
        assert!(c.validate().unwrap_err().to_string().contains("needs a key"));
        let key = "00112233445566778899aabbccddeeff";
        let text = format!("{base}[handoff]\nkey = \"{key}\"\n");
        let c = SwitchConfig::from_toml_str(&text, "x").unwrap();
        assert!(c.validate().unwrap_err().to_string().contains("address of its agent"));
        let text = format!(
            "mode = \"handoff\"\n[[node]]\naddr=\"127.0.0.1:1\"\nhandoff=\"127.0.0.1:2\"\n[handoff]\nkey = \"{key}\"\n"
        );
        let c = SwitchConfig::from_toml_str(&text, "x").unwrap();
        c.validate().unwrap();
        assert_eq!(c.handoff.ready_timeout_ms, 2_000);
        let text = format!("{text}key_file = \"/nonexistent/locus.key\"\n");
        let c = SwitchConfig::from_toml_str(&text, "x").unwrap();
        assert!(c.validate().unwrap_err().to_string().contains("/nonexistent/locus.key"));
    }

    #[test]
    fn l4_mode_needs_an_interface_a_virtual_ip_and_a_known_selection() {
        let base = "mode = \"l4\"\n[[node]]\naddr=\"10.0.0.2:80\"\n";
        let c = SwitchConfig::from_toml_str(base, "x").unwrap();
        assert!(c.validate().unwrap_err().to_string().contains("handoff.interface"));
        let text = format!("{base}[handoff]\ninterface = \"eth0\"\n");
        let any = SwitchConfig::from_toml_str(&format!("listen = \"0.0.0.0:80\"\n{text}"), "x").unwrap();
        assert!(any.validate().unwrap_err().to_string().contains("virtual IP"));
        let text = format!("listen = \"10.0.0.100:80\"\n{text}l4_selection = \"random\"\n");
        let err = SwitchConfig::from_toml_str(&text, "x").unwrap_err();
        assert!(err.to_string().contains("rr, wrr, lc or hash"));
        let c = SwitchConfig::from_toml_str(&text.replace("random", "wrr"), "x").unwrap();
        c.validate().unwrap();
    }

    #[test]
    fn discovery_sources_stand_in_for_nodes_and_are_checked_against_the_mode() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("switch.toml");
        std::fs::write(
            &path,
            "[[discovery]]\nfile = \"nodes.toml\"\n[[discovery]]\nsrv = \"_http._tcp.web\"\n",
        )
        .unwrap();
        let c = SwitchConfig::from_file(&path).unwrap();
        c.validate().unwrap();
        assert_eq!(c.discovery[0].file.as_deref(), Some(dir.path().join("nodes.toml").as_path()));
        let twice = "[[discovery]]\nfile = \"n\"\n[[discovery]]\nfile = \"n\"\npoll_ms = 200\n";
        let err = SwitchConfig::from_toml_str(twice, "x").unwrap().validate().unwrap_err().to_string();
        assert!(err.contains("file:n is listed twice"), "{err}");
        let key = "00112233445566778899aabbccddeeff";
        let text = format!(
            "mode = \"handoff\"\n[handoff]\nkey = \"{key}\"\n[[discovery]]\ndns = \"web\"\nport = 80\n"
        );
        let err = SwitchConfig::from_toml_str(&text, "x").unwrap().validate().unwrap_err().to_string();
        assert!(err.contains("handoff_port"), "{err}");
        let text = text.replace("port = 80", "port = 80\nhandoff_port = 7100");
        SwitchConfig::from_toml_str(&text, "x").unwrap().validate().unwrap();
    }

    #[test]
    fn every_mode_parses_and_unknown_ones_are_refused_clearly() {
        assert_eq!("proxy".parse::<Mode>().unwrap(), Mode::Proxy);
        assert_eq!("splice".parse::<Mode>().unwrap(), Mode::Splice);
        assert_eq!("handoff".parse::<Mode>().unwrap(), Mode::Handoff);
        assert_eq!("l4".parse::<Mode>().unwrap(), Mode::L4);
        assert!("bogus".parse::<Mode>().unwrap_err().to_string().contains("unknown mode"));
    }
}
