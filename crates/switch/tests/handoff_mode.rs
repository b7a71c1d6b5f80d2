//! Integration tests of the switch in handoff mode on loopback, with in-process Locus nodes
//! running the handoff agent (root only: TCP_REPAIR needs CAP_NET_ADMIN; ignored otherwise).
//! On one host no packet forwarder is needed: the kernel delivers the client's packets to
//! whichever socket holds the connection. Responses come from the nodes themselves (the
//! switch relays no byte), keep-alive and pipelined requests move between nodes as the
//! policy says, closes are reported, and a switch whose key the agents reject serves by proxy.
//! HTTPS clients' sessions move with their connections (one-way HTTPS): nodes answer them
//! encrypted, keep-alive requests move on with the session; a session a node refuses, or a
//! TLS 1.2 one, is served by the switch itself and counted.

mod common;

use common::*;
use locus_node::{HandoffConfig, NodeConfig, NodeServer, RehandoffPolicy};
use locus_policy::PolicyConfig;
use locus_switch::{HandoffSettings, Mode, NodeEntry, SwitchConfig, SwitchServer};
use locus_test_support::{Client, ClientStream, Response};
use std::time::{Duration, Instant};

const KEY: &str = "6c6f6375732d746573742d6b65792d6f662d33322d62797465732d2d2d2d2d21";
const OTHER_KEY: &str = "0123456789abcdef0123456789abcdef";

/// For the root-only tests (`#[ignore]`d; `./quickstart test` runs them as root).
fn require_root() {
    locus_test_support::require_root("handoff needs CAP_NET_ADMIN");
}

struct Cluster {
    nodes: Vec<NodeServer>,
    switch: SwitchServer,
    /// What the switch was started with (an upgrade starts the next one with it).
    config: SwitchConfig,
    _root: tempfile::TempDir,
}

fn cluster(policy: &str, n: usize, switch_key: &str) -> Cluster {
    cluster_with(policy, n, switch_key, RehandoffPolicy::Handoff)
}

fn cluster_with(policy: &str, n: usize, switch_key: &str, rehandoff: RehandoffPolicy) -> Cluster {
    cluster_configured(policy, n, switch_key, rehandoff, |_| {})
}

fn cluster_configured(
    policy: &str,
    n: usize,
    switch_key: &str,
    rehandoff: RehandoffPolicy,
    tweak: impl FnOnce(&mut SwitchConfig),
) -> Cluster {
    cluster_of(policy, n, switch_key, rehandoff, |_| {}, tweak)
}

/// Node `i` (`node<i>`) serving `root`, with a handoff agent.
fn start_node(
    root: &std::path::Path,
    i: usize,
    rehandoff: RehandoffPolicy,
    agent: &impl Fn(&mut HandoffConfig),
) -> NodeServer {
    let mut handoff = HandoffConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        key: Some(KEY.into()),
        rehandoff,
        ..HandoffConfig::default()
    };
    agent(&mut handoff);
    NodeServer::start(NodeConfig {
        name: format!("node{i}"),
        root: root.to_path_buf(),
        workers: 1,
        handoff: Some(handoff),
        ..NodeConfig::default()
    })
    .unwrap()
}

fn node_entry(i: usize, node: &NodeServer) -> NodeEntry {
    NodeEntry {
        name: Some(format!("node{i}")),
        addr: node.addr(),
        weight: 1,
        handoff: node.handoff_addr(),
        admin: None,
    }
}

fn cluster_of(
    policy: &str,
    n: usize,
    switch_key: &str,
    rehandoff: RehandoffPolicy,
    agent: impl Fn(&mut HandoffConfig),
    tweak: impl FnOnce(&mut SwitchConfig),
) -> Cluster {
    // RUST_LOG=locus_switch=debug,locus_node=debug shows both sides of the protocol.
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
    let root = tempfile::tempdir().unwrap();
    write_site(root.path());
    let nodes: Vec<NodeServer> = (0..n).map(|i| start_node(root.path(), i, rehandoff, &agent)).collect();
    let config = SwitchConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        workers: 2,
        mode: Mode::Handoff,
        policy: PolicyConfig::from_name(policy).unwrap(),
        nodes: nodes.iter().enumerate().map(|(i, node)| node_entry(i, node)).collect(),
        handoff: HandoffSettings { key: Some(switch_key.into()), ..HandoffSettings::default() },
        ..SwitchConfig::default()
    };
    let mut config = config;
    tweak(&mut config);
    let switch = SwitchServer::start(config.clone()).unwrap();
    let c = Cluster { nodes, switch, config, _root: root };
    // Both workers connect a control channel to each agent.
    if switch_key == KEY {
        c.wait_for(|s| s["handoff"]["channels_up"] == 2 * n, "control channels");
    }
    c
}

impl Cluster {
    fn status(&self) -> serde_json::Value {
        self.switch.status()
    }

    fn counter(&self, name: &str) -> u64 {
        let s = self.status();
        s["handoff"][name].as_u64().unwrap_or_else(|| panic!("handoff.{name} in {s}"))
    }

    fn wait_for(&self, ok: impl Fn(&serde_json::Value) -> bool, what: &str) {
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(5) {
            if ok(&self.status()) {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!("waited in vain for {what}: {}", self.status());
    }

    fn get(&self, client: &mut Client, path: &str) -> Response {
        client.send(format!("GET {path} HTTP/1.1\r\nHost: t\r\n\r\n").as_bytes());
        client.read_response(false).expect("a response")
    }

    fn node_of(&self, path: &str) -> String {
        let mut c = Client::connect(self.switch.addr());
        self.get(&mut c, path).header("x-locus-node").expect("X-Locus-Node").to_string()
    }

    fn stop(self) {
        self.switch.shutdown();
        for n in self.nodes {
            n.shutdown();
        }
    }
}

#[test]
#[ignore = "needs root: TCP_REPAIR needs CAP_NET_ADMIN (./quickstart test runs it as root)"]
fn handoff_serves_small_and_large_files_byte_exact_from_the_nodes_themselves() {
    require_root();
    let c = cluster("lard", 2, KEY);
    let big = pattern(3 << 20, 11);
    for round in 0..3 {
        let mut client = Client::connect(c.switch.addr());
        let r = c.get(&mut client, "/big.bin");
        assert_eq!(r.status, 200);
        assert!(r.body == big, "round {round}: big body differs");
        assert!(r.header("x-locus-node").is_some_and(|n| n.starts_with("node")));
        let mut client = Client::connect(c.switch.addr());
        let r = c.get(&mut client, "/f3.txt");
        assert_eq!((r.status, r.body.as_slice()), (200, "file 3\n".repeat(4).as_bytes()));
    }
    let s = c.status();
    assert_eq!(s["handoff"]["handoffs"], 6, "{s}");
    assert_eq!(s["handoff"]["served_here"], 0, "{s}");
    // Not one response byte went through the switch.
    assert_eq!(s["bytes_to_clients"], 0, "{s}");
    // The clients closed: the agents report it and the nodes' load goes back to zero.
    c.wait_for(|s| s["handoff"]["on_nodes_now"] == 0 && s["in_flight"] == 0, "closes reported");
    assert!(c.counter("closed") >= 6);
    c.stop();
}

#[test]
#[ignore = "needs root: TCP_REPAIR needs CAP_NET_ADMIN (./quickstart test runs it as root)"]
fn keep_alive_and_pipelined_requests_move_to_the_node_the_policy_picks() {
    require_root();
    let c = cluster("hash", 2, KEY);
    let a = "/f1.txt".to_string();
    let home = c.node_of(&a);
    let b = (2..40).map(|i| format!("/f{i}.txt")).find(|p| c.node_of(p) != home).expect("two nodes used");
    let other = c.node_of(&b);
    let body = |p: &str| {
        let i: usize = p.trim_start_matches("/f").trim_end_matches(".txt").parse().unwrap();
        format!("file {i}\n").repeat(i + 1).into_bytes()
    };
    let mut client = Client::connect(c.switch.addr());
    for path in [&a, &b, &a, &b, &b] {
        let r = c.get(&mut client, path);
        assert_eq!(r.status, 200);
        assert_eq!(r.body, body(path), "{path}");
        let want = if path == &a { &home } else { &other };
        assert_eq!(r.header("x-locus-node"), Some(want.as_str()), "{path}");
    }
    assert!(c.counter("rehandoffs") >= 3, "{}", c.status());
    // The same target again is served where the switch last placed it, without asking.
    let routes = c.counter("routes");
    for _ in 0..5 {
        assert_eq!(c.get(&mut client, &b).header("x-locus-node"), Some(other.as_str()));
    }
    assert_eq!(c.counter("routes"), routes);
    drop(client);
    // A pipelined pair whose second request belongs to the other node.
    let mut client = Client::connect(c.switch.addr());
    client.send(format!("GET {a} HTTP/1.1\r\nHost: t\r\n\r\nGET {b} HTTP/1.1\r\nHost: t\r\n\r\n").as_bytes());
    let (ra, rb) = (client.read_response(false).unwrap(), client.read_response(false).unwrap());
    assert_eq!((&ra.body, &rb.body), (&body(&a), &body(&b)));
    assert_eq!(ra.header("x-locus-node"), Some(home.as_str()));
    assert_eq!(rb.header("x-locus-node"), Some(other.as_str()));
    assert_eq!(c.counter("served_here"), 0);
    drop(client);
    c.wait_for(|s| s["handoff"]["on_nodes_now"] == 0 && s["in_flight"] == 0, "closes reported");
    c.stop();
}

#[test]
#[ignore = "needs root: TCP_REPAIR needs CAP_NET_ADMIN (./quickstart test runs it as root)"]
fn a_switch_whose_key_the_agents_reject_hands_nothing_off_and_serves_by_proxy() {
    require_root();
    let c = cluster("lard", 2, OTHER_KEY);
    // Every worker's channel to every agent has been tried and refused.
    c.wait_for(|s| s["handoff"]["channel_failures"].as_u64() >= Some(4), "refused control channels");
    assert_eq!(c.counter("channels_up"), 0);
    let mut client = Client::connect(c.switch.addr());
    for _ in 0..3 {
        let r = c.get(&mut client, "/f5.txt");
        assert_eq!((r.status, r.body), (200, "file 5\n".repeat(6).into_bytes()));
    }
    assert_eq!(c.counter("handoffs"), 0);
    let status = c.status();
    assert_eq!(status["policy_assignments"], 3, "a handoff not tried keeps its one dispatch: {status}");
    for n in &c.nodes {
        let s = n.status();
        assert_eq!(s["handoffs_accepted"], 0, "{s}");
    }
    c.stop();
}

#[test]
#[ignore = "needs root: TCP_REPAIR needs CAP_NET_ADMIN (./quickstart test runs it as root)"]
fn with_back_end_forwarding_the_connection_stays_and_the_other_node_answers_through_it() {
    require_root();
    let c = cluster_with("hash", 2, KEY, RehandoffPolicy::Forward);
    let a = "/f1.txt".to_string();
    let home = c.node_of(&a);
    let b = (2..40).map(|i| format!("/f{i}.txt")).find(|p| c.node_of(p) != home).expect("two nodes used");
    let other = c.node_of(&b);
    let (routes, rehandoffs) = (c.counter("routes"), c.counter("rehandoffs"));
    let mut client = Client::connect(c.switch.addr());
    // a is handed to its node; b, c.. are fetched by that node from the other one; the
    // connection never moves, and keeps working (the switch does not hold its packets).
    for path in [&a, &b, &a, &b, &a] {
        let r = c.get(&mut client, path);
        assert_eq!(r.status, 200, "{path}");
        let want = if path == &a { &home } else { &other };
        assert_eq!(r.header("x-locus-node"), Some(want.as_str()), "{path}");
    }
    assert_eq!(c.counter("rehandoffs"), rehandoffs);
    assert_eq!(c.counter("routes"), routes + 4);
    drop(client);
    c.wait_for(|s| s["handoff"]["on_nodes_now"] == 0 && s["in_flight"] == 0, "closes reported");
    c.stop();
}

#[test]
#[ignore = "needs root: TCP_REPAIR needs CAP_NET_ADMIN (./quickstart test runs it as root)"]
fn cap_hands_each_request_of_a_class_to_the_next_node_even_on_one_keep_alive_connection() {
    require_root();
    // /f1*.txt are "cpu" requests to the switch's class table; the rest are unclassed.
    let class: locus_classify::ClassConfig = toml::from_str(
        "name = \"one\"\nprefix = \"/f1\"\ncost = { dist = \"const\", ms = 5 }\nsize = 100\nresource = \"cpu\"\n",
    )
    .unwrap();
    let c =
        cluster_configured("cap", 2, KEY, RehandoffPolicy::Handoff, |config| config.classes = vec![class]);
    let mut client = Client::connect(c.switch.addr());
    let mut nodes = Vec::new();
    for path in ["/f1.txt", "/f2.txt", "/f10.txt", "/f3.txt", "/f11.txt", "/f4.txt", "/f12.txt", "/f5.txt"] {
        let r = c.get(&mut client, path);
        assert_eq!(r.status, 200, "{path}");
        nodes.push(r.header("x-locus-node").expect("X-Locus-Node").to_string());
    }
    // Each class has its own round robin: the cpu requests (even positions) alternate
    // between the nodes, and so do the unclassed ones (odd positions).
    for parity in 0..2 {
        let of_class: Vec<&String> = nodes.iter().skip(parity).step_by(2).collect();
        assert!(of_class.windows(2).all(|w| w[0] != w[1]), "class {parity} served by {nodes:?}");
    }
    assert!(c.counter("rehandoffs") >= 3, "{}", c.status());
    assert_eq!(c.counter("served_here"), 0);
    drop(client);
    c.wait_for(|s| s["handoff"]["on_nodes_now"] == 0 && s["in_flight"] == 0, "closes reported");
    c.stop();
}

#[test]
#[ignore = "needs root: TCP_REPAIR needs CAP_NET_ADMIN (./quickstart test runs it as root)"]
fn csld_places_handed_off_connections_and_hears_of_their_requests() {
    require_root();
    let c = cluster("csld", 2, KEY);
    let mut served = std::collections::HashSet::new();
    // Keep-alive connections with several targets each, over more than two CSLD periods
    // (200 ms): the first request places the connection, later ones move it (Routes).
    let started = Instant::now();
    let mut connections = 0;
    while started.elapsed() < Duration::from_millis(700) || connections < 6 {
        let mut client = Client::connect(c.switch.addr());
        for i in [1, 2, 3] {
            let r = c.get(&mut client, &format!("/f{}.txt", (connections + i) % 40));
            assert_eq!(r.status, 200);
            served.insert(r.header("x-locus-node").expect("X-Locus-Node").to_string());
        }
        connections += 1;
    }
    assert_eq!(served.len(), 2, "both nodes served: {served:?}");
    assert!(c.counter("handoffs") >= 6, "{}", c.status());
    assert_eq!(c.counter("served_here"), 0);
    // The policy saw the connections and their requests: after a period with traffic it
    // weights both nodes, and its file table holds the documents its sniffer was told of.
    c.wait_for(
        |s| {
            s["mapping_entries"].as_u64().is_some_and(|m| m >= 8)
                && s["nodes"]
                    .as_array()
                    .is_some_and(|n| n.iter().all(|n| n["policy_weight"].as_f64().is_some_and(|w| w > 0.0)))
        },
        "CSLD weights for both nodes and its file table",
    );
    c.wait_for(|s| s["handoff"]["on_nodes_now"] == 0 && s["in_flight"] == 0, "closes reported");
    c.stop();
}

/// A handoff cluster whose switch also terminates TLS (a certificate for `localhost` in the
/// returned directory), the agents set up by `agent`; the certificate's PEM.
#[test]
#[ignore = "needs root: TCP_REPAIR needs CAP_NET_ADMIN (./quickstart test runs it as root)"]
fn a_node_added_by_a_reload_gets_control_channels_and_handed_off_connections() {
    require_root();
    let mut c = cluster("rr", 2, KEY);
    let node2 = start_node(c._root.path(), 2, RehandoffPolicy::Handoff, &|_| {});
    let mut config = c.config.clone();
    config.nodes.push(node_entry(2, &node2));
    let report = c.switch.reload(config).unwrap();
    assert_eq!(report.added, ["node2"]);
    c.wait_for(|s| s["handoff"]["channels_up"] == 6, "both workers' channels to the new node's agent");
    let served: Vec<String> = (0..6).map(|i| c.node_of(&format!("/f{i}.txt"))).collect();
    assert!(served.contains(&"node2".to_string()), "rr sends connections to the new node: {served:?}");
    assert_eq!(c.counter("handoffs"), 6, "every one handed off, none proxied: {}", c.status());
    c.nodes.push(node2);
    c.stop();
}

#[test]
#[ignore = "needs root: TCP_REPAIR needs CAP_NET_ADMIN (./quickstart test runs it as root)"]
fn after_an_upgrade_connections_handed_off_before_it_move_on_and_new_ones_are_handed_off() {
    require_root();
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("switch.sock");
    let mut c = cluster_configured("hash", 2, KEY, RehandoffPolicy::Handoff, |config| {
        config.control_socket = Some(socket.clone());
    });
    let a = "/f1.txt".to_string();
    let home = c.node_of(&a);
    let b = (2..40).map(|i| format!("/f{i}.txt")).find(|p| c.node_of(p) != home).expect("two nodes used");
    let other = c.node_of(&b);
    let mut before = Client::connect(c.switch.addr());
    assert_eq!(c.get(&mut before, &a).header("x-locus-node"), Some(home.as_str()));
    let new = SwitchServer::start_taking_over(c.config.clone(), &socket).unwrap();
    let old = std::mem::replace(&mut c.switch, new);
    c.wait_for(|s| s["handoff"]["channels_up"] == 4, "the new switch's control channels");
    old.shutdown();
    // The connection lives on its node, which now asks the new switch where each request
    // goes: the new switch routes it (it knows the address clients connect to from the old
    // one), and moves it to the other node for the other's target.
    for (path, node) in [(&b, &other), (&a, &home)] {
        let r = c.get(&mut before, path);
        assert_eq!((r.status, &r.body), (200, &file_body(path)), "{path}");
        assert_eq!(r.header("x-locus-node"), Some(node.as_str()), "{path}");
    }
    assert!(c.counter("rehandoffs") >= 2, "{}", c.status());
    // New connections are handed off by the new switch.
    let mut after = Client::connect(c.switch.addr());
    assert_eq!(c.get(&mut after, &a).header("x-locus-node"), Some(home.as_str()));
    assert!(c.counter("handoffs") >= 1, "{}", c.status());
    drop((before, after));
    c.stop();
}

fn tls_cluster(
    policy: &str,
    n: usize,
    agent: impl Fn(&mut HandoffConfig),
) -> (Cluster, tempfile::TempDir, String) {
    let dir = tempfile::tempdir().unwrap();
    let (crt, key, pem) = locus_test_support::write_pair(dir.path(), "switch", &["localhost"], (2020, 2090));
    let c = cluster_of(policy, n, KEY, RehandoffPolicy::Handoff, agent, |config| {
        config.listen_tls = Some("127.0.0.1:0".parse().unwrap());
        config.tls = Some(locus_tls::TlsSettings::single(crt, key));
        config.admin = Some("127.0.0.1:0".parse().unwrap());
    });
    (c, dir, pem)
}

fn file_body(path: &str) -> Vec<u8> {
    let i: usize = path.trim_start_matches("/f").trim_end_matches(".txt").parse().unwrap();
    format!("file {i}\n").repeat(i + 1).into_bytes()
}

#[test]
#[ignore = "needs root: TCP_REPAIR needs CAP_NET_ADMIN (./quickstart test runs it as root)"]
fn https_sessions_move_with_their_connections_and_the_nodes_answer_them_encrypted() {
    require_root();
    let (c, _dir, pem) = tls_cluster("hash", 2, |_| {});
    let tls_addr = c.switch.tls_addr().unwrap();
    let connect = || Client::connect_tls(tls_addr, locus_test_support::client_config(&pem), "localhost");
    let mut client = connect();
    let r = client.get("/big.bin");
    assert_eq!(r.status, 200);
    assert!(r.body == pattern(3 << 20, 11), "the big body, byte for byte");
    assert!(r.header("x-locus-node").is_some_and(|n| n.starts_with("node")));
    drop(client);
    // Keep-alive requests whose documents live on different nodes: the session moves on.
    let a = "/f1.txt".to_string();
    let home = c.node_of(&a);
    let b = (2..40).map(|i| format!("/f{i}.txt")).find(|p| c.node_of(p) != home).expect("two nodes used");
    let other = c.node_of(&b);
    let mut client = connect();
    for path in [&a, &b, &a, &b, &b] {
        let r = client.get(path);
        assert_eq!((r.status, &r.body), (200, &file_body(path)), "{path}");
        let want = if path == &a { &home } else { &other };
        assert_eq!(r.header("x-locus-node"), Some(want.as_str()), "{path}");
    }
    drop(client);
    // A pipelined pair whose second request belongs to the other node. The node answers the
    // first and hands the connection back with the second while the client's kernel still
    // owes an ACK for the answer: on one host, without a packet forwarder to hold it, an ACK
    // sent between the two nodes' sockets would be answered RST. Quick ACKs make the client
    // ACK the answer as it arrives, and it reads nothing (no window update) until the
    // connection is on the other node.
    let mut client = connect();
    socket2::SockRef::from(client.stream.tcp()).set_tcp_quickack(true).unwrap();
    client.send(format!("GET {a} HTTP/1.1\r\nHost: t\r\n\r\nGET {b} HTTP/1.1\r\nHost: t\r\n\r\n"));
    c.wait_for(|s| s["handoff"]["rehandoffs"].as_u64() >= Some(4), "the pair's second request moved");
    let (ra, rb) = (client.read_response(false).unwrap(), client.read_response(false).unwrap());
    assert_eq!((&ra.body, &rb.body), (&file_body(&a), &file_body(&b)));
    assert_eq!(ra.header("x-locus-node"), Some(home.as_str()));
    assert_eq!(rb.header("x-locus-node"), Some(other.as_str()));
    drop(client);
    let s = c.status();
    assert_eq!(s["handoff"]["tls"]["handoffs"], 3, "{s}");
    assert!(c.counter("rehandoffs") >= 4, "{s}");
    assert_eq!(c.counter("served_here"), 0, "{s}");
    // Not one response byte went through the switch.
    assert_eq!(s["bytes_to_clients"], 0, "{s}");
    c.wait_for(|s| s["handoff"]["on_nodes_now"] == 0 && s["in_flight"] == 0, "closes reported");
    c.stop();
}

#[test]
#[ignore = "needs root: TCP_REPAIR needs CAP_NET_ADMIN (./quickstart test runs it as root)"]
fn a_tls_session_a_node_refuses_or_on_tls_1_2_is_served_by_the_switch_and_counted() {
    require_root();
    // Agents relaying to an upstream cannot continue a TLS session: they refuse it.
    let (c, _dir, pem) = tls_cluster("hash", 2, |h| h.upstream = Some("127.0.0.1:9".parse().unwrap()));
    let tls_addr = c.switch.tls_addr().unwrap();
    let mut client = Client::connect_tls(tls_addr, locus_test_support::client_config(&pem), "localhost");
    for path in ["/f3.txt", "/f4.txt", "/f3.txt"] {
        let r = client.get(path);
        assert_eq!((r.status, &r.body), (200, &file_body(path)), "{path}");
    }
    let s = c.status();
    assert_eq!((c.counter("refused"), c.counter("served_here")), (1, 1), "{s}");
    assert_eq!(s["handoff"]["tls"]["handoffs"], 0, "{s}");
    drop(client);
    c.stop();

    let (c, _dir, pem) = tls_cluster("hash", 2, |_| {});
    let tls12 = locus_test_support::client_config_with(&pem, &[&rustls::version::TLS12]);
    let mut client = Client::connect_tls(c.switch.tls_addr().unwrap(), tls12, "localhost");
    for path in ["/f3.txt", "/f4.txt"] {
        let r = client.get(path);
        assert_eq!((r.status, &r.body), (200, &file_body(path)), "{path}");
    }
    let s = c.status();
    assert_eq!(s["handoff"]["tls"]["two_way"]["tls12"], 1, "{s}");
    assert_eq!((c.counter("handoffs"), c.counter("refused")), (0, 0), "{s}");
    let metrics = locus_test_support::get(c.switch.admin_addr().unwrap(), "/metrics").text();
    assert!(metrics.contains("handoff_tls_two_way_total{reason=\"tls12\"} 1"), "{metrics}");
    assert!(metrics.contains("handoffs_tls_total 0"), "{metrics}");
    drop(client);
    c.stop();
}

/// A blocking rustls client of `addr` that has finished its handshake.
fn raw_tls_client(
    addr: std::net::SocketAddr,
    pem: &str,
) -> rustls::StreamOwned<rustls::ClientConnection, std::net::TcpStream> {
    let tcp = std::net::TcpStream::connect(addr).unwrap();
    tcp.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let conn = rustls::ClientConnection::new(
        locus_test_support::client_config(pem),
        "localhost".try_into().unwrap(),
    )
    .unwrap();
    let mut s = rustls::StreamOwned::new(conn, tcp);
    while s.conn.is_handshaking() {
        s.conn.complete_io(&mut s.sock).unwrap();
    }
    s
}

/// Read `s` to its end (or an error): the bytes, and the error if one ended it.
fn read_to_end_or_error(s: &mut impl std::io::Read) -> (Vec<u8>, Option<std::io::Error>) {
    let mut out = Vec::new();
    let mut buf = [0u8; 16384];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return (out, None),
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(e) => return (out, Some(e)),
        }
    }
}

#[test]
#[ignore = "needs root: TCP_REPAIR needs CAP_NET_ADMIN (./quickstart test runs it as root)"]
fn a_client_closing_at_once_still_gets_its_answer_and_a_forged_record_ends_the_session() {
    use std::io::Write;
    require_root();
    let (c, _dir, pem) = tls_cluster("hash", 2, |_| {});
    let tls_addr = c.switch.tls_addr().unwrap();
    // The request, close_notify and FIN in one segment (corked): the connection is half-closed
    // before the switch could dump it, so the switch answers on the session it took over.
    let mut s = raw_tls_client(tls_addr, &pem);
    let corked = socket2::SockRef::from(&s.sock);
    corked.set_tcp_cork(true).unwrap();
    s.write_all(b"GET /f3.txt HTTP/1.1\r\nHost: t\r\n\r\n").unwrap();
    s.conn.send_close_notify();
    s.flush().unwrap();
    s.sock.shutdown(std::net::Shutdown::Write).unwrap();
    let (answer, error) = read_to_end_or_error(&mut s);
    let text = String::from_utf8_lossy(&answer);
    assert!(text.starts_with("HTTP/1.1 200") && answer.ends_with(&file_body("/f3.txt")), "{text} {error:?}");
    assert_eq!(c.counter("failed"), 1, "a half-closed connection cannot be dumped");
    // The request, and close_notify and FIN once the node has the connection: the node answers.
    // (On one host without a packet forwarder nothing holds the client's packets while the
    // connection is between the switch and the node: the client sends nothing in that time.)
    let mut s = raw_tls_client(tls_addr, &pem);
    s.write_all(b"GET /f2.txt HTTP/1.1\r\nHost: t\r\n\r\n").unwrap();
    c.wait_for(|s| s["handoff"]["tls"]["handoffs"] == 1, "the session handed off");
    s.conn.send_close_notify();
    s.flush().unwrap();
    s.sock.shutdown(std::net::Shutdown::Write).unwrap();
    let (answer, error) = read_to_end_or_error(&mut s);
    let text = String::from_utf8_lossy(&answer);
    assert!(text.starts_with("HTTP/1.1 200") && answer.ends_with(&file_body("/f2.txt")), "{text} {error:?}");
    // A record whose tag does not verify, after the handoff: an alert, the end, nothing served.
    let mut s = raw_tls_client(tls_addr, &pem);
    s.write_all(b"GET /f4.txt HTTP/1.1\r\nHost: t\r\n\r\n").unwrap();
    let mut first = vec![0u8; 4096];
    let n = std::io::Read::read(&mut s, &mut first).unwrap();
    assert!(first[..n].starts_with(b"HTTP/1.1 200"));
    s.conn.writer().write_all(b"GET /f5.txt HTTP/1.1\r\nHost: t\r\n\r\n").unwrap();
    let mut record = Vec::new();
    s.conn.write_tls(&mut record).unwrap();
    *record.last_mut().unwrap() ^= 0x55;
    s.sock.write_all(&record).unwrap();
    let (rest, error) = read_to_end_or_error(&mut s);
    assert!(!String::from_utf8_lossy(&rest).contains("HTTP/1.1"), "nothing served after a forged record");
    let error = error.expect("the session ends with an alert").to_string();
    assert!(error.contains("BadRecordMac"), "{error}");
    let s = c.status();
    assert_eq!((s["handoff"]["tls"]["handoffs"].as_u64(), c.counter("failed")), (Some(2), 1), "{s}");
    c.wait_for(|s| s["handoff"]["on_nodes_now"] == 0, "closes reported");
    c.stop();
}
