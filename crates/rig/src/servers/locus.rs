//! Locus servers on a `Net`'s hosts (a `locus` executable): how to start a node (`NodeSpec`,
//! with its DC mode in `DcNodeSpec`) and a switch (`SwitchSpec`), the lab's ports, the
//! control-channel key of the one-way modes and the peer key of cooperating nodes, and the
//! command lines (and, for the peer key, the small configuration file) that say so.

use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};

use crate::error::RigError;
use crate::network::Net;
use crate::process::{CpuCgroup, give_open_files};
use crate::servers::server::{Server, start};
use crate::servers::tls_files::TlsFiles;

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
    /// A real CPU limit in CPUs (e.g. 0.25): the node runs in a cgroup of its own with that
    /// quota (`Server::cpu_cgroup` says which mechanism). `None`: the host's CPUs, unlimited.
    pub cpu_limit: Option<f64>,
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
    /// The cluster's peer key (a hex file) that signs coop and DC requests between nodes;
    /// every node of a cluster needs the same one. `None` with coop peers or DC mode:
    /// `peer.key` in the scratch folder, written with a new random key if it is not there,
    /// so the nodes started with one scratch folder share it.
    pub peer_key_file: Option<PathBuf>,
    /// Serve HTTPS with this certificate and these ticket keys.
    pub tls: Option<TlsFiles>,
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
            cpu_limit: None,
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
            peer_key_file: None,
            tls: None,
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
pub fn write_handoff_key(path: &Path) -> Result<(), RigError> {
    write_random_key(path)
}

/// Write a new random peer key (hex) to `path`, readable by its owner only: the key that
/// signs the coop and DC requests between the nodes of one cluster.
pub fn write_peer_key(path: &Path) -> Result<(), RigError> {
    write_random_key(path)
}

/// Write 32 random bytes in hex to `path`, readable by its owner only.
fn write_random_key(path: &Path) -> Result<(), RigError> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let mut key = [0u8; 32];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut key))
        .map_err(|e| RigError::io(Path::new("/dev/urandom"), e))?;
    let hex: String = key.iter().map(|b| format!("{b:02x}")).collect();
    std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .and_then(|mut f| std::io::Write::write_all(&mut f, hex.as_bytes()))
        .map_err(|e| RigError::io(path, e))
}

/// `locus node` on its role's host.
pub fn locus_node(net: &Net, locus: &Path, scratch: &Path, spec: &NodeSpec) -> Result<Server, RigError> {
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
    if !spec.coop_peers.is_empty() || spec.dc.is_some() {
        cmd.arg("--config").arg(peer_key_config(scratch, spec)?);
    }
    if let Some(tls) = &spec.tls {
        cmd.arg("--tls-cert").arg(&tls.cert).arg("--tls-key").arg(&tls.key);
        cmd.arg("--tls-ticket-keys").arg(&tls.ticket_keys);
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
    // Made before the node starts (and dropped after it if it fails to start): the node joins
    // it before it execs, so all its threads are limited from the first.
    let cpu_cgroup = match spec.cpu_limit {
        Some(cpus) => {
            let group = CpuCgroup::create(&spec.role, cpus)?;
            group.enter_on_exec(&mut cmd)?;
            Some(group)
        }
        None => None,
    };
    let mut server = start(net, &spec.role, &spec.role, cmd, addr, admin, scratch)?;
    server.agent = agent;
    server.cpu_cgroup = cpu_cgroup;
    Ok(server)
}

/// The node configuration file (in `scratch`) that names the peer key of `spec`'s cluster
/// (flags given with it override the rest of the defaults it leaves as they are); the key
/// is `spec.peer_key_file`, or `peer.key` in `scratch`, made if missing.
fn peer_key_config(scratch: &Path, spec: &NodeSpec) -> Result<PathBuf, RigError> {
    let key = match &spec.peer_key_file {
        Some(path) => path.clone(),
        None => {
            let path = scratch.join("peer.key");
            if !path.exists() {
                write_peer_key(&path)?;
            }
            path
        }
    };
    let key = std::fs::canonicalize(&key).map_err(|e| RigError::io(&key, e))?;
    let config = scratch.join(format!("{}-peer.toml", spec.role));
    let text = format!("peer_key_file = {}\n", toml_string(&key.to_string_lossy()));
    std::fs::write(&config, text).map_err(|e| RigError::io(&config, e))?;
    Ok(config)
}

/// `text` as a TOML basic string.
fn toml_string(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' | '\\' => {
                out.push('\\');
                out.push(c);
            }
            c if c.is_control() => out.push_str(&format!("\\u{:04X}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
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
    /// A TLS listener at this address with this certificate and these ticket keys.
    pub tls: Option<(TlsFiles, SocketAddr)>,
}

impl SwitchSpec {
    /// A switch with `policy` in `mode`, no admin listener, no handoff plane, no classes.
    pub fn new(policy: &str, mode: &str, workers: u32, max_connections: usize) -> SwitchSpec {
        SwitchSpec {
            policy: policy.to_string(),
            mode: mode.to_string(),
            workers,
            max_connections,
            admin: false,
            splice_min_bytes: None,
            policy_table: None,
            handoff_key_file: None,
            handoff_agents: Vec::new(),
            handoff_pin_dir: None,
            l4_selection: None,
            class_file: None,
            site_root: None,
            node_admins: Vec::new(),
            tls: None,
        }
    }
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
) -> Result<Server, RigError> {
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
    if let Some((tls, addr)) = &spec.tls {
        file.insert_str(0, &format!("listen_tls = \"{addr}\"\n"));
        file.push_str(&format!(
            "[tls]\nticket_keys = {:?}\n[[tls.certificates]]\ncert = {:?}\nkey = {:?}\n",
            tls.ticket_keys, tls.cert, tls.key
        ));
    }
    if !file.is_empty() {
        let path = scratch.join("locus-switch.toml");
        std::fs::write(&path, file).map_err(|e| RigError::io(&path, e))?;
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
pub fn is_one_way_mode(mode: &str) -> bool {
    matches!(mode, "handoff" | "l4")
}

/// A node's DC mode (`--dc-servers`, `--dc-self`, `--dc-quota`, `--dc-method`).
#[derive(Clone, Debug)]
pub struct DcNodeSpec {
    /// Every server of the cluster, by name, as clients reach it.
    pub servers: Vec<(String, SocketAddr)>,
    /// This node's name among them.
    pub self_name: String,
    /// Replica quota (`64MiB`); `None`: the node's default.
    pub quota: Option<String>,
    /// `naive`, `deletion-aware`, `resource-aware`, `migration`, or `no-replication` (DC
    /// serving with replication off).
    pub method: String,
    /// Balancing period in ms (`--dc-balance-ms`); `None`: the node's default.
    pub balance_ms: Option<u64>,
}

impl DcNodeSpec {
    /// The node's `--dc-…` arguments.
    pub fn args(&self) -> Vec<String> {
        let servers: Vec<String> = self.servers.iter().map(|(n, a)| format!("{n}={a}")).collect();
        let mut args =
            vec!["--dc-servers".into(), servers.join(","), "--dc-self".into(), self.self_name.clone()];
        if self.method == "no-replication" {
            args.extend(["--dc-replicate".into(), "false".into()]);
        } else {
            args.extend(["--dc-method".into(), self.method.clone()]);
        }
        if let Some(q) = &self.quota {
            args.extend(["--dc-quota".into(), q.clone()]);
        }
        if let Some(b) = self.balance_ms {
            args.extend(["--dc-balance-ms".into(), b.to_string()]);
        }
        args
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cooperating_nodes_started_in_one_scratch_folder_share_one_new_peer_key() {
        let scratch = tempfile::tempdir().unwrap();
        let node = |role: &str| NodeSpec::new(role, Path::new("/srv"));
        let first = peer_key_config(scratch.path(), &node("node1")).unwrap();
        let second = peer_key_config(scratch.path(), &node("node2")).unwrap();
        let key = std::fs::canonicalize(scratch.path().join("peer.key")).unwrap();
        let hex = std::fs::read_to_string(&key).unwrap();
        assert!(hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit()), "{hex}");
        let expected = format!("peer_key_file = {}\n", toml_string(&key.to_string_lossy()));
        assert_eq!(std::fs::read_to_string(first).unwrap(), expected);
        assert_eq!(std::fs::read_to_string(second).unwrap(), expected);
        assert_eq!(std::fs::read_to_string(&key).unwrap(), hex, "the second node did not write a new key");
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(std::fs::metadata(&key).unwrap().permissions().mode() & 0o777, 0o600);
    }

    #[test]
    fn a_given_peer_key_file_is_named_and_strings_are_escaped_for_toml() {
        let scratch = tempfile::tempdir().unwrap();
        let given = scratch.path().join("cluster \"a\".key");
        write_peer_key(&given).unwrap();
        let spec =
            NodeSpec { peer_key_file: Some(given.clone()), ..NodeSpec::new("node1", Path::new("/srv")) };
        let text = std::fs::read_to_string(peer_key_config(scratch.path(), &spec).unwrap()).unwrap();
        assert!(text.ends_with("cluster \\\"a\\\".key\"\n"), "{text}");
        assert!(!scratch.path().join("peer.key").exists());
        assert_eq!(toml_string("a\\b\u{1}"), "\"a\\\\b\\u0001\"");
    }
}
