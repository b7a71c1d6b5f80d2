//! `locus bench clubweb` and `locus bench rehandoff` on tiny points in the lab's namespaces
//! (root only: `#[ignore]`d; `./quickstart test` runs them as root): every mode and
//! configuration gives a complete row with no failed request; the flags parse with their
//! defaults.

use std::process::Command;
use std::time::Duration;

use clap::Parser;
use locus_bench::cli::BenchCommand;
use locus_bench::clubweb::{ClubwebArgs, run_clubweb};
use locus_bench::rehandoff::{RehandoffArgs, run_rehandoff};
use locus_rig::tear_down_everything;
use locus_test_support::{locus_binary, require_namespaces, watchdog};

#[derive(Parser)]
struct Bench {
    #[command(subcommand)]
    cmd: BenchCommand,
}

fn clubweb_args(args: &[&str]) -> ClubwebArgs {
    let argv = ["bench", "clubweb"].iter().chain(args).copied();
    match Bench::try_parse_from(argv).expect("flags parse").cmd {
        BenchCommand::Clubweb(a) => a,
        other => panic!("not clubweb: {other:?}"),
    }
}

fn rehandoff_args(args: &[&str]) -> RehandoffArgs {
    let argv = ["bench", "rehandoff"].iter().chain(args).copied();
    match Bench::try_parse_from(argv).expect("flags parse").cmd {
        BenchCommand::Rehandoff(a) => a,
        other => panic!("not rehandoff: {other:?}"),
    }
}

#[test]
fn defaults_match_the_documented_sweeps() {
    let a = clubweb_args(&[]);
    assert_eq!(a.rates, [500, 1000, 2000, 4000, 8000]);
    assert_eq!((a.size, a.modes.len(), a.policy.as_str(), a.json), (16 * 1024, 3, "lard", false));
    let a = rehandoff_args(&["--sizes", "1k,64k", "--json"]);
    assert_eq!((a.sizes.as_slice(), a.json), (&[1024, 65536][..], true));
    assert_eq!(a.setups, ["handoff", "forward", "handoff-close", "proxy"]);
    assert!(Bench::try_parse_from(["bench", "clubweb", "--size", "zero"]).is_err());
}

#[test]
#[ignore = "needs root: network namespaces (./quickstart test runs it as root)"]
fn clubweb_runs_a_tiny_point_per_mode_without_errors() {
    require_namespaces("the lab's network namespaces");
    watchdog("clubweb lab", Duration::from_secs(240), tear_down_everything);
    let locus = locus_binary();
    let a = clubweb_args(&[
        "--rates",
        "200",
        "--duration",
        "1",
        "--warmup",
        "0.3",
        "--locus",
        locus.to_str().unwrap(),
    ]);
    let rows = run_clubweb(&a, |line| eprintln!("{line}")).unwrap();
    let modes: Vec<&str> = rows.iter().map(|r| r.mode.as_str()).collect();
    assert_eq!(modes, ["proxy", "splice", "handoff"]);
    for r in &rows {
        assert_eq!((r.bench.as_str(), r.rate, r.errors), ("clubweb", 200, 0), "{r:?}");
        assert!(r.achieved_rps > 100.0 && r.achieved_rps < 300.0, "{r:?}");
        assert!(r.p50_ms > 0.0 && r.p50_ms <= r.p90_ms && r.p90_ms <= r.p99_ms, "{r:?}");
        assert!(r.switch_cpu_us_per_req > 0.0, "{r:?}");
    }
}

/// `locus bench rehandoff` on 1 KB files, 4 clients, 1 s per configuration.
fn tiny_rehandoff(setups: &str) -> Vec<locus_bench::rehandoff::RehandoffRow> {
    let locus = locus_binary();
    let a = rehandoff_args(&[
        "--sizes",
        "1k",
        "--clients",
        "4",
        "--duration",
        "1",
        "--warmup",
        "0.3",
        "--targets",
        "4",
        "--setups",
        setups,
        "--locus",
        locus.to_str().unwrap(),
    ]);
    run_rehandoff(&a, |line| eprintln!("{line}")).unwrap()
}

/// A complete row without errors, at a rate no stalled connection could give.
fn assert_served(r: &locus_bench::rehandoff::RehandoffRow) {
    assert_eq!((r.bench.as_str(), r.size, r.errors), ("rehandoff", 1024, 0), "{r:?}");
    assert!(r.rps > 200.0 && r.p50_ms > 0.0 && r.p50_ms <= r.p99_ms, "{r:?}");
    assert!(r.node_cpu_us_per_req > 0.0 && r.switch_cpu_us_per_req > 0.0, "{r:?}");
}

#[test]
#[ignore = "needs root: network namespaces (./quickstart test runs it as root)"]
fn rehandoff_runs_multiple_handoff_a_connection_per_request_and_proxy_without_errors() {
    require_namespaces("the lab's network namespaces");
    watchdog("rehandoff lab", Duration::from_secs(240), tear_down_everything);
    let rows = tiny_rehandoff("handoff,handoff-close,proxy");
    let setups: Vec<&str> = rows.iter().map(|r| r.setup.as_str()).collect();
    assert_eq!(setups, ["handoff", "handoff-close", "proxy"]);
    rows.iter().for_each(assert_served);
    // Keep-alive pairs alternate nodes: every request after a connection's first crosses.
    assert!(rows[0].cross_node_pct > 80.0, "{:?}", rows[0]);
}

#[test]
#[ignore = "needs root: network namespaces (./quickstart test runs it as root)"]
fn rehandoff_measures_back_end_forwarding_on_keep_alive_connections() {
    require_namespaces("the lab's network namespaces");
    watchdog("rehandoff forward lab", Duration::from_secs(240), tear_down_everything);
    let rows = tiny_rehandoff("forward");
    assert_eq!(rows.len(), 1);
    assert_served(&rows[0]);
    assert!(rows[0].cross_node_pct > 40.0, "{:?}", rows[0]);
}

/// A child process killed on drop, and what it left behind (if the test fails) removed.
struct KilledOnDrop(std::process::Child);

impl Drop for KilledOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
        let _ = locus_rig::clean_stale_labs();
    }
}

/// The pids among `pids` still alive and not zombies.
fn still_running(pids: &[u32]) -> Vec<u32> {
    pids.iter()
        .copied()
        .filter(|p| std::fs::read_to_string(format!("/proc/{p}/stat")).is_ok_and(|s| !s.contains(") Z")))
        .collect()
}

#[test]
#[ignore = "needs root: network namespaces (./quickstart test runs it as root)"]
fn ctrl_c_during_a_proxy_bench_removes_its_servers_namespaces_and_scratch_folder() {
    require_namespaces("the lab's network namespaces");
    interrupt_a_proxy_bench("namespaces");
}

#[test]
#[ignore = "needs root: network namespaces (./quickstart test runs it as root)"]
fn ctrl_c_during_a_loopback_proxy_bench_leaves_no_wrk_running() {
    require_namespaces("the lab's network namespaces");
    // On loopback no namespace kill reaches wrk: it must die with the bench itself.
    interrupt_a_proxy_bench("loopback");
}

/// Start `locus bench proxy` on `net`, send it SIGINT once wrk runs, and check that it exits
/// with 130 leaving no namespace, scratch folder, server or wrk behind.
fn interrupt_a_proxy_bench(net: &str) {
    watchdog("proxy bench interrupt", Duration::from_secs(180), tear_down_everything);
    let tmp = tempfile::tempdir().unwrap();
    // The bench's stderr, shown when the exit status is wrong (outside TMPDIR, which must end empty).
    let log_dir = tempfile::tempdir().unwrap();
    let log_path = log_dir.path().join("stderr");
    let mut bench = KilledOnDrop(
        Command::new(locus_binary())
            .args(["bench", "proxy", "--paths", "locus", "--sizes", "1k", "--keepalive", "on"])
            .args(["--rounds", "1", "--seconds", "20", "--idle-connections", "0", "--net", net])
            .env("TMPDIR", tmp.path())
            .stdout(std::process::Stdio::null())
            .stderr(std::fs::File::create(&log_path).unwrap())
            .spawn()
            .unwrap(),
    );
    let bench = &mut bench.0;
    let pid = bench.id();
    let owned = || -> Vec<String> {
        std::fs::read_dir("/run/netns")
            .map(|d| d.filter_map(|e| e.ok()?.file_name().into_string().ok()).collect::<Vec<_>>())
            .unwrap_or_default()
            .into_iter()
            .filter(|n| locus_rig::namespace_owner(n) == Some(pid))
            .collect()
    };
    // Wait for wrk to run in the lab: every server is up by then.
    let start = std::time::Instant::now();
    let servers = loop {
        let procs = locus_rig::descendants(pid);
        let wrk_runs = procs
            .iter()
            .any(|p| std::fs::read_to_string(format!("/proc/{p}/comm")).is_ok_and(|c| c.trim() == "wrk"));
        if wrk_runs && (net == "loopback" || !owned().is_empty()) {
            break procs;
        }
        assert!(bench.try_wait().unwrap().is_none(), "the bench ended before its load began");
        assert!(start.elapsed() < Duration::from_secs(90), "no load within 90 s");
        std::thread::sleep(Duration::from_millis(50));
    };
    let scratch_made = std::fs::read_dir(tmp.path()).unwrap().count();
    assert!(scratch_made > 0, "the bench made no scratch folder under TMPDIR");
    // SAFETY: kill with the pid of our own child.
    unsafe { libc::kill(pid as i32, libc::SIGINT) };
    let status = loop {
        if let Some(s) = bench.try_wait().unwrap() {
            break s;
        }
        assert!(start.elapsed() < Duration::from_secs(150), "no exit after SIGINT");
        std::thread::sleep(Duration::from_millis(20));
    };
    let stderr = std::fs::read_to_string(&log_path).unwrap_or_default();
    assert_eq!(status.code(), Some(130), "exit status after SIGINT: {status}; stderr:\n{stderr}");
    assert!(owned().is_empty(), "namespaces left: {:?}", owned());
    let left: Vec<_> =
        std::fs::read_dir(tmp.path()).unwrap().filter_map(|e| e.ok()).map(|e| e.path()).collect();
    assert!(left.is_empty(), "scratch left: {left:?}");
    std::thread::sleep(Duration::from_millis(300));
    assert!(still_running(&servers).is_empty(), "still running: {:?}", still_running(&servers));
}

/// The cache-forwarding path: a node without a cache serves every request from its peer's
/// memory (the path refuses to start otherwise), with no failed request, and its efficiency is
/// measured against one node directly.
#[test]
#[ignore = "needs root: network namespaces (./quickstart test runs it as root)"]
fn the_cf_path_serves_from_the_peers_memory_without_errors() {
    require_namespaces("the lab's network namespaces");
    watchdog("proxy bench cf path", Duration::from_secs(180), tear_down_everything);
    let out = Command::new(locus_binary())
        .args(["bench", "proxy", "--paths", "cf", "--sizes", "1k", "--keepalive", "off", "--json"])
        .args(["--rounds", "1", "--seconds", "1", "--idle-connections", "0", "--net", "namespaces"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let rows: Vec<serde_json::Value> =
        String::from_utf8_lossy(&out.stdout).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let cf = rows.iter().find(|r| r["path"] == "cf").unwrap_or_else(|| panic!("no cf row: {rows:?}"));
    assert_eq!(cf["errors"], 0, "{cf}");
    assert!(cf["rps"].as_f64().unwrap() > 0.0 && cf["efficiency"].as_f64().unwrap() > 0.0, "{cf}");
}
