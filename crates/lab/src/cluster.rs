//! `LabCluster`: one point's servers — fresh Locus nodes (cold caches) on the node hosts and a
//! switch (Locus, HAProxy or NGINX) on the switch host listening on the virtual IP — with
//! what the lab reads from them: admin snapshots (node requests and cache counters, the Locus
//! switch's per-node counters, the switch's CPU time) and which node served a request.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use locus_load::{CacheSnapshot, SwitchSnapshot, TargetUrl, fetch_status};

use crate::error::LabError;
use crate::experiment::{NodeSettings, SwitchKind, haproxy_balance, nginx_balance};
use locus_rig::process_tree_cpu;
use locus_rig::servers::{self, HTTP_PORT, NodeSpec, Server, SwitchSpec};
use locus_rig::{HaproxyTuning, Net, get_header};

/// What a cluster is made of.
#[derive(Clone, Debug)]
pub struct ClusterSpec {
    pub nodes: usize,
    pub node: NodeSettings,
    /// Document root every node serves.
    pub root: std::path::PathBuf,
    pub switch: SwitchKind,
    pub policy: String,
    pub mode: String,
    /// Switch workers (threads or processes).
    pub workers: u32,
    /// Locus switch `splice_min_bytes` (`None`: its default).
    pub splice_min_bytes: Option<u64>,
    /// Handoff mode: the nodes' `rehandoff` (`handoff`, `forward`; `None`: their default).
    pub rehandoff: Option<String>,
    /// The Locus switch's `[policy]` table (TOML) with the row's parameters, if any.
    pub policy_table: Option<String>,
    /// The workload's dynamic classes (`[[classes]]` file), for the nodes and a Locus switch.
    pub class_file: Option<std::path::PathBuf>,
    /// The nodes cache cooperatively with this replacement (`lru`, `lfu`), if set.
    pub coop: Option<String>,
    /// DC rows: every co-op's replica quota, if set.
    pub dc_quota: Option<String>,
    /// DC rows: the homes' balancing period in ms, if set.
    pub dc_balance_ms: Option<u64>,
    /// HAProxy rows: the backend's knobs beyond its balance.
    pub haproxy: HaproxyTuning,
    /// The class file the Locus switch reads, when it differs from the nodes' (costs scaled).
    pub switch_class_file: Option<std::path::PathBuf>,
    /// The balancer terminates TLS with these files (clients speak HTTPS to it on 443).
    pub tls: Option<servers::TlsFiles>,
}

impl ClusterSpec {
    /// `nodes` nodes with default settings serving `root` behind `switch` with `policy` in
    /// `mode`, one worker; nothing else set.
    pub fn new(
        nodes: usize,
        root: std::path::PathBuf,
        switch: SwitchKind,
        policy: &str,
        mode: &str,
    ) -> ClusterSpec {
        ClusterSpec {
            nodes,
            node: NodeSettings::default(),
            root,
            switch,
            policy: policy.into(),
            mode: mode.into(),
            workers: 1,
            splice_min_bytes: None,
            rehandoff: None,
            policy_table: None,
            class_file: None,
            coop: None,
            dc_quota: None,
            dc_balance_ms: None,
            haproxy: HaproxyTuning::default(),
            switch_class_file: None,
            tls: None,
        }
    }
}

/// The started servers of one point.
pub struct LabCluster<'n> {
    net: &'n Net,
    kind: SwitchKind,
    nodes: Vec<Server>,
    /// The switch; `None` for DC rows, whose clients talk to the nodes.
    switch: Option<Server>,
    /// Where clients speak HTTPS, when the balancer terminates TLS.
    https: Option<SocketAddr>,
}

/// One node's counters at one moment.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NodeCounters {
    pub name: String,
    /// Requests served so far.
    pub requests: u64,
    pub cache: CacheSnapshot,
    /// Misses served from a peer's memory (cooperative caching; 0 without it).
    pub remote_hits: u64,
    /// CPU time of the node's process so far.
    pub cpu: Duration,
}

/// Counters of the whole cluster at one moment.
#[derive(Clone, Debug, PartialEq)]
pub struct ClusterSnapshot {
    pub nodes: Vec<NodeCounters>,
    /// The Locus switch's requests per node (none for HAProxy and NGINX).
    pub switch: Option<SwitchSnapshot>,
    /// CPU time of the switch process (and its children) so far.
    pub switch_cpu: Duration,
}

/// Port of the l4 service and of its cloning nodes.
const L4_PORT: u16 = 86;
/// Where a balancer terminating TLS listens.
const HTTPS_PORT: u16 = 443;
/// The name on the lab's certificate, asked for by the load whatever address it connects to.
pub const TLS_NAME: &str = "locus.test";

const ADMIN_TIMEOUT: Duration = Duration::from_secs(5);

fn admin_url(addr: SocketAddr) -> Result<TargetUrl, LabError> {
    Ok(format!("http://{addr}/").parse::<TargetUrl>()?)
}

/// A one-way switch connects a control channel per worker and node as it starts: wait for
/// them all, or the first connections would take the proxy path.
fn wait_for_control_channels(net: &Net, switch: &Server, workers: u32, nodes: usize) -> Result<(), LabError> {
    let want = u64::from(workers.max(1)) * nodes as u64;
    let admin = switch.admin.ok_or_else(|| LabError::Point {
        point: "switch".into(),
        message: "a one-way switch started without an admin listener".into(),
    })?;
    let url = admin_url(admin)?;
    let up = net.on_host("client", || {
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        loop {
            let status = fetch_status(&url, ADMIN_TIMEOUT);
            let up = status.ok().and_then(|s| s["handoff"]["channels_up"].as_u64()).unwrap_or(0);
            if up >= want || std::time::Instant::now() > deadline {
                return Ok::<u64, LabError>(up);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    })?;
    if up < want {
        return Err(LabError::Point {
            point: "switch".into(),
            message: format!(
                "{up} of {want} control channels to the agents came up (see {})",
                switch.log.display()
            ),
        });
    }
    Ok(())
}

/// A new peer key in `scratch` for a cluster whose nodes cache cooperatively or run DC mode
/// (they sign their requests to each other with it); `None` for other clusters.
fn new_peer_key(spec: &ClusterSpec, scratch: &Path) -> Result<Option<PathBuf>, LabError> {
    if spec.coop.is_none() && spec.switch != SwitchKind::Dc {
        return Ok(None);
    }
    let path = scratch.join("peer.key");
    servers::write_peer_key(&path)?;
    Ok(Some(path))
}

impl<'n> LabCluster<'n> {
    /// Start the nodes, then the switch in front of them.
    pub fn start(
        net: &'n Net,
        locus: &Path,
        scratch: &Path,
        spec: &ClusterSpec,
    ) -> Result<LabCluster<'n>, LabError> {
        std::fs::create_dir_all(scratch).map_err(|e| LabError::io(scratch, e))?;
        let one_way = spec.switch == SwitchKind::Locus && servers::is_one_way_mode(&spec.mode);
        // l4: the forwarder steers each SYN to a node, which clones the connection to the
        // node the policy picks for each request (socket cloning).
        let cloning = one_way && spec.mode == "l4";
        // The l4 service port, which the cloning nodes listen on too (on every address).
        let port = if cloning { L4_PORT } else { HTTP_PORT };
        let key_file = if one_way {
            let path = scratch.join("handoff.key");
            servers::write_handoff_key(&path)?;
            Some(path)
        } else {
            None
        };
        let mut nodes = Vec::with_capacity(spec.nodes);
        let addrs = (1..=spec.nodes)
            .map(|i| net.listen_addr(&format!("node{i}"), port))
            .collect::<Result<Vec<_>, _>>()?;
        let dc_names: Vec<(String, SocketAddr)> =
            addrs.iter().enumerate().map(|(j, a)| (format!("node{}", j + 1), *a)).collect();
        let co_op_root = scratch.join("co-op-root");
        if spec.switch == SwitchKind::Dc {
            std::fs::create_dir_all(&co_op_root).map_err(|e| LabError::io(&co_op_root, e))?;
        }
        let peer_key_file = new_peer_key(spec, scratch)?;
        for i in 1..=spec.nodes {
            let dc_on = spec.switch == SwitchKind::Dc && spec.policy != "off";
            let dc = dc_on.then(|| servers::DcNodeSpec {
                servers: dc_names.clone(),
                self_name: format!("node{i}"),
                quota: spec.dc_quota.clone(),
                balance_ms: spec.dc_balance_ms,
                method: spec.policy.clone(),
            });
            // DC: node1 is the home of the whole site; the others start empty, as co-ops.
            let root = if spec.switch == SwitchKind::Dc && i > 1 { &co_op_root } else { &spec.root };
            let coop_peers = match spec.coop {
                Some(_) => addrs.iter().enumerate().filter(|(j, _)| j + 1 != i).map(|(_, a)| *a).collect(),
                None => Vec::new(),
            };
            let node = NodeSpec {
                workers: spec.node.workers,
                cache_size: Some(spec.node.cache.clone()),
                cache_policy: Some(spec.coop.clone().unwrap_or_else(|| spec.node.cache_policy.clone())),
                coop_peers,
                max_object: Some(spec.node.max_object.clone()),
                storage: spec.node.storage.clone(),
                cpu: spec.node.cpu.clone(),
                cpu_limit: spec.node.cpu_limit,
                class_file: spec.class_file.clone(),
                admin: true,
                handoff_key_file: key_file.clone(),
                handoff_rehandoff: spec.rehandoff.clone().filter(|_| one_way),
                handoff_clone: cloning,
                handoff_clone_service: if cloning { Some(net.switch_addr(port)?) } else { None },
                listen_any: cloning,
                port: Some(port),
                dc,
                peer_key_file: peer_key_file.clone(),
                ..NodeSpec::new(&format!("node{i}"), root)
            };
            nodes.push(servers::locus_node(net, locus, scratch, &node)?);
        }
        let named: Vec<(String, SocketAddr)> = nodes.iter().map(|n| (n.name.clone(), n.addr)).collect();
        let listen = net.switch_addr(port)?;
        let https = match &spec.tls {
            Some(_) => Some(net.switch_addr(HTTPS_PORT)?),
            None => None,
        };
        // HAProxy and NGINX listen with TLS alone; the Locus switch keeps its cleartext one.
        let proxy_listen = match (&spec.tls, https) {
            (Some(tls), Some(addr)) => servers::Listen { addr, tls: Some(tls) },
            _ => listen.into(),
        };
        let unknown = |what: &str| LabError::Point {
            point: format!("{} {}", spec.switch.name(), spec.policy),
            message: format!("unknown {what} policy"),
        };
        let switch = match spec.switch {
            SwitchKind::Locus => {
                let s = SwitchSpec {
                    admin: true,
                    splice_min_bytes: spec.splice_min_bytes,
                    policy_table: spec.policy_table.clone(),
                    handoff_key_file: key_file.clone(),
                    handoff_agents: nodes.iter().filter_map(|n| n.agent).collect(),
                    class_file: spec.switch_class_file.clone().or_else(|| spec.class_file.clone()),
                    site_root: spec.class_file.as_ref().map(|_| spec.root.clone()),
                    node_admins: nodes.iter().filter_map(|n| n.admin).collect(),
                    tls: spec.tls.clone().zip(https),
                    ..SwitchSpec::new(&spec.policy, &spec.mode, spec.workers, 9000)
                };
                let switch = servers::locus_switch(net, locus, scratch, listen, &named, &s)?;
                if one_way {
                    wait_for_control_channels(net, &switch, spec.workers, nodes.len())?;
                }
                Some(switch)
            }
            SwitchKind::Haproxy => {
                let balance = haproxy_balance(&spec.policy).ok_or_else(|| unknown("HAProxy"))?;
                Some(servers::haproxy(
                    net,
                    scratch,
                    proxy_listen,
                    &named,
                    balance,
                    &spec.haproxy,
                    spec.workers,
                )?)
            }
            SwitchKind::Nginx => {
                let balance = nginx_balance(&spec.policy).ok_or_else(|| unknown("NGINX"))?;
                Some(servers::nginx_proxy(net, scratch, proxy_listen, &named, balance, spec.workers)?)
            }
            SwitchKind::Dc => None,
        };
        Ok(LabCluster { net, kind: spec.switch, nodes, switch, https })
    }

    /// The URL clients send requests to (the virtual IP in the lab; node1, the home, without
    /// a switch).
    pub fn switch_url(&self) -> String {
        match self.https {
            Some(a) => format!("https://{a}/"),
            None => format!("http://{}/", self.switch_addr()),
        }
    }

    /// The switch's address (node1's without a switch).
    pub fn switch_addr(&self) -> SocketAddr {
        match &self.switch {
            Some(s) => s.addr,
            None => self.nodes[0].addr,
        }
    }

    /// The switch's admin listener (`/locus/status`), if it has one.
    pub fn switch_admin(&self) -> Option<SocketAddr> {
        self.switch.as_ref().and_then(|s| s.admin)
    }

    /// Every node's HTTP address, in order.
    pub fn node_addrs(&self) -> Vec<SocketAddr> {
        self.nodes.iter().map(|n| n.addr).collect()
    }

    /// The switch's process id, if there is a switch.
    pub fn switch_pid(&self) -> Option<u32> {
        self.switch.as_ref().map(|s| s.process.pid())
    }

    /// Node names in order.
    pub fn node_names(&self) -> Vec<String> {
        self.nodes.iter().map(|n| n.name.clone()).collect()
    }

    /// The network it runs on.
    pub fn net(&self) -> &Net {
        self.net
    }

    /// Fail if the switch or a node has exited.
    pub fn check_running(&mut self) -> Result<(), LabError> {
        if let Some(s) = &mut self.switch {
            s.check_running()?;
        }
        for n in &mut self.nodes {
            n.check_running()?;
        }
        Ok(())
    }

    /// Read every admin listener and the switch's CPU time, from the calling thread (which
    /// must be on the client host, like the thread `run_load` runs on).
    pub fn snapshot_here(&self) -> Result<ClusterSnapshot, LabError> {
        let switch_cpu = match &self.switch {
            Some(s) => process_tree_cpu(s.process.pid())?,
            None => Duration::ZERO,
        };
        let mut nodes = Vec::with_capacity(self.nodes.len());
        for n in &self.nodes {
            let addr = n.admin.ok_or_else(|| LabError::Point {
                point: n.name.clone(),
                message: "node started without an admin listener".into(),
            })?;
            let bad = |message: String| LabError::Point { point: n.name.clone(), message };
            let status = fetch_status(&admin_url(addr)?, ADMIN_TIMEOUT).map_err(bad)?;
            let requests = status
                .get("requests_total")
                .and_then(|v| v.as_u64())
                .ok_or_else(|| bad("status has no requests_total".into()))?;
            let cache = CacheSnapshot::from_status(&status)
                .ok_or_else(|| bad("status has no cache counters".into()))?;
            let remote_hits = status["coop"]["remote_hits"].as_u64().unwrap_or(0);
            let cpu = process_tree_cpu(n.process.pid())?;
            nodes.push(NodeCounters { name: n.name.clone(), requests, cache, remote_hits, cpu });
        }
        let switch = match (self.kind, self.switch.as_ref().and_then(|s| s.admin)) {
            (SwitchKind::Locus, Some(addr)) => {
                let bad = |message: String| LabError::Point { point: "switch".into(), message };
                let status = fetch_status(&admin_url(addr)?, ADMIN_TIMEOUT).map_err(bad)?;
                Some(SwitchSnapshot::from_status(&status).ok_or_else(|| bad("status has no nodes".into()))?)
            }
            _ => None,
        };
        Ok(ClusterSnapshot { nodes, switch, switch_cpu })
    }

    /// `snapshot_here` from a thread on the client host.
    pub fn snapshot(&self) -> Result<ClusterSnapshot, LabError> {
        self.net.on_host("client", || self.snapshot_here())
    }

    /// Send `count` sequential `GET target` requests through the switch (a connection each)
    /// and return the node that served each (`X-Locus-Node`) with the response's status.
    pub fn serving_nodes(&self, target: &str, count: usize) -> Result<Vec<(u16, String)>, LabError> {
        let addr = self.switch_addr();
        self.net
            .on_host("client", || (0..count).map(|_| Ok(get_header(addr, target, "x-locus-node")?)).collect())
    }
}

/// What the cluster did between two snapshots.
#[derive(Clone, Debug, PartialEq)]
pub struct ClusterDelta {
    /// Requests each node served (its own counter).
    pub node_requests: Vec<u64>,
    /// Requests the Locus switch sent to each node (its counter), if it is a Locus switch that
    /// counted any (a one-way switch does not see the requests after a handoff).
    pub switch_requests: Option<Vec<u64>>,
    /// Cache hits over hits and misses on all nodes.
    pub hit_ratio: Option<f64>,
    /// Misses served from a peer's memory over hits and misses on all nodes.
    pub remote_hit_ratio: Option<f64>,
    /// Max over mean of the requests per node: the switch's counts for Locus, the nodes'
    /// own counts for HAProxy and NGINX.
    pub imbalance: Option<f64>,
    /// CPU time of the switch.
    pub switch_cpu: Duration,
    /// CPU time of all nodes together.
    pub node_cpu: Duration,
}

impl ClusterDelta {
    /// Requests forwarded to nodes in the interval: the switch's counts when it has them.
    pub fn forwarded(&self) -> u64 {
        self.switch_requests.as_ref().unwrap_or(&self.node_requests).iter().sum()
    }

    /// The difference between two snapshots of the same cluster.
    pub fn between(before: &ClusterSnapshot, after: &ClusterSnapshot) -> ClusterDelta {
        let node_requests: Vec<u64> = after
            .nodes
            .iter()
            .zip(&before.nodes)
            .map(|(a, b)| a.requests.saturating_sub(b.requests))
            .collect();
        let switch_requests = match (&before.switch, &after.switch) {
            (Some(b), Some(a)) => Some(
                a.nodes
                    .iter()
                    .map(|(name, n)| {
                        let was = b.nodes.iter().find(|(bn, _)| bn == name).map_or(0, |(_, v)| *v);
                        n.saturating_sub(was)
                    })
                    .collect::<Vec<u64>>(),
            ),
            _ => None,
        };
        let b: Vec<CacheSnapshot> = before.nodes.iter().map(|n| n.cache).collect();
        let a: Vec<CacheSnapshot> = after.nodes.iter().map(|n| n.cache).collect();
        // A one-way switch routes only the first request of a connection and counts none of
        // the rest: then the nodes' own counts are the requests.
        let switch_requests = switch_requests.filter(|c| c.iter().sum::<u64>() > 0);
        let counts = switch_requests.as_ref().unwrap_or(&node_requests);
        let lookups: u64 =
            a.iter().zip(&b).map(|(a, b)| (a.hits + a.misses).saturating_sub(b.hits + b.misses)).sum();
        let remote: u64 = after
            .nodes
            .iter()
            .zip(&before.nodes)
            .map(|(a, b)| a.remote_hits.saturating_sub(b.remote_hits))
            .sum();
        ClusterDelta {
            hit_ratio: locus_load::hit_ratio(&b, &a),
            remote_hit_ratio: (lookups > 0).then(|| remote as f64 / lookups as f64),
            imbalance: max_over_mean(counts),
            switch_cpu: after.switch_cpu.saturating_sub(before.switch_cpu),
            node_cpu: after.nodes.iter().zip(&before.nodes).map(|(a, b)| a.cpu.saturating_sub(b.cpu)).sum(),
            node_requests,
            switch_requests,
        }
    }
}

/// Max over mean (1.0: perfectly even); `None` without requests.
pub fn max_over_mean(counts: &[u64]) -> Option<f64> {
    let total: u64 = counts.iter().sum();
    if counts.is_empty() || total == 0 {
        return None;
    }
    let mean = total as f64 / counts.len() as f64;
    counts.iter().max().map(|&m| m as f64 / mean)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(name: &str, requests: u64, hits: u64, misses: u64) -> NodeCounters {
        NodeCounters {
            name: name.into(),
            requests,
            cache: CacheSnapshot { hits, misses },
            remote_hits: misses / 2,
            cpu: Duration::from_millis(requests),
        }
    }

    #[test]
    fn deltas_use_the_switch_counts_when_there_are_some_and_the_nodes_otherwise_and_count_remote_hits() {
        let before = ClusterSnapshot {
            nodes: vec![node("node1", 100, 50, 50), node("node2", 10, 5, 5)],
            switch: Some(SwitchSnapshot {
                policy: Some("lard".into()),
                mode: Some("proxy".into()),
                nodes: vec![("node1".into(), 100), ("node2".into(), 10)],
            }),
            switch_cpu: Duration::from_millis(100),
        };
        let after = ClusterSnapshot {
            nodes: vec![node("node1", 400, 300, 100), node("node2", 110, 85, 25)],
            switch: Some(SwitchSnapshot {
                policy: Some("lard".into()),
                mode: Some("proxy".into()),
                nodes: vec![("node1".into(), 400), ("node2".into(), 110)],
            }),
            switch_cpu: Duration::from_millis(300),
        };
        let d = ClusterDelta::between(&before, &after);
        assert_eq!(d.node_requests, [300, 100]);
        // Remote hits (25 + 10) over the cache lookups (300 + 100).
        assert_eq!(d.remote_hit_ratio, Some(35.0 / 400.0));
        assert_eq!(d.switch_requests.as_deref(), Some(&[300, 100][..]));
        assert!((d.hit_ratio.unwrap() - 330.0 / 400.0).abs() < 1e-12);
        assert!((d.imbalance.unwrap() - 1.5).abs() < 1e-12);
        assert_eq!(d.switch_cpu, Duration::from_millis(200));
        let no_switch = ClusterDelta::between(
            &ClusterSnapshot { switch: None, ..before.clone() },
            &ClusterSnapshot { switch: None, ..after.clone() },
        );
        assert_eq!(no_switch.switch_requests, None);
        assert!((no_switch.imbalance.unwrap() - 1.5).abs() < 1e-12);
    }

    #[test]
    fn a_one_way_switch_that_counted_no_requests_leaves_the_counts_to_the_nodes() {
        let snapshot = |n1, n2, cpu_ms| ClusterSnapshot {
            nodes: vec![node("node1", n1, 0, 0), node("node2", n2, 0, 0)],
            switch: Some(SwitchSnapshot {
                policy: Some("lard".into()),
                mode: Some("handoff".into()),
                nodes: vec![("node1".into(), 0), ("node2".into(), 0)],
            }),
            switch_cpu: Duration::from_millis(cpu_ms),
        };
        let d = ClusterDelta::between(&snapshot(0, 0, 10), &snapshot(129, 126, 30));
        assert_eq!(d.switch_requests, None);
        assert_eq!(d.node_requests.iter().sum::<u64>(), 255);
        assert!((d.imbalance.unwrap() - 129.0 / 127.5).abs() < 1e-12);
    }

    #[test]
    fn max_over_mean_is_one_when_even_and_none_when_idle() {
        assert_eq!(max_over_mean(&[5, 5, 5]), Some(1.0));
        assert_eq!(max_over_mean(&[4, 0]), Some(2.0));
        assert_eq!(max_over_mean(&[0, 0]), None);
        assert_eq!(max_over_mean(&[]), None);
    }
}
