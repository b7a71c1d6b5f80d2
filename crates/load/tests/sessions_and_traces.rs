//! Sessions and trace replay, observed by the server: a page's embedded objects follow it on
//! the same connection; a trace is replayed exactly, each client's requests in order on one
//! connection; CLF and WC98 logs are read through locus-trace.

mod common;

use std::collections::HashMap;
use std::time::Duration;

use common::{ScriptedServer, file_responder, write_locus_trace};
use locus_load::{DocumentSet, LoadConfig, Popularity, TraceSource, Verification, Workload, run_load};
use locus_trace::{SiteFileKind, SiteGenerator, SiteSpec, Wc98Record};

fn trace_workload(path: &std::path::Path) -> Workload {
    Workload::Trace { source: TraceSource::File { path: path.into(), format: None }, repeat: false }
}

#[test]
fn sessions_fetch_embeds_after_their_page_on_the_same_connection() {
    let dir = tempfile::tempdir().unwrap();
    let spec = SiteSpec { files: 80, embeds_per_page: 3, ..SiteSpec::default() };
    let manifest = SiteGenerator::new(spec).unwrap().write(dir.path(), false, &mut |_, _| {}).unwrap();
    // The server logs what it read before each answer: a page must have been answered
    // alone, before its embeds (pipelined together) were sent.
    let server = ScriptedServer::start(file_responder(dir.path()), 0);
    let config = LoadConfig {
        workload: Workload::Synthetic {
            popularity: Popularity::Zipf { alpha: 0.8 },
            documents: DocumentSet::Manifest(dir.path().into()),
        },
        verification: Verification::Manifest(dir.path().into()),
        sessions: true,
        pipeline: 4,
        clients: 3,
        threads: 1,
        requests: Some(300),
        timeout: Duration::from_secs(5),
        ..LoadConfig::new(vec![server.url().parse().unwrap()])
    };
    let report = run_load(&config).unwrap();
    assert_eq!((report.requests, report.errors, report.mismatches), (300, 0, 0), "{}", report.render_text());
    let pages = manifest.files.iter().filter(|f| f.kind == SiteFileKind::Page).count();
    let mut sessions = 0;
    for conn in server.connections() {
        let targets: Vec<&str> = conn.requests.iter().map(|r| r.target.as_str()).collect();
        let mut i = 0;
        let mut batch_of = Vec::new();
        for (b, &n) in conn.batches.iter().enumerate() {
            batch_of.extend(std::iter::repeat_n(b, n));
        }
        while i < targets.len() {
            let page = manifest.file(targets[i]).unwrap();
            assert_eq!(page.kind, SiteFileKind::Page, "a session starts with a page: {targets:?}");
            let n = page.embeds.len().min(targets.len() - i - 1);
            assert_eq!(targets[i + 1..i + 1 + n], page.embeds[..n], "embeds in order after {}", page.target);
            if n > 0 {
                assert_ne!(batch_of[i], batch_of[i + 1], "the page was answered before its embeds were sent");
            }
            i += 1 + n;
            sessions += 1;
        }
    }
    assert!(sessions > 20 && pages > 10, "{sessions} sessions over {pages} pages");
}

#[test]
fn trace_replay_sends_exactly_the_traces_targets_in_order_per_client() {
    let dir = tempfile::tempdir().unwrap();
    let server = ScriptedServer::start(file_responder(dir.path()), 0);
    // Six clients, interleaved, with a HEAD and a query among them.
    let mut records = Vec::new();
    for step in 0..8 {
        for client in 0..6u32 {
            let method = if (client + step) % 7 == 0 { "HEAD" } else { "GET" };
            records.push((client, method, format!("/c{client}/r{step}?q={}", client * 10 + step)));
        }
    }
    let refs: Vec<(u32, &str, &str)> = records.iter().map(|(c, m, t)| (*c, *m, t.as_str())).collect();
    let trace = dir.path().join("t.trace");
    write_locus_trace(&trace, &refs);
    let config = LoadConfig {
        workload: trace_workload(&trace),
        sessions: true,
        clients: 4,
        threads: 2,
        timeout: Duration::from_secs(5),
        ..LoadConfig::new(vec![server.url().parse().unwrap()])
    };
    let report = run_load(&config).unwrap();
    assert_eq!(report.requests, records.len() as u64, "{}", report.render_text());
    // Each client's requests: contiguous, in trace order, on one connection.
    let mut seen_clients = 0;
    for conn in server.connections() {
        let seq: Vec<(String, String)> =
            conn.requests.iter().map(|r| (r.method.clone(), r.target.clone())).collect();
        for chunk in seq.chunks(8) {
            let client: u32 = chunk[0].1[2..].split('/').next().unwrap().parse().unwrap();
            let expected: Vec<(String, String)> = records
                .iter()
                .filter(|r| r.0 == client)
                .map(|(_, m, t)| (m.to_string(), t.clone()))
                .collect();
            assert_eq!(chunk, &expected[..], "client {client}");
            seen_clients += 1;
        }
    }
    assert_eq!(seen_clients, 6);

    // Without sessions and with one client: exactly the trace order.
    let server = ScriptedServer::start(file_responder(dir.path()), 0);
    let report = run_load(&LoadConfig {
        sessions: false,
        clients: 1,
        threads: 1,
        ..config.clone().with_target(&server)
    })
    .unwrap();
    assert_eq!(report.requests, records.len() as u64);
    let seen: Vec<(String, String)> =
        server.all_requests().into_iter().map(|r| (r.method, r.target)).collect();
    let expected: Vec<(String, String)> =
        records.iter().map(|(_, m, t)| (m.to_string(), t.clone())).collect();
    assert_eq!(seen, expected);

    // With several clients the whole trace is sent once, each record exactly once.
    let server = ScriptedServer::start(file_responder(dir.path()), 0);
    run_load(&LoadConfig { sessions: false, clients: 5, threads: 2, ..config.with_target(&server) }).unwrap();
    let mut seen: Vec<(String, String)> =
        server.all_requests().into_iter().map(|r| (r.method, r.target)).collect();
    let mut expected = expected;
    seen.sort();
    expected.sort();
    assert_eq!(seen, expected);
}

#[test]
fn clf_and_wc98_logs_are_replayed_through_locus_trace() {
    let dir = tempfile::tempdir().unwrap();
    let server = ScriptedServer::start(file_responder(dir.path()), 0);
    let clf = dir.path().join("access.log");
    std::fs::write(
        &clf,
        "1.2.3.4 - - [10/Oct/2000:13:55:36 -0700] \"GET /a.html HTTP/1.0\" 200 10\n\
         1.2.3.5 - - [10/Oct/2000:13:55:37 -0700] \"GET /b.gif HTTP/1.0\" 200 20 \"-\" \"agent\"\n\
         1.2.3.4 - - [10/Oct/2000:13:55:38 -0700] \"HEAD /c%20d.html HTTP/1.0\" 404 0\n",
    )
    .unwrap();
    let config = LoadConfig {
        workload: trace_workload(&clf),
        clients: 1,
        threads: 1,
        timeout: Duration::from_secs(5),
        ..LoadConfig::new(vec![server.url().parse().unwrap()])
    };
    assert_eq!(run_load(&config).unwrap().requests, 3);
    let seen: Vec<(String, String)> =
        server.all_requests().into_iter().map(|r| (r.method, r.target)).collect();
    assert_eq!(
        seen,
        [
            ("GET".into(), "/a.html".into()),
            ("GET".into(), "/b.gif".into()),
            ("HEAD".into(), "/c%20d.html".into())
        ]
    );

    let wc98 = dir.path().join("wc_day1.bin");
    let mut bytes = Vec::new();
    for (i, object) in [5u32, 9, 5, 12].iter().enumerate() {
        let r = Wc98Record {
            timestamp: 897_000_000 + i as u32,
            client_id: i as u32 % 2,
            object_id: *object,
            size: 100,
            method: 0,
            status: 0x42,
            file_type: 1,
            server: 0,
        };
        bytes.extend_from_slice(&r.to_bytes());
    }
    std::fs::write(&wc98, bytes).unwrap();
    let server = ScriptedServer::start(file_responder(dir.path()), 0);
    let config = LoadConfig { workload: trace_workload(&wc98), ..config.with_target(&server) };
    assert_eq!(run_load(&config).unwrap().requests, 4);
    let targets: Vec<String> = server.all_requests().into_iter().map(|r| r.target).collect();
    assert_eq!(targets.len(), 4);
    assert_eq!(targets[0], targets[2], "the same object twice");
    let distinct: HashMap<&String, ()> = targets.iter().map(|t| (t, ())).collect();
    assert_eq!(distinct.len(), 3);
}

trait WithTarget {
    fn with_target(self, server: &ScriptedServer) -> Self;
}

impl WithTarget for LoadConfig {
    fn with_target(self, server: &ScriptedServer) -> LoadConfig {
        LoadConfig { targets: vec![server.url().parse().unwrap()], ..self }
    }
}
