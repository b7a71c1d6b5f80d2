//! The paths `locus bench proxy` measures — one Locus node or NGINX directly, and each load
//! balancer in front of the two nodes (the Locus switch in each of its modes, HAProxy, NGINX) —
//! and how each starts its server. A new switch mode is one more entry in [`PATHS`].

use super::ProxyBenchOptions;
pub use crate::one_way_rig::ONE_WAY_NODE_PORT;
use crate::one_way_rig::{AgentNodes, await_control_channels};
use anyhow::bail;
use locus_rig::{HaproxyBalance, HaproxyTuning, Net, NginxBalance, NodeSpec, Server, SwitchSpec, servers};
use std::net::SocketAddr;
use std::path::Path;

/// What a path's start function may use: the network, the `locus` executable, the scratch
/// folder, the document root, the two nodes already running, and the options.
pub(super) struct Env<'a> {
    pub net: &'a Net,
    pub locus: &'a Path,
    pub scratch: &'a Path,
    pub root: &'a Path,
    /// The two Locus nodes (name and address), already serving `root`.
    pub nodes: &'a [(String, SocketAddr)],
    pub opts: &'a ProxyBenchOptions,
    /// The nodes of the one-way paths (running the handoff agent, listening on every address
    /// at [`ONE_WAY_NODE_PORT`]), started by the first one-way path and kept for the others.
    pub one_way_nodes: std::cell::OnceCell<AgentNodes>,
}

/// A started path: where wrk sends its requests, and the servers it started (stopped when
/// this is dropped; a path may start several, e.g. agents on the nodes).
pub(super) struct Started {
    pub addr: SocketAddr,
    pub servers: Vec<Server>,
}

/// One way from the client to the files, measured as rows with this `name`.
pub struct PathKind {
    /// The row's `"path"` in JSON and the table's column.
    pub name: &'static str,
    /// What it is, for the table's legend.
    pub about: &'static str,
    start: fn(&Env<'_>) -> anyhow::Result<Started>,
    /// It attaches the tc forwarder to the switch's interface, where only one can be: started
    /// for each of its runs and stopped after, instead of once for the whole bench.
    pub exclusive: bool,
}

impl PathKind {
    /// Start its server(s) on the lab's hosts.
    pub(super) fn start(&self, env: &Env<'_>) -> anyhow::Result<Started> {
        (self.start)(env)
    }
}

/// The path every other is normalized by (its throughput is the `efficiency` denominator).
pub const DIRECT: &str = "direct";
/// The path whose switch holds the idle keep-alive connections.
pub const IDLE_PATH: &str = "locus";

/// Every path this build can measure, in the order of the table's columns. To add a switch
/// mode (e.g. `handoff`, `l4`), add an entry whose start function runs
/// `locus_switch(env, "<mode>", <free port>)` (and anything the mode needs on the nodes).
pub const PATHS: &[PathKind] = &[
    PathKind { name: DIRECT, about: "one Locus node directly", start: direct, exclusive: false },
    PathKind {
        name: "direct-nginx",
        about: "NGINX serving the files directly on node1 (one worker, sendfile, open-file cache)",
        start: nginx_static,
        exclusive: false,
    },
    PathKind {
        name: "cf",
        about: "cache forwarding: a Locus node without a cache of its own fetching every request from a peer node's memory (cooperative caching) over a pooled keep-alive connection",
        start: cache_forwarding,
        exclusive: false,
    },
    PathKind {
        name: "locus",
        about: "Locus switch, proxy mode (two-way, pooled keep-alive node connections)",
        start: |env| locus_switch(env, "proxy", 80),
        exclusive: false,
    },
    PathKind {
        name: "splice",
        about: "Locus switch, splice mode (first request routed, then a kernel-spliced tunnel)",
        start: |env| locus_switch(env, "splice", 82),
        exclusive: false,
    },
    PathKind {
        name: "handoff",
        about: "Locus switch, handoff mode (one-way: each connection moves to its node with TCP_REPAIR; responses bypass the switch; nodes run the agent)",
        start: |env| one_way(env, "handoff", 84),
        exclusive: true,
    },
    PathKind {
        name: "l4",
        about: "Locus switch, l4 mode (tc forwarder picks a node at the SYN, round robin, no TCP termination) with socket cloning by the nodes' agents",
        start: |env| one_way(env, "l4", ONE_WAY_NODE_PORT),
        exclusive: true,
    },
    PathKind {
        name: "haproxy",
        about: "HAProxy (`balance uri`, `hash-type consistent`, `hash-balance-factor 150`), as many threads as switch workers",
        start: haproxy,
        exclusive: false,
    },
    PathKind {
        name: "nginx",
        about: "NGINX as the load balancer (`hash $request_uri consistent`, one worker, keep-alive upstreams)",
        start: nginx_proxy,
        exclusive: false,
    },
];

/// The paths named (in `PATHS` order, each once), with [`DIRECT`] added when missing: it is
/// what `efficiency` divides by.
pub fn resolve_paths(names: &[String]) -> anyhow::Result<Vec<&'static PathKind>> {
    let names: Vec<&str> = names.iter().map(|n| canonical_path_name(n)).collect();
    for n in &names {
        if !PATHS.iter().any(|p| p.name == *n) {
            let known: Vec<&str> = PATHS.iter().map(|p| p.name).collect();
            bail!("unknown path `{n}`: use {} (`proxy` is `locus`)", known.join(", "));
        }
    }
    Ok(PATHS.iter().filter(|p| p.name == DIRECT || names.contains(&p.name)).collect())
}

/// The switch's proxy mode is the row `locus` (the name the JSON has had since the first bench);
/// `proxy`, the mode's own name, is accepted for it.
fn canonical_path_name(name: &str) -> &str {
    if name == "proxy" { IDLE_PATH } else { name }
}

fn direct(env: &Env<'_>) -> anyhow::Result<Started> {
    Ok(Started { addr: env.nodes[0].1, servers: Vec::new() })
}

fn nginx_static(env: &Env<'_>) -> anyhow::Result<Started> {
    let s = servers::nginx_static(env.net, env.scratch, &env.nodes[0].0, env.root, None)?;
    Ok(Started { addr: s.addr, servers: vec![s] })
}

/// HTTP ports of the cache-forwarding path's two nodes: the one without a cache (on node1,
/// measured) and the peer whose memory holds the documents (on node2).
const CF_PORTS: (u16, u16) = (87, 88);

/// Cache forwarding (the CF of the Socket Cloning paper): two more nodes caching
/// cooperatively, the measured one with no cache, so that every request it serves is fetched
/// from the other's memory; the peer loads every document before the bench starts, and the
/// path starts only once the measured node answers from the peer's memory.
fn cache_forwarding(env: &Env<'_>) -> anyhow::Result<Started> {
    let scratch = env.scratch.join("cf-nodes");
    std::fs::create_dir_all(&scratch)?;
    let forwarder = env.net.listen_addr("node1", CF_PORTS.0)?;
    let holder_addr = env.net.listen_addr("node2", CF_PORTS.1)?;
    let holder = NodeSpec {
        workers: env.opts.node_workers,
        port: Some(CF_PORTS.1),
        coop_peers: vec![forwarder],
        ..NodeSpec::new("node2", env.root)
    };
    let holder = servers::locus_node(env.net, env.locus, &scratch, &holder)?;
    let spec = NodeSpec {
        workers: env.opts.node_workers,
        port: Some(CF_PORTS.0),
        cache_size: Some("0".into()),
        coop_peers: vec![holder_addr],
        ..NodeSpec::new("node1", env.root)
    };
    let node = servers::locus_node(env.net, env.locus, &scratch, &spec)?;
    for size in &env.opts.sizes {
        let path = format!("/{size}.bin");
        env.net.on_host("client", || get_cache_status(holder_addr, &path))?;
        // The holder tells the document's home node that it holds it (a notice sent in the
        // background): wait until the measured node finds it there.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        loop {
            let status = env.net.on_host("client", || get_cache_status(forwarder, &path))?;
            if status == "remote" {
                break;
            }
            if std::time::Instant::now() > deadline {
                bail!(
                    "cf: {path} from {forwarder} was `{status}`, not fetched from the peer's memory (see {})",
                    scratch.display()
                );
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    }
    Ok(Started { addr: forwarder, servers: vec![node, holder] })
}

/// GET `path` from `addr` and return its `X-Locus-Cache` (hit, miss, remote, ...); an error
/// unless it is a 200.
fn get_cache_status(addr: SocketAddr, path: &str) -> anyhow::Result<String> {
    let (status, cache) = locus_rig::get_header(addr, path, "x-locus-cache")?;
    anyhow::ensure!(status == 200, "GET {path} from {addr}: status {status}");
    Ok(cache)
}

/// The Locus switch in `mode` on the switch host (`port` in the lab), in front of both nodes.
fn locus_switch(env: &Env<'_>, mode: &str, port: u16) -> anyhow::Result<Started> {
    let spec =
        SwitchSpec::new(&env.opts.policy, mode, env.opts.switch_workers, env.opts.idle_connections + 1000);
    // Each switch gets a scratch folder of its own: the lab names logs by program.
    let scratch = env.scratch.join(format!("switch-{mode}"));
    std::fs::create_dir_all(&scratch)?;
    let listen = env.net.listen_addr("switch", port)?;
    let s = servers::locus_switch(env.net, env.locus, &scratch, listen, env.nodes, &spec)?;
    Ok(Started { addr: s.addr, servers: vec![s] })
}

/// A one-way mode: two more nodes on the same hosts (started once, shared by the one-way
/// paths), running the handoff agent with cloning and listening on every address at
/// [`ONE_WAY_NODE_PORT`] (the l4 forwarder brings them the clients' SYNs; a handed-off
/// connection is restored on the virtual IP, which they carry), and the switch on the
/// virtual IP.
fn one_way(env: &Env<'_>, mode: &str, port: u16) -> anyhow::Result<Started> {
    if env.one_way_nodes.get().is_none() {
        let roles: Vec<String> = env.nodes.iter().map(|(role, _)| role.clone()).collect();
        let scratch = env.scratch.join("one-way-nodes");
        let nodes =
            AgentNodes::start(env.net, env.locus, &scratch, env.root, &roles, env.opts.node_workers, true)?;
        let _ = env.one_way_nodes.set(nodes);
    }
    let agents = env.one_way_nodes.get().expect("set above");
    let scratch = env.scratch.join(format!("switch-{mode}"));
    std::fs::create_dir_all(&scratch)?;
    let nodes = agents.addrs();
    let spec = SwitchSpec {
        admin: true,
        handoff_key_file: Some(agents.key.clone()),
        handoff_agents: agents.agents(),
        ..SwitchSpec::new(&env.opts.policy, mode, env.opts.switch_workers, env.opts.idle_connections + 1000)
    };
    let listen = env.net.switch_addr(port)?;
    let switch = servers::locus_switch(env.net, env.locus, &scratch, listen, &nodes, &spec)?;
    let want = u64::from(env.opts.switch_workers.max(1)) * nodes.len() as u64;
    await_control_channels(env.net, &switch, want, mode)?;
    Ok(Started { addr: listen, servers: vec![switch] })
}

fn haproxy(env: &Env<'_>) -> anyhow::Result<Started> {
    let listen = env.net.listen_addr("switch", 81)?;
    let s = servers::haproxy(
        env.net,
        env.scratch,
        listen.into(),
        env.nodes,
        HaproxyBalance::UriChashBounded,
        &HaproxyTuning::default(),
        env.opts.switch_workers,
    )?;
    Ok(Started { addr: s.addr, servers: vec![s] })
}

fn nginx_proxy(env: &Env<'_>) -> anyhow::Result<Started> {
    // Its own scratch folder: NGINX serving the files directly uses `<scratch>/nginx`.
    let scratch = env.scratch.join("nginx-proxy");
    std::fs::create_dir_all(&scratch)?;
    let listen = env.net.listen_addr("switch", 83)?;
    let s = servers::nginx_proxy(env.net, &scratch, listen.into(), env.nodes, NginxBalance::UriChash, 1)?;
    Ok(Started { addr: s.addr, servers: vec![s] })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn paths_are_resolved_in_table_order_with_direct_added() {
        let got: Vec<&str> =
            resolve_paths(&names(&["nginx", "proxy", "locus"])).unwrap().iter().map(|p| p.name).collect();
        assert_eq!(got, ["direct", "locus", "nginx"]);
        let Err(err) = resolve_paths(&names(&["lvs"])) else { panic!("`lvs` is not a path") };
        let err = err.to_string();
        assert!(err.contains("unknown path `lvs`") && err.contains("splice"), "{err}");
    }

    #[test]
    fn path_names_are_unique_and_include_the_normalizer_and_the_idle_switch() {
        let mut n: Vec<&str> = PATHS.iter().map(|p| p.name).collect();
        assert!(n.contains(&DIRECT) && n.contains(&IDLE_PATH));
        n.sort();
        n.dedup();
        assert_eq!(n.len(), PATHS.len());
    }
}
