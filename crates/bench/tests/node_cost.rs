//! `locus bench node-cost` with tiny counts: it starts a real node, measures every size with
//! and without keep-alive, and fits finite, non-negative costs whose spec parses back.

use clap::Parser;
use locus_bench::cli::BenchCommand;
use locus_bench::node_cost::{NodeCostArgs, run_node_cost};

#[derive(Parser)]
struct Bench {
    #[command(subcommand)]
    cmd: BenchCommand,
}

fn args(argv: &[&str]) -> NodeCostArgs {
    let argv = ["bench", "node-cost"].iter().chain(argv).copied();
    match Bench::try_parse_from(argv).expect("flags parse").cmd {
        BenchCommand::NodeCost(a) => a,
        other => panic!("not node-cost: {other:?}"),
    }
}

#[test]
fn defaults_measure_three_sizes_for_a_few_seconds() {
    let a = args(&[]);
    assert_eq!(
        (a.sizes.as_slice(), a.requests, a.cpus, a.json),
        (&[1024, 16384, 262144][..], 2000, 1, false)
    );
}

#[test]
fn a_tiny_run_fits_finite_non_negative_costs_and_a_spec_that_parses() {
    let report = run_node_cost(&args(&["--requests", "40", "--sizes", "1k,64k", "--cpus", "2"])).unwrap();
    assert_eq!(report.cells.len(), 4);
    // A cell's node CPU is the process's CPU less the client thread's: over a few requests
    // the clocks' granularity can leave one at 0, never below, and the run as a whole some.
    for c in &report.cells {
        assert!(c.node_cpu_us.is_finite() && c.node_cpu_us >= 0.0, "{c:?}");
        assert_eq!(c.connections, if c.keepalive { 1 } else { 40 });
    }
    assert!(report.cells.iter().map(|c| c.node_cpu_us).sum::<f64>() > 0.0, "{report:?}");
    for v in [report.conn_us, report.request_us, report.kb_us, report.rms_residual_us] {
        assert!(v.is_finite() && v >= 0.0, "{report:?}");
    }
    let config = report.config().unwrap();
    assert_eq!(
        (config.conn_us, config.request_us, config.kb_us, config.cpus),
        (report.conn_us, report.request_us, report.kb_us, 2)
    );
    let text = report.render_text();
    assert!(text.contains(&format!("--cpu {}", report.spec)), "{text}");
}
