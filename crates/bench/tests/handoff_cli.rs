//! `locus bench handoff --json` as a user runs it: the flags parse (with their defaults), and
//! a short run prints exactly one JSON line with the handoffs, median and p99. The run needs
//! CAP_NET_ADMIN and is ignored without root (`./quickstart test` runs it as root).

use clap::Parser;
use locus_bench::cli::BenchCommand;
use locus_bench::handoff::{HandoffArgs, Placement, output};

#[derive(Parser)]
struct Bench {
    #[command(subcommand)]
    cmd: BenchCommand,
}

fn handoff_args(args: &[&str]) -> HandoffArgs {
    let argv = ["bench", "handoff"].iter().chain(args).copied();
    match Bench::try_parse_from(argv).expect("flags parse").cmd {
        BenchCommand::Handoff(a) => a,
        other => panic!("not the handoff subcommand: {other:?}"),
    }
}

#[test]
fn defaults_are_ten_thousand_handoffs_on_one_cpu_as_a_table() {
    let a = handoff_args(&[]);
    assert_eq!((a.count, a.json, a.placement), (10_000, false, Placement::OneCpu));
    let a = handoff_args(&["--placement", "free", "--count", "7", "--json"]);
    assert_eq!((a.count, a.json, a.placement), (7, true, Placement::Free));
    assert_eq!(handoff_args(&["--placement", "two-cpus"]).placement, Placement::TwoCpus);
    assert!(Bench::try_parse_from(["bench", "handoff", "--placement", "anywhere"]).is_err());
}

#[test]
#[ignore = "needs root: CAP_NET_ADMIN for TCP_REPAIR (./quickstart test runs it as root)"]
fn json_run_prints_one_line_with_handoffs_median_and_p99() {
    locus_test_support::require_root("locus bench handoff needs CAP_NET_ADMIN for TCP_REPAIR");
    let text = output(&handoff_args(&["--count", "300", "--json"])).unwrap();
    assert_eq!(text.lines().count(), 1, "{text}");
    let json: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(json["handoffs"].as_u64(), Some(300), "{text}");
    let median = json["median_us"].as_f64().expect("median_us is a number");
    let p99 = json["p99_us"].as_f64().expect("p99_us is a number");
    assert!(median > 0.0 && p99 >= median, "{text}");
}
