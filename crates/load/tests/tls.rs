//! The load client over HTTPS against a Locus node serving TLS: every response checked byte
//! for byte against the document root, a connection per request making a full handshake each
//! time, `--resume` turning all but the first into resumed ones, keep-alive making one per
//! connection, and the handshake latency reported; a missing trust file is refused up front.

use std::time::Duration;

use locus_load::{LoadConfig, Verification, run_load};
use locus_node::{NodeConfig, NodeServer};
use locus_test_support::write_pair;

/// A node serving `root` over TLS for `localhost`; the certificate's path (the trust file).
fn tls_node(root: &std::path::Path, keys: &std::path::Path) -> (NodeServer, std::path::PathBuf) {
    let (crt, key, _) = write_pair(keys, "node", &["localhost"], (2020, 2090));
    let config = NodeConfig {
        root: root.into(),
        workers: 1,
        tls: Some(locus_tls::TlsSettings::single(crt.clone(), key)),
        ..NodeConfig::default()
    };
    (NodeServer::start(config).unwrap(), crt)
}

fn config(node: &NodeServer, ca: &std::path::Path, root: &std::path::Path) -> LoadConfig {
    LoadConfig {
        clients: 2,
        threads: 1,
        requests: Some(60),
        timeout: Duration::from_secs(5),
        verification: Verification::Root(root.into()),
        tls_ca: Some(ca.into()),
        ..LoadConfig::new(vec![format!("https://localhost:{}/a.bin", node.addr().port()).parse().unwrap()])
    }
}

#[test]
fn https_load_is_verified_and_counts_full_resumed_and_keep_alive_handshakes() {
    let (root, keys) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    std::fs::write(root.path().join("a.bin"), (0..70_000u32).map(|i| (i % 251) as u8).collect::<Vec<_>>())
        .unwrap();
    let (node, ca) = tls_node(root.path(), keys.path());

    let full = run_load(&LoadConfig { keepalive: false, ..config(&node, &ca, root.path()) }).unwrap();
    assert_eq!((full.requests, full.errors, full.mismatches), (60, 0, 0), "{:?}", full.errors_by_kind);
    assert!(full.verified >= 60);
    let t = full.tls.clone().expect("handshakes reported");
    assert_eq!((t.handshakes_resumed, t.handshakes_full >= 60), (0, true), "{t:?}");
    assert!(t.handshake_p50_ms > 0.0 && t.handshake_p99_ms >= t.handshake_p50_ms);
    assert!(full.render_text().contains("TLS"));

    // More clients than the eight tickets one shared store would keep per server: each
    // client has its own, so only its first connection is a full handshake.
    let many = LoadConfig {
        keepalive: false,
        tls_resume: true,
        clients: 40,
        requests: Some(400),
        ..config(&node, &ca, root.path())
    };
    let resumed = run_load(&many).unwrap();
    assert_eq!((resumed.requests, resumed.errors, resumed.mismatches), (400, 0, 0));
    let t = resumed.tls.clone().unwrap();
    assert!(t.handshakes_full <= 40 && t.handshakes_resumed >= 360, "each client's first is full: {t:?}");

    let kept = run_load(&config(&node, &ca, root.path())).unwrap();
    assert_eq!((kept.requests, kept.errors, kept.mismatches), (60, 0, 0));
    assert_eq!(kept.tls.unwrap().handshakes_full, 2, "one per connection");
    node.shutdown();
}

#[test]
fn https_without_a_trust_file_is_refused_before_any_connection() {
    let url = "https://localhost:1/".parse().unwrap();
    let e = run_load(&LoadConfig::new(vec![url])).unwrap_err().to_string();
    assert!(e.contains("--tls-ca"), "{e}");
}

#[test]
fn a_named_server_and_a_single_suite_are_what_the_handshakes_use() {
    let (root, keys) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    std::fs::write(root.path().join("a.bin"), b"abc").unwrap();
    let (node, ca) = tls_node(root.path(), keys.path());
    let by_address = format!("https://127.0.0.1:{}/a.bin", node.addr().port()).parse().unwrap();
    let named = LoadConfig {
        tls_name: Some("localhost".into()),
        tls_suite: Some("TLS13_AES_128_GCM_SHA256".into()),
        ..LoadConfig { targets: vec![by_address], ..config(&node, &ca, root.path()) }
    };
    let report = run_load(&named).unwrap();
    assert_eq!((report.requests, report.errors), (60, 0));
    let suites = node.status()["tls"]["suites"].clone();
    assert_eq!(suites, serde_json::json!({"TLS13_AES_128_GCM_SHA256": 2}), "{suites}");
    let bad = LoadConfig { tls_suite: Some("TLS_NOPE".into()), ..config(&node, &ca, root.path()) };
    let e = run_load(&bad).unwrap_err().to_string();
    assert!(e.contains("TLS_NOPE") && e.contains("TLS13_AES_128_GCM_SHA256"), "{e}");
    node.shutdown();
}
