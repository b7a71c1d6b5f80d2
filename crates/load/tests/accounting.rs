//! Every measured request is accounted for exactly once: completed, failed (timeouts apart),
//! outstanding at the window's end, or (open loop) scheduled and never sent. Checked against
//! a server that answers, one that never finishes an answer, and one too slow for the rate.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{Reply, ScriptedServer, SeenRequest};
use locus_load::{LoadConfig, LoadReport, run_load};

fn config(server: &ScriptedServer, path: &str) -> LoadConfig {
    LoadConfig::new(vec![format!("{}{path}", server.url()).parse().unwrap()])
}

/// The closed-loop books: sent = completed + failed + outstanding, nothing unaccounted.
fn assert_closed_books(r: &LoadReport) {
    assert_eq!(r.unaccounted, 0, "{}", r.render_text());
    assert_eq!(r.sent, r.requests + r.failed + r.outstanding, "{}", r.render_text());
    assert_eq!(r.censored_latencies, r.outstanding);
    assert!(r.timeouts <= r.failed && r.timeouts <= r.errors, "{}", r.render_text());
}

#[test]
fn a_clean_closed_loop_run_completes_every_request_it_sent() {
    let server = ScriptedServer::start(Arc::new(|_: &SeenRequest| Reply::ok(b"ok".to_vec())), 0);
    let report =
        run_load(&LoadConfig { clients: 4, threads: 2, requests: Some(200), ..config(&server, "/ok") })
            .unwrap();
    assert_closed_books(&report);
    assert_eq!((report.sent, report.requests), (200, 200), "{}", report.render_text());
    assert_eq!((report.failed, report.timeouts, report.outstanding), (0, 0, 0));
    assert_eq!((report.scheduled, report.not_sent), (None, None), "closed loop schedules nothing");
}

#[test]
fn answers_that_never_end_are_timeouts_or_outstanding_never_lost() {
    // The server promises 1,000 bytes and sends 2: no answer ever completes. Each request
    // either times out (the default timeout: half the 1-s window) or is still waiting when
    // the window ends; whichever, it is counted once.
    let hang = Arc::new(|_: &SeenRequest| Reply { content_length: Some(1000), ..Reply::ok(b"ok".to_vec()) });
    let server = ScriptedServer::start(hang, 0);
    let report = run_load(&LoadConfig {
        clients: 4,
        threads: 1,
        duration: Some(Duration::from_secs(1)),
        ..config(&server, "/hang")
    })
    .unwrap();
    assert_closed_books(&report);
    assert_eq!(report.requests, 0, "{}", report.render_text());
    assert!(report.sent >= 4, "every client sent at least once: {}", report.render_text());
    assert_eq!(report.failed, report.timeouts, "every failure is a timeout: {}", report.render_text());
    assert_eq!(report.sent, report.timeouts + report.outstanding);
    assert_eq!(report.errors, report.timeouts, "timeouts are errors; outstanding ones are not");
    if report.outstanding > 0 {
        // A censored latency is the wait up to the window's end, and some wait was > 0.
        assert!(report.max_ms > 0.0, "{}", report.render_text());
    }
}

#[test]
fn an_open_loop_too_fast_for_its_server_reconciles_arrivals_with_completions() {
    // One connection, 40 ms an answer, 100 arrivals a second: most arrivals go out late or
    // not at all, and the books still balance.
    let slow =
        Arc::new(|_: &SeenRequest| Reply { delay: Duration::from_millis(40), ..Reply::ok(b"ok".to_vec()) });
    let server = ScriptedServer::start(slow, 0);
    let report = run_load(&LoadConfig {
        rate: Some(100.0),
        clients: 1,
        threads: 1,
        duration: Some(Duration::from_secs(1)),
        ..config(&server, "/slow")
    })
    .unwrap();
    let (scheduled, not_sent) = (report.scheduled.unwrap(), report.not_sent.unwrap());
    assert_eq!(report.unaccounted, 0, "{}", report.render_text());
    assert_eq!(scheduled, report.requests + report.failed + report.outstanding + not_sent);
    assert!(not_sent > 0 && report.requests > 0, "{}", report.render_text());
    let by_reason = report.not_sent_by_reason.as_ref().unwrap();
    let json = serde_json::to_value(by_reason).unwrap();
    let reasons: u64 = json.as_object().unwrap().values().map(|v| v.as_u64().unwrap()).sum();
    assert_eq!(reasons, not_sent, "every unsent arrival has its reason: {json}");
}

#[test]
fn a_clean_open_loop_run_sends_every_arrival_it_scheduled() {
    let server = ScriptedServer::start(Arc::new(|_: &SeenRequest| Reply::ok(b"ok".to_vec())), 0);
    let report = run_load(&LoadConfig {
        rate: Some(50.0),
        clients: 8,
        threads: 1,
        duration: Some(Duration::from_secs(1)),
        ..config(&server, "/ok")
    })
    .unwrap();
    let scheduled = report.scheduled.unwrap();
    assert_eq!(report.unaccounted, 0, "{}", report.render_text());
    assert_eq!(scheduled, report.requests + report.failed + report.outstanding + report.not_sent.unwrap());
    assert_eq!(report.failed, 0, "{}", report.render_text());
    assert!(report.requests > 0);
}
