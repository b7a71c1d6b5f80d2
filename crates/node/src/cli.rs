//! `locus node` on the command line: `NodeArgs` (a configuration file, then flags that
//! override it) and `run`, which starts the node, reads the file and flags again and puts
//! them in force on SIGHUP (a refusal is logged, never fatal), and shuts it down gracefully on
//! SIGTERM or SIGINT.

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::Context;
use locus_cache::Replacement;
use locus_io::{ConfigFileArgs, TerminationSignals};

use crate::config::{NodeConfig, RehandoffPolicy};
use crate::dc::config::DcArgs;
use crate::document_root::DocumentRoot;
use crate::error::NodeError;
use crate::server::NodeServer;
use locus_classify::ByteSize;
use locus_node_config::CpuModelConfig;
use locus_node_config::StorageConfig;

/// Arguments of `locus node`.
#[derive(clap::Args, Clone, Debug, Default)]
pub struct NodeArgs {
    #[command(flatten)]
    pub file: ConfigFileArgs,
    /// HTTP listen address.
    #[arg(long, value_name = "ADDR")]
    pub listen: Option<SocketAddr>,
    /// Admin listen address (/locus/status, /metrics, /locus/health).
    #[arg(long, value_name = "ADDR")]
    pub admin: Option<SocketAddr>,
    /// Document root.
    #[arg(long, value_name = "DIR")]
    pub root: Option<PathBuf>,
    /// Node name, sent in X-Locus-Node.
    #[arg(long)]
    pub name: Option<String>,
    /// Worker threads (0 = one per CPU).
    #[arg(long)]
    pub workers: Option<usize>,
    /// Threads for dynamic requests' CPU work (0 = one per CPU).
    #[arg(long)]
    pub cpu_threads: Option<usize>,
    /// Cache capacity, e.g. 64MiB (0 disables the cache).
    #[arg(long, value_name = "SIZE")]
    pub cache_size: Option<ByteSize>,
    /// Cache replacement policy: lru, lfu, gds or gdsf.
    #[arg(long, value_name = "POLICY")]
    pub cache_policy: Option<Replacement>,
    /// Largest cached file, e.g. 1MiB; larger files are streamed.
    #[arg(long, value_name = "SIZE")]
    pub max_object: Option<ByteSize>,
    /// Check cached files against the file system at most this often.
    #[arg(long, value_name = "MS")]
    pub revalidate_ms: Option<u64>,
    /// Storage model: "lard98", "csld", or "seek_ms=28,mb_s=10,disks=2".
    #[arg(long, value_name = "MODEL")]
    pub storage: Option<StorageConfig>,
    /// CPU model: "lard98", or "conn_us=145,request_us=0,kb_us=80,cpus=1" (after a preset,
    /// keys override it).
    #[arg(long, value_name = "MODEL")]
    pub cpu: Option<CpuModelConfig>,
    /// Fetch misses from this origin (http://host:port).
    #[arg(long, value_name = "URL")]
    pub origin: Option<String>,
    /// TOML file of dynamic classes ([[classes]] tables).
    #[arg(long, value_name = "FILE")]
    pub classes: Option<PathBuf>,
    /// Host accepted in absolute-form targets (repeatable).
    #[arg(long = "server-name", value_name = "HOST")]
    pub server_names: Vec<String>,
    /// Seed of the dynamic cost draws.
    #[arg(long)]
    pub seed: Option<u64>,
    /// Most open client connections.
    #[arg(long)]
    pub max_connections: Option<usize>,
    /// Time allowed to receive a request head.
    #[arg(long, value_name = "MS")]
    pub header_timeout_ms: Option<u64>,
    /// Idle time allowed between requests.
    #[arg(long, value_name = "MS")]
    pub keepalive_timeout_ms: Option<u64>,
    /// Largest request head, e.g. 16KiB.
    #[arg(long, value_name = "SIZE")]
    pub max_head_bytes: Option<ByteSize>,
    /// Time in-flight requests get to finish on shutdown.
    #[arg(long, value_name = "MS")]
    pub drain_timeout_ms: Option<u64>,
    /// Run the handoff agent: the control listener the one-way switch connects to.
    #[arg(long, value_name = "ADDR")]
    pub handoff_listen: Option<SocketAddr>,
    /// File with the shared control key in hex (for the handoff agent).
    #[arg(long, value_name = "PATH")]
    pub handoff_key_file: Option<PathBuf>,
    /// Relay handed-off connections to this unmodified HTTP server (no per-request routing).
    #[arg(long, value_name = "ADDR")]
    pub handoff_upstream: Option<SocketAddr>,
    /// L4 mode with socket cloning: connections accepted here ask the switch where each
    /// request goes.
    #[arg(long)]
    pub handoff_clone: bool,
    /// With --handoff-clone: clone only connections to this address (the l4 service); the
    /// others (health checks, peers) are served here.
    #[arg(long, value_name = "ADDR")]
    pub handoff_clone_service: Option<SocketAddr>,
    /// A request routed to another node: "handoff" (give the connection back) or "forward"
    /// (fetch it from that node).
    #[arg(long, value_name = "POLICY")]
    pub handoff_rehandoff: Option<RehandoffPolicy>,
    /// Cooperative caching: the other nodes' HTTP listeners (http://H:P,http://H:P); a local
    /// miss is fetched from a peer's memory before storage is read.
    #[arg(long, value_name = "URLS", value_delimiter = ',')]
    pub coop_peers: Option<Vec<String>>,
    /// This node as its peers reach it (http://H:P; default: the listen address).
    #[arg(long, value_name = "URL")]
    pub coop_self: Option<String>,
    /// Time a peer gets to answer before storage is read instead (default 200).
    #[arg(long, value_name = "MS")]
    pub coop_timeout_ms: Option<u64>,
    /// Keep a copy of a document fetched from a peer (true|false, default true).
    #[arg(long, value_name = "BOOL")]
    pub coop_keep_copy: Option<bool>,
    /// Serve HTTPS with this certificate chain (PEM, end-entity first); needs --tls-key.
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// The private key of --tls-cert (PEM; readable by its owner only).
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// Session-ticket keys shared with the rest of the cluster (HAProxy's tls-ticket-keys
    /// format: base64 keys a line, the last three used, the next-to-last sealing).
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub tls_ticket_keys: Option<PathBuf>,
    #[command(flatten)]
    pub dc: DcArgs,
}

impl NodeArgs {
    /// The configuration file (or the defaults) with the flags applied.
    pub fn to_config(&self) -> anyhow::Result<NodeConfig> {
        let mut c = match &self.file.config {
            Some(path) => NodeConfig::from_file(path)?,
            None => NodeConfig::default(),
        };
        macro_rules! set {
            ($flag:expr => $field:expr) => {
                if let Some(v) = $flag.clone() {
                    $field = v;
                }
            };
        }
        set!(self.listen => c.listen);
        set!(self.root => c.root);
        set!(self.name => c.name);
        set!(self.workers => c.workers);
        set!(self.cpu_threads => c.cpu_threads);
        set!(self.cache_size => c.cache.capacity);
        set!(self.cache_policy => c.cache.replacement);
        set!(self.max_object => c.cache.max_object);
        set!(self.revalidate_ms => c.cache.revalidate_ms);
        set!(self.seed => c.seed);
        set!(self.max_connections => c.limits.max_connections);
        set!(self.header_timeout_ms => c.limits.header_timeout_ms);
        set!(self.keepalive_timeout_ms => c.limits.keepalive_timeout_ms);
        set!(self.max_head_bytes => c.limits.max_head_bytes);
        set!(self.drain_timeout_ms => c.limits.drain_timeout_ms);
        if self.admin.is_some() {
            c.admin = self.admin;
        }
        if self.storage.is_some() {
            c.storage = self.storage;
        }
        if self.cpu.is_some() {
            c.cpu = self.cpu;
        }
        if self.origin.is_some() {
            c.origin = self.origin.clone();
        }
        if self.classes.is_some() {
            c.class_file = self.classes.clone();
        }
        c.server_names.extend(self.server_names.iter().cloned());
        let handoff_flags = self.handoff_listen.is_some()
            || self.handoff_key_file.is_some()
            || self.handoff_upstream.is_some()
            || self.handoff_clone
            || self.handoff_clone_service.is_some()
            || self.handoff_rehandoff.is_some();
        if handoff_flags {
            let h = c.handoff.get_or_insert_with(Default::default);
            set!(self.handoff_listen => h.listen);
            set!(self.handoff_rehandoff => h.rehandoff);
            if self.handoff_key_file.is_some() {
                h.key_file = self.handoff_key_file.clone();
            }
            if self.handoff_upstream.is_some() {
                h.upstream = self.handoff_upstream;
            }
            h.clone |= self.handoff_clone;
            if self.handoff_clone_service.is_some() {
                h.clone_service = self.handoff_clone_service;
            }
        }
        let coop_flags = self.coop_peers.is_some()
            || self.coop_self.is_some()
            || self.coop_timeout_ms.is_some()
            || self.coop_keep_copy.is_some();
        if coop_flags {
            let coop = c.coop.get_or_insert_with(Default::default);
            set!(self.coop_peers => coop.peers);
            set!(self.coop_timeout_ms => coop.timeout_ms);
            set!(self.coop_keep_copy => coop.keep_copy);
            if self.coop_self.is_some() {
                coop.self_url = self.coop_self.clone();
            }
        }
        self.dc.apply(&mut c.dc);
        if let (Some(cert), Some(key)) = (&self.tls_cert, &self.tls_key) {
            let mut tls = locus_tls::TlsSettings::single(cert.clone(), key.clone());
            tls.ticket_keys = self.tls_ticket_keys.clone();
            c.tls = Some(tls);
        }
        c.validate()?;
        Ok(c)
    }
}

/// Run a node until SIGTERM or SIGINT, then shut it down gracefully. Call it before the
/// process starts other threads, so that they inherit the blocked termination signals.
pub fn run(args: NodeArgs) -> anyhow::Result<()> {
    let config = args.to_config()?;
    let args = std::sync::Arc::new(args);
    if args.file.check {
        let summary = check_files(config)?;
        args.file.report_check(&summary);
        return Ok(());
    }
    let signals = TerminationSignals::block_with_reload().context("blocking SIGTERM, SIGINT and SIGHUP")?;
    let name = config.name.clone();
    let server = NodeServer::start(config).context("starting the node")?;
    let scheme = if server.serves_tls() { "https" } else { "http" };
    println!("locus node {name} listening on {scheme}://{}", server.addr());
    if let Some(admin) = server.admin_addr() {
        println!("admin on http://{admin}/locus/status");
    }
    if let Some(handoff) = server.handoff_addr() {
        println!("handoff agent listening on {handoff}");
    }
    locus_io::service_notify::ready();
    let signal = signals
        .wait_reloading(|| locus_io::service_notify::reloading(|| reload(&server, &args)))
        .context("waiting for signals")?;
    tracing::info!(signal, "shutting down");
    locus_io::service_notify::stopping();
    server.shutdown();
    Ok(())
}

/// SIGHUP: read the configuration again (file and flags) and put it in force; a file that
/// does not parse or check is refused with the error, and the running configuration stays.
fn reload(server: &NodeServer, args: &NodeArgs) {
    let config = match args.to_config() {
        Ok(config) => config,
        Err(e) => return server.refuse_reload(&format!("{e:#}")),
    };
    // The outcome is logged by the reload itself (what changed, what needs a restart, or why
    // it was refused).
    let _ = server.reload(config);
}

/// `--check`: what `NodeServer::start` reads before it binds (the class file, the document
/// root unless an origin serves misses, the handoff key), so a file the node could not start
/// with fails here; the summary names the node and its root.
fn check_files(mut config: NodeConfig) -> anyhow::Result<String> {
    config.load_class_file()?;
    if config.origin.is_none() {
        DocumentRoot::new(&config.root)
            .map_err(|source| NodeError::Root { path: config.root.clone(), error: source })?;
    }
    if let Some(h) = &config.handoff {
        h.control_key()?;
    }
    if let Some(tls) = &config.tls {
        tls.load(&[locus_tls::ALPN_HTTP1], std::time::SystemTime::now())?;
    }
    Ok(format!("node {}, root {}, {} classes", config.name, config.root.display(), config.classes.len()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        node: NodeArgs,
    }

    #[test]
    fn flags_override_the_configuration_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("node.toml");
        std::fs::write(&path, "name = \"fromfile\"\nseed = 3\n[cache]\ncapacity = \"1MiB\"\n").unwrap();
        let cli = Cli::try_parse_from([
            "node",
            "--config",
            path.to_str().unwrap(),
            "--name",
            "n7",
            "--cache-size",
            "2MiB",
            "--cache-policy",
            "lru",
            "--storage",
            "seek_ms=5,mb_s=20,disks=2",
            "--server-name",
            "a.example",
            "--cpu",
            "lard98,request_us=20",
        ])
        .unwrap();
        let c = cli.node.to_config().unwrap();
        assert_eq!(c.name, "n7");
        assert_eq!(c.seed, 3);
        assert_eq!(c.cache.capacity, ByteSize::mib(2));
        assert_eq!(c.cache.replacement, Replacement::Lru);
        assert_eq!(c.storage, Some(StorageConfig { seek_ms: 5.0, transfer_mb_s: 20.0, disks: 2 }));
        assert_eq!(c.server_names, vec!["a.example".to_string()]);
        assert_eq!(c.cpu, Some(CpuModelConfig { request_us: 20.0, ..CpuModelConfig::lard98() }));
    }

    #[test]
    fn handoff_flags_make_or_override_the_handoff_table() {
        let c = Cli::try_parse_from(["node"]).unwrap().node.to_config().unwrap();
        assert!(c.handoff.is_none(), "no flag, no table: no agent");
        let cli = Cli::try_parse_from([
            "node",
            "--handoff-listen",
            "127.0.0.1:7470",
            "--handoff-key-file",
            "/etc/locus/key",
            "--handoff-upstream",
            "127.0.0.1:8081",
            "--handoff-rehandoff",
            "forward",
        ])
        .unwrap();
        let h = cli.node.to_config().unwrap().handoff.unwrap();
        assert_eq!(h.listen, "127.0.0.1:7470".parse().unwrap());
        assert_eq!(h.key_file, Some(PathBuf::from("/etc/locus/key")));
        assert_eq!(h.upstream, Some("127.0.0.1:8081".parse().unwrap()));
        assert_eq!(h.rehandoff, RehandoffPolicy::Forward);
        assert!(!h.clone);
        let h = Cli::try_parse_from(["node", "--handoff-clone"]).unwrap().node.to_config().unwrap().handoff;
        assert!(h.unwrap().clone);
        assert!(Cli::try_parse_from(["node", "--handoff-rehandoff", "bounce"]).is_err());
    }

    #[test]
    fn coop_flags_make_the_coop_table_and_conflicts_are_refused() {
        let c = Cli::try_parse_from([
            "node",
            "--listen",
            "127.0.0.1:8000",
            "--coop-peers",
            "http://127.0.0.1:8001,http://127.0.0.1:8002",
            "--coop-timeout-ms",
            "50",
            "--coop-keep-copy",
            "false",
        ])
        .unwrap()
        .node
        .to_config()
        .unwrap();
        let coop = c.coop.unwrap();
        assert_eq!(coop.peers, vec!["http://127.0.0.1:8001", "http://127.0.0.1:8002"]);
        assert_eq!((coop.timeout_ms, coop.keep_copy, coop.self_url), (50, false, None));
        let cli =
            Cli::try_parse_from(["node", "--coop-peers", "http://127.0.0.1:8001", "--origin", "http://b:80"]);
        let e = cli.unwrap().node.to_config().unwrap_err().to_string();
        assert!(e.contains("coop") && e.contains("origin") && e.contains("exclude"), "{e}");
        let cli =
            Cli::try_parse_from(["node", "--listen", "0.0.0.0:80", "--coop-peers", "http://10.0.0.2:80"]);
        let e = cli.unwrap().node.to_config().unwrap_err().to_string();
        assert!(e.contains("coop.self"), "{e}");
        assert!(Cli::try_parse_from(["node", "--coop-keep-copy", "maybe"]).is_err());
    }

    #[test]
    fn sighup_reads_the_file_and_flags_again_and_a_file_that_does_not_parse_is_counted_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("node.toml");
        std::fs::write(&path, "workers = 1\ncpu_threads = 1\n[cache]\ncapacity = \"1MiB\"\n").unwrap();
        let args =
            Cli::try_parse_from(["node", "--config", path.to_str().unwrap(), "--name", "n9"]).unwrap().node;
        let server = NodeServer::start(args.to_config().unwrap()).unwrap();
        std::fs::write(&path, "workers = 1\ncpu_threads = 1\n[cache]\ncapacity = \"lots\"\n").unwrap();
        reload(&server, &args);
        assert_eq!((server.stats().reloads, server.stats().reloads_refused), (0, 1));
        std::fs::write(&path, "workers = 1\ncpu_threads = 1\n[cache]\ncapacity = \"2MiB\"\n").unwrap();
        reload(&server, &args);
        assert_eq!((server.stats().reloads, server.stats().reloads_refused), (1, 1));
        let status = server.status();
        assert_eq!(
            (status["cache_capacity_bytes"].as_u64(), status["name"].as_str()),
            (Some(2 << 20), Some("n9"))
        );
        server.shutdown();
    }

    #[test]
    fn bad_flag_values_are_refused_by_the_parser() {
        assert!(Cli::try_parse_from(["node", "--cache-size", "lots"]).is_err());
        assert!(Cli::try_parse_from(["node", "--cache-policy", "fifo"]).is_err());
        assert!(Cli::try_parse_from(["node", "--storage", "floppy"]).is_err());
        assert!(Cli::try_parse_from(["node", "--cpu", "kb_us=-1"]).is_err());
    }
}
