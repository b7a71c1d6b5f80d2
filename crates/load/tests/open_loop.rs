//! The open loop against a scripted server: Poisson arrivals at the asked rate with free
//! connections (nothing late), and with busy connections late requests counted and their
//! latency measured from the schedule (no coordinated omission).

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{Reply, ScriptedServer, SeenRequest};
use locus_load::{ErrorKind, LoadConfig, OpenLoopSchedule, run_load};

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
    // 300 connections each reserve an arrival (at 10/s the last is due about 30 s in); the run
    // must end after the 3rd, when its budget is spent, not sleep until the reservations fall
    // due. Both bounds come from the run's own seeded schedule: it waits for its 3rd arrival
    // (a lower bound), and ends before the moment a regression would make it wait for.
    let (rate, clients, seed) = (10.0, 300, 11);
    let mut schedule = OpenLoopSchedule::for_worker(rate, seed, 0).unwrap();
    let due: Vec<Duration> = (0..clients).map(|_| Duration::from_secs_f64(schedule.next_offset())).collect();
    let server = ScriptedServer::start(Arc::new(|_: &SeenRequest| Reply::ok(b"ok".to_vec())), 0);
    let config = LoadConfig {
        rate: Some(rate),
        clients,
        threads: 1,
        requests: Some(3),
        seed,
        timeout: Duration::from_secs(5),
        ..LoadConfig::new(vec![format!("{}/x", server.url()).parse().unwrap()])
    };
    let started = Instant::now();
    let report = run_load(&config).unwrap();
    let elapsed = started.elapsed();
    assert_eq!(report.requests, 3);
    assert_eq!(server.all_requests().len(), 3);
    assert!(elapsed >= due[2], "the 3rd arrival is due at {:?}; the run took {elapsed:?}", due[2]);
    let last = due[clients - 1];
    assert!(elapsed < last, "took {elapsed:?}: it waited for a reservation due at {last:?}");
}
