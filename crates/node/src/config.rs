//! Node configuration: `NodeConfig` and its sections (cache, limits, dynamic classes; the
//! storage and CPU models' settings are in `locus-node-config`, the handoff agent's in
//! `handoff::config`), read from TOML with every unknown key refused (the error names the key, line and file), with defaults for everything, and
//! `ConfigError`.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use locus_cache::Replacement;
use serde::{Deserialize, Serialize};

use crate::class_table::ClassTable;
use crate::coop::config::CoopConfig;
use crate::dc::config::DcConfig;
pub use crate::handoff::config::{HandoffConfig, RehandoffPolicy};
use crate::origin::OriginAddr;
use crate::peer_link::{PeerKey, SecretText, configured_peer_key};
use locus_classify::ByteSize;
use locus_classify::{ClassConfig, ClassFile};
use locus_node_config::{CpuModelConfig, StorageConfig};

/// Why a configuration could not be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// A file could not be read.
    #[error("{}: {error}", path.display())]
    Io { path: PathBuf, error: std::io::Error },
    /// TOML syntax, an unknown or mistyped key (`message` names the key and line), or a
    /// value of the file that cannot be used (a class table: `message` names the classes).
    #[error("{}{message}", path.as_ref().map(|p| format!("{}: ", p.display())).unwrap_or_default())]
    Parse { path: Option<PathBuf>, message: String },
    /// A value that parses but cannot be used.
    #[error("invalid configuration: {0}")]
    Invalid(String),
}

impl ConfigError {
    /// The error with the file it came from in front, if it does not name one yet.
    fn in_file(self, path: &Path) -> ConfigError {
        match self {
            ConfigError::Invalid(m) => ConfigError::Parse {
                path: Some(path.to_path_buf()),
                message: format!("invalid configuration: {m}"),
            },
            e => e,
        }
    }
}

/// The number of CPUs this process may use (at least 1).
pub fn available_cpus() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Everything a node needs to run. Every field has a default; `listen` defaults to
/// `127.0.0.1:0` (an ephemeral port, see `NodeServer::addr`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct NodeConfig {
    /// Address of the HTTP listener.
    pub listen: SocketAddr,
    /// Address of the admin listener (`/locus/status`, `/metrics`, `/locus/health`), if any.
    pub admin: Option<SocketAddr>,
    /// Node name, sent in `X-Locus-Node` on every response.
    pub name: String,
    /// Document root.
    pub root: PathBuf,
    /// Worker threads, each with its own event loop and SO_REUSEPORT listener; 0 = one per CPU.
    pub workers: usize,
    /// Threads that run dynamic requests' CPU work; 0 = one per CPU.
    pub cpu_threads: usize,
    pub cache: CacheConfig,
    /// Storage model charging modelled disk time per miss; `None`: real reads only.
    pub storage: Option<StorageConfig>,
    /// CPU model (`[cpu]`) charging every request's CPU cost as modelled time; `None`: real
    /// CPU only (dynamic costs burnt on the CPU pool).
    pub cpu: Option<CpuModelConfig>,
    /// Fetch misses from this origin (`http://host:port`) instead of the document root.
    pub origin: Option<String>,
    /// Dynamic classes (matched before static files, in order).
    pub classes: Vec<ClassConfig>,
    /// A TOML file with more `[[classes]]`, appended to `classes` when the node starts.
    pub class_file: Option<PathBuf>,
    pub limits: NodeLimits,
    /// Hosts accepted in absolute-form request targets besides the request's Host header.
    pub server_names: Vec<String>,
    /// Seed of every random draw (dynamic costs), so runs repeat.
    pub seed: u64,
    /// The handoff agent (`[handoff]`): take over connections handed off by a one-way switch.
    pub handoff: Option<HandoffConfig>,
    /// Cooperative caching (`[coop]`): misses fetched from peers' memory before storage.
    pub coop: Option<CoopConfig>,
    /// DC mode (`[dc]`): home of its own documents, co-op for replicas of the others'.
    pub dc: Option<DcConfig>,
    /// Serve HTTPS on `listen` (`[tls]`, or `--tls-cert`/`--tls-key`) instead of HTTP.
    pub tls: Option<locus_tls::TlsSettings>,
    /// File holding the cluster's shared peer key in hex (relative to the configuration
    /// file): `[coop]` and `[dc]` requests between nodes are signed with it and told by their
    /// signature; without a key, by their source address.
    pub peer_key_file: Option<PathBuf>,
    /// The peer key in hex, inline (`peer_key_file` is preferred; never printed).
    #[serde(skip_serializing)]
    pub peer_key: Option<SecretText>,
}

impl Default for NodeConfig {
    fn default() -> NodeConfig {
        NodeConfig {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            admin: None,
            name: "node".into(),
            root: PathBuf::from("."),
            workers: available_cpus(),
            cpu_threads: available_cpus(),
            cache: CacheConfig::default(),
            storage: None,
            cpu: None,
            origin: None,
            classes: Vec::new(),
            class_file: None,
            limits: NodeLimits::default(),
            server_names: Vec::new(),
            seed: 0,
            handoff: None,
            coop: None,
            dc: None,
            tls: None,
            peer_key_file: None,
            peer_key: None,
        }
    }
}

/// The document cache.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CacheConfig {
    /// Total bytes of cached bodies (0 disables the cache).
    pub capacity: ByteSize,
    /// Larger files bypass the cache and are streamed from disk.
    pub max_object: ByteSize,
    pub replacement: Replacement,
    /// A cached file is checked against the file system at most this often.
    pub revalidate_ms: u64,
}

impl Default for CacheConfig {
    fn default() -> CacheConfig {
        CacheConfig {
            capacity: ByteSize::mib(64),
            max_object: ByteSize::mib(1),
            replacement: Replacement::Gds,
            revalidate_ms: 1000,
        }
    }
}

/// Connection and request limits.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct NodeLimits {
    /// Open client connections; connections beyond it are accepted and closed at once.
    /// Lowered at start to what the open-file limit holds: with a warning, unless it is the
    /// default and the limit is at least 10,000 (see `open_files::connection_limit`).
    pub max_connections: usize,
    /// Time allowed from a request's first byte (or the connection's start) to the end of
    /// its head; then 408 and close.
    pub header_timeout_ms: u64,
    /// Idle time allowed between requests on a keep-alive connection.
    pub keepalive_timeout_ms: u64,
    /// Largest request head; beyond it 431.
    pub max_head_bytes: ByteSize,
    /// Most header fields in a request (at most 128); beyond it 431.
    pub max_headers: usize,
    /// On shutdown, how long in-flight requests may take to finish.
    pub drain_timeout_ms: u64,
}

impl Default for NodeLimits {
    fn default() -> NodeLimits {
        NodeLimits {
            max_connections: 10_000,
            header_timeout_ms: 10_000,
            keepalive_timeout_ms: 60_000,
            max_head_bytes: ByteSize::kib(16),
            max_headers: 100,
            drain_timeout_ms: 5_000,
        }
    }
}

fn parse_error(path: Option<&Path>, e: toml::de::Error) -> ConfigError {
    ConfigError::Parse { path: path.map(Path::to_path_buf), message: e.to_string().trim_end().to_string() }
}

/// The text of a configuration file; an error names the file.
pub(crate) fn read_file(path: &Path) -> Result<String, ConfigError> {
    std::fs::read_to_string(path)
        .map_err(|source| ConfigError::Io { path: path.to_path_buf(), error: source })
}

impl NodeConfig {
    /// Parse a configuration from TOML text and check it. Relative paths stay relative to
    /// the working directory.
    pub fn from_toml_str(s: &str) -> Result<NodeConfig, ConfigError> {
        let config: NodeConfig = toml::from_str(s).map_err(|e| parse_error(None, e))?;
        config.validate()?;
        Ok(config)
    }

    /// Read a configuration file; relative `root` and `class_file` are taken relative to the
    /// file's directory. Errors are prefixed with the file's path.
    pub fn from_file(path: impl AsRef<Path>) -> Result<NodeConfig, ConfigError> {
        let path = path.as_ref();
        let text = read_file(path)?;
        let mut config: NodeConfig = toml::from_str(&text).map_err(|e| parse_error(Some(path), e))?;
        let dir = path.parent().unwrap_or(Path::new(""));
        if config.root.is_relative() {
            config.root = dir.join(&config.root);
        }
        if let Some(f) = &config.class_file
            && f.is_relative()
        {
            config.class_file = Some(dir.join(f));
        }
        if let Some(h) = &mut config.handoff
            && let Some(f) = &h.key_file
            && f.is_relative()
        {
            h.key_file = Some(dir.join(f));
        }
        if let Some(f) = &config.peer_key_file
            && f.is_relative()
        {
            config.peer_key_file = Some(dir.join(f));
        }
        config.validate().map_err(|e| e.in_file(path))?;
        Ok(config)
    }

    /// The peer key, from `peer_key_file` (first) or `peer_key`; `None` without either.
    /// Errors name the file or setting, never the key.
    pub fn peer_key(&self) -> Result<Option<PeerKey>, ConfigError> {
        configured_peer_key(self.peer_key_file.as_deref(), self.peer_key.as_ref())
    }

    /// Read the classes of `class_file`, if set, and append them to `classes` (clearing
    /// `class_file`, so loading twice does not duplicate them).
    pub fn load_class_file(&mut self) -> Result<(), ConfigError> {
        let Some(path) = self.class_file.take() else { return Ok(()) };
        let text = read_file(&path)?;
        let file: ClassFile = toml::from_str(&text).map_err(|e| parse_error(Some(&path), e))?;
        self.classes.extend(file.classes);
        // A shadowed or repeated class is refused naming both classes; say which file added them.
        ClassTable::new(&self.classes, self.seed).map_err(|e| e.in_file(&path))?;
        Ok(())
    }

    /// Check values that parse but cannot be used.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let invalid = |s: String| Err(ConfigError::Invalid(s));
        if self.name.is_empty() || !self.name.bytes().all(|b| b.is_ascii_graphic()) {
            return invalid(format!(
                "name {:?} must be non-empty visible ASCII (it is sent in a header)",
                self.name
            ));
        }
        if let Some(storage) = &self.storage {
            storage.validate().map_err(ConfigError::Invalid)?;
        }
        if let Some(cpu) = &self.cpu {
            cpu.validate().map_err(ConfigError::Invalid)?;
        }
        if let Some(origin) = &self.origin {
            origin.parse::<OriginAddr>().map_err(ConfigError::Invalid)?;
        }
        let l = &self.limits;
        if l.max_head_bytes.bytes() < 256 || l.max_head_bytes.bytes() > 1 << 20 {
            return invalid(format!("limits.max_head_bytes must be in 256..=1MiB, not {}", l.max_head_bytes));
        }
        if l.max_headers == 0 || l.max_headers > 128 {
            return invalid(format!("limits.max_headers must be in 1..=128, not {}", l.max_headers));
        }
        if l.max_connections == 0 {
            return invalid("limits.max_connections must be at least 1".into());
        }
        if l.header_timeout_ms == 0 || l.keepalive_timeout_ms == 0 {
            return invalid("limits.header_timeout_ms and keepalive_timeout_ms must be at least 1".into());
        }
        for n in &self.server_names {
            if n.is_empty() || n.contains(['/', ' ', '@']) {
                return invalid(format!("server name {n:?} is not a host name"));
            }
        }
        if let Some(h) = &self.handoff {
            h.validate()?;
        }
        if let Some(coop) = &self.coop {
            if let Some(origin) = &self.origin {
                return invalid(format!(
                    "coop and origin {origin:?} exclude each other: cooperative caching reads misses \
                     from the document root, an origin node from its origin; configure one of them"
                ));
            }
            coop.validate(self.listen).map_err(ConfigError::Invalid)?;
        }
        if let Some(dc) = &self.dc {
            dc.validate_beside(self.listen, self.coop.is_some(), self.origin.is_some())
                .map_err(ConfigError::Invalid)?;
        }
        ClassTable::new(&self.classes, self.seed)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use locus_classify::CostDistribution;

    fn parse_err(s: &str) -> String {
        NodeConfig::from_toml_str(s).unwrap_err().to_string()
    }

    #[test]
    fn empty_config_gives_the_documented_defaults() {
        let c = NodeConfig::from_toml_str("").unwrap();
        assert_eq!(c.listen, "127.0.0.1:0".parse().unwrap());
        assert_eq!(c.name, "node");
        assert_eq!(c.cache.capacity, ByteSize::mib(64));
        assert_eq!(c.cache.max_object, ByteSize::mib(1));
        assert_eq!(c.cache.replacement, Replacement::Gds);
        assert_eq!(c.cache.revalidate_ms, 1000);
        assert_eq!(c.limits.max_connections, 10_000);
        assert_eq!(c.limits.max_head_bytes, ByteSize::kib(16));
        assert!(c.storage.is_none() && c.origin.is_none() && c.classes.is_empty());
    }

    #[test]
    fn full_config_parses_sizes_policies_storage_and_classes() {
        let c = NodeConfig::from_toml_str(
            r#"
            listen = "127.0.0.1:8080"
            admin = "127.0.0.1:9090"
            name = "n1"
            root = "/srv"
            seed = 7
            server_names = ["www.example.com"]
            [cache]
            capacity = "32MiB"
            max_object = 500000
            replacement = "lru"
            [storage]
            preset = "lard98"
            disks = 2
            [limits]
            max_head_bytes = "8KiB"
            [[classes]]
            name = "c1"
            prefix = "/cgi/c1"
            query = { id = "*" }
            cost = { dist = "normal", mean_ms = 10, stddev_ms = 2 }
            size = "2KiB"
            "#,
        )
        .unwrap();
        assert_eq!(c.admin, Some("127.0.0.1:9090".parse().unwrap()));
        assert_eq!(c.cache.capacity, ByteSize::mib(32));
        assert_eq!(c.cache.max_object, ByteSize(500_000));
        assert_eq!(c.cache.replacement, Replacement::Lru);
        assert_eq!(c.storage, Some(StorageConfig { seek_ms: 28.0, transfer_mb_s: 10.0, disks: 2 }));
        assert_eq!(c.limits.max_head_bytes, ByteSize::kib(8));
        assert_eq!(c.classes[0].cost, CostDistribution::Normal { mean_ms: 10.0, stddev_ms: 2.0 });
        assert_eq!(c.classes[0].size, ByteSize(2048));
    }

    #[test]
    fn unknown_key_error_names_the_key_and_its_line() {
        let e = parse_err("name = \"a\"\n[cache]\ncapacity = \"1MiB\"\ncapacty = 3\n");
        assert!(e.contains("capacty") && e.contains("line 4"), "{e}");
        let e = parse_err("nmae = \"x\"");
        assert!(e.contains("nmae") && e.contains("line 1"), "{e}");
        let e = parse_err("[limits]\nheader_timeout = 5\n");
        assert!(e.contains("header_timeout") && e.contains("line 2"), "{e}");
        let e = parse_err(
            "[[classes]]\nname = \"a\"\nprefix = \"/a\"\nsize = 1\ncost = { dist = \"const\", ms = 1, mean = 2 }\n",
        );
        assert!(e.contains("mean") && e.contains("line 5"), "{e}");
    }

    #[test]
    fn mistyped_values_are_errors_naming_the_line() {
        let e = parse_err("[cache]\n\ncapacity = \"lots\"\n");
        assert!(e.contains("line 3") && e.contains("lots"), "{e}");
        let e = parse_err("[cache]\nreplacement = \"fifo\"\n");
        assert!(e.contains("line 2") && e.contains("fifo"), "{e}");
        let e = parse_err("[storage]\npreset = \"floppy\"\n");
        assert!(e.contains("floppy"), "{e}");
        let e = parse_err("[storage]\nseek = 3\n");
        assert!(e.contains("seek") && e.contains("line 2"), "{e}");
        let e = parse_err("listen = \"nowhere\"\n");
        assert!(e.contains("line 1"), "{e}");
    }

    #[test]
    fn invalid_values_are_refused() {
        assert!(parse_err("name = \"a b\"").contains("name"));
        assert!(parse_err("origin = \"ftp://x\"").contains("origin"));
        assert!(parse_err("[limits]\nmax_headers = 500").contains("max_headers"));
        assert!(parse_err("[storage]\ndisks = 0").contains("disks"));
    }

    #[test]
    fn file_errors_are_prefixed_with_the_path_and_relative_paths_follow_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("node.toml");
        std::fs::write(&path, "root = \"www\"\nclass_file = \"classes.toml\"\n").unwrap();
        let c = NodeConfig::from_file(&path).unwrap();
        assert_eq!(c.root, dir.path().join("www"));
        assert_eq!(c.class_file, Some(dir.path().join("classes.toml")));

        std::fs::write(&path, "root = \"www\"\nbogus = 1\n").unwrap();
        let e = NodeConfig::from_file(&path).unwrap_err().to_string();
        assert!(
            e.starts_with(&path.display().to_string()) && e.contains("bogus") && e.contains("line 2"),
            "{e}"
        );
        let e = NodeConfig::from_file(dir.path().join("missing.toml")).unwrap_err().to_string();
        assert!(e.contains("missing.toml"), "{e}");
    }

    #[test]
    fn class_file_is_loaded_and_its_errors_name_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let classes = dir.path().join("classes.toml");
        std::fs::write(
            &classes,
            "[[classes]]\nname = \"k1\"\nprefix = \"/k1\"\ncost = { dist = \"const\", ms = 10 }\nsize = 100\n",
        )
        .unwrap();
        let mut c = NodeConfig { class_file: Some(classes.clone()), ..NodeConfig::default() };
        c.load_class_file().unwrap();
        assert_eq!(c.classes.len(), 1);
        assert_eq!(c.class_file, None);
        std::fs::write(&classes, "[[classes]]\nname = \"k1\"\nprefx = \"/k1\"\n").unwrap();
        let mut c = NodeConfig { class_file: Some(classes.clone()), ..NodeConfig::default() };
        let e = c.load_class_file().unwrap_err().to_string();
        assert!(e.contains("classes.toml") && e.contains("prefx") && e.contains("line 3"), "{e}");
    }

    #[test]
    fn handoff_table_parses_and_its_key_file_follows_the_file_and_is_never_printed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("node.toml");
        std::fs::write(
            &path,
            "[handoff]\nlisten = \"127.0.0.1:7470\"\nkey_file = \"key.hex\"\nrehandoff = \"forward\"\nclone = true\n",
        )
        .unwrap();
        let hex = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";
        std::fs::write(dir.path().join("key.hex"), format!("{hex}\n")).unwrap();
        let c = NodeConfig::from_file(&path).unwrap();
        let h = c.handoff.as_ref().unwrap();
        assert_eq!(h.listen, "127.0.0.1:7470".parse().unwrap());
        assert_eq!(h.key_file, Some(dir.path().join("key.hex")));
        assert_eq!(h.rehandoff, RehandoffPolicy::Forward);
        assert!(h.clone && h.upstream.is_none());
        assert_eq!((h.go_timeout_ms, h.route_timeout_ms), (5_000, 1_000));
        h.control_key().unwrap();

        let inline = NodeConfig::from_toml_str(&format!("[handoff]\nkey = \"{hex}\"\n")).unwrap();
        let h = inline.handoff.unwrap();
        h.control_key().unwrap();
        let shown = format!("{h:?} {}", toml::to_string(&h).unwrap());
        assert!(!shown.contains(hex) && !shown.contains("0011223344"), "{shown}");
    }

    #[test]
    fn handoff_without_a_usable_key_or_with_upstream_and_clone_is_refused() {
        let h = NodeConfig::from_toml_str("[handoff]\n").unwrap().handoff.unwrap();
        assert!(h.control_key().unwrap_err().to_string().contains("key"));
        let h = NodeConfig::from_toml_str("[handoff]\nkey = \"abcd\"\n").unwrap().handoff.unwrap();
        let e = h.control_key().unwrap_err().to_string();
        assert!(e.contains("16 bytes") && !e.contains("abcd"), "{e}");
        let e = parse_err("[handoff]\nupstream = \"127.0.0.1:80\"\nclone = true\n");
        assert!(e.contains("exclude"), "{e}");
        let e = parse_err("[handoff]\nrehandoff = \"bounce\"\n");
        assert!(e.contains("bounce") && e.contains("line 2"), "{e}");
    }

    #[test]
    fn the_peer_key_file_follows_the_file_and_an_inline_peer_key_is_never_printed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("node.toml");
        let hex = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";
        std::fs::write(dir.path().join("peer.key"), format!("{hex}\n")).unwrap();
        std::fs::write(&path, "peer_key_file = \"peer.key\"\n").unwrap();
        let c = NodeConfig::from_file(&path).unwrap();
        assert_eq!(c.peer_key_file, Some(dir.path().join("peer.key")));
        assert!(c.peer_key().unwrap().is_some());
        assert!(NodeConfig::default().peer_key().unwrap().is_none());

        let inline = NodeConfig::from_toml_str(&format!("peer_key = \"{hex}\"\n")).unwrap();
        assert!(inline.peer_key().unwrap().is_some());
        let shown = format!("{inline:?} {}", toml::to_string(&inline).unwrap());
        assert!(!shown.contains("0011223344"), "{shown}");
        let short = NodeConfig::from_toml_str("peer_key = \"abcd\"\n").unwrap();
        let e = short.peer_key().unwrap_err().to_string();
        assert!(e.contains("peer_key") && e.contains("16 bytes") && !e.contains("abcd"), "{e}");
    }

    #[test]
    fn coop_table_parses_with_defaults_and_refuses_unknown_keys_and_self() {
        let c = NodeConfig::from_toml_str(
            "listen = \"127.0.0.1:8000\"\n[coop]\npeers = [\"http://127.0.0.1:8001\"]\nself = \"http://127.0.0.1:8000\"\n",
        )
        .unwrap();
        let coop = c.coop.unwrap();
        assert_eq!(coop.self_url.as_deref(), Some("http://127.0.0.1:8000"));
        assert_eq!((coop.timeout_ms, coop.keep_copy), (200, true));
        let e = parse_err("[coop]\npeers = []\nkeep = true\n");
        assert!(e.contains("keep") && e.contains("line 3"), "{e}");
        let e = parse_err("listen = \"127.0.0.1:8000\"\n[coop]\npeers = [\"http://127.0.0.1:8000\"]\n");
        assert!(e.contains("coop.peers[0]") && e.contains("itself"), "{e}");
    }
}
