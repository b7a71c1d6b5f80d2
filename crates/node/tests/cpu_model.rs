//! The CPU model over real connections: every request waits its modelled CPU cost (a lone
//! one at least its cost; four sharing one modelled CPU at least their sum), the charges are
//! exactly conn + request + KiB × kb per response, a dynamic class's cost passes as time
//! without burning CPU, the status and metrics show the queue, and bad `[cpu]` values are
//! refused naming the key, line and file.

mod common;

use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use common::{Client, TestNode};
use locus_node::{ByteSize, ClassConfig, CostDistribution, CpuModelConfig, NodeConfig};

fn model(conn_us: f64, request_us: f64, kb_us: f64) -> Option<CpuModelConfig> {
    Some(CpuModelConfig { conn_us, request_us, kb_us, cpus: 1 })
}

fn process_cpu_time() -> Duration {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid, writable timespec and the clock id is a constant the kernel knows.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0, "process CPU clock");
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

fn cpu_status(node: &TestNode) -> serde_json::Value {
    node.server().status()["cpu_model"].clone()
}

#[test]
fn one_request_takes_at_least_its_modelled_cost() {
    let node = TestNode::start(|c, _| c.cpu = model(0.0, 20_000.0, 0.0));
    node.write("a.txt", b"hello");
    let start = Instant::now();
    let r = node.get("/a.txt");
    assert_eq!((r.status, r.text().as_str()), (200, "hello"));
    assert!(start.elapsed() >= Duration::from_millis(20), "{:?}", start.elapsed());
    let s = cpu_status(&node);
    assert_eq!((s["charged"].as_u64(), s["active"].as_u64()), (Some(1), Some(0)), "{s}");
    assert_eq!(s["config"]["request_us"].as_f64(), Some(20_000.0));
}

#[test]
fn four_concurrent_requests_share_one_modelled_cpu() {
    let node = TestNode::start(|c, _| c.cpu = model(0.0, 20_000.0, 0.0));
    node.write("a.txt", b"hello");
    let addr = node.addr();
    // Connect first, so that the requests leave together.
    let clients: Vec<Client> = (0..4).map(|_| Client::connect(addr)).collect();
    let barrier = Arc::new(Barrier::new(5));
    let threads: Vec<_> = clients
        .into_iter()
        .map(|mut c| {
            let barrier = barrier.clone();
            std::thread::spawn(move || {
                barrier.wait();
                c.get("/a.txt").status
            })
        })
        .collect();
    barrier.wait();
    let start = Instant::now();
    let statuses: Vec<u16> = threads.into_iter().map(|t| t.join().unwrap()).collect();
    let last = start.elapsed();
    assert_eq!(statuses, [200; 4]);
    // 80 ms of work on one modelled CPU, none of which can start before `start`.
    assert!(last >= Duration::from_millis(80), "{last:?}");
    let s = cpu_status(&node);
    assert_eq!(s["charged"].as_u64(), Some(4), "{s}");
    assert!(s["busy_s"].as_f64().unwrap() >= 0.080, "{s}");
}

#[test]
fn charges_are_connection_request_and_body_kib_for_every_kind_of_response() {
    let node = TestNode::start(|c, _| c.cpu = model(3_000.0, 1_000.0, 100.0));
    node.write("f.bin", &common::pattern(8192, 1));
    let mut c = node.client();
    assert_eq!(c.get("/f.bin").status, 200); // conn + request + 8 KiB (a miss)
    assert_eq!(c.get("/f.bin").status, 200); // request + 8 KiB (a hit)
    c.send("GET /f.bin HTTP/1.1\r\nHost: x\r\nRange: bytes=0-2047\r\n\r\n");
    assert_eq!(c.response(false).status, 206); // request + 2 KiB
    c.send("HEAD /f.bin HTTP/1.1\r\nHost: x\r\n\r\n");
    assert_eq!(c.response(true).status, 200); // request
    let r = c.get("/nothing"); // request + the text "404 Not Found\n"
    assert_eq!(r.status, 404);
    let expected_us = 3_000.0 + 5.0 * 1_000.0 + 100.0 * (8.0 + 8.0 + 2.0 + r.body.len() as f64 / 1024.0);
    let s = cpu_status(&node);
    let served_us = s["served_s"].as_f64().unwrap() * 1e6;
    assert!((served_us - expected_us).abs() < 0.01, "served {served_us} µs, expected {expected_us} µs");
    assert_eq!(s["charged"].as_u64(), Some(5), "{s}");
    // A second connection pays the connection cost again.
    assert_eq!(node.get("/f.bin").status, 200);
    let served_us = cpu_status(&node)["served_s"].as_f64().unwrap() * 1e6;
    assert!((served_us - expected_us - 3_000.0 - 1_000.0 - 800.0).abs() < 0.01, "{served_us}");
}

#[test]
fn a_dynamic_class_through_the_model_takes_its_time_without_burning_it() {
    let node = TestNode::start(|c, _| {
        c.cpu = model(0.0, 0.0, 0.0);
        c.classes = vec![ClassConfig {
            name: "slow".into(),
            prefix: "/slow".into(),
            query: Default::default(),
            cost: CostDistribution::Const { ms: 200.0 },
            disk_ms: 0.0,
            size: ByteSize(100),
            resource: None,
        }];
    });
    let cpu_before = process_cpu_time();
    let start = Instant::now();
    let r = node.get("/slow");
    let elapsed = start.elapsed();
    let burnt = process_cpu_time() - cpu_before;
    assert_eq!(r.status, 200);
    assert_eq!(r.header("X-Locus-Cpu-Us"), Some("200000"));
    assert!(elapsed >= Duration::from_millis(200), "{elapsed:?}");
    // Far less than the 200 ms a burnt cost would take (the other tests of this file run
    // beside it in this process).
    assert!(burnt < Duration::from_millis(100), "the process burnt {burnt:?}");
    assert_eq!(node.server().stats().dynamic, 1);
}

#[test]
fn status_and_metrics_show_the_model_and_the_load_report_still_counts() {
    let node = TestNode::start(|c, _| {
        c.cpu = model(0.0, 5_000.0, 0.0);
        c.admin = Some("127.0.0.1:0".parse().unwrap());
    });
    node.write("a.txt", b"x");
    assert_eq!(node.get("/a.txt").status, 200);
    let admin = node.server().admin_addr().unwrap();
    let metrics = Client::connect(admin).get("/metrics").text();
    for line in ["locus_node_cpu_model_charged_total 1", "locus_node_cpu_model_active 0"] {
        assert!(metrics.contains(line), "{line} missing from {metrics}");
    }
    assert!(metrics.contains("locus_node_cpu_model_busy_seconds_total 0.005"), "{metrics}");
    let status = node.server().status();
    assert_eq!(status["load_report"]["static_active"].as_u64(), Some(0));
    let off = TestNode::start(|_, _| {});
    assert!(off.server().status()["cpu_model"].is_null());
}

#[test]
fn bad_cpu_values_are_refused_with_key_line_and_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("node.toml");
    for (text, key, line) in [
        ("name = \"n\"\n[cpu]\nkb_us = -3\n", "kb_us", "line 2"),
        ("[cpu]\npreset = \"lard98\"\n\ncpus = 0\n", "cpus", "line 1"),
        ("[cpu]\nghz = 3\n", "ghz", "line 2"),
    ] {
        std::fs::write(&path, text).unwrap();
        let e = NodeConfig::from_file(&path).unwrap_err().to_string();
        assert!(e.starts_with(&path.display().to_string()), "{e}");
        assert!(e.contains(key) && e.contains(line), "{text:?}: {e}");
    }
    let c = NodeConfig::from_toml_str("[cpu]\npreset = \"lard98\"\nrequest_us = 50\n").unwrap();
    assert_eq!(c.cpu, Some(CpuModelConfig { request_us: 50.0, ..CpuModelConfig::lard98() }));
    assert!(NodeConfig::from_toml_str("").unwrap().cpu.is_none());
}
