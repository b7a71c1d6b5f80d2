//! Byte-exact verification end to end: a Locus node serving a directory passes; a server
//! that returns wrong bytes, wrong lengths or wrong statuses has every such response
//! counted (and `locus load` fails).

mod common;

use std::sync::Arc;
use std::time::Duration;

use clap::Parser;
use common::{Reply, ScriptedServer, SeenRequest, file_responder, write_locus_trace};
use locus_load::{
    DocumentSet, ErrorKind, LoadArgs, LoadConfig, MismatchKind, Popularity, TraceSource, Verification,
    Workload, run_load,
};
use locus_node::{NodeConfig, NodeServer};

fn docroot() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for i in 0..20u32 {
        let body: Vec<u8> = (0..(i * 997 + 13)).map(|b| (b * 31 + i) as u8).collect();
        std::fs::write(dir.path().join(format!("f{i}.bin")), body).unwrap();
    }
    std::fs::create_dir(dir.path().join("sub")).unwrap();
    std::fs::write(dir.path().join("sub/big.bin"), vec![7u8; 300_000]).unwrap();
    dir
}

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    load: LoadArgs,
}

fn cli_args(args: &[&str]) -> LoadArgs {
    Cli::try_parse_from(std::iter::once("load").chain(args.iter().copied())).unwrap().load
}

#[test]
fn byte_exact_verification_passes_on_a_locus_node() {
    let root = docroot();
    let node =
        NodeServer::start(NodeConfig { root: root.path().into(), workers: 1, ..NodeConfig::default() })
            .unwrap();
    let config = LoadConfig {
        workload: Workload::Synthetic {
            popularity: Popularity::Uniform,
            documents: DocumentSet::Docroot(root.path().into()),
        },
        verification: Verification::Root(root.path().into()),
        clients: 6,
        threads: 2,
        requests: Some(400),
        timeout: Duration::from_secs(5),
        ..LoadConfig::new(vec![format!("http://{}", node.addr()).parse().unwrap()])
    };
    let report = run_load(&config).unwrap();
    node.shutdown();
    assert_eq!((report.requests, report.errors, report.mismatches), (400, 0, 0), "{}", report.render_text());
    assert_eq!(report.verified, 400);
    assert!(report.bytes > 400 * 13);
    assert!(report.rps > 0.0 && report.p50_ms > 0.0);
}

#[test]
fn every_wrong_body_length_and_status_is_counted_and_the_cli_run_fails() {
    let root = docroot();
    let files = file_responder(root.path());
    // Right for f0..f9; wrong bytes for f10; short body (consistent length) for f11; a lying
    // Content-Length for HEAD of f12; 500 for f13; 200 for a file that does not exist.
    let responder = Arc::new(move |req: &SeenRequest| {
        let mut reply = files(req);
        match req.target.as_str() {
            "/f10.bin" => reply.body[5] ^= 0xff,
            "/f11.bin" => {
                reply.body.pop();
            }
            "/f12.bin" if req.method == "HEAD" => reply.content_length = Some(3),
            "/f13.bin" => reply = Reply::status(500),
            "/nope.bin" => reply = Reply::ok(b"surprise".to_vec()),
            _ => {}
        }
        reply
    });
    let server = ScriptedServer::start(responder, 0);
    let mut records = Vec::new();
    for round in 0..3 {
        for i in 0..10 {
            records.push((round, "GET", format!("/f{i}.bin")));
        }
        for t in ["/f10.bin", "/f11.bin", "/f13.bin", "/nope.bin"] {
            records.push((round, "GET", t.to_string()));
        }
        records.push((round, "HEAD", "/f12.bin".to_string()));
        records.push((round, "HEAD", "/f3.bin".to_string()));
        records.push((round, "GET", "/missing.bin".to_string()));
    }
    let trace = root.path().join("bad.trace");
    let refs: Vec<(u32, &str, &str)> = records.iter().map(|(c, m, t)| (*c, *m, t.as_str())).collect();
    write_locus_trace(&trace, &refs);
    let config = LoadConfig {
        workload: Workload::Trace {
            source: TraceSource::File { path: trace.clone(), format: None },
            repeat: false,
        },
        verification: Verification::Root(root.path().into()),
        clients: 3,
        threads: 1,
        timeout: Duration::from_secs(5),
        mismatch_samples: 4,
        ..LoadConfig::new(vec![server.url().parse().unwrap()])
    };
    let report = run_load(&config).unwrap();
    assert_eq!(report.requests, records.len() as u64, "{}", report.render_text());
    assert_eq!(report.verified, records.len() as u64);
    // Per round: f10 checksum, f11 length, f12 HEAD length, f13 status, nope status.
    assert_eq!(report.mismatches, 15, "{}", report.render_text());
    assert_eq!(report.mismatches_by_kind.get(MismatchKind::Checksum), 3);
    assert_eq!(report.mismatches_by_kind.get(MismatchKind::Length), 6);
    assert_eq!(report.mismatches_by_kind.get(MismatchKind::Status), 6);
    assert_eq!(report.errors_by_kind.get(ErrorKind::Status5xx), 3);
    assert_eq!(report.errors_by_kind.get(ErrorKind::Status4xx), 3, "the expected 404s");
    assert_eq!(report.mismatch_samples.len(), 4);
    let sample = &report.mismatch_samples[0];
    assert!(sample.request.contains(&server.url()) && sample.request.contains("/f1"), "{sample:?}");
    assert_ne!(sample.expected, sample.actual);
    assert!(!report.verified_ok());

    let root_arg = root.path().to_str().unwrap();
    let trace_arg = trace.to_str().unwrap();
    let url = server.url();
    let failed = locus_load::cli::run(cli_args(&[
        &url,
        "--trace",
        trace_arg,
        "--verify-root",
        root_arg,
        "-c",
        "2",
        "-t",
        "1",
    ]));
    let message = failed.expect_err("mismatches make the run fail").to_string();
    assert!(message.contains("15 of"), "{message}");
    // The same trace without the wrong targets passes.
    let good: Vec<(u32, &str, &str)> = refs
        .iter()
        .copied()
        .filter(|r| ["/f10.bin", "/f11.bin", "/f12.bin", "/f13.bin", "/nope.bin"].iter().all(|b| *b != r.2))
        .collect();
    let good_trace = root.path().join("good.trace");
    write_locus_trace(&good_trace, &good);
    let ok = locus_load::cli::run(cli_args(&[
        &url,
        "--trace",
        good_trace.to_str().unwrap(),
        "--verify-root",
        root_arg,
        "-t",
        "1",
        "--json",
    ]));
    assert!(ok.is_ok(), "{ok:?}");
}

#[test]
fn a_server_that_breaks_framing_is_counted_not_fatal() {
    // Garbage, a truncated body and a closed connection: every request is an error of a
    // kind, none is a response, and the run still ends with a report.
    let responder = Arc::new(|req: &SeenRequest| match req.target.as_str() {
        "/short" => Reply { content_length: Some(100), ..Reply::ok(b"abc".to_vec()) },
        _ => Reply::ok(Vec::new()),
    });
    let server = ScriptedServer::start(responder, 0);
    let config = LoadConfig {
        clients: 2,
        threads: 1,
        requests: Some(6),
        timeout: Duration::from_millis(400),
        ..LoadConfig::new(vec![format!("{}/short", server.url()).parse().unwrap()])
    };
    let report = run_load(&config).unwrap();
    assert_eq!(report.requests, 0);
    assert_eq!(report.errors_by_kind.get(ErrorKind::Timeout), 6, "{}", report.render_text());
    drop(server);
    // Nothing listens any more: connect errors, counted per request.
    let report = run_load(&LoadConfig { requests: Some(5), ..config }).unwrap();
    assert_eq!(report.errors_by_kind.get(ErrorKind::Connect), 5, "{}", report.render_text());
}
