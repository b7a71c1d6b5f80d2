//! Integration tests of the switch in proxy mode against scripted back-ends on loopback:
//! byte-exact relaying of large, chunked and HEAD responses and of request bodies, pipelining,
//! strict parsing (nothing malformed reaches a node), limits, retries and failover, the
//! admission queue, graceful shutdown, the access log and the admin listener.

mod common;

use common::*;
use locus_policy::PolicyConfig;
use locus_switch::{Mode, SwitchConfig, SwitchServer};
use locus_test_support::{Client, get};
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// A proxy-mode switch before `backends`, with an admin listener.
fn config(backends: &[SocketAddr], policy: &str) -> SwitchConfig {
    SwitchConfig {
        admin: Some("127.0.0.1:0".parse().unwrap()),
        ..switch_config(Mode::Proxy, backends, policy)
    }
}

/// A back-end that answers every request with its own name and the target it saw.
fn echo_backend(name: &'static str) -> ScriptedBackend {
    ScriptedBackend::start(move |r| {
        Action::Reply(ok_response(
            format!("{name} {}", r.target).as_bytes(),
            &format!("X-Served-By: {name}\r\n"),
        ))
    })
}

#[test]
fn large_chunked_and_head_responses_relay_byte_exact() {
    let big = Arc::new(pattern(5 << 20, 7));
    let parts: Vec<Vec<u8>> = (0..50).map(|i| pattern(1000 + i * 977, i as u64)).collect();
    let expect_chunked: Vec<u8> = parts.concat();
    let backend = {
        let big = big.clone();
        let parts = parts.clone();
        ScriptedBackend::start(move |r| match r.target.as_str() {
            "/big" => Action::Reply(ok_response(&big, "")),
            "/chunked" => {
                let refs: Vec<&[u8]> = parts.iter().map(|p| p.as_slice()).collect();
                Action::Reply(chunked_response(&refs))
            }
            _ => Action::Reply(ok_response(b"x", "")),
        })
    };
    let sw = SwitchServer::start(config(&[backend.addr], "rr")).unwrap();
    let mut c = Client::connect(sw.addr());
    let r = c.get("/big");
    assert_eq!(r.status, 200);
    assert!(r.body == *big, "5 MiB body differs");
    let r = c.get("/chunked");
    assert_eq!(r.header("transfer-encoding"), Some("chunked"));
    assert_eq!(r.body, expect_chunked);
    c.send(b"HEAD /big HTTP/1.1\r\nHost: t\r\n\r\n");
    let r = c.read_response(true).unwrap();
    assert_eq!((r.status, r.body.len()), (200, 0));
    assert_eq!(r.header("content-length"), Some("5242880"));
    // The connection is still usable after all of that.
    assert_eq!(c.get("/small").body, b"x");

    // An HTTP/1.0 client gets the chunked body decoded, delimited by close.
    let mut c = Client::connect(sw.addr());
    c.send(b"GET /chunked HTTP/1.0\r\n\r\n");
    let r = c.read_response(false).unwrap();
    assert_eq!(r.header("transfer-encoding"), None);
    assert_eq!(r.header("connection"), Some("close"));
    assert_eq!(r.body, expect_chunked);
    sw.shutdown();
}

#[test]
fn a_post_never_goes_out_on_a_pooled_connection_with_stray_bytes_after_a_spliced_body() {
    // A broken node writes four bytes past each large response. The switch splices the body
    // (it is past the first read) and pools the connection; a POST must not be sent on it.
    let big = Arc::new(pattern(4 << 20, 11));
    let backend = {
        let big = big.clone();
        ScriptedBackend::start(move |r| match r.method.as_str() {
            "GET" => {
                let mut bytes = ok_response(&big, "");
                bytes.extend_from_slice(b"JUNK");
                Action::Reply(bytes)
            }
            _ => Action::Reply(ok_response(b"posted", "")),
        })
    };
    let sw = SwitchServer::start(config(&[backend.addr], "rr")).unwrap();
    let mut c = Client::connect(sw.addr());
    let r = c.get("/big");
    assert!(r.status == 200 && r.body == *big, "4 MiB body differs");
    // The reply (and its stray bytes) written whole is, on loopback, in the switch's socket.
    let deadline = Instant::now() + Duration::from_secs(10);
    while backend.replies.load(Ordering::Relaxed) < 1 {
        assert!(Instant::now() < deadline, "the back-end never finished writing its reply");
        std::thread::sleep(Duration::from_millis(1));
    }
    c.send(b"POST /p HTTP/1.1\r\nHost: t\r\nContent-Length: 2\r\n\r\nhi");
    let r = c.read_response(false).unwrap();
    assert_eq!((r.status, r.body.as_slice()), (200, &b"posted"[..]), "the POST met the stray bytes");
    sw.shutdown();
}

#[test]
fn pipelined_requests_are_answered_in_order_across_nodes() {
    let a = echo_backend("a");
    let b = echo_backend("b");
    let sw = SwitchServer::start(config(&[a.addr, b.addr], "rr")).unwrap();
    let mut c = Client::connect(sw.addr());
    let paths: Vec<String> = (0..8).map(|i| format!("/p{i}")).collect();
    let batch: String = paths.iter().map(|p| format!("GET {p} HTTP/1.1\r\nHost: t\r\n\r\n")).collect();
    c.send(batch.as_bytes());
    let mut servers = Vec::new();
    for p in &paths {
        let r = c.read_response(false).expect("pipelined response");
        let body = String::from_utf8(r.body.clone()).unwrap();
        assert!(body.ends_with(&format!(" {p}")), "expected the answer to {p}, got {body}");
        servers.push(r.header("x-served-by").unwrap().to_string());
    }
    assert!(servers.contains(&"a".to_string()) && servers.contains(&"b".to_string()), "{servers:?}");
    sw.shutdown();
}

#[test]
fn smuggling_attempts_get_400_close_and_never_reach_a_node() {
    let backend = echo_backend("a");
    let sw = SwitchServer::start(config(&[backend.addr], "rr")).unwrap();
    let attacks: &[&[u8]] = &[
        b"POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        b"POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!",
        b"POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\nhello",
        b"POST / HTTP/1.1\r\nHost: t\r\nContent-Length: +5\r\n\r\nhello",
        b"POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked, identity\r\n\r\n",
        b"POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: xchunked\r\n\r\n",
        b"POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding:\tchunked\r\nTransfer-Encoding: gzip\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost: t\r\nX-Fold: a\r\n b\r\n\r\n",
        b"GET / HTTP/1.1\nHost: t\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost: t\rX: y\r\n\r\n",
        b"GET / HTTP/1.1\r\nHo st: t\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost : t\r\n\r\n",
        b"GET /a b HTTP/1.1\r\nHost: t\r\n\r\n",
        b"GET a HTTP/1.1\r\nHost: t\r\n\r\n",
        b"GET / HTTP/1.1\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
    ];
    for raw in attacks {
        let mut c = Client::connect(sw.addr());
        c.send(raw);
        let r = c
            .read_response(false)
            .unwrap_or_else(|| panic!("no answer to {:?}", String::from_utf8_lossy(raw)));
        assert_eq!(r.status, 400, "{:?}", String::from_utf8_lossy(raw));
        assert_eq!(r.header("connection"), Some("close"));
        assert!(
            c.closed_or_silent(CLOSE_WAIT),
            "connection left open after {:?}",
            String::from_utf8_lossy(raw)
        );
    }
    // A smuggled second request after a bad one on the same connection never gets through.
    let mut c = Client::connect(sw.addr());
    c.send(b"POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\nTransfer-Encoding: chunked\r\n\r\nGET /admin HTTP/1.1\r\nHost: t\r\n\r\n");
    assert_eq!(c.read_response(false).unwrap().status, 400);
    assert!(c.closed_or_silent(CLOSE_WAIT));
    assert_eq!(backend.requests(), 0, "a malformed request reached the node");
    sw.shutdown();
}

#[test]
fn oversized_heads_get_431_and_slow_heads_get_408() {
    let backend = echo_backend("a");
    let mut cfg = config(&[backend.addr], "rr");
    cfg.limits.header_timeout_ms = 300;
    let sw = SwitchServer::start(cfg).unwrap();
    let mut c = Client::connect(sw.addr());
    let big = "x".repeat(20_000);
    c.send(format!("GET / HTTP/1.1\r\nHost: t\r\nX-Big: {big}\r\n\r\n").as_bytes());
    assert_eq!(c.read_response(false).unwrap().status, 431);
    assert!(c.closed_or_silent(CLOSE_WAIT));
    let mut c = Client::connect(sw.addr());
    c.send(b"GET / HTTP/1.1\r\nHost: t\r\n");
    let r = c.read_response(false).expect("408 after the header timeout");
    assert_eq!(r.status, 408);
    assert!(c.closed_or_silent(CLOSE_WAIT));
    assert_eq!(backend.requests(), 0);
    sw.shutdown();
}

#[test]
fn connections_over_the_limit_are_refused_with_503_and_others_keep_working() {
    let backend = echo_backend("a");
    let mut cfg = config(&[backend.addr], "rr");
    cfg.limits.max_connections = 2;
    let sw = SwitchServer::start(cfg).unwrap();
    let mut c1 = Client::connect(sw.addr());
    let mut c2 = Client::connect(sw.addr());
    assert_eq!(c1.get("/1").status, 200);
    assert_eq!(c2.get("/2").status, 200);
    let mut c3 = Client::connect(sw.addr());
    let r = c3.read_response(false).expect("a 503 for the connection over the limit");
    assert_eq!(r.status, 503);
    assert!(c3.closed_or_silent(CLOSE_WAIT));
    drop(c1);
    assert!(wait_until(Duration::from_secs(2), || sw.connections() < 2));
    assert_eq!(get(sw.addr(), "/4").status, 200);
    assert_eq!(c2.get("/5").status, 200);
    sw.shutdown();
}

#[test]
fn request_bodies_stream_to_the_node_byte_exact() {
    let backend = ScriptedBackend::start(|r| {
        let sum: u64 = r.body.iter().map(|&b| b as u64).sum();
        Action::Reply(ok_response(format!("{} {}", r.body.len(), sum).as_bytes(), ""))
    });
    let sw = SwitchServer::start(config(&[backend.addr], "rr")).unwrap();
    let body = pattern(3 << 20, 3);
    let sum: u64 = body.iter().map(|&b| b as u64).sum();
    let mut c = Client::connect(sw.addr());
    c.send(format!("POST /up HTTP/1.1\r\nHost: t\r\nContent-Length: {}\r\n\r\n", body.len()).as_bytes());
    c.send(&body);
    assert_eq!(c.read_response(false).unwrap().body, format!("{} {sum}", body.len()).into_bytes());
    // Chunked, in uneven chunks, with Expect: 100-continue.
    c.send(b"PUT /up HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\nExpect: 100-continue\r\n\r\n");
    let mut sent = 0;
    for (i, chunk) in body.chunks(70_001).enumerate() {
        c.send(format!("{:x};i={i}\r\n", chunk.len()).as_bytes());
        c.send(chunk);
        c.send(b"\r\n");
        sent += chunk.len();
    }
    c.send(b"0\r\nX-Trailer: t\r\n\r\n");
    assert_eq!(c.read_response(false).unwrap().body, format!("{sent} {sum}").into_bytes());
    // A broken chunk size ends the connection with 400.
    c.send(b"POST /up HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n");
    assert_eq!(c.read_response(false).unwrap().status, 400);
    assert!(c.closed_or_silent(CLOSE_WAIT));
    sw.shutdown();
}

#[test]
fn idempotent_request_is_retried_once_on_another_node_and_post_is_not() {
    let broken = ScriptedBackend::start(|_| Action::Close);
    let good = echo_backend("good");
    let mut cfg = config(&[broken.addr, good.addr], "rr");
    cfg.health.passive = false; // keep the broken node in the view so every other request hits it
    cfg.health.interval_ms = 60_000;
    let sw = SwitchServer::start(cfg).unwrap();
    let mut c = Client::connect(sw.addr());
    for i in 0..6 {
        let r = c.get(&format!("/g{i}"));
        assert_eq!(r.status, 200, "GET {i} not retried");
        assert_eq!(r.header("x-served-by"), Some("good"));
    }
    let status = sw.status();
    assert!(status["retries"].as_u64().unwrap() >= 3, "{status}");
    let mut statuses = Vec::new();
    for i in 0..4 {
        let mut c = Client::connect(sw.addr());
        c.send(format!("POST /p{i} HTTP/1.1\r\nHost: t\r\nContent-Length: 2\r\n\r\nhi").as_bytes());
        statuses.push(c.read_response(false).unwrap().status);
    }
    assert!(statuses.contains(&502), "a POST to the broken node must fail, not be resent: {statuses:?}");
    assert!(statuses.contains(&200), "{statuses:?}");
    sw.shutdown();
}

#[test]
fn the_policy_is_asked_once_per_request() {
    let backend = echo_backend("a");
    let sw = SwitchServer::start(config(&[backend.addr], "lard")).unwrap();
    let mut c = Client::connect(sw.addr());
    for i in 0..4 {
        assert_eq!(c.get(&format!("/k{i}")).status, 200);
    }
    c.send(b"GET /p1 HTTP/1.1\r\nHost: t\r\n\r\nGET /p2 HTTP/1.1\r\nHost: t\r\n\r\n");
    for _ in 0..2 {
        assert_eq!(c.read_response(false).unwrap().status, 200);
    }
    assert_eq!(get(sw.addr(), "/other").status, 200);
    let status = sw.status();
    assert_eq!(
        (status["requests"].as_u64(), status["policy_assignments"].as_u64()),
        (Some(7), Some(7)),
        "{status}"
    );
    sw.shutdown();
}

#[test]
fn a_failed_node_leaves_the_view_within_a_second_and_comes_back_with_slow_start() {
    let a = echo_backend("a");
    let b = echo_backend("b");
    let a_addr = a.addr;
    let cfg = config(&[a.addr, b.addr], "lard");
    let sw = SwitchServer::start(cfg).unwrap();
    // LARD puts /x on one node; find it.
    let first = get(sw.addr(), "/x").header("x-served-by").unwrap().to_string();
    for _ in 0..5 {
        assert_eq!(get(sw.addr(), "/x").header("x-served-by").unwrap(), first);
    }
    let (victim, victim_name, other) = if first == "a" { (a, "n0", "b") } else { (b, "n1", "a") };
    let victim_addr = victim.addr;
    drop(victim);
    // With default health settings and no traffic, active checks alone take it out: `fall`
    // failed checks, at least an interval apart (so not sooner than about one interval; how
    // soon at most is the machine's load, not the switch's, so only a liveness limit here).
    let health = locus_switch::HealthConfig::default();
    let t0 = std::time::Instant::now();
    assert!(wait_until(Duration::from_secs(10), || sw.node_is_up(victim_name) == Some(false)));
    let took = t0.elapsed();
    let floor = Duration::from_millis(health.interval_ms * u64::from(health.fall - 1) / 2);
    assert!(took >= floor, "node left the view after {took:?}, before {} failed checks", health.fall);
    // Its LARD targets move to the surviving node.
    for _ in 0..3 {
        let r = get(sw.addr(), "/x");
        assert_eq!((r.status, r.header("x-served-by").unwrap()), (200, other));
    }
    // Back on the same port: it rejoins, ramping up.
    let name = if victim_addr == a_addr { "a" } else { "b" };
    let _back = ScriptedBackend::start_on(victim_addr, move |r| {
        Action::Reply(ok_response(r.target.as_bytes(), &format!("X-Served-By: {name}\r\n")))
    });
    assert!(wait_until(Duration::from_secs(3), || sw.node_is_up(victim_name) == Some(true)));
    let status = sw.status();
    let ramp = status["nodes"].as_array().unwrap().iter().find(|n| n["name"] == victim_name).unwrap()["ramp"]
        .as_f64()
        .unwrap();
    assert!(ramp < 1.0, "a recovered node starts below full weight: {status}");
    sw.shutdown();
}

#[test]
fn connection_failure_takes_a_node_out_at_once_and_the_request_still_succeeds() {
    // Reserve a port nothing listens on.
    let dead: SocketAddr = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    let good = echo_backend("good");
    let mut cfg = config(&[dead, good.addr], "hash");
    cfg.health.interval_ms = 60_000; // only passive detection can act within this test
    let sw = SwitchServer::start(cfg).unwrap();
    for i in 0..20 {
        let r = get(sw.addr(), &format!("/t{i}"));
        assert_eq!(r.status, 200);
    }
    assert_eq!(sw.node_is_up("n0"), Some(false));
    sw.shutdown();
}

#[test]
fn no_node_up_gets_503_and_the_connection_stays_usable() {
    let dead: SocketAddr = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    let mut cfg = config(&[dead], "rr");
    cfg.health.interval_ms = 50;
    cfg.health.timeout_ms = 50;
    let sw = SwitchServer::start(cfg).unwrap();
    assert!(wait_until(Duration::from_secs(2), || sw.node_is_up("n0") == Some(false)));
    let mut c = Client::connect(sw.addr());
    assert_eq!(c.get("/a").status, 503);
    assert_eq!(c.get("/b").status, 503);
    sw.shutdown();
}

#[test]
fn admission_limit_queues_requests_so_the_cluster_never_exceeds_it() {
    let in_flight = Arc::new(AtomicUsize::new(0));
    let peak = Arc::new(AtomicUsize::new(0));
    let backend = {
        let (in_flight, peak) = (in_flight.clone(), peak.clone());
        ScriptedBackend::start(move |r| {
            if !r.target.starts_with("/q") {
                return Action::Reply(ok_response(b"health", ""));
            }
            let now = in_flight.fetch_add(1, Ordering::SeqCst) + 1;
            peak.fetch_max(now, Ordering::SeqCst);
            std::thread::sleep(Duration::from_millis(100));
            in_flight.fetch_sub(1, Ordering::SeqCst);
            Action::Reply(ok_response(b"ok", ""))
        })
    };
    let mut cfg = config(&[backend.addr], "lard-r");
    cfg.policy = PolicyConfig::LardR {
        t_low: 25,
        t_high: 65,
        k_secs: 20.0,
        admission_limit: Some(2),
        max_targets: 1000,
    };
    let sw = Arc::new(SwitchServer::start(cfg).unwrap());
    let addr = sw.addr();
    let clients: Vec<_> =
        (0..6).map(|i| std::thread::spawn(move || get(addr, &format!("/q{i}")).status)).collect();
    let saw_queue = wait_until(Duration::from_secs(2), || sw.status()["queued"].as_u64().unwrap_or(0) > 0);
    let statuses: Vec<u16> = clients.into_iter().map(|t| t.join().unwrap()).collect();
    assert!(statuses.iter().all(|&s| s == 200), "{statuses:?}");
    assert!(saw_queue, "requests over the limit should have waited in the queue");
    assert_eq!(peak.load(Ordering::SeqCst), 2, "the node saw more requests at once than the limit");
    let status = sw.status();
    assert_eq!(status["policy_assignments"], 6, "a queued request is dispatched once: {status}");
    Arc::try_unwrap(sw).ok().unwrap().shutdown();
}

#[test]
fn graceful_shutdown_finishes_in_flight_requests_and_stops_accepting() {
    let backend =
        ScriptedBackend::start(|_| Action::Delay(Duration::from_millis(400), ok_response(b"done", "")));
    let sw = SwitchServer::start(config(&[backend.addr], "rr")).unwrap();
    let addr = sw.addr();
    let idle = Client::connect(addr);
    let inflight = std::thread::spawn(move || get(addr, "/slow"));
    // The request is in flight once the node has it (counted before the node's delay).
    assert!(wait_until(Duration::from_secs(5), || backend.requests() >= 1));
    let t0 = std::time::Instant::now();
    sw.shutdown();
    // Shutdown waits for the in-flight request only, not for idle connections to time out.
    assert!(t0.elapsed() < Duration::from_secs(30), "shutdown waited for the drain timeout");
    let r = inflight.join().unwrap();
    assert_eq!((r.status, r.body.as_slice()), (200, &b"done"[..]));
    let mut idle = idle;
    assert!(idle.closed_or_silent(CLOSE_WAIT), "idle keep-alive connections are closed on shutdown");
    assert!(std::net::TcpStream::connect(addr).is_err(), "still accepting after shutdown");
}

#[test]
fn access_log_records_combined_log_format_lines() {
    let backend = echo_backend("a");
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("access.log");
    let mut cfg = config(&[backend.addr], "rr");
    cfg.access_log = Some(log.clone());
    let sw = SwitchServer::start(cfg).unwrap();
    let mut c = Client::connect(sw.addr());
    c.send(b"GET /logged?q=1 HTTP/1.1\r\nHost: t\r\nReferer: http://ref/\r\nUser-Agent: tester/1\r\n\r\n");
    c.read_response(false).unwrap();
    drop(c);
    sw.shutdown();
    let text = std::fs::read_to_string(&log).unwrap();
    let line = text.lines().next().expect("a log line");
    assert!(line.starts_with("127.0.0.1 - - ["), "{line}");
    assert!(line.ends_with("\"GET /logged?q=1 HTTP/1.1\" 200 13 \"http://ref/\" \"tester/1\""), "{line}");
}

#[test]
fn admin_serves_status_json_and_prometheus_metrics() {
    let backend = echo_backend("a");
    let sw = SwitchServer::start(config(&[backend.addr], "lard-r")).unwrap();
    assert_eq!(get(sw.addr(), "/m").status, 200);
    let admin = sw.admin_addr().unwrap();
    let status = get(admin, "/locus/status");
    assert_eq!(status.header("content-type"), Some("application/json"));
    let v: serde_json::Value = serde_json::from_slice(&status.body).unwrap();
    assert_eq!(v["policy"], "lard-r");
    assert_eq!(v["nodes"][0]["requests"], 1);
    assert_eq!(v["admission_limit"], 24, "S = (n-1)*T_high + T_low - 1 for one node");
    let metrics = String::from_utf8(get(admin, "/metrics").body).unwrap();
    assert!(metrics.contains("locus_switch_node_requests_total{node=\"n0\"} 1"), "{metrics}");
    assert!(metrics.contains("locus_switch_responses_total{class=\"2xx\"} 1"), "{metrics}");
    assert!(metrics.contains("# EOF"));
    assert_eq!(get(admin, "/nope").status, 404);
    sw.shutdown();
}

#[test]
fn http10_clients_get_keep_alive_only_when_they_ask() {
    let backend = echo_backend("a");
    let sw = SwitchServer::start(config(&[backend.addr], "rr")).unwrap();
    let mut c = Client::connect(sw.addr());
    c.send(b"GET /k HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
    let r = c.read_response(false).unwrap();
    assert_eq!(r.header("connection"), Some("keep-alive"));
    c.send(b"GET /k2 HTTP/1.0\r\n\r\n");
    let r = c.read_response(false).unwrap();
    assert_eq!(r.header("connection"), Some("close"));
    assert!(c.closed_or_silent(CLOSE_WAIT));
    sw.shutdown();
}
