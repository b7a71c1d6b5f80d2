//! `locus switch`: command-line flags (over an optional TOML file), start, wait for SIGTERM or
//! Ctrl-C, then shut down gracefully.

use crate::config::{Mode, NodeEntry, SwitchConfig};
use crate::server::SwitchServer;
use anyhow::Context;
use locus_io::TerminationSignals;
use locus_policy::PolicyConfig;
use std::net::SocketAddr;
use std::path::PathBuf;

/// Flags of `locus switch`. Flags override the configuration file.
#[derive(clap::Args, Debug, Default)]
pub struct SwitchArgs {
    /// TOML configuration file.
    #[arg(long, short)]
    pub config: Option<PathBuf>,
    /// Client-facing address.
    #[arg(long)]
    pub listen: Option<SocketAddr>,
    /// Admin address for /locus/status and /metrics.
    #[arg(long)]
    pub admin: Option<SocketAddr>,
    /// Forwarding mode: proxy (every request routed), splice (first request routed, then a
    /// kernel-spliced tunnel) or handoff (the connection moves to the node; one-way).
    #[arg(long)]
    pub mode: Option<String>,
    /// Policy name with default parameters: rr, wrr, lc, wlc, p2c, hash, chash, maglev,
    /// chash-bounded, lard, lard-r.
    #[arg(long)]
    pub policy: Option<String>,
    /// A node, as `ADDR`, `NAME=ADDR`, `NAME=ADDR*WEIGHT`, with `@AGENT` (its handoff agent's
    /// address) for handoff mode; repeat for each node (replaces the file's nodes).
    #[arg(long = "node", value_name = "[NAME=]ADDR[*WEIGHT][@AGENT]")]
    pub nodes: Vec<String>,
    /// Handoff mode: file with the control channel's key in hex.
    #[arg(long, value_name = "FILE")]
    pub handoff_key_file: Option<PathBuf>,
    /// Handoff mode: interface to attach the tc forwarder to (none: nodes on this host).
    #[arg(long, value_name = "IFACE")]
    pub handoff_interface: Option<String>,
    /// Handoff mode: bpffs directory to pin the forwarder's maps in (survives restarts).
    #[arg(long, value_name = "DIR")]
    pub handoff_pin_dir: Option<PathBuf>,
    /// l4 mode: how the forwarder picks a node at a client's SYN: rr, wrr, lc or hash.
    #[arg(long, value_name = "SELECTION")]
    pub l4_selection: Option<String>,
    /// Worker threads (0 = one per core).
    #[arg(long)]
    pub workers: Option<usize>,
    /// Combined Log Format access log file (`-` for standard output).
    #[arg(long)]
    pub access_log: Option<PathBuf>,
    /// Most client connections held at once.
    #[arg(long)]
    pub max_connections: Option<usize>,
    /// Check the configuration and exit.
    #[arg(long)]
    pub check: bool,
}

/// Parse `[NAME=]ADDR[*WEIGHT][@AGENT]`.
pub fn parse_node(spec: &str) -> anyhow::Result<NodeEntry> {
    let (spec_main, handoff) = match spec.split_once('@') {
        Some((m, a)) => (
            m,
            Some(
                a.parse::<SocketAddr>()
                    .with_context(|| format!("node `{spec}`: agent `{a}` is not an IP:port"))?,
            ),
        ),
        None => (spec, None),
    };
    let (name, rest) = match spec_main.split_once('=') {
        Some((n, r)) => (Some(n.to_string()), r),
        None => (None, spec),
    };
    let (addr, weight) = match rest.split_once('*') {
        Some((a, w)) => (a, w.parse::<u32>().with_context(|| format!("node `{spec}`: bad weight `{w}`"))?),
        None => (rest, 1),
    };
    let addr =
        addr.parse::<SocketAddr>().with_context(|| format!("node `{spec}`: `{addr}` is not an IP:port"))?;
    Ok(NodeEntry { name, addr, weight, handoff })
}

impl SwitchArgs {
    /// The configuration these flags describe.
    pub fn to_config(&self) -> anyhow::Result<SwitchConfig> {
        let mut config = match &self.config {
            Some(path) => SwitchConfig::from_file(path)?,
            None => SwitchConfig::default(),
        };
        if let Some(a) = self.listen {
            config.listen = a;
        }
        if let Some(a) = self.admin {
            config.admin = Some(a);
        }
        if let Some(m) = &self.mode {
            config.mode = m.parse::<Mode>()?;
        }
        if let Some(p) = &self.policy {
            config.policy = PolicyConfig::from_name(p)?;
        }
        if !self.nodes.is_empty() {
            config.nodes = self.nodes.iter().map(|s| parse_node(s)).collect::<anyhow::Result<_>>()?;
        }
        if let Some(w) = self.workers {
            config.workers = w;
        }
        if let Some(p) = &self.access_log {
            config.access_log = Some(p.clone());
        }
        if let Some(m) = self.max_connections {
            config.limits.max_connections = m;
        }
        if let Some(k) = &self.handoff_key_file {
            config.handoff.key_file = Some(k.clone());
        }
        if let Some(i) = &self.handoff_interface {
            config.handoff.interface = Some(i.clone());
        }
        if let Some(d) = &self.handoff_pin_dir {
            config.handoff.pin_dir = Some(d.clone());
        }
        if let Some(s) = &self.l4_selection {
            config.handoff.l4_selection = s.clone();
        }
        config.validate()?;
        Ok(config)
    }
}

/// Run `locus switch` until SIGTERM or Ctrl-C.
pub fn run(args: SwitchArgs) -> anyhow::Result<()> {
    let config = args.to_config()?;
    if args.check {
        // The same fitting of max_connections to the open-file limit as at start-up.
        let plan = crate::open_files::plan(&config)?;
        if let Some(warning) = plan.warning() {
            eprintln!("warning: {warning}");
        }
        println!(
            "configuration OK: {} nodes, policy {}, at most {} connections (open-file limit {})",
            config.nodes.len(),
            config.policy.name(),
            plan.max_connections,
            plan.limit.soft
        );
        return Ok(());
    }
    // Held from before the address is printed: a SIGTERM right after it (a supervisor or a
    // test that starts, uses and stops the switch at once) is taken by the wait below, never
    // by the default action, which would kill the switch without draining.
    let signals = TerminationSignals::block().context("blocking SIGTERM and SIGINT")?;
    let server = SwitchServer::start(config)?;
    println!("locus switch listening on {}", server.addr());
    if let Some(a) = server.admin_addr() {
        println!("admin on http://{a}/locus/status");
    }
    let signal = signals.wait().context("waiting for SIGTERM or SIGINT")?;
    tracing::info!(signal, "shutting down");
    server.shutdown();
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_specs_parse_name_address_and_weight() {
        let n = parse_node("web1=127.0.0.1:8001*3").unwrap();
        assert_eq!((n.name.as_deref(), n.addr.port(), n.weight), (Some("web1"), 8001, 3));
        let n = parse_node("127.0.0.1:8002").unwrap();
        assert_eq!((n.name, n.weight), (None, 1));
        assert!(parse_node("web=localhost:80").unwrap_err().to_string().contains("not an IP:port"));
        assert!(parse_node("127.0.0.1:1*x").unwrap_err().to_string().contains("bad weight"));
        let n = parse_node("n1=10.0.0.2:80*2@10.0.0.2:7100").unwrap();
        assert_eq!((n.weight, n.handoff), (2, Some("10.0.0.2:7100".parse().unwrap())));
        assert!(parse_node("10.0.0.2:80@agent").unwrap_err().to_string().contains("not an IP:port"));
    }

    #[test]
    fn flags_override_the_file_and_are_validated() {
        let args = SwitchArgs {
            nodes: vec!["127.0.0.1:1".into(), "127.0.0.1:2".into()],
            policy: Some("chash-bounded".into()),
            ..SwitchArgs::default()
        };
        let c = args.to_config().unwrap();
        assert_eq!(c.nodes.len(), 2);
        assert_eq!(c.policy.name(), "chash-bounded");
        let args = SwitchArgs {
            policy: Some("nope".into()),
            nodes: vec!["127.0.0.1:1".into()],
            ..Default::default()
        };
        assert!(args.to_config().unwrap_err().to_string().contains("unknown policy"));
        let args = SwitchArgs::default();
        assert!(args.to_config().unwrap_err().to_string().contains("no nodes"));
    }
}
