//! Integration tests of reloading a running switch in place (proxy mode, scripted back-ends
//! that say who served): a node added takes requests, a node removed takes no new ones while
//! its request in flight finishes, a re-weighted node's share follows its weight, LARD keeps
//! the targets of the nodes that stay, and a configuration that does not check (no nodes, a
//! bad policy, a missing certificate) is refused with the error while the switch serves on.

mod common;

use common::*;
use locus_policy::PolicyConfig;
use locus_switch::{NodeEntry, ReloadError, SwitchConfig, SwitchServer};
use locus_test_support::Client;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::Duration;

/// A back-end answering `X-Locus-Node: name`; `/slow` after `slow`.
fn backend(name: &str, slow: Duration) -> ScriptedBackend {
    let name = name.to_string();
    ScriptedBackend::start(move |r| {
        let reply =
            ok_response(format!("{name} {}", r.target).as_bytes(), &format!("X-Locus-Node: {name}\r\n"));
        if r.target == "/slow" { Action::Delay(slow, reply) } else { Action::Reply(reply) }
    })
}

fn node(name: &str, addr: SocketAddr, weight: u32) -> NodeEntry {
    NodeEntry { name: Some(name.into()), addr, weight, handoff: None, admin: None }
}

fn config(policy: &str, nodes: Vec<NodeEntry>) -> SwitchConfig {
    SwitchConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        workers: 1,
        policy: PolicyConfig::from_name(policy).unwrap(),
        nodes,
        ..SwitchConfig::default()
    }
}

/// Who served each of `paths`, over one keep-alive connection.
fn served(addr: SocketAddr, paths: &[String]) -> Vec<String> {
    let mut client = Client::connect(addr);
    paths
        .iter()
        .map(|p| {
            let r = client.get(p);
            assert_eq!(r.status, 200, "{p}");
            r.header("x-locus-node").unwrap().to_string()
        })
        .collect()
}

fn counts(names: &[String]) -> HashMap<String, usize> {
    let mut m = HashMap::new();
    for n in names {
        *m.entry(n.clone()).or_default() += 1;
    }
    m
}

fn paths(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("/{prefix}/{i}")).collect()
}

#[test]
fn added_nodes_take_requests_and_a_removed_node_finishes_its_request_but_takes_no_new_one() {
    let (a, b, c) = (
        backend("a", Duration::ZERO),
        backend("b", Duration::from_millis(600)),
        backend("c", Duration::ZERO),
    );
    let server = SwitchServer::start(config("rr", vec![node("a", a.addr, 1), node("b", b.addr, 1)])).unwrap();
    let addr = server.addr();
    // A slow request on b, in flight across the reload that removes b.
    let slow = std::thread::spawn(move || {
        let mut client = Client::connect(addr);
        for _ in 0..2 {
            let r = client.get("/slow");
            if r.header("x-locus-node") == Some("b") {
                return (r.status, r.text());
            }
        }
        panic!("rr never sent /slow to b");
    });
    assert!(wait_until(Duration::from_secs(5), || b.requests() >= 1), "the slow request reached b");
    let report = server.reload(config("rr", vec![node("a", a.addr, 1), node("c", c.addr, 1)])).unwrap();
    assert_eq!(
        (report.added.clone(), report.removed.clone()),
        (vec!["c".to_string()], vec!["b".to_string()])
    );
    let seen = counts(&served(addr, &paths("x", 20)));
    assert_eq!(seen.get("b"), None, "the removed node takes no new request: {seen:?}");
    assert!(seen.get("c").is_some_and(|&n| n >= 5), "the added node takes requests: {seen:?}");
    assert_eq!(slow.join().unwrap(), (200, "b /slow".to_string()), "the request in flight on b finished");
    let status = server.status();
    assert_eq!(status["reloads"], 1, "{status}");
    let retired: Vec<_> =
        status["nodes"].as_array().unwrap().iter().filter(|n| n["retired"] == true).collect();
    assert_eq!((retired.len(), &retired[0]["name"]), (1, &serde_json::json!("b")), "{status}");
    server.shutdown();
}

#[test]
fn a_reweighted_node_takes_its_new_share_and_lard_keeps_the_targets_of_nodes_that_stay() {
    let (a, b, c) =
        (backend("a", Duration::ZERO), backend("b", Duration::ZERO), backend("c", Duration::ZERO));
    let server =
        SwitchServer::start(config("wrr", vec![node("a", a.addr, 1), node("b", b.addr, 1)])).unwrap();
    let addr = server.addr();
    server.reload(config("wrr", vec![node("a", a.addr, 3), node("b", b.addr, 1)])).unwrap();
    let seen = counts(&served(addr, &paths("w", 40)));
    assert_eq!((seen["a"], seen["b"]), (30, 10), "weights 3:1 after the reload");
    // LARD: targets placed, then a node added and the thresholds changed; every target stays.
    let report = server.reload(config("lard", vec![node("a", a.addr, 1), node("b", b.addr, 1)])).unwrap();
    assert_eq!((report.policy, report.policy_state), ("lard", "new"), "{report:?}");
    let targets = paths("t", 30);
    let before = served(addr, &targets);
    let mut lard = config("lard", vec![node("a", a.addr, 1), node("b", b.addr, 1), node("c", c.addr, 1)]);
    lard.policy = PolicyConfig::Lard { t_low: 20, t_high: 60, max_targets: 10_000 };
    let report = server.reload(lard).unwrap();
    assert_eq!((report.policy_state, report.added.clone()), ("kept", vec!["c".to_string()]), "{report:?}");
    assert_eq!(served(addr, &targets), before, "LARD keeps the targets of the nodes that stay");
    assert!(served(addr, &paths("new", 12)).contains(&"c".to_string()), "new targets reach the new node");
    server.shutdown();
}

#[test]
fn a_configuration_that_does_not_check_is_refused_and_the_switch_serves_on() {
    let a = backend("a", Duration::ZERO);
    let server = SwitchServer::start(config("rr", vec![node("a", a.addr, 1)])).unwrap();
    let addr = server.addr();
    let refused = |c: SwitchConfig, needle: &str| {
        let e = server.reload(c).unwrap_err();
        assert!(matches!(e, ReloadError::Config(_)) && e.to_string().contains(needle), "{e}");
    };
    refused(config("rr", Vec::new()), "no nodes");
    refused(config("rr", vec![node("a", a.addr, 0)]), "weight");
    let mut cap = config("rr", vec![node("a", a.addr, 1)]);
    cap.policy = PolicyConfig::Cap;
    refused(cap, "class");
    let mut tls = config("rr", vec![node("a", a.addr, 1)]);
    tls.listen_tls = Some("127.0.0.1:0".parse().unwrap());
    tls.tls = Some(locus_tls::TlsSettings::single("/nonexistent/c.pem".into(), "/nonexistent/k.pem".into()));
    let report = server.reload(tls).expect("adding TLS is a restart's work, named in the report");
    assert_eq!(report.needs_restart, vec!["listen_tls", "tls"]);
    assert_eq!(served(addr, &paths("p", 3)), vec!["a"; 3], "the running configuration serves on");
    let status = server.status();
    assert_eq!(
        (status["reloads"].as_u64(), status["reloads_refused"].as_u64()),
        (Some(1), Some(3)),
        "{status}"
    );
    server.shutdown();
}

#[test]
fn a_reload_storm_loses_no_request() {
    let (a, b) = (backend("a", Duration::ZERO), backend("b", Duration::ZERO));
    let server = SwitchServer::start(config("rr", vec![node("a", a.addr, 1), node("b", b.addr, 1)])).unwrap();
    let addr = server.addr();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let clients: Vec<_> = (0..2)
        .map(|i| {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut done = 0;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    // One connection per request, and keep-alive requests in between.
                    let mut client = Client::connect(addr);
                    for k in 0..5 {
                        let r = client.get(&format!("/c{i}/{done}/{k}"));
                        assert_eq!(r.status, 200);
                        done += 1;
                    }
                }
                done
            })
        })
        .collect();
    // 100 reloads, alternating which nodes are in and their weights.
    for i in 0..100u32 {
        let nodes = match i % 3 {
            0 => vec![node("a", a.addr, 1 + i % 4)],
            1 => vec![node("a", a.addr, 1), node("b", b.addr, 2)],
            _ => vec![node("b", b.addr, 1)],
        };
        server.reload(config(if i % 2 == 0 { "rr" } else { "lard" }, nodes)).unwrap();
        std::thread::sleep(Duration::from_millis(5));
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let done: usize = clients.into_iter().map(|c| c.join().expect("no request failed")).sum();
    assert!(done > 0);
    assert_eq!(server.status()["reloads"], 100);
    assert_eq!(server.status()["responses"]["5xx"], 0);
    server.shutdown();
}
