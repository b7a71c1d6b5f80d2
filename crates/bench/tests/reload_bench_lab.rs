//! `locus bench reload` in short: one seed, a few reloads and one binary upgrade of the Locus
//! switch in proxy mode and of HAProxy in master-worker mode under load, in the lab's
//! namespaces (root only: `#[ignore]`d; `./quickstart test` runs it as root): every row has
//! the JSON fields the docs name, the events all happened, and the switch lost no request.
//! The flags' defaults are checked without root.

use std::time::Duration;

use clap::Parser;
use locus_bench::cli::BenchCommand;
use locus_bench::reload_bench::{ReloadArgs, markdown_table, run_reload_bench, summarize};
use locus_rig::tear_down_everything;
use locus_test_support::{locus_binary, require_namespaces, watchdog};

#[derive(Parser)]
struct Bench {
    #[command(subcommand)]
    cmd: BenchCommand,
}

fn reload_args(args: &[&str]) -> ReloadArgs {
    let argv = ["bench", "reload"].iter().chain(args).copied();
    match Bench::try_parse_from(argv).expect("flags parse").cmd {
        BenchCommand::Reload(a) => a,
        other => panic!("not reload: {other:?}"),
    }
}

#[test]
fn defaults_are_the_documented_run() {
    let a = reload_args(&[]);
    assert_eq!((a.seeds, a.reloads, a.upgrades, a.interval_ms), (3, 20, 3, 400));
    assert_eq!(a.servers, locus_bench::reload_bench::SUBJECTS);
    assert_eq!((a.new_conn_rate, a.new_conn_clients, a.keepalive_clients, a.think_ms), (200, 4, 16, 20));
    assert!(Bench::try_parse_from(["bench", "reload", "--seeds", "x"]).is_err());
}

#[test]
#[ignore = "needs root: network namespaces (./quickstart test runs it as root)"]
fn a_short_run_gives_complete_rows_and_the_switch_loses_no_request() {
    require_namespaces("the lab's network namespaces");
    watchdog("reload bench lab", Duration::from_secs(50), tear_down_everything);
    let locus = locus_binary();
    let a = reload_args(&[
        "--servers",
        "locus-proxy,haproxy-transfer",
        "--seeds",
        "1",
        "--reloads",
        "4",
        "--upgrades",
        "1",
        "--interval-ms",
        "200",
        "--locus",
        locus.to_str().unwrap(),
    ]);
    let rows = run_reload_bench(&a, |line| eprintln!("{line}")).unwrap();
    eprintln!("{}", markdown_table(&summarize(&rows)));
    let servers: Vec<(&str, &str)> = rows.iter().map(|r| (r.server.as_str(), r.mode.as_str())).collect();
    assert_eq!(servers, [("locus", "proxy"), ("haproxy", "master-worker (socket transfer)")]);
    for r in &rows {
        let json = serde_json::to_value(r).unwrap();
        for key in ["server", "mode", "seed", "reloads", "upgrades", "requests", "failed", "resets"] {
            assert!(json.get(key).is_some(), "{key} missing: {json}");
        }
        assert_eq!((r.reloads, r.upgrades, r.error.as_deref()), (4, 1, None), "{r:?}");
        assert!(r.new_conn_requests > 100 && r.keepalive_requests > 500, "{r:?}");
        assert_eq!(r.requests, r.new_conn_requests + r.keepalive_requests, "{r:?}");
    }
    // Issue 32's target. Missed now and then (1 run in 10 here, debug build): at the handover the
    // old switch closes idle keep-alive connections even when a request has just arrived
    // (docs/performance.md, "Reload and upgrade").
    let locus = &rows[0];
    assert_eq!(
        (locus.failed, locus.resets, locus.stuck_generations),
        (0, 0, 0),
        "the switch lost requests across its reloads and upgrade: {locus:?}"
    );
}
