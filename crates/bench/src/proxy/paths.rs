//! The paths `locus bench proxy` measures — one Locus node or NGINX directly, and each load
//! balancer in front of the two nodes (the Locus switch in each of its modes, HAProxy, NGINX) —
//! and how each starts its server. A new switch mode is one more entry in [`PATHS`].

use super::ProxyBenchOptions;
use anyhow::bail;
use locus_lab::{HaproxyBalance, Net, NginxBalance, Server, SwitchSpec, servers};
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
pub const IDLE_PATH: &str = "proxy";

/// Every path this build can measure, in the order of the table's columns. To add a switch
/// mode (e.g. `handoff`, `l4`), add an entry whose start function runs
/// `locus_switch(env, "<mode>", <free port>)` (and anything the mode needs on the nodes).
pub const PATHS: &[PathKind] = &[
    PathKind { name: DIRECT, about: "one Locus node directly", start: direct },
    PathKind {
        name: "direct-nginx",
        about: "NGINX serving the files directly on node1 (one worker, sendfile, open-file cache)",
        start: nginx_static,
    },
    PathKind {
        name: "proxy",
        about: "Locus switch, proxy mode (two-way, pooled keep-alive node connections)",
        start: |env| locus_switch(env, "proxy", 80),
    },
    PathKind {
        name: "splice",
        about: "Locus switch, splice mode (first request routed, then a kernel-spliced tunnel)",
        start: |env| locus_switch(env, "splice", 82),
    },
    PathKind {
        name: "haproxy",
        about: "HAProxy (`balance uri`, `hash-type consistent`, `hash-balance-factor 150`), as many threads as switch workers",
        start: haproxy,
    },
    PathKind {
        name: "nginx",
        about: "NGINX as the load balancer (`hash $request_uri consistent`, one worker, keep-alive upstreams)",
        start: nginx_proxy,
    },
];

/// The paths named (in `PATHS` order, each once), with [`DIRECT`] added when missing: it is
/// what `efficiency` divides by.
pub fn resolve_paths(names: &[String]) -> anyhow::Result<Vec<&'static PathKind>> {
    for n in names {
        if !PATHS.iter().any(|p| p.name == n) {
            let known: Vec<&str> = PATHS.iter().map(|p| p.name).collect();
            bail!("unknown path `{n}`: use {}", known.join(", "));
        }
    }
    Ok(PATHS.iter().filter(|p| p.name == DIRECT || names.iter().any(|n| n == p.name)).collect())
}

fn direct(env: &Env<'_>) -> anyhow::Result<Started> {
    Ok(Started { addr: env.nodes[0].1, servers: Vec::new() })
}

fn nginx_static(env: &Env<'_>) -> anyhow::Result<Started> {
    let s = servers::nginx_static(env.net, env.scratch, &env.nodes[0].0, env.root)?;
    Ok(Started { addr: s.addr, servers: vec![s] })
}

/// The Locus switch in `mode` on the switch host (`port` in the lab), in front of both nodes.
fn locus_switch(env: &Env<'_>, mode: &str, port: u16) -> anyhow::Result<Started> {
    let spec = SwitchSpec {
        policy: env.opts.policy.clone(),
        mode: mode.into(),
        workers: env.opts.switch_workers,
        max_connections: env.opts.idle_connections + 1000,
        admin: false,
        splice_min_bytes: None,
        handoff_key_file: None,
        handoff_agents: Vec::new(),
        handoff_pin_dir: None,
        l4_selection: None,
    };
    // Each switch gets a scratch folder of its own: the lab names logs by program.
    let scratch = env.scratch.join(format!("switch-{mode}"));
    std::fs::create_dir_all(&scratch)?;
    let listen = env.net.listen_addr("switch", port)?;
    let s = servers::locus_switch(env.net, env.locus, &scratch, listen, env.nodes, &spec)?;
    Ok(Started { addr: s.addr, servers: vec![s] })
}

fn haproxy(env: &Env<'_>) -> anyhow::Result<Started> {
    let listen = env.net.listen_addr("switch", 81)?;
    let s = servers::haproxy(
        env.net,
        env.scratch,
        listen,
        env.nodes,
        HaproxyBalance::UriChashBounded,
        env.opts.switch_workers,
    )?;
    Ok(Started { addr: s.addr, servers: vec![s] })
}

fn nginx_proxy(env: &Env<'_>) -> anyhow::Result<Started> {
    // Its own scratch folder: NGINX serving the files directly uses `<scratch>/nginx`.
    let scratch = env.scratch.join("nginx-proxy");
    std::fs::create_dir_all(&scratch)?;
    let listen = env.net.listen_addr("switch", 83)?;
    let s = servers::nginx_proxy(env.net, &scratch, listen, env.nodes, NginxBalance::UriChash, 1)?;
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
            resolve_paths(&names(&["nginx", "proxy", "proxy"])).unwrap().iter().map(|p| p.name).collect();
        assert_eq!(got, ["direct", "proxy", "nginx"]);
        let Err(err) = resolve_paths(&names(&["locus"])) else { panic!("`locus` is not a path") };
        let err = err.to_string();
        assert!(err.contains("unknown path `locus`") && err.contains("splice"), "{err}");
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
