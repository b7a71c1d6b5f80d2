//! Cooperative caching between in-process nodes on 127.0.0.1: remote hits from a peer's
//! memory, storage as the fallback (no holder, a peer down, slow or answering garbage), the
//! home's directory following evictions, one fetch for concurrent misses, keep_copy, the
//! cache-off relay path, start-up refusals and the counters.

mod coop_support;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use coop_support::*;
use locus_node::{ByteSize, CoopConfig, NodeConfig, NodeServer};
use locus_test_support::get;

fn pattern(len: usize, salt: u8) -> Vec<u8> {
    (0..len).map(|i| ((i % 251) as u8).wrapping_add(salt)).collect()
}

/// Two nodes A and B naming each other, each over its own root.
struct Pair {
    a: NodeServer,
    b: NodeServer,
    roots: [tempfile::TempDir; 2],
    ports: [u16; 2],
}

fn pair(configure_a: impl FnOnce(&mut NodeConfig), configure_b: impl FnOnce(&mut NodeConfig)) -> Pair {
    let roots = [tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap()];
    let ports = [free_port(), free_port()];
    let a = start_node("a", ports[0], roots[0].path(), &[ports[1]], |c| {
        c.admin = Some(SocketAddr::from(([127, 0, 0, 1], 0)));
        configure_a(c);
    });
    let b = start_node("b", ports[1], roots[1].path(), &[ports[0]], configure_b);
    Pair { a, b, roots, ports }
}

impl Pair {
    /// The same version of a document in both roots.
    fn write(&self, key: &str, data: &[u8]) {
        for r in &self.roots {
            write_doc(r.path(), key, data);
        }
    }

    fn directory_entries(&self) -> u64 {
        coop_figure(&self.a, "directory_entries") + coop_figure(&self.b, "directory_entries")
    }
}

#[test]
fn a_miss_is_served_from_a_peers_memory_without_its_storage_and_counted() {
    let p = pair(|_| {}, |_| {});
    let body = pattern(1024, 1);
    p.write("/doc.bin", &body);
    let r = get(p.b.addr(), "/doc.bin");
    assert_eq!((r.status, r.header("x-locus-cache")), (200, Some("miss")));
    wait_until("the home knows B holds the document", || p.directory_entries() == 1);
    // B can no longer read it: whatever B sends comes from its memory.
    std::fs::remove_file(p.roots[1].path().join("doc.bin")).unwrap();
    let r = get(p.a.addr(), "/doc.bin");
    assert_eq!((r.status, r.header("x-locus-cache"), r.served_by()), (200, Some("remote"), Some("a")));
    assert_eq!(r.body, body);
    assert_eq!(coop_figure(&p.a, "remote_hits"), 1);
    assert_eq!(coop_figure(&p.a, "storage_reads"), 0);
    assert_eq!(coop_figure(&p.a, "bytes_from_peers"), 1024);
    assert_eq!(coop_figure(&p.b, "fetches_served"), 1);
    assert_eq!(coop_figure(&p.b, "storage_reads"), 1);
    // Peer requests are not client requests.
    assert_eq!(p.b.stats().requests, 1);
    // A kept a copy: the next request is a local hit, and the home now knows two holders.
    let r = get(p.a.addr(), "/doc.bin");
    assert_eq!((r.header("x-locus-cache"), r.body == body), (Some("hit"), true));
    wait_until("the home knows both holders", || p.directory_entries() == 2);
    let metrics = get(p.a.admin_addr().unwrap(), "/metrics").text();
    for line in [
        "locus_node_coop_remote_hits_total 1",
        "locus_node_coop_local_hits_total 1",
        "locus_node_coop_storage_reads_total 0",
        "locus_node_coop_peer_failures_total{reason=\"timeout\"} 0",
    ] {
        assert!(metrics.contains(line), "{line} in\n{metrics}");
    }
    let status = get(p.a.admin_addr().unwrap(), "/locus/status").text();
    assert!(status.contains("\"coop\"") && status.contains("\"remote_hits\": 1"), "{status}");
}

#[test]
fn without_a_holder_the_miss_reads_storage() {
    let p = pair(|_| {}, |_| {});
    p.write("/only.txt", b"from storage");
    let r = get(p.a.addr(), "/only.txt");
    assert_eq!((r.status, r.header("x-locus-cache"), r.text().as_str()), (200, Some("miss"), "from storage"));
    assert_eq!((coop_figure(&p.a, "remote_hits"), coop_figure(&p.a, "storage_reads")), (0, 1));
    let r = get(p.a.addr(), "/absent.txt");
    assert_eq!(r.status, 404);
}

#[test]
fn an_eviction_notice_reaches_the_home_and_no_peer_is_asked_in_vain() {
    // B holds one document at a time; both keys are homed at A, so B's notices cross the network.
    let p = pair(
        |_| {},
        |c| {
            c.cache.capacity = ByteSize::kib(10);
            c.cache.max_object = ByteSize::kib(8);
        },
    );
    let [pa, _] = p.ports;
    let first = key_homed_at("first", pa, &p.ports);
    let second = key_homed_at("second", pa, &p.ports);
    p.write(&first, &pattern(6000, 2));
    p.write(&second, &pattern(6000, 3));
    assert_eq!(get(p.b.addr(), &first).status, 200);
    wait_until("A's directory has B's insert", || coop_figure(&p.a, "directory_entries") == 1);
    assert_eq!(get(p.b.addr(), &second).status, 200);
    wait_until("A received insert, insert, evict", || coop_figure(&p.a, "notices_received") == 3);
    assert_eq!(coop_figure(&p.a, "directory_entries"), 1);
    let r = get(p.a.addr(), &first);
    assert_eq!((r.status, r.header("x-locus-cache"), r.body == pattern(6000, 2)), (200, Some("miss"), true));
    assert_eq!(coop_figure(&p.a, "peer_failures.not_held"), 0, "B was not asked for what it evicted");
    let r = get(p.a.addr(), &second);
    assert_eq!(r.header("x-locus-cache"), Some("remote"));
}

#[test]
fn a_peer_that_is_down_costs_a_storage_read_and_is_then_avoided() {
    let root = tempfile::tempdir().unwrap();
    let (port, dead) = (free_port(), free_port());
    // A backoff far longer than the test, so the second miss falls within it however slow
    // the machine is.
    let a = start_node("a", port, root.path(), &[dead], |c| {
        c.coop.as_mut().unwrap().backoff_ms = 600_000;
    });
    wait_until("the start-up check ran", || a.status()["coop"]["peers"][0]["start_check"] != "pending");
    let check = a.status()["coop"]["peers"][0]["start_check"].as_str().unwrap().to_string();
    assert!(check.starts_with("unreachable") && check.contains("refused"), "{check}");
    let keys = [key_homed_at("x", dead, &[port, dead]), key_homed_at("y", dead, &[port, dead])];
    for (i, key) in keys.iter().enumerate() {
        write_doc(root.path(), key, &pattern(2000, i as u8));
        let r = get(a.addr(), key);
        assert_eq!((r.status, r.body == pattern(2000, i as u8)), (200, true));
    }
    assert_eq!(coop_figure(&a, "peer_failures.refused"), 1);
    assert_eq!(coop_figure(&a, "peers_skipped"), 1, "the second miss did not try the dead peer");
    assert_eq!(coop_figure(&a, "storage_reads"), 2);
}

#[test]
fn a_silent_peer_times_out_and_the_client_gets_the_file() {
    let root = tempfile::tempdir().unwrap();
    let port = free_port();
    let fake = FakePeer::start(FakeMode::Silent, Vec::new());
    let a = start_node("a", port, root.path(), &[fake.port], |c| {
        c.coop.as_mut().unwrap().timeout_ms = 100;
    });
    let key = key_homed_at("slow", fake.port, &[port, fake.port]);
    write_doc(root.path(), &key, b"patience");
    let started = Instant::now();
    let r = get(a.addr(), &key);
    assert!(started.elapsed() >= Duration::from_millis(100));
    assert_eq!((r.status, r.text().as_str()), (200, "patience"));
    assert_eq!(coop_figure(&a, "peer_failures.timeout"), 1);
    assert_eq!(fake.requests(), 1);
}

#[test]
fn broken_answers_never_reach_the_client() {
    let cases = [
        (FakeMode::Garbage, "bad_reply"),
        (FakeMode::Truncated, "bad_reply"),
        (FakeMode::ShortLength, "bad_reply"),
        (FakeMode::ServerError, "bad_reply"),
        (FakeMode::ChangedValidator, "stale"),
    ];
    let body = pattern(3000, 7);
    for (mode, reason) in cases {
        let root = tempfile::tempdir().unwrap();
        let port = free_port();
        let fake = FakePeer::start(mode, body.clone());
        let a = start_node("a", port, root.path(), &[fake.port], |_| {});
        let key = key_homed_at("doc", fake.port, &[port, fake.port]);
        write_doc(root.path(), &key, &body);
        for _ in 0..2 {
            let r = get(a.addr(), &key);
            assert_eq!((r.status, r.body == body), (200, true), "{mode:?}");
        }
        assert_eq!(fake.requests(), 1, "{mode:?}");
        assert_eq!(coop_figure(&a, &format!("peer_failures.{reason}")), 1, "{mode:?}");
        assert_eq!(coop_figure(&a, "remote_hits"), 0, "{mode:?}");
    }
}

#[test]
fn concurrent_misses_for_one_document_share_one_peer_fetch() {
    let root = tempfile::tempdir().unwrap();
    let port = free_port();
    let body = pattern(5000, 9);
    let fake = FakePeer::start(FakeMode::Correct { delay_ms: 500 }, body.clone());
    let a = start_node("a", port, root.path(), &[fake.port], |c| {
        c.coop.as_mut().unwrap().timeout_ms = 10_000;
    });
    let key = key_homed_at("hot", fake.port, &[port, fake.port]);
    write_doc(root.path(), &key, &body);
    let clients: Vec<_> = (0..8)
        .map(|_| {
            let (addr, key) = (a.addr(), key.clone());
            std::thread::spawn(move || get(addr, &key))
        })
        .collect();
    for c in clients {
        let r = c.join().unwrap();
        assert_eq!((r.status, r.body == body), (200, true));
    }
    assert_eq!(fake.requests(), 1);
    assert_eq!(coop_figure(&a, "documents_from_peers"), 1);
}

#[test]
fn without_keep_copy_every_miss_is_fetched_again() {
    let p = pair(|c| c.coop.as_mut().unwrap().keep_copy = false, |_| {});
    p.write("/k.bin", &pattern(700, 4));
    assert_eq!(get(p.b.addr(), "/k.bin").status, 200);
    wait_until("the home knows B holds it", || p.directory_entries() == 1);
    for _ in 0..3 {
        let r = get(p.a.addr(), "/k.bin");
        assert_eq!((r.header("x-locus-cache"), r.body == pattern(700, 4)), (Some("remote"), true));
    }
    assert_eq!(coop_figure(&p.b, "fetches_served"), 3);
    assert_eq!(p.a.status()["cache_objects"], 0);
}

#[test]
fn with_the_cache_off_every_request_is_relayed_from_the_holding_peer() {
    let p = pair(|c| c.cache.capacity = ByteSize(0), |_| {});
    let body = pattern(256 * 1024, 5);
    p.write("/big.bin", &body);
    assert_eq!(get(p.b.addr(), "/big.bin").status, 200);
    wait_until("the home knows B holds it", || p.directory_entries() == 1);
    let mut client = locus_test_support::Client::connect(p.a.addr());
    for _ in 0..5 {
        let r = client.get("/big.bin");
        assert_eq!((r.status, r.header("x-locus-cache"), r.body == body), (200, Some("remote"), true));
    }
    assert_eq!(coop_figure(&p.b, "fetches_served"), 5);
    assert_eq!(coop_figure(&p.a, "storage_reads"), 0);
}

#[test]
fn a_node_listed_among_its_own_peers_refuses_to_start() {
    let root = tempfile::tempdir().unwrap();
    let port = free_port();
    let other = free_port();
    let config = NodeConfig {
        listen: SocketAddr::from(([127, 0, 0, 1], port)),
        root: root.path().to_path_buf(),
        coop: Some(CoopConfig { peers: vec![url(other), url(port)], ..CoopConfig::default() }),
        ..NodeConfig::default()
    };
    let e = NodeServer::start(config).err().expect("refused").to_string();
    assert!(e.contains("coop.peers[1]") && e.contains("itself"), "{e}");
    let config = NodeConfig {
        root: root.path().to_path_buf(),
        coop: Some(CoopConfig { peers: vec!["http://127.0.0.1:x".into()], ..CoopConfig::default() }),
        ..NodeConfig::default()
    };
    let e = NodeServer::start(config).err().expect("refused").to_string();
    assert!(e.contains("coop.peers[0]") && e.contains("127.0.0.1:x"), "{e}");
}

#[test]
fn coop_requests_from_an_address_that_is_no_peers_are_refused() {
    let root = tempfile::tempdir().unwrap();
    let a = start_node("a", free_port(), root.path(), &[], |c| {
        c.coop.as_mut().unwrap().peers = vec!["http://127.0.0.2:9".into()];
    });
    write_doc(root.path(), "/s.txt", b"secret");
    assert_eq!(get(a.addr(), "/s.txt").status, 200);
    let r = get(a.addr(), "/locus/coop/fetch?k=/s.txt&v=6-1700000000123456789");
    assert_eq!(r.status, 403);
    assert_eq!(coop_figure(&a, "refused"), 1);
    assert_eq!(a.stats().requests, 1, "a refused coop request is no client request");
}
