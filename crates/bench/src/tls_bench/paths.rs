//! The paths `locus bench tls` measures, each terminating TLS with the same certificate and
//! ticket keys: one Locus node serving HTTPS itself, NGINX serving the same files over HTTPS,
//! and each load balancer terminating TLS in front of the two cleartext nodes (the Locus
//! switch in proxy mode, HAProxy, NGINX), and the switch in handoff mode moving each TLS
//! session with its connection to two nodes running the agent (one-way HTTPS); with the
//! processes whose CPU time is the path's.

use std::net::SocketAddr;
use std::path::Path;

use anyhow::bail;
use locus_rig::servers::{Listen, TlsFiles};
use locus_rig::{HaproxyBalance, HaproxyTuning, Net, NginxBalance, NodeSpec, Server, SwitchSpec, servers};

use crate::one_way_rig::{AgentNodes, await_control_channels};

/// What a path's start function may use.
pub(super) struct Env<'a> {
    pub net: &'a Net,
    pub locus: &'a Path,
    pub scratch: &'a Path,
    pub root: &'a Path,
    /// The two cleartext Locus nodes behind the balancers.
    pub nodes: &'a [(String, SocketAddr)],
    pub tls: &'a TlsFiles,
    /// Worker threads of the switch, HAProxy, NGINX and the TLS node alike.
    pub workers: u32,
}

/// A started path: where the load goes (HTTPS), its servers (whose CPU time is the path's),
/// and servers it needs beside them (the handoff path's nodes); all stopped when dropped.
pub(super) struct Started {
    pub addr: SocketAddr,
    pub servers: Vec<Server>,
    pub _beside: Vec<Server>,
}

/// One TLS path.
pub struct TlsPath {
    pub name: &'static str,
    pub about: &'static str,
    start: fn(&Env<'_>) -> anyhow::Result<Started>,
}

impl TlsPath {
    pub(super) fn start(&self, env: &Env<'_>) -> anyhow::Result<Started> {
        (self.start)(env)
    }
}

/// Every TLS path, in the table's order.
pub const TLS_PATHS: &[TlsPath] = &[
    TlsPath { name: "direct", about: "one Locus node serving HTTPS itself (rustls)", start: direct },
    TlsPath {
        name: "direct-nginx",
        about: "NGINX serving the same files over HTTPS on node1 (OpenSSL, sendfile off under TLS)",
        start: nginx_static,
    },
    TlsPath {
        name: "locus",
        about: "Locus switch, proxy mode, terminating TLS (rustls) before the two nodes",
        start: locus_switch,
    },
    TlsPath {
        name: "handoff",
        about: "Locus switch, handoff mode: it terminates TLS, reads the first request and moves the connection with its TLS session to the node (one-way HTTPS); nodes answer encrypted, the switch's CPU is the path's",
        start: handoff,
    },
    TlsPath {
        name: "haproxy",
        about: "HAProxy terminating TLS (OpenSSL), `balance uri` consistent hashing",
        start: haproxy,
    },
    TlsPath {
        name: "nginx",
        about: "NGINX terminating TLS (OpenSSL), `hash $request_uri consistent`, keep-alive upstreams",
        start: nginx_proxy,
    },
];

/// The paths named, in table order; all when none is.
pub fn resolve_tls_paths(names: &[String]) -> anyhow::Result<Vec<&'static TlsPath>> {
    for n in names {
        if !TLS_PATHS.iter().any(|p| p.name == n) {
            let known: Vec<&str> = TLS_PATHS.iter().map(|p| p.name).collect();
            bail!("unknown TLS path `{n}`: use {}", known.join(", "));
        }
    }
    Ok(TLS_PATHS.iter().filter(|p| names.is_empty() || names.iter().any(|n| n == p.name)).collect())
}

/// HTTPS port of the TLS node on node1 (its cleartext twin serves the balancers on 80).
const DIRECT_TLS_PORT: u16 = 443;

fn direct(env: &Env<'_>) -> anyhow::Result<Started> {
    let scratch = env.scratch.join("tls-node");
    std::fs::create_dir_all(&scratch)?;
    let spec = NodeSpec {
        workers: env.workers,
        port: Some(DIRECT_TLS_PORT),
        tls: Some(env.tls.clone()),
        ..NodeSpec::new("node1", env.root)
    };
    let s = servers::locus_node(env.net, env.locus, &scratch, &spec)?;
    Ok(Started { addr: s.addr, servers: vec![s], _beside: Vec::new() })
}

fn nginx_static(env: &Env<'_>) -> anyhow::Result<Started> {
    let scratch = env.scratch.join("tls-nginx-static");
    std::fs::create_dir_all(&scratch)?;
    let s = servers::nginx_static(env.net, &scratch, &env.nodes[0].0, env.root, Some(env.tls))?;
    Ok(Started { addr: s.addr, servers: vec![s], _beside: Vec::new() })
}

fn locus_switch(env: &Env<'_>) -> anyhow::Result<Started> {
    let scratch = env.scratch.join("tls-switch");
    std::fs::create_dir_all(&scratch)?;
    let tls_addr = env.net.listen_addr("switch", 443)?;
    let spec = SwitchSpec {
        tls: Some((env.tls.clone(), tls_addr)),
        ..SwitchSpec::new("lard-r", "proxy", env.workers, 20_000)
    };
    let listen = env.net.listen_addr("switch", 80)?;
    let s = servers::locus_switch(env.net, env.locus, &scratch, listen, env.nodes, &spec)?;
    Ok(Started { addr: tls_addr, servers: vec![s], _beside: Vec::new() })
}

/// Port of the handoff path's TLS listener on the virtual IP (its cleartext one is 84).
const HANDOFF_TLS_PORT: u16 = 8443;

fn handoff(env: &Env<'_>) -> anyhow::Result<Started> {
    let scratch = env.scratch.join("tls-handoff");
    let roles: Vec<String> = env.nodes.iter().map(|(role, _)| role.clone()).collect();
    let nodes =
        AgentNodes::start(env.net, env.locus, &scratch.join("nodes"), env.root, &roles, env.workers, false)?;
    let tls_addr = env.net.switch_addr(HANDOFF_TLS_PORT)?;
    let spec = SwitchSpec {
        admin: true,
        handoff_key_file: Some(nodes.key.clone()),
        handoff_agents: nodes.agents(),
        tls: Some((env.tls.clone(), tls_addr)),
        ..SwitchSpec::new("lard-r", "handoff", env.workers, 20_000)
    };
    let listen = env.net.switch_addr(84)?;
    let switch = servers::locus_switch(env.net, env.locus, &scratch, listen, &nodes.addrs(), &spec)?;
    let want = u64::from(env.workers.max(1)) * nodes.servers.len() as u64;
    await_control_channels(env.net, &switch, want, "handoff")?;
    Ok(Started { addr: tls_addr, servers: vec![switch], _beside: nodes.servers })
}

fn haproxy(env: &Env<'_>) -> anyhow::Result<Started> {
    let scratch = env.scratch.join("tls-haproxy");
    std::fs::create_dir_all(&scratch)?;
    let listen = Listen { addr: env.net.listen_addr("switch", 444)?, tls: Some(env.tls) };
    let s = servers::haproxy(
        env.net,
        &scratch,
        listen,
        env.nodes,
        HaproxyBalance::UriChashBounded,
        &HaproxyTuning::default(),
        env.workers,
    )?;
    Ok(Started { addr: s.addr, servers: vec![s], _beside: Vec::new() })
}

fn nginx_proxy(env: &Env<'_>) -> anyhow::Result<Started> {
    let scratch = env.scratch.join("tls-nginx-proxy");
    std::fs::create_dir_all(&scratch)?;
    let listen = Listen { addr: env.net.listen_addr("switch", 445)?, tls: Some(env.tls) };
    let s = servers::nginx_proxy(env.net, &scratch, listen, env.nodes, NginxBalance::UriChash, env.workers)?;
    Ok(Started { addr: s.addr, servers: vec![s], _beside: Vec::new() })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tls_paths_resolve_in_table_order_and_an_unknown_one_is_named() {
        let names = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let got: Vec<&str> =
            resolve_tls_paths(&names(&["nginx", "locus"])).unwrap().iter().map(|p| p.name).collect();
        assert_eq!(got, ["locus", "nginx"]);
        assert_eq!(resolve_tls_paths(&[]).unwrap().len(), TLS_PATHS.len());
        let e = resolve_tls_paths(&names(&["splice"])).err().unwrap().to_string();
        assert!(e.contains("`splice`") && e.contains("haproxy"), "{e}");
    }
}
