//! The load a node reports for a metric-fed switch: `/locus/status`'s `load_report` (a
//! `NodeReport`) counts static and dynamic requests while they are served and requests waiting
//! on the disk, `/metrics` carries the same four gauges, and a class with `disk_ms` waits its
//! disk time (on the node-local disk, or in the storage model's queue behind misses).

mod common;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use common::{Client, TestNode};
use locus_core::NodeReport;
use locus_node::{ByteSize, ClassConfig, CostDistribution, StorageConfig};

fn class(name: &str, prefix: &str, cpu_ms: f64, disk_ms: f64) -> ClassConfig {
    ClassConfig {
        name: name.into(),
        prefix: prefix.into(),
        query: BTreeMap::new(),
        cost: CostDistribution::Const { ms: cpu_ms },
        disk_ms,
        size: ByteSize(100),
        resource: None,
    }
}

fn load(node: &TestNode) -> NodeReport {
    serde_json::from_value(node.server().status()["load_report"].clone()).unwrap()
}

/// GET each target on its own connection, each from its own thread; the threads return the
/// status and the elapsed time.
fn get_concurrently(addr: SocketAddr, targets: &[&str]) -> Vec<JoinHandle<(u16, Duration, Option<String>)>> {
    targets
        .iter()
        .map(|t| {
            let t = t.to_string();
            std::thread::spawn(move || {
                let start = Instant::now();
                let mut c = Client::connect(addr);
                c.send(format!("GET {t} HTTP/1.1\r\nHost: x\r\n\r\n"));
                let r = c.response(false);
                (r.status, start.elapsed(), r.header("X-Locus-Disk-Us").map(str::to_string))
            })
        })
        .collect()
}

/// The largest report of `field` seen while any of `threads` runs (stopping early at `want`).
fn peak(
    node: &TestNode,
    threads: &[JoinHandle<(u16, Duration, Option<String>)>],
    want: u32,
    field: fn(&NodeReport) -> u32,
) -> u32 {
    let mut seen = 0;
    while seen < want && threads.iter().any(|t| !t.is_finished()) {
        seen = seen.max(field(&load(node)));
        std::thread::sleep(Duration::from_millis(1));
    }
    seen
}

/// The report once every request has ended (the counts drop as the responses are queued,
/// so wait a little for the last one rather than race it).
fn settled(node: &TestNode) -> NodeReport {
    let deadline = Instant::now() + Duration::from_secs(2);
    loop {
        let r = load(node);
        if (r.static_active, r.dynamic_active, r.disk_wait) == (0, 0, 0) || Instant::now() > deadline {
            return r;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

fn join_all(
    threads: Vec<JoinHandle<(u16, Duration, Option<String>)>>,
) -> Vec<(u16, Duration, Option<String>)> {
    threads.into_iter().map(|t| t.join().unwrap()).collect()
}

#[test]
fn dynamic_active_counts_slow_class_requests_in_service_and_returns_to_zero() {
    let node = TestNode::start(|c, _| c.classes = vec![class("slow", "/slow", 150.0, 0.0)]);
    let idle = load(&node);
    assert_eq!((idle.static_active, idle.dynamic_active, idle.disk_wait, idle.probe), (0, 0, 0, None));
    let threads = get_concurrently(node.addr(), &["/slow?a", "/slow?b"]);
    let seen = peak(&node, &threads, 2, |r| r.dynamic_active);
    let statics = load(&node).static_active;
    for (status, ..) in join_all(threads) {
        assert_eq!(status, 200);
    }
    assert_eq!(seen, 2, "both requests in service at once");
    assert_eq!(statics, 0, "a dynamic request is not counted as static");
    assert_eq!(settled(&node), NodeReport::default());
}

#[test]
fn disk_wait_and_static_active_count_misses_waiting_on_a_slow_storage_model() {
    let node = TestNode::start(|c, _| {
        c.storage = Some(StorageConfig { seek_ms: 100.0, transfer_mb_s: 100.0, disks: 1 });
    });
    for f in ["a", "b", "c"] {
        node.write(f, f.as_bytes());
    }
    let threads = get_concurrently(node.addr(), &["/a", "/b", "/c"]);
    let disk = peak(&node, &threads, 3, |r| r.disk_wait);
    let statics = load(&node).static_active;
    for (status, ..) in join_all(threads) {
        assert_eq!(status, 200);
    }
    // Three misses on one disk queue: the last waits ~200 ms behind the others.
    assert_eq!(disk, 3);
    assert!(statics >= 1, "the misses still queued are static requests in service: {statics}");
    assert_eq!(settled(&node), NodeReport::default());
}

#[test]
fn a_class_with_disk_ms_takes_its_disk_time_on_the_node_local_disk_queue() {
    let node = TestNode::start(|c, _| c.classes = vec![class("db", "/db", 0.0, 80.0)]);
    let start = Instant::now();
    let r = node.get("/db?q=1");
    assert!(start.elapsed() >= Duration::from_millis(80), "{:?}", start.elapsed());
    let disk_us: u64 = r.header("X-Locus-Disk-Us").unwrap().parse().unwrap();
    assert!(disk_us >= 80_000, "{disk_us}");
    // Two at once on the one node-local disk: FIFO, so the later waits for the earlier.
    let start = Instant::now();
    let threads = get_concurrently(node.addr(), &["/db?q=2", "/db?q=3"]);
    let waiting = peak(&node, &threads, 2, |r| r.disk_wait);
    let results = join_all(threads);
    assert_eq!(waiting, 2);
    assert!(start.elapsed() >= Duration::from_millis(160), "{:?}", start.elapsed());
    for (status, _, disk) in results {
        assert_eq!(status, 200);
        let disk_us: u64 = disk.unwrap().parse().unwrap();
        assert!(disk_us >= 80_000, "{disk_us}");
    }
    assert_eq!(settled(&node), NodeReport::default());
}

#[test]
fn a_class_disk_read_queues_behind_a_miss_on_the_storage_models_disk() {
    let node = TestNode::start(|c, _| {
        c.storage = Some(StorageConfig { seek_ms: 100.0, transfer_mb_s: 100.0, disks: 1 });
        c.classes = vec![class("db", "/db", 0.0, 100.0), class("cpu", "/cpu", 1.0, 0.0)];
    });
    node.write("f", b"file");
    let start = Instant::now();
    let threads = get_concurrently(node.addr(), &["/f", "/db"]);
    let peak_queue = peak(&node, &threads, 2, |r| r.disk_wait);
    let results = join_all(threads);
    assert_eq!(peak_queue, 2, "the miss and the class read wait on the same disk");
    assert!(start.elapsed() >= Duration::from_millis(200), "{:?}", start.elapsed());
    assert!(results[1].2.is_some());
    assert!(node.get("/cpu").header("X-Locus-Disk-Us").is_none(), "no disk cost, no disk header");
}

#[test]
fn metrics_and_status_carry_the_four_load_gauges() {
    let node = TestNode::start(|c, _| c.admin = Some("127.0.0.1:0".parse().unwrap()));
    let admin = node.server().admin_addr().unwrap();
    let mut c = Client::connect(admin);
    c.send("GET /metrics HTTP/1.1\r\nHost: admin\r\n\r\n");
    let text = c.response(false).text();
    for name in ["listen_queue", "disk_waiting", "static_active", "dynamic_active"] {
        let full = format!("locus_node_{name}");
        assert!(text.contains(&format!("# TYPE {full} gauge\n")), "{full} in\n{text}");
        assert!(text.contains(&format!("# HELP {full} ")), "{full} in\n{text}");
        assert!(text.contains(&format!("\n{full} 0\n")), "{full} idle in\n{text}");
    }
    c.send("GET /locus/status HTTP/1.1\r\nHost: admin\r\n\r\n");
    let status: serde_json::Value = serde_json::from_slice(&c.response(false).body).unwrap();
    let report = &status["load_report"];
    let keys: Vec<&str> = report.as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(keys.len(), 4, "{report}");
    for k in ["listen_queue", "disk_wait", "static_active", "dynamic_active"] {
        assert_eq!(report[k], 0, "{k} in {report}");
    }
    assert!(status["requests_total"].is_u64(), "the older fields stay");
}
