//! The closed loop against a scripted server that logs what it sees: exact request counts,
//! one connection per request without keep-alive, pipelining depth observed by the server,
//! think time between a client's requests, and a warm-up that is not counted.

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{Reply, ScriptedServer, SeenRequest};
use locus_load::{LoadConfig, ThinkTime, run_load};

fn hello() -> common::Responder {
    Arc::new(|_: &SeenRequest| Reply::ok(b"hello world".to_vec()))
}

fn config(server: &ScriptedServer) -> LoadConfig {
    LoadConfig {
        timeout: Duration::from_secs(5),
        ..LoadConfig::new(vec![format!("{}/hello", server.url()).parse().unwrap()])
    }
}

#[test]
fn closed_loop_sends_exactly_the_requested_count() {
    for (clients, threads, requests) in [(8, 2, 1000), (3, 1, 7), (1, 1, 1)] {
        let server = ScriptedServer::start(hello(), 0);
        let report =
            run_load(&LoadConfig { clients, threads, requests: Some(requests), ..config(&server) }).unwrap();
        assert_eq!(report.requests, requests, "{}", report.render_text());
        assert_eq!(report.errors, 0);
        assert_eq!(server.all_requests().len() as u64, requests, "the server saw exactly the count");
        assert!(server.connections().len() <= clients, "keep-alive: at most one connection per client");
        assert_eq!(report.statuses.get("2xx"), Some(&requests));
        assert!(report.duration_s > 0.0 && report.rps > 0.0);
    }
}

#[test]
fn keepalive_off_opens_one_connection_per_request() {
    let server = ScriptedServer::start(hello(), 0);
    let report = run_load(&LoadConfig {
        clients: 4,
        threads: 2,
        requests: Some(60),
        keepalive: false,
        ..config(&server)
    })
    .unwrap();
    assert_eq!((report.requests, report.errors), (60, 0), "{}", report.render_text());
    let conns = server.connections();
    assert_eq!(conns.len(), 60);
    assert!(conns.iter().all(|c| c.requests.len() == 1 && c.requests[0].connection_close), "{conns:?}");
    assert_eq!(report.connections, 60);
    // With keep-alive, the same load uses at most one connection per client. Not exactly one:
    // the budget is shared, so on a busy machine one thread's clients may spend all of it
    // before the other thread's clients take any (CI once saw 2 of 4).
    let server = ScriptedServer::start(hello(), 0);
    let report =
        run_load(&LoadConfig { clients: 4, threads: 2, requests: Some(60), ..config(&server) }).unwrap();
    assert_eq!((report.requests, report.errors), (60, 0), "{}", report.render_text());
    assert!((1..=4).contains(&report.connections), "{} connections", report.connections);
    assert_eq!(server.connections().len() as u64, report.connections);
    assert!(server.all_requests().iter().all(|r| !r.connection_close));
}

#[test]
fn pipelining_depth_d_sends_d_requests_before_reading() {
    for depth in [1, 4, 7] {
        // The server waits (up to 300 ms) for `depth` requests before answering any: a
        // client that read before sending them all would show smaller batches.
        let server = ScriptedServer::start(hello(), depth);
        let requests = 2 * 3 * 7 * 4;
        let report = run_load(&LoadConfig {
            clients: 2,
            threads: 1,
            pipeline: depth,
            requests: Some(requests as u64),
            ..config(&server)
        })
        .unwrap();
        assert_eq!((report.requests, report.errors), (requests as u64, 0), "{}", report.render_text());
        let batches: Vec<usize> = server.connections().iter().flat_map(|c| c.batches.clone()).collect();
        assert_eq!(batches.iter().sum::<usize>(), requests);
        assert!(batches.iter().all(|&b| b == depth), "depth {depth}: batches {batches:?}");
        let cut_short: usize = server.connections().iter().map(|c| c.cut_short).sum();
        assert_eq!(cut_short, 0, "depth {depth}: no batch waited for its timeout");
    }
}

#[test]
fn think_time_spaces_a_clients_requests() {
    let server = ScriptedServer::start(hello(), 0);
    let pause = Duration::from_millis(25);
    let think = ThinkTime::Fixed(pause);
    let started = Instant::now();
    let report =
        run_load(&LoadConfig { clients: 1, threads: 1, think, requests: Some(9), ..config(&server) })
            .unwrap();
    let elapsed = started.elapsed();
    assert_eq!(report.requests, 9);
    assert!(elapsed >= 8 * pause, "8 pauses of 25 ms took {elapsed:?}");
    // Think time is not latency: a latency that held the pause would be at least the pause.
    assert!(report.p50_ms < pause.as_secs_f64() * 1e3, "{}", report.render_text());
}

#[test]
fn warmup_requests_are_sent_but_not_counted() {
    let server = ScriptedServer::start(hello(), 0);
    let report = run_load(&LoadConfig {
        clients: 2,
        threads: 1,
        warmup: Duration::from_millis(200),
        requests: Some(50),
        ..config(&server)
    })
    .unwrap();
    assert_eq!(report.requests, 50);
    let seen = server.all_requests().len();
    assert!(seen > 50, "warm-up requests reach the server too ({seen})");
}

#[test]
fn targets_are_spread_round_robin_over_servers() {
    let a = ScriptedServer::start(hello(), 0);
    let b = ScriptedServer::start(hello(), 0);
    let targets = vec![format!("{}/x", a.url()).parse().unwrap(), format!("{}/x", b.url()).parse().unwrap()];
    let report = run_load(&LoadConfig {
        targets,
        clients: 4,
        threads: 2,
        keepalive: false,
        requests: Some(40),
        timeout: Duration::from_secs(5),
        ..LoadConfig::default()
    })
    .unwrap();
    assert_eq!(report.requests, 40);
    let (na, nb) = (a.all_requests().len(), b.all_requests().len());
    assert_eq!(na + nb, 40);
    assert!(na >= 10 && nb >= 10, "{na} / {nb}");
}
