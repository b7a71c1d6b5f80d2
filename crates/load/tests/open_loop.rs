//! The open loop against a scripted server: Poisson arrivals at the asked rate with free
//! connections (nothing late), and with busy connections late requests counted and their
//! latency measured from the schedule (no coordinated omission).

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{Reply, ScriptedServer, SeenRequest};
use locus_load::{ErrorKind, LoadConfig, run_load};

#[test]
fn open_loop_meets_its_rate_with_free_connections_and_nothing_late() {
    let server = ScriptedServer::start(Arc::new(|_: &SeenRequest| Reply::ok(vec![b'x'; 100])), 0);
    let config = LoadConfig {
        rate: Some(400.0),
        clients: 16,
        threads: 2,
        duration: Some(Duration::from_millis(1500)),
        timeout: Duration::from_secs(5),
        seed: 11,
        ..LoadConfig::new(vec![format!("{}/x", server.url()).parse().unwrap()])
    };
    let report = run_load(&config).unwrap();
    let expected = 400.0 * 1.5;
    assert!(
        (report.requests as f64 / expected - 1.0).abs() < 0.2,
        "{} requests, expected about {expected}",
        report.requests
    );
    assert!((report.rps / 400.0 - 1.0).abs() < 0.2, "{}", report.rps);
    let late = report.errors_by_kind.get(ErrorKind::Late);
    assert!(late * 20 <= report.requests, "{late} late of {}", report.requests);
    assert_eq!(report.run.loop_kind, "open");
}

#[test]
fn busy_connections_make_requests_late_and_latency_counts_from_the_schedule() {
    // One connection, each answer takes 40 ms, arrivals at 100/s: the server can serve 25/s,
    // so arrivals queue. Latency from the schedule grows far past the 40 ms service time.
    let slow =
        Arc::new(|_: &SeenRequest| Reply { delay: Duration::from_millis(40), ..Reply::ok(b"ok".to_vec()) });
    let server = ScriptedServer::start(slow, 0);
    let config = LoadConfig {
        rate: Some(100.0),
        clients: 1,
        threads: 1,
        duration: Some(Duration::from_secs(1)),
        timeout: Duration::from_secs(5),
        ..LoadConfig::new(vec![format!("{}/slow", server.url()).parse().unwrap()])
    };
    let report = run_load(&config).unwrap();
    let late = report.errors_by_kind.get(ErrorKind::Late);
    assert!((15..=30).contains(&report.requests), "{}", report.render_text());
    assert!(late + 2 >= report.requests, "{late} late of {}", report.requests);
    assert!(report.p50_ms > 150.0, "latency from the schedule, not from the send: {}", report.render_text());
    assert!(report.max_ms > 400.0, "{}", report.render_text());
}

#[test]
fn open_loop_with_a_request_count_ends_at_its_last_request() {
    // 30 connections each reserve an arrival (the 30th due about 3 s in at 10/s); the run
    // must end after the 3rd, not when the last reservation falls due.
    let server = ScriptedServer::start(Arc::new(|_: &SeenRequest| Reply::ok(b"ok".to_vec())), 0);
    let config = LoadConfig {
        rate: Some(10.0),
        clients: 30,
        threads: 1,
        requests: Some(3),
        timeout: Duration::from_secs(5),
        ..LoadConfig::new(vec![format!("{}/x", server.url()).parse().unwrap()])
    };
    let started = std::time::Instant::now();
    let report = run_load(&config).unwrap();
    assert_eq!(report.requests, 3);
    assert_eq!(server.all_requests().len(), 3);
    assert!(started.elapsed() < Duration::from_millis(1500), "took {:?}", started.elapsed());
}
