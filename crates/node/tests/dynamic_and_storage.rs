//! Dynamic classes and the storage model over real connections: a class request spends at
//! least its CPU cost and returns the deterministic body; a miss under the storage model
//! takes at least the seek time and misses on one disk queue behind each other.

mod common;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use common::{Client, TestNode};
use locus_node::{ByteSize, ClassConfig, CostDistribution, StorageConfig, dynamic_body};

fn class(name: &str, prefix: &str, query: &[(&str, &str)], ms: f64, size: u64) -> ClassConfig {
    ClassConfig {
        name: name.into(),
        prefix: prefix.into(),
        query: query.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect::<BTreeMap<_, _>>(),
        cost: CostDistribution::Const { ms },
        disk_ms: 0.0,
        size: ByteSize(size),
        resource: None,
    }
}

#[test]
fn a_dynamic_class_spends_at_least_its_cpu_cost_and_returns_the_deterministic_body() {
    let node = TestNode::start(|c, _| {
        c.classes =
            vec![class("search", "/search", &[("q", "*")], 40.0, 5000), class("cgi", "/cgi/", &[], 5.0, 10)];
    });
    node.write("search", b"static file named search");
    let target = "/search?q=locus&page=2";
    let start = Instant::now();
    let r = node.get(target);
    let elapsed = start.elapsed();
    assert_eq!(r.status, 200);
    assert_eq!(r.header("X-Locus-Class"), Some("search"));
    assert!(r.header("X-Locus-Cache").is_none());
    let cpu_us: u64 = r.header("X-Locus-Cpu-Us").unwrap().parse().unwrap();
    assert!(cpu_us >= 40_000, "{cpu_us}");
    assert!(elapsed >= Duration::from_millis(40), "{elapsed:?}");
    assert!(r.body == dynamic_body(target, 5000));
    // Without the required parameter the static file is served.
    assert_eq!(node.get("/search").text(), "static file named search");
    // HEAD costs the CPU too but sends no body.
    let mut c = node.client();
    c.send("HEAD /cgi/run HTTP/1.1\r\nHost: x\r\n\r\n");
    let r = c.response(true);
    assert_eq!(
        (r.status, r.header("Content-Length"), r.header("X-Locus-Class")),
        (200, Some("10"), Some("cgi"))
    );
    assert_eq!(node.server().stats().dynamic, 2);
}

#[test]
fn dynamic_requests_contend_for_the_cpu_pool() {
    let node = TestNode::start(|c, _| {
        c.cpu_threads = 1;
        c.classes = vec![class("k", "/k", &[], 30.0, 100)];
    });
    let addr = node.addr();
    let start = Instant::now();
    let threads: Vec<_> = (0..3)
        .map(|i| {
            std::thread::spawn(move || {
                let mut c = Client::connect(addr);
                c.send(format!("GET /k?i={i} HTTP/1.1\r\nHost: x\r\n\r\n"));
                c.response(false).status
            })
        })
        .collect();
    for t in threads {
        assert_eq!(t.join().unwrap(), 200);
    }
    // One CPU thread runs the three 30 ms jobs one after another.
    assert!(start.elapsed() >= Duration::from_millis(90), "{:?}", start.elapsed());
}

#[test]
fn the_storage_model_makes_a_miss_take_at_least_the_seek_time() {
    let node = TestNode::start(|c, _| {
        c.storage = Some(StorageConfig { seek_ms: 60.0, transfer_mb_s: 10.0, disks: 1 });
    });
    node.write("a.bin", &vec![b'a'; 100_000]);
    node.write("b.bin", &vec![b'b'; 100_000]);
    let start = Instant::now();
    let r = node.get("/a.bin");
    // 60 ms seek + 100 KB at 10 MB/s = 70 ms.
    assert!(start.elapsed() >= Duration::from_millis(70), "{:?}", start.elapsed());
    assert_eq!(r.header("X-Locus-Cache"), Some("miss"));
    // A hit pays no disk time: it never enters the disk queue (the misses below do).
    let misses = node.server().status()["cache_misses"].as_u64();
    assert_eq!(node.get("/a.bin").header("X-Locus-Cache"), Some("hit"));
    assert_eq!(node.server().status()["cache_misses"].as_u64(), misses);

    // Two concurrent misses for different files on the one disk queue: 70 + 70 ms.
    node.write("c.bin", &vec![b'c'; 100_000]);
    let addr = node.addr();
    let start = Instant::now();
    let threads: Vec<_> = ["/b.bin", "/c.bin"]
        .into_iter()
        .map(|p| {
            std::thread::spawn(move || {
                let mut c = Client::connect(addr);
                c.send(format!("GET {p} HTTP/1.1\r\nHost: x\r\n\r\n"));
                c.response(false).status
            })
        })
        .collect();
    // Both misses wait in the one disk queue at some point while the first is served.
    let mut queue_seen = None;
    while queue_seen != Some(2) && threads.iter().any(|t| !t.is_finished()) {
        queue_seen = queue_seen.max(node.server().status()["disk_queue_lengths"][0].as_u64());
        std::thread::sleep(Duration::from_millis(1));
    }
    for t in threads {
        assert_eq!(t.join().unwrap(), 200);
    }
    assert!(start.elapsed() >= Duration::from_millis(140), "{:?}", start.elapsed());
    assert_eq!(queue_seen, Some(2));
}
