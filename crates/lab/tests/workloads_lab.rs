//! The demo's new workloads end to end, as root in real network namespaces (`#[ignore]`d;
//! `./quickstart test` runs them as root): a moving hot set and a dynamic mix on nodes with a
//! modelled CPU each, behind the Locus switch (LARD/R, CSLD, CAP, metric-fed WRR — the last
//! two need the workload's classes and the nodes' admin listeners), HAProxy `leastconn` and
//! NGINX `least_conn`; every response, dynamic ones included, checked byte for byte.

use std::time::Duration;

use locus_lab::{Experiment, LabOptions, run_experiment};
use locus_rig::{find_program, tear_down_everything};
use locus_test_support::{locus_binary, require_namespaces, watchdog};

fn experiment() -> Experiment {
    let mut text = String::from(
        r#"
name = "workloads"
nodes = [2]
warmup_s = 0.5
measure_s = 20.0
measure_requests = 300

[node]
cache = "4MiB"
storage = "seek_ms=1,mb_s=100,disks=1"
cpu = "conn_us=100,request_us=100,kb_us=2"

[[switch]]
kind = "locus"
policies = ["lard-r"]
workers = 1
workloads = ["hot"]

[[switch]]
kind = "locus"
policies = ["csld", "cap", "wrr-metrics"]
workers = 1
workloads = ["dyn"]
"#,
    );
    if find_program("haproxy").is_some() {
        text.push_str("[[switch]]\nkind = \"haproxy\"\npolicies = [\"leastconn\"]\nworkers = 1\n");
    }
    if find_program("nginx").is_some() {
        text.push_str("[[switch]]\nkind = \"nginx\"\npolicies = [\"least-conn\"]\nworkers = 1\n");
    }
    text.push_str(
        r#"
[[workload]]
name = "hot"
files = 120
clients = 8
load_threads = 1
[workload.hot_spot]
documents = 2
share = 0.6
shift_s = 0.5

[[workload]]
name = "dyn"
files = 60
# Open loop: a request finding every connection busy counts as late (an error). Enough
# connections that a stall of a few hundred ms on this shared machine does not make any.
clients = 64
rate = 150
load_threads = 1
[[workload.dynamic]]
share = 0.2
variants = 20
[workload.dynamic.class]
name = "search"
prefix = "/cgi/search"
cost = { dist = "uniform", min_ms = 2, max_ms = 6 }
size = "3KiB"
"#,
    );
    Experiment::from_toml(&text, "workloads").unwrap()
}

#[test]
#[ignore = "needs root: network namespaces (./quickstart test runs it as root)"]
fn hot_spot_and_dynamic_points_are_measured_with_every_response_right() {
    require_namespaces("the lab's network namespaces");
    watchdog("hot_spot_and_dynamic_points", Duration::from_secs(300), tear_down_everything);
    let out = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let experiment = experiment();
    let options = LabOptions { locus: locus_binary(), out_dir: out.path().to_path_buf(), site_dir: None };
    let run = run_experiment(&experiment, &options, &mut |line| eprintln!("{line}")).unwrap();
    assert!(run.error.is_none(), "{:?}", run.error);
    let report = run.report;
    assert_eq!(report.points.len(), experiment.points().len());
    for p in &report.points {
        assert_eq!((p.errors, p.mismatches), (0, 0), "{p:?}");
        assert!(p.requests >= 300 && p.rps > 0.0 && p.mean_ms > 0.0, "{p:?}");
        assert!(p.p99_ms >= p.p50_ms, "{p:?}");
    }
    let workloads: Vec<&str> = report.points.iter().map(|p| p.workload.as_str()).collect();
    assert!(workloads.contains(&"hot") && workloads.contains(&"dyn"), "{workloads:?}");
    report.write(out.path()).unwrap();
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.path().join("results.json")).unwrap()).unwrap();
    for row in json.as_array().unwrap() {
        for key in ["workload", "mean_ms", "p50_ms", "p99_ms", "switch", "policy"] {
            assert!(row.get(key).is_some(), "{key} missing from {row}");
        }
    }
    let md = std::fs::read_to_string(out.path().join("report.md")).unwrap();
    assert!(md.contains("### Mean response time (ms)") && md.contains("CPU model `conn_us=100"), "{md}");
}
