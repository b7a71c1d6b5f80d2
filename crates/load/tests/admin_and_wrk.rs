//! Reading admin listeners around a run (a Locus node's cache counters, a switch's
//! per-node counters).

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use common::{Reply, ScriptedServer, SeenRequest};
use locus_load::{LoadConfig, run_load};
use locus_node::{NodeConfig, NodeServer};

#[test]
fn node_and_switch_admin_counters_become_hit_ratio_and_imbalance() {
    let root = tempfile::tempdir().unwrap();
    std::fs::write(root.path().join("one.html"), vec![b'a'; 2048]).unwrap();
    let node = NodeServer::start(NodeConfig {
        root: root.path().into(),
        workers: 1,
        admin: Some("127.0.0.1:0".parse().unwrap()),
        ..NodeConfig::default()
    })
    .unwrap();
    // A stand-in switch whose counters move between the two reads: node a +300, b +200.
    let calls = Arc::new(AtomicU64::new(0));
    let switch = ScriptedServer::start(
        Arc::new(move |req: &SeenRequest| {
            assert_eq!(req.target, "/locus/status");
            let n = calls.fetch_add(1, Ordering::SeqCst);
            let (a, b) = if n == 0 { (100, 50) } else { (400, 250) };
            let json = format!(
                r#"{{"mode":"proxy","policy":"lard-r","nodes":[{{"name":"a","requests":{a}}},{{"name":"b","requests":{b}}}]}}"#
            );
            Reply::ok(json.into_bytes())
        }),
        0,
    );
    let config = LoadConfig {
        clients: 2,
        threads: 1,
        requests: Some(200),
        switch_admin: Some(switch.url().parse().unwrap()),
        node_admins: vec![format!("http://{}", node.admin_addr().unwrap()).parse().unwrap()],
        timeout: Duration::from_secs(5),
        ..LoadConfig::new(vec![format!("http://{}/one.html", node.addr()).parse().unwrap()])
    };
    let report = run_load(&config).unwrap();
    node.shutdown();
    assert_eq!(report.requests, 200);
    let hit = report.hit_ratio.expect("hit ratio from the node");
    assert!(hit > 0.95 && hit < 1.0, "one miss then hits: {hit}");
    assert_eq!(report.policy.as_deref(), Some("lard-r"));
    assert_eq!(report.mode.as_deref(), Some("proxy"));
    let nodes = report.nodes.clone().unwrap();
    assert_eq!(nodes.iter().map(|n| n.requests).collect::<Vec<_>>(), [300, 200]);
    assert!((report.imbalance.unwrap() - 1.2).abs() < 1e-9);
    let json = report.to_json();
    assert_eq!(json["switch"], format!("{}/", switch.url()));
    assert_eq!(json["nodes"][0]["name"], "a");
    assert!(json["hit_ratio"].is_f64() && json["imbalance"].is_f64());
    assert!(report.warnings.is_empty(), "{:?}", report.warnings);

    // An admin listener that does not answer gives nulls and a warning, not a failure.
    drop(switch);
    let report = run_load(&LoadConfig { node_admins: Vec::new(), ..config.clone() });
    let report = match report {
        Ok(r) => r,
        Err(e) => panic!("{e}"),
    };
    assert!(report.nodes.is_none() && report.imbalance.is_none() && report.hit_ratio.is_none());
    assert!(!report.warnings.is_empty());
}
