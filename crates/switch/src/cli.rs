//! `locus switch`: command-line flags (over an optional TOML file), start, wait for SIGTERM or
//! Ctrl-C, then shut down gracefully.

use crate::config::{NodeEntry, SwitchConfig};
use crate::mode::{L4Selection, Mode};
use crate::node_addr::resolve_node_addr;
use crate::server::SwitchServer;
use anyhow::Context;
use locus_io::{ConfigFileArgs, TerminationSignals};
use locus_policy::PolicyConfig;
use std::net::SocketAddr;
use std::path::PathBuf;

/// Flags of `locus switch`. Flags override the configuration file.
#[derive(clap::Args, Debug, Default)]
pub struct SwitchArgs {
    #[command(flatten)]
    pub file: ConfigFileArgs,
    /// Client-facing address.
    #[arg(long)]
    pub listen: Option<SocketAddr>,
    /// Admin address for /locus/status and /metrics.
    #[arg(long)]
    pub admin: Option<SocketAddr>,
    /// Forwarding mode (the file's `mode`; default proxy).
    #[arg(long, value_enum)]
    pub mode: Option<Mode>,
    /// Policy name with default parameters (the help lists every accepted name).
    #[arg(long, value_name = "NAME", help = policy_flag_help())]
    pub policy: Option<String>,
    /// A node, as `ADDR`, `NAME=ADDR`, `NAME=ADDR*WEIGHT`, with `@AGENT` (its handoff agent's
    /// address) for handoff mode and `+ADMIN` (its admin listener, for metric-fed policies);
    /// ADDR, AGENT and ADMIN are IP:PORT or HOST:PORT (resolved at start-up); repeat for each
    /// node (replaces the file's nodes).
    #[arg(long = "node", value_name = "[NAME=]ADDR[*WEIGHT][@AGENT][+ADMIN]")]
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
    /// l4 mode: how the forwarder picks a node at a client's SYN.
    #[arg(long, value_enum, value_name = "SELECTION")]
    pub l4_selection: Option<L4Selection>,
    /// A host that absolute-form request targets may name besides the switch's own address
    /// (repeatable; adds to the file's `server_names`).
    #[arg(long = "server-name", value_name = "HOST")]
    pub server_names: Vec<String>,
    /// Worker threads (0 = one per core).
    #[arg(long)]
    pub workers: Option<usize>,
    /// Combined Log Format access log file (`-` for standard output).
    #[arg(long)]
    pub access_log: Option<PathBuf>,
    /// Most client connections held at once.
    #[arg(long)]
    pub max_connections: Option<usize>,
    /// A TOML file of request classes (`[[classes]]`, as the nodes'), appended to the file's.
    #[arg(long, value_name = "FILE")]
    pub class_file: Option<PathBuf>,
    /// The site's document root, scanned for the file table content-aware policies read.
    #[arg(long, value_name = "DIR")]
    pub site_root: Option<PathBuf>,
    /// Binary upgrade: take the listening sockets over from the switch serving this control
    /// socket instead of binding them; it stops accepting and drains once this one serves.
    #[arg(long, value_name = "SOCKET")]
    pub upgrade_from: Option<PathBuf>,
}

/// The `--policy` help, naming every policy the policy crate accepts.
fn policy_flag_help() -> String {
    let names: Vec<&str> = PolicyConfig::accepted_names().collect();
    format!("Policy name with default parameters: {}", names.join(", "))
}

/// Parse `[NAME=]ADDR[*WEIGHT][@AGENT][+ADMIN]`; ADDR, AGENT and ADMIN are `IP:PORT` or
/// `HOST:PORT` (resolved now).
pub fn parse_node(spec: &str) -> anyhow::Result<NodeEntry> {
    let resolve = |text: &str| resolve_node_addr(text).map_err(|e| anyhow::anyhow!("node `{spec}`: {e}"));
    let (spec_main, admin) = match spec.split_once('+') {
        Some((m, admin)) => (m, Some(resolve(admin)?)),
        None => (spec, None),
    };
    let (spec_main, handoff) = match spec_main.split_once('@') {
        Some((m, agent)) => (m, Some(resolve(agent)?)),
        None => (spec_main, None),
    };
    let (name, rest) = match spec_main.split_once('=') {
        Some((n, r)) => (Some(n.to_string()), r),
        None => (None, spec_main),
    };
    let (addr, weight) = match rest.split_once('*') {
        Some((a, w)) => (a, w.parse::<u32>().with_context(|| format!("node `{spec}`: bad weight `{w}`"))?),
        None => (rest, 1),
    };
    Ok(NodeEntry { name, addr: resolve(addr)?, weight, handoff, admin })
}

impl SwitchArgs {
    /// The configuration these flags describe.
    pub fn to_config(&self) -> anyhow::Result<SwitchConfig> {
        let mut config = match &self.file.config {
            Some(path) => SwitchConfig::from_file(path)?,
            None => SwitchConfig::default(),
        };
        if let Some(a) = self.listen {
            config.listen = a;
        }
        if let Some(a) = self.admin {
            config.admin = Some(a);
        }
        if let Some(m) = self.mode {
            config.mode = m;
        }
        if let Some(p) = &self.policy {
            config.policy = PolicyConfig::from_name(p)?;
        }
        if !self.nodes.is_empty() {
            config.nodes = self.nodes.iter().map(|s| parse_node(s)).collect::<anyhow::Result<_>>()?;
        }
        config.server_names.extend(self.server_names.iter().cloned());
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
        if let Some(s) = self.l4_selection {
            config.handoff.l4_selection = s;
        }
        if let Some(f) = &self.class_file {
            config.class_file = Some(f.clone());
        }
        if let Some(d) = &self.site_root {
            config.site_root = Some(d.clone());
        }
        config.validate()?;
        Ok(config)
    }
}

/// Run `locus switch` until SIGTERM or Ctrl-C.
pub fn run(args: SwitchArgs) -> anyhow::Result<()> {
    let config = args.to_config()?;
    let args = std::sync::Arc::new(args);
    if args.file.check {
        // The same fitting of max_connections to the open-file limit as at start-up.
        let plan = crate::open_files::plan(&config)?;
        if let Some(warning) = plan.warning() {
            eprintln!("warning: {warning}");
        }
        if let Some(tls) = &config.tls {
            tls.load(&[locus_tls::ALPN_HTTP1], std::time::SystemTime::now())?;
        }
        args.file.report_check(&format!(
            "{} nodes, policy {}, at most {} connections (open-file limit {})",
            config.nodes.len(),
            config.policy.name(),
            plan.max_connections,
            plan.limit.soft
        ));
        return Ok(());
    }
    // Held from before the address is printed: a SIGTERM right after it (a supervisor or a
    // test that starts, uses and stops the switch at once) is taken by the wait below, never
    // by the default action, which would kill the switch without draining.
    let signals = TerminationSignals::block_with_reload_and_upgrade()
        .context("blocking SIGTERM, SIGINT, SIGHUP and SIGUSR2")?;
    let server = match &args.upgrade_from {
        Some(from) => SwitchServer::start_taking_over(config, from)?,
        None => SwitchServer::start(config)?,
    };
    // Handed over to a newer switch: end as SIGTERM does, draining (the signal is taken by
    // the wait below).
    // SAFETY: kill and getpid have no preconditions.
    server.on_handed_over(Box::new(|| unsafe {
        libc::kill(libc::getpid(), libc::SIGTERM);
    }));
    let source = args.clone();
    server.set_config_source(Box::new(move || source.to_config().map_err(|e| format!("{e:#}"))));
    println!("locus switch listening on {}", server.addr());
    if let Some(a) = server.admin_addr() {
        println!("admin on http://{a}/locus/status");
    }
    if let Some(a) = server.tls_addr() {
        println!("HTTPS on https://{a}/");
    }
    // A successor (`--upgrade-from`) told the service manager it is the main process as it
    // took over.
    if args.upgrade_from.is_none() {
        locus_io::service_notify::ready();
    }
    let reload = || locus_io::service_notify::reloading(|| reload(&server));
    let upgrade = || crate::upgrade::start_successor(server.control_socket().as_deref());
    let signal = signals.wait_serving(reload, upgrade).context("waiting for signals")?;
    tracing::info!(signal, "shutting down");
    if !server.handed_over() {
        locus_io::service_notify::stopping();
    }
    server.shutdown();
    Ok(())
}

/// SIGHUP: read the configuration again (file and flags) and put it in force; a file that
/// does not parse or check is refused with the error, and the running configuration stays.
fn reload(server: &SwitchServer) {
    let answer = server.control("reload", "SIGHUP");
    if answer["ok"] != true {
        tracing::error!("{}", answer["error"].as_str().unwrap_or("reload refused"));
    }
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
        assert!(parse_node("127.0.0.1:1*x").unwrap_err().to_string().contains("bad weight"));
        let n = parse_node("n1=10.0.0.2:80*2@10.0.0.2:7100").unwrap();
        assert_eq!((n.weight, n.handoff), (2, Some("10.0.0.2:7100".parse().unwrap())));
        let n = parse_node("10.0.0.2:80@10.0.0.2:7100").unwrap();
        assert_eq!(
            (n.addr, n.handoff),
            ("10.0.0.2:80".parse().unwrap(), Some("10.0.0.2:7100".parse().unwrap()))
        );
        let n = parse_node("n1=10.0.0.2:80@10.0.0.2:7100+10.0.0.2:9100").unwrap();
        assert_eq!((n.handoff.unwrap().port(), n.admin), (7100, Some("10.0.0.2:9100".parse().unwrap())));
        let n = parse_node("10.0.0.2:80+10.0.0.2:9100").unwrap();
        assert_eq!((n.handoff, n.admin.unwrap().port()), (None, 9100));
        assert!(
            parse_node("10.0.0.2:80@agent").unwrap_err().to_string().contains("not IP:PORT or HOST:PORT")
        );
    }

    #[test]
    fn node_specs_take_host_names_and_name_a_host_that_does_not_resolve() {
        for spec in ["localhost:8080", "node1=localhost:8080", "node1=localhost:8080*2@localhost:7100"] {
            let n = parse_node(spec).unwrap_or_else(|e| panic!("{spec}: {e}"));
            assert!(n.addr.ip().is_loopback() && n.addr.port() == 8080, "{spec}: {}", n.addr);
        }
        let e = parse_node("web=nohost.invalid:80").unwrap_err().to_string();
        assert!(
            e.contains("web=nohost.invalid:80") && e.contains("cannot resolve host `nohost.invalid`"),
            "{e}"
        );
        let e = parse_node("web=localhost:80@agent.invalid:7100").unwrap_err().to_string();
        assert!(e.contains("`agent.invalid`"), "{e}");
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
        let args = SwitchArgs {
            nodes: vec!["127.0.0.1:1".into()],
            server_names: vec!["www.example.com".into()],
            ..Default::default()
        };
        assert_eq!(args.to_config().unwrap().server_names, vec!["www.example.com".to_string()]);
        let args = SwitchArgs { server_names: vec!["http://x/".into()], ..args };
        assert!(args.to_config().unwrap_err().to_string().contains("not a host name"));
    }
}
