//! Integration tests of the content-aware and metric-fed policies in the live switch (proxy
//! mode) over scripted back-ends that say who served: CAP spreads each resource class evenly,
//! CSLD steers new connections away from a node it saw take costly requests, the metric-fed
//! WRR away from a node whose polled `/locus/status` reports a long listen queue; and
//! configurations missing what these policies read are refused at start.

mod common;

use common::*;
use locus_classify::ClassConfig;
use locus_policy::{CsldParams, PolicyConfig, WrrVariant};
use locus_switch::{Mode, NodeEntry, SwitchConfig, SwitchServer};
use locus_test_support::Client;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

/// A class of requests under `prefix` costing `ms` of CPU and using `resource`.
fn class(name: &str, prefix: &str, ms: u32, resource: &str) -> ClassConfig {
    toml::from_str(&format!(
        "name = \"{name}\"\nprefix = \"{prefix}\"\ncost = {{ dist = \"const\", ms = {ms} }}\n\
         size = 100\nresource = \"{resource}\"\n"
    ))
    .unwrap()
}

/// A back-end answering every request with `X-Locus-Node: name`; `/locus/status` with a load
/// report whose listen queue is `listen_queue`.
fn backend(name: String, listen_queue: u32) -> ScriptedBackend {
    backend_on("127.0.0.1:0".parse().unwrap(), name, listen_queue)
}

fn backend_on(addr: SocketAddr, name: String, listen_queue: u32) -> ScriptedBackend {
    ScriptedBackend::start_on(addr, move |r| {
        let body = if r.target == "/locus/status" {
            format!(
                r#"{{"name":"{name}","load_report":{{"listen_queue":{listen_queue},"disk_wait":0,"static_active":0,"dynamic_active":0}}}}"#
            )
        } else {
            format!("{name} {}", r.target)
        };
        Action::Reply(ok_response(body.as_bytes(), &format!("X-Locus-Node: {name}\r\n")))
    })
}

fn config(backends: &[ScriptedBackend], policy: PolicyConfig, classes: Vec<ClassConfig>) -> SwitchConfig {
    let mut config = SwitchConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        workers: 1,
        policy,
        classes,
        nodes: backends
            .iter()
            .enumerate()
            .map(|(i, b)| NodeEntry {
                name: Some(format!("n{i}")),
                addr: b.addr,
                weight: 1,
                handoff: None,
                // The scripted back-end answers its own /locus/status.
                admin: Some(b.addr),
            })
            .collect(),
        ..SwitchConfig::default()
    };
    config.health.slow_start_ms = 0;
    config
}

/// Who served `target`, over a fresh connection.
fn served_by(switch: &SwitchServer, target: &str) -> String {
    let r = Client::connect(switch.addr()).get(target);
    assert_eq!(r.status, 200, "{target}");
    r.served_by().expect("X-Locus-Node").to_string()
}

/// Six rounds of one compute and two search requests through a switch in `mode` running
/// CAP; in splice mode each request takes a fresh connection (splice places a connection by
/// its first request). Each class must land evenly on the three nodes.
fn cap_spread(mode: Mode) {
    let backends: Vec<_> = (0..3).map(|i| backend(format!("n{i}"), 0)).collect();
    let classes =
        vec![class("compute", "/cgi/compute", 20, "cpu"), class("search", "/cgi/search", 0, "disk")];
    let mut c = config(&backends, PolicyConfig::Cap, classes);
    c.mode = mode;
    let switch = SwitchServer::start(c).unwrap();
    // One compute request to two searches: plain round robin over 3 nodes would send every
    // compute request to the same node.
    let mut per_class: HashMap<(&str, String), usize> = HashMap::new();
    let mut client = Client::connect(switch.addr());
    for round in 0..6 {
        for (kind, target) in
            [("compute", "/cgi/compute?n=1"), ("search", "/cgi/search?q=a"), ("search", "/cgi/search?q=b")]
        {
            if mode == Mode::Splice {
                client = Client::connect(switch.addr());
            }
            let r = client.get(&format!("{target}&r={round}"));
            assert_eq!(r.status, 200);
            *per_class.entry((kind, r.served_by().unwrap().to_string())).or_default() += 1;
        }
    }
    for i in 0..3 {
        let node = format!("n{i}");
        assert_eq!(per_class.get(&("compute", node.clone())), Some(&2), "{mode:?}: {per_class:?}");
        assert_eq!(per_class.get(&("search", node)), Some(&4), "{mode:?}: {per_class:?}");
    }
    // A spliced connection is opaque to the switch: it drains it rather than cut it.
    drop(client);
    switch.shutdown();
}

#[test]
fn cap_spreads_each_class_evenly_over_the_nodes() {
    cap_spread(Mode::Proxy);
}

#[test]
fn cap_spreads_each_class_evenly_in_splice_mode_by_each_connections_first_request() {
    cap_spread(Mode::Splice);
}

#[test]
fn csld_sends_fewer_new_connections_to_the_node_it_saw_take_costly_requests() {
    let mut backends: Vec<_> = (0..3).map(|i| backend(format!("n{i}"), 0)).collect();
    let classes = vec![class("heavy", "/cgi/heavy", 500, "cpu")];
    let mut c = config(&backends, PolicyConfig::Csld(CsldParams::default()), classes);
    c.health.interval_ms = 50;
    c.health.timeout_ms = 200;
    let switch = SwitchServer::start(c).unwrap();
    // n1 and n2 go away: every heavy request then lands on n0.
    let addrs: Vec<SocketAddr> = backends.iter().map(|b| b.addr).collect();
    backends.truncate(1);
    wait_until("n1 and n2 out of the view", || {
        switch.node_is_up("n1") == Some(false) && switch.node_is_up("n2") == Some(false)
    });
    for i in 0..16 {
        assert_eq!(served_by(&switch, &format!("/cgi/heavy?i={i}")), "n0");
    }
    // 16 × 500 ms of CPU are on n0's cost board for the next seconds. n1 and n2 come back.
    backends.push(backend_on(addrs[1], "n1".into(), 0));
    backends.push(backend_on(addrs[2], "n2".into(), 0));
    wait_until("n1 and n2 back", || {
        switch.node_is_up("n1") == Some(true) && switch.node_is_up("n2") == Some(true)
    });
    let mut counts: HashMap<String, usize> = HashMap::new();
    let started = Instant::now();
    while started.elapsed() < Duration::from_millis(1500) {
        *counts.entry(served_by(&switch, "/index.html")).or_default() += 1;
    }
    let n = |name: &str| counts.get(name).copied().unwrap_or(0);
    eprintln!("new connections after the heavy burst: {counts:?}");
    assert!(n("n0") * 2 < n("n1") && n("n0") * 2 < n("n2"), "{counts:?}");
    switch.shutdown();
}

#[test]
fn wrr_metrics_sends_less_traffic_to_a_node_reporting_a_long_listen_queue() {
    let backends = vec![backend("n0".into(), 100_000), backend("n1".into(), 0)];
    let policy = PolicyConfig::WrrMetrics { variant: WrrVariant::I };
    let switch = SwitchServer::start(config(&backends, policy, Vec::new())).unwrap();
    wait_until("both nodes reported", || {
        let status = switch.status();
        let nodes = status["nodes"].as_array().unwrap().clone();
        nodes.iter().all(|n| n["last_report"]["probe"].is_u64())
    });
    let status = switch.status();
    assert_eq!(status["nodes"][0]["last_report"]["listen_queue"], 100_000, "{status}");
    // Warm-up: a period of traffic for the weights to be computed from.
    let warm = Instant::now();
    while warm.elapsed() < Duration::from_millis(450) {
        served_by(&switch, "/warm");
    }
    let mut counts: HashMap<String, usize> = HashMap::new();
    let started = Instant::now();
    while started.elapsed() < Duration::from_millis(1200) {
        *counts.entry(served_by(&switch, "/page.html")).or_default() += 1;
    }
    let n = |name: &str| counts.get(name).copied().unwrap_or(0);
    eprintln!("requests with n0 reporting a listen queue of 100000: {counts:?}");
    assert!(n("n0") * 2 < n("n1"), "{counts:?}");
    switch.shutdown();
}

#[test]
fn switch_refuses_a_content_policy_without_what_it_reads() {
    let backends = vec![backend("n0".into(), 0), backend("n1".into(), 0)];
    let mut c = config(&backends, PolicyConfig::WrrMetrics { variant: WrrVariant::A }, Vec::new());
    c.nodes[1].admin = None;
    let e = SwitchServer::start(c).err().expect("refused").to_string();
    assert!(e.contains("node `n1`") && e.contains("admin"), "{e}");
    let text = "[[node]]\naddr = \"127.0.0.1:1\"\n[[classes]]\nname = \"x\"\nprefix = \"/x\"\n\
                cost = { dist = \"const\", ms = 1 }\nsize = 1\nresource = \"network\"\n";
    let e = SwitchConfig::from_toml_str(text, "switch.toml").unwrap_err().to_string();
    assert!(e.contains("network") && e.contains("resource") && e.contains("line 8"), "{e}");
}

fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}
