//! A `[[discovery]]` entry of the switch's configuration: one source of nodes (`dns`, `srv` or
//! `file`) with its settings, their defaults and the checks serde cannot make; and the source's
//! key, which names it in status, metrics and the list of discovered nodes.

use serde::Deserialize;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

/// Shortest re-resolution period by default (a record's TTL below it is raised to it).
pub const DEFAULT_MIN_TTL_S: u64 = 5;
/// Longest re-resolution period by default (a record's TTL above it is lowered to it).
pub const DEFAULT_MAX_TTL_S: u64 = 300;
/// How often a node file's metadata is checked for a change, by default.
pub const DEFAULT_POLL_MS: u64 = 1_000;
/// Most nodes one source may give by default; a larger answer or file is refused whole.
pub const DEFAULT_MAX_NODES: usize = 256;

/// One source of nodes. Exactly one of `dns`, `srv` and `file` is set; the other keys belong to
/// one kind or another (see `check`).
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DiscoveryEntry {
    /// A name whose A and AAAA records are the nodes (each address at `port`).
    #[serde(default)]
    pub dns: Option<String>,
    /// A name whose SRV records are the nodes (each target's addresses at the record's port,
    /// with the record's weight).
    #[serde(default)]
    pub srv: Option<String>,
    /// A TOML file of `[[node]]` tables, watched for changes (relative to the configuration
    /// file's directory).
    #[serde(default)]
    pub file: Option<PathBuf>,
    /// `dns`: the nodes' port.
    #[serde(default)]
    pub port: Option<u16>,
    /// `dns`: each node's weight (default 1).
    #[serde(default)]
    pub weight: Option<u32>,
    /// `dns`: the start of the nodes' names, `<name>-<ip>` (default the DNS name).
    #[serde(default)]
    pub name: Option<String>,
    /// `dns`, `srv`: each node's handoff agent, at this port of its address.
    #[serde(default)]
    pub handoff_port: Option<u16>,
    /// `dns`, `srv`: each node's admin listener, at this port of its address.
    #[serde(default)]
    pub admin_port: Option<u16>,
    /// `dns`, `srv`: the DNS server to ask (`IP:PORT`); default the servers of /etc/resolv.conf.
    #[serde(default)]
    pub resolver: Option<SocketAddr>,
    /// `dns`, `srv`: how long one query waits for an answer (default /etc/resolv.conf's, or 5 s).
    #[serde(default)]
    pub timeout_ms: Option<u64>,
    /// `dns`, `srv`: the records' TTL is raised to at least this many seconds.
    #[serde(default)]
    pub min_ttl_s: Option<u64>,
    /// `dns`, `srv`: the records' TTL is lowered to at most this many seconds.
    #[serde(default)]
    pub max_ttl_s: Option<u64>,
    /// `file`: how often the file's metadata is checked, in milliseconds.
    #[serde(default)]
    pub poll_ms: Option<u64>,
    /// Most nodes this source may give; a larger answer or file is refused (the last list stays).
    #[serde(default)]
    pub max_nodes: Option<usize>,
}

/// What an entry asks for, once checked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SourceKind {
    Dns,
    Srv,
    File,
}

impl SourceKind {
    pub fn as_str(self) -> &'static str {
        match self {
            SourceKind::Dns => "dns",
            SourceKind::Srv => "srv",
            SourceKind::File => "file",
        }
    }
}

impl DiscoveryEntry {
    /// Which kind of source this is (`dns` when none is set: `check` refuses that).
    pub fn kind(&self) -> SourceKind {
        match (&self.srv, &self.file) {
            (Some(_), _) => SourceKind::Srv,
            (None, Some(_)) => SourceKind::File,
            (None, None) => SourceKind::Dns,
        }
    }

    /// What is resolved or read: the DNS name or the file's path.
    pub fn target(&self) -> String {
        match (&self.dns, &self.srv, &self.file) {
            (Some(name), _, _) | (None, Some(name), _) => name.clone(),
            (None, None, Some(path)) => path.display().to_string(),
            (None, None, None) => String::new(),
        }
    }

    /// The source's key, `dns:<name>`, `srv:<name>` or `file:<path>`: it names the source in
    /// status and metrics, and its list of nodes outlives a change of the entry's other settings.
    pub fn key(&self) -> String {
        format!("{}:{}", self.kind().as_str(), self.target())
    }

    pub fn min_ttl(&self) -> Duration {
        Duration::from_secs(self.min_ttl_s.unwrap_or(DEFAULT_MIN_TTL_S))
    }

    pub fn max_ttl(&self) -> Duration {
        Duration::from_secs(self.max_ttl_s.unwrap_or(DEFAULT_MAX_TTL_S))
    }

    pub fn poll(&self) -> Duration {
        Duration::from_millis(self.poll_ms.unwrap_or(DEFAULT_POLL_MS))
    }

    pub fn max_nodes(&self) -> usize {
        self.max_nodes.unwrap_or(DEFAULT_MAX_NODES)
    }

    /// The checks serde cannot make: one kind, only the keys that kind reads, sane bounds.
    pub fn check(&self) -> Result<(), String> {
        let key = self.key();
        let kinds = [self.dns.is_some(), self.srv.is_some(), self.file.is_some()];
        if kinds.iter().filter(|&&set| set).count() != 1 {
            return Err("a [[discovery]] entry needs exactly one of dns, srv and file".into());
        }
        let kind = self.kind();
        let misplaced = |set: bool, setting: &str, kinds: &str| {
            if set { Err(format!("[[discovery]] {key}: {setting} applies to {kinds} only")) } else { Ok(()) }
        };
        let not_dns = kind != SourceKind::Dns;
        misplaced(self.port.is_some() && not_dns, "port", "dns (srv records carry their own)")?;
        misplaced(self.weight.is_some() && not_dns, "weight", "dns")?;
        misplaced(self.name.is_some() && not_dns, "name", "dns")?;
        let file = kind == SourceKind::File;
        for (set, setting) in [
            (self.handoff_port.is_some(), "handoff_port"),
            (self.admin_port.is_some(), "admin_port"),
            (self.resolver.is_some(), "resolver"),
            (self.timeout_ms.is_some(), "timeout_ms"),
            (self.min_ttl_s.is_some(), "min_ttl_s"),
            (self.max_ttl_s.is_some(), "max_ttl_s"),
        ] {
            misplaced(set && file, setting, "dns and srv")?;
        }
        misplaced(self.poll_ms.is_some() && !file, "poll_ms", "file")?;
        self.check_values(&key)
    }

    /// The values themselves.
    fn check_values(&self, key: &str) -> Result<(), String> {
        let invalid = |why: &str| Err(format!("[[discovery]] {key}: {why}"));
        match self.kind() {
            SourceKind::Dns | SourceKind::Srv => {
                let name = self.target();
                if let Err(e) = hickory_resolver::proto::rr::Name::from_utf8(&name) {
                    return invalid(&format!("`{name}` is not a DNS name: {e}"));
                }
            }
            SourceKind::File if self.target().is_empty() => return invalid("file is empty"),
            SourceKind::File => {}
        }
        if self.kind() == SourceKind::Dns && self.port.is_none_or(|p| p == 0) {
            return invalid("dns needs the nodes' port (port = 1..65535)");
        }
        if self.weight == Some(0) {
            return invalid("weight must be at least 1");
        }
        if self.name.as_deref().is_some_and(|n| n.is_empty() || n.contains(char::is_whitespace)) {
            return invalid("name must be a word without spaces");
        }
        if self.handoff_port == Some(0) || self.admin_port == Some(0) {
            return invalid("handoff_port and admin_port must be 1..65535");
        }
        if self.min_ttl_s == Some(0) {
            return invalid("min_ttl_s must be at least 1");
        }
        if self.min_ttl() > self.max_ttl() {
            return invalid("min_ttl_s must not be above max_ttl_s");
        }
        if self.timeout_ms == Some(0) {
            return invalid("timeout_ms must be greater than 0");
        }
        if self.poll_ms.is_some_and(|ms| ms < 100) {
            return invalid("poll_ms must be at least 100");
        }
        if self.max_nodes == Some(0) {
            return invalid("max_nodes must be at least 1");
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(text: &str) -> DiscoveryEntry {
        toml::from_str(text).unwrap()
    }

    #[test]
    fn each_kind_takes_its_own_keys_and_names_its_source() {
        let dns = entry("dns = \"web.example.com\"\nport = 8080\nweight = 2\nname = \"web\"\n");
        dns.check().unwrap();
        assert_eq!((dns.kind(), dns.key()), (SourceKind::Dns, "dns:web.example.com".to_string()));
        assert_eq!((dns.min_ttl().as_secs(), dns.max_ttl().as_secs()), (5, 300));
        let srv =
            entry("srv = \"_http._tcp.web.example.com\"\nresolver = \"127.0.0.1:5353\"\nmin_ttl_s = 1\n");
        srv.check().unwrap();
        assert_eq!(srv.key(), "srv:_http._tcp.web.example.com");
        let file = entry("file = \"/etc/locus/nodes.toml\"\npoll_ms = 500\n");
        file.check().unwrap();
        assert_eq!((file.key(), file.poll().as_millis()), ("file:/etc/locus/nodes.toml".to_string(), 500));
    }

    #[test]
    fn misplaced_keys_and_bad_values_are_refused_with_the_reason() {
        let refused = |text: &str, needle: &str| {
            let e = entry(text).check().unwrap_err();
            assert!(e.contains(needle), "{text}: {e}");
        };
        refused("port = 80\n", "exactly one of dns, srv and file");
        refused("dns = \"a.example\"\nsrv = \"_x._tcp.a.example\"\nport = 1\n", "exactly one");
        refused("dns = \"a.example\"\n", "needs the nodes' port");
        refused("srv = \"_x._tcp.a.example\"\nport = 80\n", "port applies to dns");
        refused("file = \"n.toml\"\nresolver = \"127.0.0.1:53\"\n", "resolver applies to dns and srv");
        refused("dns = \"a.example\"\nport = 80\npoll_ms = 500\n", "poll_ms applies to file");
        refused("dns = \"a.example\"\nport = 80\nweight = 0\n", "weight must be at least 1");
        refused("dns = \"a.example\"\nport = 80\nmin_ttl_s = 10\nmax_ttl_s = 5\n", "not be above max_ttl_s");
        refused("dns = \"a..example\"\nport = 80\n", "not a DNS name");
        refused("file = \"n.toml\"\nmax_nodes = 0\n", "max_nodes");
        assert!(toml::from_str::<DiscoveryEntry>("dns = \"a\"\nprot = 80\n").is_err(), "unknown keys");
    }
}
