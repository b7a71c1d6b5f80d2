//! `locus demo`'s run on loopback (no root): a short demo under two policies serves every
//! byte correctly, with the nodes and the switch running this build's `locus` executable.

use std::path::Path;
use std::time::Duration;

use locus_lab::loopback_demo::{DemoOptions, run_demo};

#[test]
fn a_short_demo_serves_every_byte_correctly_under_two_policies() {
    let opts = DemoOptions {
        files: 60,
        clients: 4,
        warmup: Duration::from_millis(200),
        measure: Duration::from_millis(600),
        seek_ms: 0.5,
        policies: vec!["wrr".into(), "lard-r".into()],
        ..DemoOptions::default()
    };
    let rows = run_demo(&opts, Path::new(env!("CARGO_BIN_EXE_locus")), |_| {}).unwrap();
    assert_eq!(rows.len(), 2);
    for r in &rows {
        assert!(r.rps > 0.0, "{r:?}");
        assert_eq!((r.errors, r.mismatches), (0, 0), "{r:?}");
        assert!((r.shares.iter().sum::<f64>() - 1.0).abs() < 1e-6);
    }
}
