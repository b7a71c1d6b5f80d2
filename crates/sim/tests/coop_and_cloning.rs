//! The cooperative-caching and Socket Cloning strategies on the link and file-server model:
//! CF serves remote hits where RR reads the file server, a CF fetch occupies the holder's TX
//! and the requester's RX, SC serves every target on its hash owner, links limit throughput
//! to their byte rate; and `reproduce sc` at a tiny scale writes its files with the expected
//! JSON shapes.

use locus_sim::reproduce::sc::{SC_POLICIES, ScOptions, reproduce_sc, sc_study_config};
use locus_sim::{LinkModel, SimConfig, SimPolicy, Workload, simulate};
use locus_trace::TraceRecord;

/// `rounds` passes over `docs` documents of `size` bytes, in order.
fn cyclic(docs: u32, size: u64, rounds: u32) -> Workload {
    let recs: Vec<TraceRecord> =
        (0..rounds).flat_map(|_| (0..docs).map(move |d| TraceRecord::get(format!("/d{d}"), size))).collect();
    Workload::from_records(&recs)
}

fn study(policy: &str, nodes: u32) -> SimConfig {
    SimConfig { policy: SimPolicy::from_name(policy).unwrap(), nodes, ..sc_study_config(7, 100_000_000) }
}

/// `study` with one client: requests one after another, none joining another's read.
fn serial(policy: &str, nodes: u32) -> SimConfig {
    SimConfig { arrivals: locus_sim::Arrivals::Closed { clients: Some(1) }, ..study(policy, nodes) }
}

#[test]
fn cf_serves_remote_hits_where_rr_reads_the_file_server() {
    // 7 documents over 2 nodes by round robin: after the first pass each document sits on
    // one node, and the next pass asks the other node for it (7 is odd).
    let w = cyclic(7, 10_000, 6);
    let rr = simulate(&w, &serial("rr", 2)).unwrap();
    let cf = simulate(&w, &serial("cf-lru", 2)).unwrap();
    assert!(rr.remote_hit_ratio == 0.0 && rr.miss_ratio > cf.miss_ratio, "{rr:?}");
    assert!(cf.remote_hit_ratio > 0.0, "{cf:?}");
    let rr_reads = rr.file_server.as_ref().unwrap().reads;
    let cf_reads = cf.file_server.as_ref().unwrap().reads;
    assert!(cf_reads < rr_reads, "CF {cf_reads} reads vs RR {rr_reads}");
    let sends: u64 = cf.per_node.iter().map(|n| n.remote_sends).sum();
    assert!(sends > 0);
}

#[test]
fn a_cf_fetch_occupies_the_holders_tx_and_the_requesters_rx() {
    // Two requests for one 1 MB document, one client: node 0 reads it from the file server,
    // node 1 then fetches it from node 0.
    let w = cyclic(1, 1_000_000, 2);
    let config =
        SimConfig { arrivals: locus_sim::Arrivals::Closed { clients: Some(1) }, ..study("cf-lru", 2) };
    let r = simulate(&w, &config).unwrap();
    assert_eq!((r.remote_hit_ratio, r.miss_ratio), (0.5, 0.5));
    let l0 = r.per_node[0].link.as_ref().unwrap();
    let l1 = r.per_node[1].link.as_ref().unwrap();
    // Node 0: RX from the file server, TX of its response and of the copy for node 1.
    assert_eq!((l0.rx_bytes, l0.tx_bytes), (1_000_000, 2_000_000));
    // Node 1: RX of the copy, TX of its response.
    assert_eq!((l1.rx_bytes, l1.tx_bytes), (1_000_000, 1_000_000));
    // Each MB over 100 Mbps × 0.95 takes ≥ 84 ms, and the requests are sequential: the file
    // server read, response 0, the copy, response 1.
    assert!(r.sim_seconds >= 4.0 * 0.084, "{}", r.sim_seconds);
}

#[test]
fn sc_serves_every_target_on_its_hash_owner() {
    let w = cyclic(40, 5_000, 5);
    let config = SimConfig { arrivals: locus_sim::Arrivals::Closed { clients: Some(4) }, ..study("sc", 4) };
    let r = simulate(&w, &config).unwrap();
    // Each document is read from the file server once (by its owner) and hit afterwards.
    assert_eq!(r.file_server.as_ref().unwrap().reads, 40);
    assert!((r.hit_ratio - 0.8).abs() < 1e-9, "{}", r.hit_ratio);
    // The owner is the target hash mod n: the file-server bytes each node received match
    // the documents it owns.
    for (i, node) in r.per_node.iter().enumerate() {
        let owned = w.targets().iter().filter(|t| t.hash % 4 == i as u64).count() as u64;
        assert_eq!(node.link.as_ref().unwrap().rx_bytes, owned * 5_000, "node {i}");
        assert_eq!(node.disk_reads, owned, "node {i}");
    }
    // Round robin spreads the entry work: every node's CPU did something even if it owns
    // few documents.
    assert!(r.per_node.iter().all(|n| n.cpu_utilization > 0.0));
}

#[test]
fn links_bound_throughput_by_their_byte_rate() {
    // 100 KB documents that all fit in memory: one node's TX carries every response.
    let w = cyclic(20, 100_000, 30);
    let r = simulate(&w, &study("rr", 1)).unwrap();
    let tx = r.per_node[0].link.as_ref().unwrap();
    let max_rps = 100e6 * 0.95 / 8.0 / 100_000.0;
    assert!(r.rps <= max_rps * 1.0001, "{} > {max_rps}", r.rps);
    assert!(tx.tx_utilization > 0.9, "{tx:?}");
    // Faster links: more throughput.
    let fast = SimConfig {
        links: Some(LinkModel { bits_per_s: 1_000_000_000, efficiency: 0.95 }),
        ..study("rr", 1)
    };
    assert!(simulate(&w, &fast).unwrap().rps > 1.5 * r.rps);
}

#[test]
fn without_links_and_file_server_cf_runs_on_the_lard_model() {
    let w = cyclic(31, 8_000, 4);
    let config = SimConfig {
        policy: SimPolicy::from_name("cf-lfu").unwrap(),
        nodes: 3,
        arrivals: locus_sim::Arrivals::Closed { clients: Some(1) },
        ..SimConfig::lard98()
    };
    let r = simulate(&w, &config).unwrap();
    assert!(r.file_server.is_none() && r.per_node.iter().all(|n| n.link.is_none()));
    assert!(r.remote_hit_ratio > 0.0 && r.measured_requests == 124, "{r:?}");
}

fn read_json(dir: &std::path::Path, name: &str) -> serde_json::Value {
    let text = std::fs::read_to_string(dir.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{name} does not parse: {e}"))
}

#[test]
fn quick_sc_reproduction_writes_rows_claims_and_plots() {
    let dir = tempfile::tempdir().unwrap();
    let mut opts = ScOptions::quick(dir.path());
    opts.requests = 6_000;
    opts.progress = false;
    let out = reproduce_sc(&opts).unwrap();
    assert_eq!(out.rows.len(), SC_POLICIES.len() * opts.node_counts.len());
    let rows = read_json(dir.path(), "results.json");
    let rows = rows.as_array().expect("results.json is an array");
    assert_eq!(rows.len(), out.rows.len());
    for r in rows {
        for key in ["policy", "nodes", "rps", "local_hit", "remote_hit", "server_read", "tx_utilization"] {
            assert!(r.get(key).is_some(), "{key} missing in {r}");
        }
        let shares = ["local_hit", "remote_hit", "server_read"].map(|k| r[k].as_f64().unwrap());
        assert!((shares.iter().sum::<f64>() - 1.0).abs() < 1e-9, "{r}");
        assert!(r["rps"].as_f64().unwrap() > 0.0);
    }
    let claims = read_json(dir.path(), "claims.json");
    let claims = claims.as_array().expect("claims.json is an array");
    assert_eq!(claims.len(), 7);
    for c in claims {
        for key in ["statement", "criterion", "met", "evidence"] {
            assert!(c.get(key).is_some(), "{key} missing in {c}");
        }
    }
    // Without 12 nodes the 12-node claims cannot be met, and say why.
    assert!(claims[0]["met"] == false && claims[0]["evidence"].as_str().unwrap().contains("not run"));
    // The quick run sweeps one file-server rate and CF with and without kept copies.
    let sensitivity = read_json(dir.path(), "sensitivity.json");
    assert_eq!(sensitivity.as_array().map(Vec::len), Some(1), "{sensitivity}");
    let keep = read_json(dir.path(), "keep_copy.json");
    let keep = keep.as_array().expect("keep_copy.json is an array");
    assert_eq!(keep.len(), 4 * opts.node_counts.len());
    // A node that keeps no copy of what it fetches serves no more from its own memory.
    let local = |p: &str, n: u64| {
        keep.iter().find(|r| r["policy"] == p && r["nodes"] == n).unwrap()["local_hit"].as_f64().unwrap()
    };
    assert!(local("cf-lru-single", 4) <= local("cf-lru", 4) + 1e-9, "{keep:?}");
    let report = std::fs::read_to_string(dir.path().join("report.md")).unwrap();
    assert!(report.contains("## Claims") && report.contains("ynthetic stand-in"));
    for f in ["throughput.svg", "link_utilization.svg", "trace_stats.json", "config.toml"] {
        assert!(dir.path().join(f).is_file(), "{f}");
    }
}
