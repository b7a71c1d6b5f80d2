//! The synthetic mix end to end: a Locus node with dynamic classes answers a run that mixes
//! dynamic targets and a moving hot spot into its draws, closed and open loop, and every
//! response — static file or dynamic body — verifies; against a scripted server, a hot spot
//! with all of the static share sends only the current phase's few documents, one set for
//! every connection and thread, and the set moves as phases pass.

mod common;

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{Reply, ScriptedServer, SeenRequest};
use locus_load::{
    DocumentSet, DynamicTarget, HotSpot, LoadConfig, Popularity, Verification, Workload, run_load,
};
use locus_node::{ByteSize, ClassConfig, CostDistribution, NodeConfig, NodeServer};

/// (path, body size) of the dynamic classes.
const CLASSES: [(&str, u64); 2] = [("/dyn/search", 3000), ("/dyn/cart", 100)];

fn docroot() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for i in 0..40u32 {
        let body: Vec<u8> = (0..(i * 311 + 7)).map(|b| (b * 13 + i) as u8).collect();
        std::fs::write(dir.path().join(format!("f{i}.bin")), body).unwrap();
    }
    dir
}

fn node(root: &std::path::Path) -> NodeServer {
    let classes = CLASSES
        .iter()
        .map(|&(prefix, size)| ClassConfig {
            name: prefix.trim_start_matches("/dyn/").into(),
            prefix: prefix.into(),
            query: BTreeMap::new(),
            cost: CostDistribution::Const { ms: 0.0 },
            disk_ms: 0.0,
            size: ByteSize(size),
            resource: None,
        })
        .collect();
    NodeServer::start(NodeConfig { root: root.into(), workers: 1, classes, ..NodeConfig::default() }).unwrap()
}

fn mixed_config(root: &std::path::Path, node: &NodeServer) -> LoadConfig {
    LoadConfig {
        workload: Workload::Synthetic {
            popularity: Popularity::Zipf { alpha: 0.8 },
            documents: DocumentSet::Docroot(root.into()),
        },
        verification: Verification::Root(root.into()),
        hot_spot: Some(HotSpot { documents: 3, share: 0.5, shift: Some(Duration::from_millis(50)) }),
        dynamic: vec![
            DynamicTarget { path: CLASSES[0].0.into(), share: 0.2, variants: 10, size: CLASSES[0].1 },
            DynamicTarget { path: CLASSES[1].0.into(), share: 0.1, variants: 5, size: CLASSES[1].1 },
        ],
        clients: 6,
        threads: 2,
        timeout: Duration::from_secs(10),
        seed: 3,
        ..LoadConfig::new(vec![format!("http://{}", node.addr()).parse().unwrap()])
    }
}

#[test]
fn closed_loop_mix_of_dynamic_targets_and_a_hot_spot_verifies_every_response() {
    let root = docroot();
    let node = node(root.path());
    let config = LoadConfig { requests: Some(800), ..mixed_config(root.path(), &node) };
    let report = run_load(&config).unwrap();
    let served = node.stats().dynamic;
    node.shutdown();
    let text = report.render_text();
    assert_eq!((report.requests, report.errors, report.mismatches), (800, 0, 0), "{text}");
    assert!(report.verified >= 800, "{text}");
    // 30 % of the requests are dynamic: binomial(800, 0.3) has σ ≈ 13.
    assert!((180..=300).contains(&report.dynamic_requests), "{text}");
    assert!(served >= report.dynamic_requests, "node served {served} dynamic requests");
    assert_eq!(report.statuses.get("2xx"), Some(&800), "{text}");
}

#[test]
fn open_loop_mix_of_dynamic_targets_and_a_hot_spot_verifies_every_response() {
    let root = docroot();
    let node = node(root.path());
    let config = LoadConfig {
        rate: Some(300.0),
        duration: Some(Duration::from_millis(1200)),
        ..mixed_config(root.path(), &node)
    };
    let report = run_load(&config).unwrap();
    node.shutdown();
    let text = report.render_text();
    assert_eq!(report.mismatches, 0, "{text}");
    assert_eq!(report.errors, report.errors_by_kind.get(locus_load::ErrorKind::Late), "{text}");
    assert!(report.requests >= 100 && report.verified >= report.requests, "{text}");
    assert!(report.dynamic_requests * 10 >= report.requests && report.dynamic_requests > 0, "{text}");
    assert_eq!(report.run.loop_kind, "open");
}

#[test]
fn a_full_share_hot_spot_sends_one_shared_small_set_per_phase_and_the_set_moves() {
    let server = ScriptedServer::start(Arc::new(|_: &SeenRequest| Reply::ok(b"doc".to_vec())), 0);
    let shift = Duration::from_millis(300);
    let config = LoadConfig {
        workload: Workload::Synthetic {
            popularity: Popularity::Uniform,
            documents: DocumentSet::Model { documents: 1000 },
        },
        hot_spot: Some(HotSpot { documents: 2, share: 1.0, shift: Some(shift) }),
        clients: 4,
        threads: 2,
        duration: Some(Duration::from_millis(1200)),
        timeout: Duration::from_secs(10),
        ..LoadConfig::new(vec![server.url().parse().unwrap()])
    };
    let started = Instant::now();
    let report = run_load(&config).unwrap();
    let elapsed = started.elapsed();
    assert_eq!(report.errors, 0, "{}", report.render_text());
    let targets: HashSet<String> = server.all_requests().into_iter().map(|r| r.target).collect();
    // At most two documents for each phase the run can have reached, from every connection
    // and thread (a set per thread or connection would be several times as many).
    let phases = (elapsed.as_nanos() / shift.as_nanos()) as usize + 1;
    assert!(targets.len() <= 2 * phases, "{} targets in {phases} phases: {targets:?}", targets.len());
    // The run lasts at least 1.2 s = 4 shifts: it sees more than one hot set.
    assert!(targets.len() >= 4, "{targets:?}");
    assert!(targets.iter().all(|t| t.starts_with("/doc/")), "{targets:?}");
}
