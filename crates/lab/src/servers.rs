//! The servers a lab or benchmark starts on a `Net`'s hosts as child processes, with their configuration and
//! log in a scratch folder: Locus nodes and switches (a `locus` executable), HAProxy (`balance
//! uri` + consistent hashing + `hash-balance-factor 150`, or round robin), and NGINX as a
//! keep-alive reverse proxy (`hash $request_uri consistent`, or round robin) or a static server.

use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

pub use crate::dc_node_spec::DcNodeSpec;
use crate::error::LabError;
use crate::process::{ChildGuard, give_open_files, require_program};

pub use crate::net::Net;

/// A started server.
pub struct Server {
    pub name: String,
    /// Where it serves HTTP.
    pub addr: SocketAddr,
    /// Its Locus admin listener (`/locus/status`), if it has one.
    pub admin: Option<SocketAddr>,
    pub process: ChildGuard,
    /// Its output.
    pub log: PathBuf,
    /// Its handoff agent's control address, if it runs one.
    pub agent: Option<SocketAddr>,
}

impl Server {
    /// Fail if the process has exited.
    pub fn check_running(&mut self) -> Result<(), LabError> {
        match self.process.exited() {
            Some(status) => Err(LabError::ServerStart {
                name: self.name.clone(),
                message: format!("exited: {status}"),
                log: self.log.clone(),
            }),
            None => Ok(()),
        }
    }
}

const START_LIMIT: Duration = Duration::from_secs(15);

/// Lines of a failed server's log quoted in its start error.
const LOG_TAIL_LINES: usize = 5;

/// The last [`LOG_TAIL_LINES`] non-empty lines of `log` as ` (log: a | b)`, or nothing when
/// it is empty or unreadable.
fn log_tail(log: &Path) -> String {
    let Ok(text) = std::fs::read(log) else { return String::new() };
    let text = String::from_utf8_lossy(&text);
    let lines: Vec<&str> = text.lines().map(str::trim).filter(|l| !l.is_empty()).collect();
    if lines.is_empty() {
        return String::new();
    }
    format!(" (log: {})", lines[lines.len().saturating_sub(LOG_TAIL_LINES)..].join(" | "))
}

/// Wait until `addr` (and `admin`) are free on `role`'s host, spawn `cmd` there and wait until
/// they accept connections from the client host.
fn start(
    net: &Net,
    role: &str,
    name: &str,
    cmd: Command,
    addr: SocketAddr,
    admin: Option<SocketAddr>,
    scratch: &Path,
) -> Result<Server, LabError> {
    let log = scratch.join(format!("{name}.log"));
    let wanted: Vec<SocketAddr> = std::iter::once(addr).chain(admin).collect();
    net.wait_until_free(role, &wanted)?;
    let mut process = ChildGuard::spawn(name, cmd, &log)?;
    // The log's end goes into the error: a bench's scratch folder (and the log in it) is
    // removed before anyone reads the message.
    let fail = |message: String| LabError::ServerStart {
        name: name.to_string(),
        message: format!("{message}{}", log_tail(&log)),
        log: log.clone(),
    };
    let outcome = net.on_host("client", || -> Result<Result<(), String>, LabError> {
        let started = Instant::now();
        for a in &wanted {
            loop {
                if let Some(status) = process.exited() {
                    return Ok(Err(format!("exited early: {status}")));
                }
                if TcpStream::connect_timeout(a, Duration::from_millis(200)).is_ok() {
                    break;
                }
                if started.elapsed() > START_LIMIT {
                    return Ok(Err(format!("not listening on {a} within {START_LIMIT:?}")));
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        Ok(Ok(()))
    })?;
    outcome.map_err(fail)?;
    Ok(Server { name: name.to_string(), addr, admin, process, log, agent: None })
}

/// How to start a `locus node`.
#[derive(Clone, Debug)]
pub struct NodeSpec {
    /// Its role (host) and name, e.g. `node1`.
    pub role: String,
    pub root: PathBuf,
    pub workers: u32,
    /// `--cache-size`, e.g. `8MiB`.
    pub cache_size: Option<String>,
    /// `--cache-policy`: lru, lfu, gds, gdsf.
    pub cache_policy: Option<String>,
    /// `--max-object`.
    pub max_object: Option<String>,
    /// `--storage`, e.g. `seek_ms=8,mb_s=40,disks=1`.
    pub storage: Option<String>,
    /// `--cpu`, e.g. `lard98,request_us=145`.
    pub cpu: Option<String>,
    /// `--classes`: a `[[classes]]` file of dynamic classes.
    pub class_file: Option<PathBuf>,
    /// Start the admin listener (port 9090 in the lab).
    pub admin: bool,
    /// Run the handoff agent (control port 7100 in the lab) with this key file.
    pub handoff_key_file: Option<PathBuf>,
    /// Agent option: clone l4 connections (ask the switch where each request goes).
    pub handoff_clone: bool,
    /// Agent option: clone only connections to this address (the l4 service).
    pub handoff_clone_service: Option<SocketAddr>,
    /// Agent option: `handoff` or `forward` (back-end forwarding) for requests routed away.
    pub handoff_rehandoff: Option<String>,
    /// Listen on every address (0.0.0.0), so that connections to the virtual IP that the l4
    /// forwarder steers here are accepted too.
    pub listen_any: bool,
    /// HTTP port in the lab; `None`: [`HTTP_PORT`].
    pub port: Option<u16>,
    /// The agent's control port in the lab; `None`: [`AGENT_PORT`].
    pub agent_port: Option<u16>,
    /// Agent option: relay handed-off connections to this unmodified server (e.g. NGINX).
    pub handoff_upstream: Option<SocketAddr>,
    /// Cooperative caching with these other nodes (their HTTP listeners); empty: off.
    pub coop_peers: Vec<SocketAddr>,
    /// DC mode: the cluster, this node's name in it, its quota and method.
    pub dc: Option<DcNodeSpec>,
}

impl NodeSpec {
    /// A node with one worker, default cache, no storage model and no admin.
    pub fn new(role: &str, root: &Path) -> NodeSpec {
        NodeSpec {
            role: role.to_string(),
            root: root.to_path_buf(),
            workers: 1,
            cache_size: None,
            cache_policy: None,
            max_object: None,
            storage: None,
            cpu: None,
            class_file: None,
            admin: false,
            handoff_key_file: None,
            handoff_clone: false,
            handoff_clone_service: None,
            handoff_rehandoff: None,
            listen_any: false,
            port: None,
            agent_port: None,
            handoff_upstream: None,
            coop_peers: Vec::new(),
            dc: None,
        }
    }
}

/// Port of every HTTP server in the lab.
pub const HTTP_PORT: u16 = 80;
/// Port of the Locus admin listeners in the lab.
pub const ADMIN_PORT: u16 = 9090;
/// Port of the nodes' handoff agents in the lab.
pub const AGENT_PORT: u16 = 7100;

/// Write a new random control-channel key (hex) to `path`, readable by its owner only.
pub fn write_handoff_key(path: &Path) -> Result<(), LabError> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let mut key = [0u8; 32];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut key))
        .map_err(|e| LabError::io(Path::new("/dev/urandom"), e))?;
    let hex: String = key.iter().map(|b| format!("{b:02x}")).collect();
    std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .and_then(|mut f| std::io::Write::write_all(&mut f, hex.as_bytes()))
        .map_err(|e| LabError::io(path, e))
}

/// `locus node` on its role's host.
pub fn locus_node(net: &Net, locus: &Path, scratch: &Path, spec: &NodeSpec) -> Result<Server, LabError> {
    let addr = net.listen_addr(&spec.role, spec.port.unwrap_or(HTTP_PORT))?;
    let admin = if spec.admin { Some(net.listen_addr(&spec.role, ADMIN_PORT)?) } else { None };
    let mut cmd = net.command(&spec.role, locus)?;
    let listen =
        if spec.listen_any { SocketAddr::new(Ipv4Addr::UNSPECIFIED.into(), addr.port()) } else { addr };
    cmd.arg("node").args(["--listen", &listen.to_string(), "--root"]).arg(&spec.root);
    cmd.args(["--name", &spec.role, "--workers", &spec.workers.to_string()]);
    if let Some(a) = admin {
        cmd.args(["--admin", &a.to_string()]);
    }
    let optional = [
        ("--cache-size", &spec.cache_size),
        ("--cache-policy", &spec.cache_policy),
        ("--max-object", &spec.max_object),
        ("--storage", &spec.storage),
        ("--cpu", &spec.cpu),
    ];
    for (flag, value) in optional {
        if let Some(v) = value {
            cmd.args([flag, v]);
        }
    }
    if let Some(f) = &spec.class_file {
        cmd.arg("--classes").arg(f);
    }
    if !spec.coop_peers.is_empty() {
        let peers: Vec<String> = spec.coop_peers.iter().map(|p| format!("http://{p}")).collect();
        cmd.args(["--coop-peers", &peers.join(","), "--coop-self", &format!("http://{addr}")]);
    }
    if let Some(dc) = &spec.dc {
        cmd.args(dc.args());
    }
    let agent = match &spec.handoff_key_file {
        Some(key) => {
            let agent = net.listen_addr(&spec.role, spec.agent_port.unwrap_or(AGENT_PORT))?;
            cmd.args(["--handoff-listen", &agent.to_string(), "--handoff-key-file"]).arg(key);
            if spec.handoff_clone {
                cmd.arg("--handoff-clone");
            }
            if let Some(s) = spec.handoff_clone_service {
                cmd.args(["--handoff-clone-service", &s.to_string()]);
            }
            if let Some(r) = &spec.handoff_rehandoff {
                cmd.args(["--handoff-rehandoff", r]);
            }
            if let Some(u) = spec.handoff_upstream {
                cmd.args(["--handoff-upstream", &u.to_string()]);
            }
            Some(agent)
        }
        None => None,
    };
    net.wait_until_free(&spec.role, agent.as_slice())?;
    let mut server = start(net, &spec.role, &spec.role, cmd, addr, admin, scratch)?;
    server.agent = agent;
    Ok(server)
}

/// How to start a `locus switch`.
#[derive(Clone, Debug)]
pub struct SwitchSpec {
    pub policy: String,
    pub mode: String,
    pub workers: u32,
    pub max_connections: usize,
    /// Start the admin listener (port 9090 in the lab).
    pub admin: bool,
    /// `[limits] splice_min_bytes` (0 turns splice(2) relaying off); `None`: the default.
    pub splice_min_bytes: Option<u64>,
    /// A `[policy]` table (TOML) naming `policy` with its parameters; `None`: `--policy`.
    pub policy_table: Option<String>,
    /// Handoff and l4 modes: the key file, the nodes' agent addresses (in node order), and a
    /// bpffs directory to pin the forwarder's maps in.
    pub handoff_key_file: Option<PathBuf>,
    pub handoff_agents: Vec<SocketAddr>,
    pub handoff_pin_dir: Option<PathBuf>,
    /// l4 mode: how the forwarder picks a node at a SYN (rr, wrr, lc, hash); `None`: rr.
    pub l4_selection: Option<String>,
    /// `--class-file`: the request classes the policy estimates costs with.
    pub class_file: Option<PathBuf>,
    /// `--site-root`: the documents whose sizes the policy reads.
    pub site_root: Option<PathBuf>,
    /// The nodes' admin listeners (in node order), for policies fed by node reports.
    pub node_admins: Vec<SocketAddr>,
}

/// `locus switch` on the switch host, listening on `listen`, in front of `nodes` (name and
/// address each).
pub fn locus_switch(
    net: &Net,
    locus: &Path,
    scratch: &Path,
    listen: SocketAddr,
    nodes: &[(String, SocketAddr)],
    spec: &SwitchSpec,
) -> Result<Server, LabError> {
    let admin = if spec.admin { Some(net.listen_addr("switch", ADMIN_PORT)?) } else { None };
    let mut cmd = net.command("switch", locus)?;
    // Enough descriptors for `max_connections` in any mode (splice: 6 a connection), plus
    // pools and listeners, so the switch does not lower its limit to fit the machine's.
    give_open_files(&mut cmd, spec.max_connections as u64 * 6 + 4096);
    cmd.arg("switch");
    // No flags for these: a configuration file holds them, and the flags below override the rest.
    let mut file = spec.policy_table.clone().unwrap_or_default();
    if let Some(bytes) = spec.splice_min_bytes {
        file.push_str(&format!("[limits]\nsplice_min_bytes = {bytes}\n"));
    }
    if !file.is_empty() {
        let path = scratch.join("locus-switch.toml");
        std::fs::write(&path, file).map_err(|e| LabError::io(&path, e))?;
        cmd.arg("--config").arg(&path);
    }
    if spec.policy_table.is_none() {
        cmd.args(["--policy", &spec.policy]);
    }
    cmd.args([
        "--listen",
        &listen.to_string(),
        "--mode",
        &spec.mode,
        "--workers",
        &spec.workers.to_string(),
        "--max-connections",
        &spec.max_connections.to_string(),
    ]);
    if let Some(a) = admin {
        cmd.args(["--admin", &a.to_string()]);
    }
    for (i, (name, addr)) in nodes.iter().enumerate() {
        let agent = spec.handoff_agents.get(i).map_or(String::new(), |a| format!("@{a}"));
        let admin = spec.node_admins.get(i).map_or(String::new(), |a| format!("+{a}"));
        cmd.args(["--node", &format!("{name}={addr}{agent}{admin}")]);
    }
    if let Some(key) = &spec.handoff_key_file {
        cmd.arg("--handoff-key-file").arg(key);
    }
    if net.lab().is_some() && is_one_way_mode(&spec.mode) {
        // The forwarder steers the clients' packets to the nodes across the lab's LAN.
        cmd.args(["--handoff-interface", "eth0"]);
    }
    if let Some(s) = &spec.l4_selection {
        cmd.args(["--l4-selection", s]);
    }
    if let Some(dir) = &spec.handoff_pin_dir {
        cmd.arg("--handoff-pin-dir").arg(dir);
    }
    if let Some(f) = &spec.class_file {
        cmd.arg("--class-file").arg(f);
    }
    if let Some(d) = &spec.site_root {
        cmd.arg("--site-root").arg(d);
    }
    start(net, "switch", "locus-switch", cmd, listen, admin, scratch)
}

/// Whether a Locus switch mode is one-way (`handoff`, `l4`): it needs a control-channel key,
/// agents on the nodes and, across a LAN, an interface for the tc forwarder.
pub(crate) fn is_one_way_mode(mode: &str) -> bool {
    matches!(mode, "handoff" | "l4")
}

/// How HAProxy picks a node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HaproxyBalance {
    /// `balance uri`, `hash-type consistent`, `hash-balance-factor 150`.
    UriChashBounded,
    /// `balance roundrobin`.
    RoundRobin,
    /// `balance leastconn`.
    LeastConn,
}

impl HaproxyBalance {
    /// The backend lines.
    fn config(self) -> &'static str {
        match self {
            HaproxyBalance::UriChashBounded => {
                "  balance uri\n  hash-type consistent\n  hash-balance-factor 150\n"
            }
            HaproxyBalance::RoundRobin => "  balance roundrobin\n",
            HaproxyBalance::LeastConn => "  balance leastconn\n",
        }
    }
}

/// The HAProxy configuration for a keep-alive HTTP proxy in front of `nodes`.
pub fn haproxy_config(
    listen: SocketAddr,
    nodes: &[(String, SocketAddr)],
    balance: HaproxyBalance,
    threads: u32,
) -> String {
    let servers: String = nodes.iter().map(|(name, addr)| format!("  server {name} {addr}\n")).collect();
    // maxconn is bounded by the 20,000-descriptor limit of these machines (two per connection).
    format!(
        "global\n  nbthread {threads}\n  maxconn 9000\n\
         defaults\n  mode http\n  timeout connect 5s\n  timeout client 60s\n  timeout server 60s\n  timeout http-keep-alive 60s\n  option http-keep-alive\n\
         frontend lab\n  bind {listen}\n  default_backend nodes\n\
         backend nodes\n{}{servers}",
        balance.config()
    )
}

/// HAProxy on the switch host.
pub fn haproxy(
    net: &Net,
    scratch: &Path,
    listen: SocketAddr,
    nodes: &[(String, SocketAddr)],
    balance: HaproxyBalance,
    threads: u32,
) -> Result<Server, LabError> {
    let bin = require_program("haproxy", "haproxy")?;
    let path = scratch.join("haproxy.cfg");
    std::fs::write(&path, haproxy_config(listen, nodes, balance, threads))
        .map_err(|e| LabError::io(&path, e))?;
    let mut cmd = net.command("switch", &bin)?;
    cmd.arg("-db").arg("-f").arg(&path);
    start(net, "switch", "haproxy", cmd, listen, None, scratch)
}

/// How NGINX picks an upstream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NginxBalance {
    /// `hash $request_uri consistent`.
    UriChash,
    /// The default round robin.
    RoundRobin,
    /// `least_conn`.
    LeastConn,
}

/// The `http` block's common lines; temporary files under `dir`.
fn nginx_http_common(dir: &str) -> String {
    format!(
        "  access_log off;\n  tcp_nodelay on;\n  keepalive_requests 1000000;\n  keepalive_timeout 60s;\n\
         \x20 default_type application/octet-stream;\n\
         \x20 client_body_temp_path {dir}/body;\n  proxy_temp_path {dir}/proxy;\n  fastcgi_temp_path {dir}/fastcgi;\n  uwsgi_temp_path {dir}/uwsgi;\n  scgi_temp_path {dir}/scgi;\n"
    )
}

/// The NGINX configuration of a reverse proxy with keep-alive connections to `nodes`.
pub fn nginx_proxy_config(
    dir: &Path,
    listen: SocketAddr,
    nodes: &[(String, SocketAddr)],
    balance: NginxBalance,
    workers: u32,
) -> String {
    let d = dir.display().to_string();
    let hash = match balance {
        NginxBalance::UriChash => "    hash $request_uri consistent;\n",
        NginxBalance::RoundRobin => "",
        NginxBalance::LeastConn => "    least_conn;\n",
    };
    let servers: String = nodes.iter().map(|(_, addr)| format!("    server {addr};\n")).collect();
    format!(
        "user root;\nmaster_process on;\ndaemon off;\nworker_processes {workers};\nerror_log {d}/error.log;\npid {d}/nginx.pid;\n\
         events {{ worker_connections 8192; }}\n\
         http {{\n{}\
         \x20 upstream nodes {{\n{hash}{servers}    keepalive 256;\n    keepalive_requests 1000000;\n  }}\n\
         \x20 server {{\n    listen {listen};\n    location / {{\n      proxy_pass http://nodes;\n      proxy_http_version 1.1;\n      proxy_set_header Connection \"\";\n      proxy_set_header Host $host;\n      proxy_buffers 32 16k;\n      proxy_max_temp_file_size 0;\n    }}\n  }}\n}}\n",
        nginx_http_common(&d)
    )
}

/// NGINX as a keep-alive reverse proxy on the switch host.
pub fn nginx_proxy(
    net: &Net,
    scratch: &Path,
    listen: SocketAddr,
    nodes: &[(String, SocketAddr)],
    balance: NginxBalance,
    workers: u32,
) -> Result<Server, LabError> {
    let bin = require_program("nginx", "nginx")?;
    let dir = nginx_prefix(scratch)?;
    let path = dir.join("nginx.conf");
    std::fs::write(&path, nginx_proxy_config(&dir, listen, nodes, balance, workers))
        .map_err(|e| LabError::io(&path, e))?;
    let mut cmd = net.command("switch", &bin)?;
    cmd.arg("-c").arg(&path).arg("-p").arg(&dir);
    start(net, "switch", "nginx", cmd, listen, None, scratch)
}

/// NGINX's folder in `scratch`, made and given as an absolute path: NGINX takes a relative
/// `-c` and the relative paths in its configuration from its prefix (`-p`), not from the
/// working directory, so a relative scratch folder (`--out lab-out/…`) would be doubled.
fn nginx_prefix(scratch: &Path) -> Result<PathBuf, LabError> {
    let dir = std::path::absolute(scratch.join("nginx")).map_err(|e| LabError::io(scratch, e))?;
    std::fs::create_dir_all(&dir).map_err(|e| LabError::io(&dir, e))?;
    Ok(dir)
}

/// NGINX with one worker process, sendfile and an open-file cache, serving `root` on `role`'s
/// host (port 8080 in the lab).
pub fn nginx_static(net: &Net, scratch: &Path, role: &str, root: &Path) -> Result<Server, LabError> {
    let bin = require_program("nginx", "nginx")?;
    let addr = net.listen_addr(role, 8080)?;
    let dir = nginx_prefix(scratch)?;
    let root = std::path::absolute(root).map_err(|e| LabError::io(root, e))?;
    let d = dir.display().to_string();
    let config = format!(
        "master_process off;\ndaemon off;\nworker_processes 1;\nerror_log {d}/error.log;\npid {d}/nginx.pid;\n\
         events {{ worker_connections 16384; }}\n\
         http {{\n{}  sendfile on;\n  tcp_nopush on;\n  open_file_cache max=10000 inactive=60s;\n\
         \x20 server {{\n    listen {addr};\n    root {};\n  }}\n}}\n",
        nginx_http_common(&d),
        root.display()
    );
    let path = dir.join("nginx.conf");
    std::fs::write(&path, config).map_err(|e| LabError::io(&path, e))?;
    let mut cmd = net.command(role, &bin)?;
    cmd.arg("-c").arg(&path).arg("-p").arg(&dir);
    start(net, role, "nginx", cmd, addr, None, scratch)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nodes() -> Vec<(String, SocketAddr)> {
        vec![
            ("node1".into(), "10.253.0.11:80".parse().unwrap()),
            ("node2".into(), "10.253.0.12:80".parse().unwrap()),
        ]
    }

    #[test]
    fn a_start_error_quotes_the_last_log_lines_and_nothing_for_an_empty_or_missing_log() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("s.log");
        assert_eq!(log_tail(&log), "");
        std::fs::write(&log, "\n  \n").unwrap();
        assert_eq!(log_tail(&log), "");
        let lines: Vec<String> = (1..=8).map(|i| format!("line {i}")).collect();
        std::fs::write(&log, lines.join("\n") + "\n\n").unwrap();
        assert_eq!(log_tail(&log), " (log: line 4 | line 5 | line 6 | line 7 | line 8)");
    }

    #[test]
    fn haproxy_configs_hash_the_uri_with_bounded_loads_or_go_round_robin() {
        let listen = "10.253.0.100:80".parse().unwrap();
        let c = haproxy_config(listen, &nodes(), HaproxyBalance::UriChashBounded, 2);
        for line in ["balance uri", "hash-type consistent", "hash-balance-factor 150", "nbthread 2"] {
            assert!(c.contains(line), "{line} missing:\n{c}");
        }
        assert!(c.contains("server node2 10.253.0.12:80") && c.contains("bind 10.253.0.100:80"));
        let rr = haproxy_config(listen, &nodes(), HaproxyBalance::RoundRobin, 1);
        assert!(rr.contains("balance roundrobin") && !rr.contains("hash-type"));
    }

    #[test]
    fn nginx_proxy_keeps_upstream_connections_alive_and_hashes_the_uri() {
        let c = nginx_proxy_config(
            Path::new("/tmp/x"),
            "10.253.0.100:80".parse().unwrap(),
            &nodes(),
            NginxBalance::UriChash,
            2,
        );
        for line in [
            "hash $request_uri consistent;",
            "keepalive 256;",
            "proxy_http_version 1.1;",
            "proxy_set_header Connection \"\";",
            "server 10.253.0.11:80;",
            "worker_processes 2;",
        ] {
            assert!(c.contains(line), "{line} missing:\n{c}");
        }
        let rr = nginx_proxy_config(
            Path::new("/tmp/x"),
            "10.253.0.100:80".parse().unwrap(),
            &nodes(),
            NginxBalance::RoundRobin,
            1,
        );
        assert!(!rr.contains("hash "));
    }
}
