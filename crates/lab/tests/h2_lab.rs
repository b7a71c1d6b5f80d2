//! Workloads over HTTP/2 end to end, as root in real network namespaces (`#[ignore]`d;
//! `./quickstart test` runs them as root): HTTPS clients speaking h2 to the Locus switch,
//! HAProxy and NGINX, which speak HTTP/1.1 to the nodes — `locus load --h2` with several streams
//! per connection checking every response byte for byte, and h2load (a process per connection,
//! each with its own URL list) over h2 and over HTTP/1.1.

use std::time::Duration;

use locus_lab::{Experiment, LabOptions, run_experiment};
use locus_rig::{find_program, tear_down_everything};
use locus_test_support::{locus_binary, require_namespaces, watchdog};

fn experiment() -> Experiment {
    let text = r#"
name = "h2"
nodes = [2]
warmup_s = 1.0
measure_s = 2.0
measure_requests = 400

[node]
cache = "4MiB"
storage = "seek_ms=1,mb_s=100,disks=1"

[[switch]]
kind = "locus"
policies = ["lard-r"]
workers = 1

[[switch]]
kind = "haproxy"
policies = ["uri-chash-bounded"]
workers = 1

[[switch]]
kind = "nginx"
policies = ["uri-chash"]
workers = 1

[[workload]]
name = "verified"
tls = true
h2 = true
streams = 4
files = 120
clients = 4
load_threads = 1

[[workload]]
name = "h2load"
client = "h2load"
tls = true
h2 = true
streams = 4
files = 120
clients = 3

[[workload]]
name = "h2load-h1"
client = "h2load"
tls = true
files = 120
clients = 3
"#;
    Experiment::from_toml(text, "h2").unwrap()
}

#[test]
#[ignore = "needs root: network namespaces (./quickstart test runs it as root)"]
fn every_balancer_serves_http2_clients_and_every_verified_byte_is_right() {
    require_namespaces("the lab's network namespaces");
    for (program, package) in [("haproxy", "haproxy"), ("nginx", "nginx"), ("h2load", "nghttp2-client")] {
        assert!(
            find_program(program).is_some(),
            "{program} is missing: install {package} (./quickstart does)"
        );
    }
    watchdog("h2_workloads", Duration::from_secs(300), tear_down_everything);
    let out = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let experiment = experiment();
    let options = LabOptions { locus: locus_binary(), out_dir: out.path().to_path_buf(), site_dir: None };
    let run = run_experiment(&experiment, &options, &mut |line| eprintln!("{line}")).unwrap();
    assert!(run.error.is_none(), "{:?}", run.error);
    let points = &run.report.points;
    assert_eq!(points.len(), 9);
    for p in points {
        assert_eq!((p.errors, p.mismatches), (0, 0), "{p:?}");
        assert!(p.requests >= 100 && p.rps > 0.0 && p.p99_ms >= p.p50_ms, "{p:?}");
        assert!(p.node_requests.iter().sum::<u64>() > 0, "the nodes served the requests: {p:?}");
        let unverified = p.warnings.iter().any(|w| w.contains("bodies were not verified"));
        assert_eq!(unverified, p.workload != "verified", "{p:?}");
    }
}
