//! `measure_handoff_latency` on loopback (root only): every handoff of more than one batch is
//! timed, the figures are ordered as they must be, and the summary is the JSON line `locus
//! bench handoff --json` prints; with TLS, every session moves and works on the node.

use locus_bench::handoff_latency::measure_handoff_latency;
use locus_test_support::require_root;

#[test]
#[ignore = "needs root: TCP_REPAIR needs CAP_NET_ADMIN (./quickstart test runs it as root)"]
fn measuring_handoff_latency_times_every_handoff_over_connections_that_work() {
    require_root("TCP_REPAIR needs CAP_NET_ADMIN");
    // More than one batch (250), the last one partial.
    let latency = measure_handoff_latency(300).unwrap();
    assert_eq!(latency.handoffs, 300);
    assert!(
        latency.median_us > 0.0 && latency.median_us <= latency.p99_us && latency.p99_us <= latency.max_us
    );
    assert!(latency.dump_median_us > 0.0 && latency.restore_median_us > 0.0);
    assert!(latency.restored_median_us < latency.median_us, "one hop is less than the round trip");
    let json = latency.summary_json();
    assert!(json.starts_with("{\"handoffs\": 300, \"median_us\": "), "{json}");
    assert!(json.contains(", \"p99_us\": ") && json.ends_with('}'), "{json}");
}

#[test]
#[ignore = "needs root: TCP_REPAIR needs CAP_NET_ADMIN (./quickstart test runs it as root)"]
fn with_tls_every_session_moves_and_the_client_reads_the_node_through_it() {
    require_root("TCP_REPAIR needs CAP_NET_ADMIN");
    // Every client checks the node's response through its own TLS session: a session the
    // node did not continue right fails the measurement.
    let latency = locus_bench::handoff_latency::measure_handoff_latency_with(
        30,
        locus_bench::handoff_latency::ThreadPlacement::OneCpu,
        true,
    )
    .unwrap();
    assert_eq!((latency.handoffs, latency.tls), (30, true));
    assert!(latency.median_us > 0.0 && latency.median_us <= latency.p99_us);
}
