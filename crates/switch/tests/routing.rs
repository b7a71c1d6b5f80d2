//! Integration tests of policy routing with real in-process Locus nodes, each reporting who
//! served a request in `X-Locus-Node`: hashing and LARD keep a target on one node while
//! round robin spreads it, LARD/R replicates a hot target, and bodies from the node's cache
//! and disk arrive byte-exact through the switch.

mod common;

use common::*;
use locus_node::{NodeConfig, NodeServer};
use locus_policy::PolicyConfig;
use locus_switch::{NodeEntry, SwitchConfig, SwitchServer};
use locus_test_support::Client;
use std::collections::{HashMap, HashSet};

struct Cluster {
    nodes: Vec<NodeServer>,
    switch: SwitchServer,
    _root: tempfile::TempDir,
}

fn cluster(policy: PolicyConfig, n: usize) -> Cluster {
    let root = tempfile::tempdir().unwrap();
    write_site(root.path());
    std::fs::write(root.path().join("mid.bin"), pattern(64 << 10, 12)).unwrap();
    let nodes: Vec<NodeServer> = (0..n)
        .map(|i| {
            NodeServer::start(NodeConfig {
                name: format!("node{i}"),
                root: root.path().to_path_buf(),
                workers: 1,
                ..NodeConfig::default()
            })
            .unwrap()
        })
        .collect();
    let config = SwitchConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        workers: 2,
        policy,
        nodes: nodes
            .iter()
            .enumerate()
            .map(|(i, node)| NodeEntry {
                name: Some(format!("node{i}")),
                addr: node.addr(),
                weight: 1,
                handoff: None,
                admin: None,
            })
            .collect(),
        ..SwitchConfig::default()
    };
    let switch = SwitchServer::start(config).unwrap();
    Cluster { nodes, switch, _root: root }
}

impl Cluster {
    fn stop(self) {
        self.switch.shutdown();
        for n in self.nodes {
            n.shutdown();
        }
    }
}

/// Which node served each of `rounds` requests for each target.
fn servers_per_target(c: &Cluster, targets: &[String], rounds: usize) -> HashMap<String, HashSet<String>> {
    let mut client = Client::connect(c.switch.addr());
    let mut seen: HashMap<String, HashSet<String>> = HashMap::new();
    for _ in 0..rounds {
        for t in targets {
            let r = client.get(t);
            assert_eq!(r.status, 200, "{t}");
            seen.entry(t.clone()).or_default().insert(r.header("x-locus-node").unwrap().to_string());
        }
    }
    seen
}

fn targets(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("/f{i}.txt")).collect()
}

#[test]
fn hash_and_lard_keep_each_target_on_one_node_while_wrr_spreads_it() {
    for name in ["hash", "chash", "maglev", "chash-bounded", "lard", "lard-r"] {
        let c = cluster(PolicyConfig::from_name(name).unwrap(), 3);
        let seen = servers_per_target(&c, &targets(30), 4);
        for (t, nodes) in &seen {
            assert_eq!(nodes.len(), 1, "{name}: {t} was served by {nodes:?}");
        }
        let used: HashSet<&String> = seen.values().flatten().collect();
        assert!(used.len() >= 2, "{name}: 30 targets should spread over the nodes, used {used:?}");
        c.stop();
    }
    for name in ["rr", "wrr"] {
        let c = cluster(PolicyConfig::from_name(name).unwrap(), 3);
        let seen = servers_per_target(&c, &targets(5), 6);
        for (t, nodes) in &seen {
            assert_eq!(nodes.len(), 3, "{name}: {t} should reach every node, got {nodes:?}");
        }
        c.stop();
    }
}

#[test]
fn a_hot_target_under_lard_r_gains_a_replica_when_its_node_is_overloaded() {
    // Tiny thresholds so that a handful of concurrent requests count as overload.
    let policy = PolicyConfig::LardR {
        t_low: 1,
        t_high: 2,
        k_secs: 60.0,
        admission_limit: Some(0),
        max_targets: 1000,
    };
    let c = cluster(policy, 2);
    let addr = c.switch.addr();
    let mut served = HashSet::new();
    for _ in 0..5 {
        let threads: Vec<_> = (0..8)
            .map(|_| {
                std::thread::spawn(move || {
                    let mut client = Client::connect(addr);
                    (0..20)
                        .map(|_| client.get("/big.bin").header("x-locus-node").unwrap().to_string())
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        for t in threads {
            served.extend(t.join().unwrap());
        }
        if served.len() == 2 {
            break;
        }
    }
    assert_eq!(served.len(), 2, "the hot target should have been replicated to the second node");
    c.stop();
}

#[test]
fn bodies_from_node_cache_and_disk_are_byte_exact_through_the_switch() {
    let c = cluster(PolicyConfig::from_name("lard").unwrap(), 2);
    let big = pattern(3 << 20, 11);
    let mid = pattern(64 << 10, 12);
    let mut client = Client::connect(c.switch.addr());
    for round in 0..3 {
        let r = client.get("/big.bin");
        assert_eq!(r.status, 200);
        assert!(r.body == big, "3 MiB body differs in round {round}");
        let r = client.get("/mid.bin");
        assert!(r.body == mid, "64 KiB body differs in round {round}");
        if round > 0 {
            assert_eq!(r.header("x-locus-cache"), Some("hit"));
        }
    }
    // Pipelined mix of cached and uncached documents, answered in order.
    client.send(b"GET /mid.bin HTTP/1.1\r\nHost: t\r\n\r\nGET /f3.txt HTTP/1.1\r\nHost: t\r\n\r\nGET /big.bin HTTP/1.1\r\nHost: t\r\n\r\n");
    assert!(client.read_response(false).unwrap().body == mid);
    assert_eq!(client.read_response(false).unwrap().body, "file 3\n".repeat(4).into_bytes());
    assert!(client.read_response(false).unwrap().body == big);
    c.stop();
}
