//! The wrk comparison behind `locus bench load`: wrk and locus-load take turns on one URL of
//! an in-process node, and both rates and their ratio are reported (skipped where wrk is not
//! installed).

use locus_bench::load_vs_wrk::compare_with_wrk;
use locus_bench::wrk::WRK_PROGRAM;
use locus_node::{NodeConfig, NodeServer};

#[test]
fn wrk_comparison_reports_both_rates_and_their_ratio() {
    if !std::path::Path::new(WRK_PROGRAM).exists() {
        eprintln!("skipped: {WRK_PROGRAM} is not installed");
        return;
    }
    let root = tempfile::tempdir().unwrap();
    std::fs::write(root.path().join("1k.bin"), vec![b'k'; 1024]).unwrap();
    let node =
        NodeServer::start(NodeConfig { root: root.path().into(), workers: 1, ..NodeConfig::default() })
            .unwrap();
    let url = format!("http://{}/1k.bin", node.addr());
    let c = compare_with_wrk(&url, 4, 1, 1).unwrap();
    node.shutdown();
    assert_eq!(c.rounds.len(), 4);
    assert_eq!(
        c.rounds.iter().map(|r| r.tool).collect::<Vec<_>>(),
        ["wrk", "locus-load", "wrk", "locus-load"]
    );
    assert!(c.wrk_rps > 0.0 && c.locus_rps > 0.0, "{}", c.render_text());
    assert!((c.ratio - c.locus_rps / c.wrk_rps).abs() < 1e-9);
    assert!(c.rounds.iter().all(|r| r.mismatches.unwrap_or(0) == 0 && r.errors == 0), "{}", c.render_text());
    assert!(c.verified);
}
