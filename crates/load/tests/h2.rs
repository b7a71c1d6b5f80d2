//! The load client over HTTP/2 (`--h2`) against an in-test h2 server on loopback: cleartext
//! h2c and TLS chosen by ALPN, every response checked byte for byte, many streams in flight on
//! one connection; wrong bytes counted as mismatches, resets, GOAWAYs, silent streams and
//! servers that do not speak HTTP/2 counted as errors by kind, with every request accounted for.

mod h2_server;

use std::collections::HashMap;
use std::io::{Read, Write};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime};

use h2_server::{H2Server, Misbehaviour};
use locus_load::{
    DocumentSet, ErrorKind, LoadConfig, LoadReport, Popularity, TraceSource, Verification, Workload, run_load,
};
use locus_trace::TraceRecord;

/// Files of several sizes (two larger than a default HTTP/2 window) written under `root`,
/// and the same as the server's documents.
fn site(root: &Path) -> HashMap<String, Vec<u8>> {
    let mut docs = HashMap::new();
    for (i, size) in [0usize, 1, 100, 4096, 20_000, 70_000, 300_000, 1_000_003].into_iter().enumerate() {
        let body: Vec<u8> = (0..size).map(|b| (b * 31 + i * 7) as u8).collect();
        std::fs::write(root.join(format!("f{i}.bin")), &body).unwrap();
        docs.insert(format!("/f{i}.bin"), body);
    }
    docs
}

fn h2(url: &str) -> LoadConfig {
    LoadConfig {
        h2: true,
        threads: 1,
        timeout: Duration::from_secs(5),
        ..LoadConfig::new(vec![url.parse().unwrap()])
    }
}

fn synthetic(root: &Path) -> Workload {
    Workload::Synthetic { popularity: Popularity::Uniform, documents: DocumentSet::Docroot(root.into()) }
}

fn every_request_accounted(r: &LoadReport) {
    assert_eq!(r.unaccounted, 0, "{}", r.render_text());
    assert_eq!(r.sent, r.requests + r.failed + r.outstanding, "{}", r.render_text());
}

#[test]
fn h2c_runs_are_verified_and_keep_many_streams_in_flight_on_one_connection() {
    let root = tempfile::tempdir().unwrap();
    let server = H2Server::start(site(root.path()), Misbehaviour::None, Duration::from_millis(2), None);
    let config = LoadConfig {
        clients: 2,
        streams: 10,
        requests: Some(600),
        workload: synthetic(root.path()),
        verification: Verification::Root(root.path().into()),
        ..h2(&server.url("/"))
    };
    let report = run_load(&config).unwrap();
    assert_eq!((report.requests, report.errors, report.mismatches), (600, 0, 0), "{}", report.render_text());
    assert!(report.verified >= 600);
    every_request_accounted(&report);
    assert_eq!((report.connections, server.connections()), (2, 2), "one connection per client");
    assert!(server.max_streams() >= 2, "streams in flight at once: {}", server.max_streams());
    assert!(server.max_streams() <= 10, "never more than --streams: {}", server.max_streams());
    assert!(report.bytes > 600, "the frames read are the bytes on the wire");
    let json = report.to_json();
    assert_eq!((json["run"]["protocol"].as_str(), json["run"]["streams"].as_u64()), (Some("h2"), Some(10)));
    assert!(report.render_text().contains("HTTP/2 with 10 streams each"), "{}", report.render_text());

    // One stream per connection: never two requests at once.
    let one = H2Server::start(site(root.path()), Misbehaviour::None, Duration::from_millis(1), None);
    let config = LoadConfig { clients: 1, streams: 1, requests: Some(50), ..config.clone() };
    let report = run_load(&LoadConfig { targets: vec![one.url("/").parse().unwrap()], ..config }).unwrap();
    assert_eq!((report.requests, report.errors, report.mismatches), (50, 0, 0));
    assert_eq!(one.max_streams(), 1);
}

#[test]
fn wrong_bytes_over_h2_are_mismatches_not_errors() {
    let root = tempfile::tempdir().unwrap();
    let server = H2Server::start(site(root.path()), Misbehaviour::WrongBytes, Duration::ZERO, None);
    let config = LoadConfig {
        clients: 1,
        streams: 4,
        requests: Some(40),
        verification: Verification::Root(root.path().into()),
        ..h2(&server.url("/f5.bin"))
    };
    let report = run_load(&config).unwrap();
    assert_eq!((report.requests, report.errors), (40, 0), "{}", report.render_text());
    assert_eq!(report.mismatches, 40);
    let sample = &report.mismatch_samples[0];
    assert_eq!(sample.kind.name(), "checksum");
    assert_eq!(sample.request, format!("GET {}", server.url("/f5.bin")));
}

#[test]
fn reset_streams_are_counted_as_reset_and_the_connection_goes_on() {
    let root = tempfile::tempdir().unwrap();
    let server = H2Server::start(site(root.path()), Misbehaviour::ResetEvery(5), Duration::ZERO, None);
    let config = LoadConfig {
        clients: 2,
        streams: 4,
        requests: Some(100),
        verification: Verification::Root(root.path().into()),
        ..h2(&server.url("/f3.bin"))
    };
    let report = run_load(&config).unwrap();
    assert_eq!(server.requests(), 100);
    assert_eq!(report.errors_by_kind.get(ErrorKind::Reset), 20, "{}", report.render_text());
    assert_eq!((report.requests, report.failed, report.errors, report.mismatches), (80, 20, 20, 0));
    every_request_accounted(&report);
    assert_eq!(report.connections, 2, "a reset stream leaves its connection open");
}

#[test]
fn goaway_is_counted_and_the_connection_opened_again() {
    let root = tempfile::tempdir().unwrap();
    let server =
        H2Server::start(site(root.path()), Misbehaviour::GoAwayAfter(10), Duration::from_millis(5), None);
    let config = LoadConfig {
        clients: 1,
        streams: 4,
        requests: Some(100),
        verification: Verification::Root(root.path().into()),
        ..h2(&server.url("/f4.bin"))
    };
    let report = run_load(&config).unwrap();
    every_request_accounted(&report);
    assert_eq!(report.requests + report.failed, 100, "{}", report.render_text());
    assert!(report.requests > 10, "answers after the first GOAWAY: {}", report.render_text());
    assert!(report.connections >= 2 && server.connections() >= 2, "{}", report.render_text());
    let goaway = report.errors_by_kind.get(ErrorKind::GoAway);
    assert!(goaway > 0, "the streams a GOAWAY cut off: {}", report.render_text());
    assert_eq!(
        report.errors,
        goaway + report.errors_by_kind.get(ErrorKind::Closed),
        "{}",
        report.render_text()
    );
    assert_eq!(report.mismatches, 0);
}

#[test]
fn a_silent_stream_times_out_and_its_connection_is_kept() {
    let root = tempfile::tempdir().unwrap();
    let silent = Misbehaviour::Silent("/f2.bin".into());
    let server = H2Server::start(site(root.path()), silent, Duration::ZERO, None);
    let started = Instant::now();
    let config = LoadConfig {
        clients: 1,
        streams: 2,
        requests: Some(4),
        timeout: Duration::from_millis(300),
        ..h2(&server.url("/f2.bin"))
    };
    let report = run_load(&config).unwrap();
    assert!(started.elapsed() < Duration::from_secs(5), "{:?}", started.elapsed());
    assert_eq!(report.errors_by_kind.get(ErrorKind::Timeout), 4, "{}", report.render_text());
    assert_eq!((report.requests, report.timeouts), (0, 4));
    every_request_accounted(&report);
    assert_eq!(report.connections, 1, "a timed-out stream is reset, its connection kept");
}

#[test]
fn open_loop_over_h2_takes_arrivals_on_every_stream() {
    let root = tempfile::tempdir().unwrap();
    let server = H2Server::start(site(root.path()), Misbehaviour::None, Duration::ZERO, None);
    let config = LoadConfig {
        clients: 2,
        streams: 3,
        rate: Some(400.0),
        duration: Some(Duration::from_millis(800)),
        workload: synthetic(root.path()),
        verification: Verification::Root(root.path().into()),
        ..h2(&server.url("/"))
    };
    let report = run_load(&config).unwrap();
    assert_eq!(report.run.loop_kind, "open");
    assert_eq!((report.mismatches, report.failed), (0, 0), "{}", report.render_text());
    assert!(report.requests > 100, "{}", report.render_text());
    assert!(report.scheduled.is_some_and(|s| s >= report.requests), "{}", report.render_text());
    assert_eq!(report.unaccounted, 0, "{}", report.render_text());
    assert!(report.connections <= 2);
}

#[test]
fn trace_sessions_over_h2_replay_each_clients_requests_in_order() {
    let root = tempfile::tempdir().unwrap();
    let server = H2Server::start(site(root.path()), Misbehaviour::None, Duration::from_millis(1), None);
    let records: Vec<TraceRecord> = (0..120u32)
        .map(|i| TraceRecord { client: i % 7, ..TraceRecord::get(format!("/f{}.bin", i % 8), 0) })
        .chain(std::iter::once(TraceRecord::get("/missing", 0)))
        .collect();
    let config = LoadConfig {
        clients: 2,
        streams: 3,
        sessions: true,
        workload: Workload::Trace { source: TraceSource::Records(Arc::new(records)), repeat: false },
        verification: Verification::Root(root.path().into()),
        requests: Some(121),
        ..h2(&server.url("/"))
    };
    let report = run_load(&config).unwrap();
    assert_eq!((report.requests, report.mismatches), (121, 0), "{}", report.render_text());
    assert_eq!(report.verified, 121);
    assert_eq!(report.errors_by_kind.get(ErrorKind::Status4xx), 1, "the missing file's 404");
    assert_eq!(report.errors, 1);
    assert_eq!(server.requests(), 121);
}

/// A TLS server for `localhost` offering `alpn`; the trust file's path. The key directory
/// must outlive the server.
fn tls_server(keys: &Path, docs: HashMap<String, Vec<u8>>, alpn: &[&[u8]]) -> (H2Server, std::path::PathBuf) {
    let (crt, key, _) = locus_test_support::write_pair(keys, "h2", &["localhost"], (2020, 2090));
    let config = locus_tls::TlsSettings::single(crt.clone(), key).load(alpn, SystemTime::now()).unwrap();
    (H2Server::start(docs, Misbehaviour::None, Duration::from_millis(1), Some(config)), crt)
}

#[test]
fn h2_over_tls_is_chosen_by_alpn_and_verified() {
    let (root, keys) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (server, ca) =
        tls_server(keys.path(), site(root.path()), &[locus_tls::ALPN_H2, locus_tls::ALPN_HTTP1]);
    let config = LoadConfig {
        clients: 2,
        streams: 5,
        requests: Some(200),
        workload: synthetic(root.path()),
        verification: Verification::Root(root.path().into()),
        tls_ca: Some(ca),
        ..h2(&server.url("/"))
    };
    let report = run_load(&config).unwrap();
    assert_eq!((report.requests, report.errors, report.mismatches), (200, 0, 0), "{}", report.render_text());
    every_request_accounted(&report);
    let tls = report.tls.clone().expect("handshakes reported");
    assert_eq!((tls.handshakes_full, report.connections), (2, 2));
    assert!(server.max_streams() >= 2, "{}", server.max_streams());
}

#[test]
fn a_tls_server_that_does_not_select_h2_is_a_protocol_error_not_a_crash() {
    let (root, keys) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    // One server refuses the offer (a no_application_protocol alert), the other selects nothing.
    for alpn in [&[locus_tls::ALPN_HTTP1][..], &[]] {
        let (server, ca) = tls_server(keys.path(), site(root.path()), alpn);
        let config =
            LoadConfig { clients: 1, requests: Some(5), tls_ca: Some(ca), ..h2(&server.url("/f1.bin")) };
        let report = run_load(&config).unwrap();
        assert_eq!(report.errors_by_kind.get(ErrorKind::Protocol), 5, "{alpn:?}: {}", report.render_text());
        assert_eq!((report.requests, report.failed), (0, 5));
        assert!(report.warnings.iter().any(|w| w.contains("did not speak HTTP/2")), "{:?}", report.warnings);
        assert_eq!(server.requests(), 0);
    }
}

#[test]
fn h2c_to_a_server_answering_in_http1_is_a_protocol_error() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let addr = listener.local_addr().unwrap();
    let done = Arc::new(AtomicBool::new(false));
    let stop = done.clone();
    let server = std::thread::spawn(move || {
        // Answer every connection as an HTTP/1.1 server answers a preface it cannot parse.
        while !stop.load(Ordering::SeqCst) {
            let Ok((mut tcp, _)) = listener.accept() else {
                std::thread::sleep(Duration::from_millis(2));
                continue;
            };
            tcp.set_nonblocking(false).unwrap();
            let mut buf = [0u8; 256];
            let _ = tcp.read(&mut buf);
            let _ =
                tcp.write_all(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
        }
    });
    let config = LoadConfig { clients: 1, requests: Some(3), ..h2(&format!("http://{addr}/x")) };
    let report = run_load(&config).unwrap();
    done.store(true, Ordering::SeqCst);
    server.join().unwrap();
    assert_eq!((report.requests, report.failed), (0, 3), "{}", report.render_text());
    assert!(report.errors_by_kind.get(ErrorKind::Protocol) > 0, "{}", report.render_text());
    every_request_accounted(&report);
}
