//! HTTP/2 to clients: h2c with prior knowledge and h2 over TLS (ALPN); every stream of one
//! connection dispatched on its own; bodies streamed both ways under flow control with their
//! trailers; malformed requests reset and never forwarded; GOAWAY at shutdown with the stream
//! in flight finished; one-way modes serving HTTP/2 two-way and counting it; HTTP/2 off when
//! configured so. The floods are in `http2_floods.rs`.

mod common;

use bytes::Bytes;
use common::h2_raw::{self, RawH2};
use common::{
    Action, ScriptedBackend, chunked_response, ok_response, one_node_config, pattern, switch_config,
};
use h2::client::SendRequest;
use http::HeaderMap;
use locus_switch::{Mode, SwitchServer};
use locus_test_support::{Client, client_config, write_pair};
use std::net::SocketAddr;
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(5);

/// A back-end answering every request with `len` patterned bytes (seeded by the path's
/// length) and its name.
fn backend(name: &'static str, len: usize) -> ScriptedBackend {
    ScriptedBackend::start(move |r| {
        let extra =
            format!("X-Node: {name}\r\nX-Saw-Proto: {}\r\n", r.header("x-forwarded-proto").unwrap_or("-"));
        Action::Reply(ok_response(&pattern(len, r.target.len() as u64), &extra))
    })
}

/// An HTTP/2 connection on `io`, its driver spawned.
async fn handshake<T>(io: T) -> SendRequest<Bytes>
where
    T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (send, conn) = h2::client::handshake(io).await.expect("HTTP/2 handshake");
    tokio::spawn(async move {
        let _ = conn.await;
    });
    send
}

async fn h2c(addr: SocketAddr) -> SendRequest<Bytes> {
    handshake(tokio::net::TcpStream::connect(addr).await.unwrap()).await
}

/// A response read whole: head, body, trailers.
struct Got {
    status: u16,
    headers: HeaderMap,
    body: Vec<u8>,
    trailers: Option<HeaderMap>,
}

/// Send `req` with `body` (and `trailers`) and read the response whole.
async fn exchange(
    send: &SendRequest<Bytes>,
    req: http::Request<()>,
    body: Option<Vec<u8>>,
    trailers: Option<HeaderMap>,
) -> Result<Got, h2::Error> {
    let mut send = send.clone().ready().await?;
    let end = body.is_none() && trailers.is_none();
    let (resp, mut stream) = send.send_request(req, end)?;
    if let Some(b) = body {
        stream.send_data(Bytes::from(b), trailers.is_none())?;
    }
    if let Some(t) = trailers {
        stream.send_trailers(t)?;
    }
    let (parts, mut recv) = resp.await?.into_parts();
    let mut out = Vec::new();
    while let Some(d) = recv.data().await {
        let d = d?;
        let _ = recv.flow_control().release_capacity(d.len());
        out.extend_from_slice(&d);
    }
    let trailers = recv.trailers().await?;
    Ok(Got { status: parts.status.as_u16(), headers: parts.headers, body: out, trailers })
}

async fn get(send: &SendRequest<Bytes>, path: &str) -> Got {
    let req = http::Request::get(format!("http://localhost{path}")).body(()).unwrap();
    exchange(send, req, None, None).await.expect("a response")
}

/// Shut the switch down off the runtime (it joins its threads).
async fn shut(switch: SwitchServer) {
    tokio::task::spawn_blocking(move || switch.shutdown()).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_stream_of_one_h2c_connection_is_dispatched_on_its_own_byte_for_byte() {
    let (a, b) = (backend("n0", 200_000), backend("n1", 200_000));
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("access.log");
    let mut config = switch_config(Mode::Proxy, &[a.addr, b.addr], "rr");
    config.access_log = Some(log.clone());
    config.admin = Some("127.0.0.1:0".parse().unwrap());
    let switch = SwitchServer::start(config).unwrap();
    let send = h2c(switch.addr()).await;
    let mut tasks = Vec::new();
    for i in 0..10 {
        let send = send.clone();
        tasks.push(tokio::spawn(async move { (i, get(&send, &format!("/doc{i}")).await) }));
    }
    let mut nodes = std::collections::BTreeMap::new();
    for t in tasks {
        let (i, got) = t.await.unwrap();
        assert_eq!(got.status, 200);
        let path_len = format!("/doc{i}").len() as u64;
        assert!(got.body == pattern(200_000, path_len), "stream {i}: its 200 kB, byte for byte");
        assert_eq!(got.headers["x-saw-proto"], "http");
        assert!(!got.headers.contains_key("connection"));
        *nodes.entry(got.headers["x-node"].to_str().unwrap().to_string()).or_insert(0) += 1;
    }
    assert_eq!(nodes.len(), 2, "both nodes served streams of the one connection: {nodes:?}");
    let s = switch.status();
    assert_eq!(s["http2"]["connections"], 1, "{}", s["http2"]);
    assert_eq!(s["http2"]["streams"], 10);
    assert_eq!(s["requests"], 10);
    let admin = switch.admin_addr().unwrap();
    let metrics =
        tokio::task::spawn_blocking(move || locus_test_support::get(admin, "/metrics")).await.unwrap();
    let metrics = String::from_utf8(metrics.body).unwrap();
    assert!(metrics.contains("locus_switch_h2_streams_total 10"), "{metrics}");
    assert!(metrics.contains("locus_switch_h2_connections_total 1"), "{metrics}");
    drop(send);
    shut(switch).await;
    // A line per stream, flushed at shutdown.
    let text = std::fs::read_to_string(&log).unwrap();
    assert_eq!(text.lines().count(), 10, "{text}");
    assert!(
        text.lines().all(|l| l.contains("\"GET /doc") && l.contains(" HTTP/2.0\" 200 200000 ")),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn h2_over_tls_is_agreed_by_alpn_and_http1_clients_still_get_http1() {
    let a = backend("n0", 70_000);
    let dir = tempfile::tempdir().unwrap();
    let (crt, key, pem) = write_pair(dir.path(), "switch", &["localhost"], (2020, 2090));
    let mut config = switch_config(Mode::Proxy, &[a.addr], "rr");
    config.listen_tls = Some("127.0.0.1:0".parse().unwrap());
    config.tls = Some(locus_tls::TlsSettings::single(crt, key));
    let switch = SwitchServer::start(config).unwrap();
    let tls_addr = switch.tls_addr().unwrap();
    let mut h2_config = (*client_config(&pem)).clone();
    h2_config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    let tcp = tokio::net::TcpStream::connect(tls_addr).await.unwrap();
    let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
    let deadline = tokio::time::Instant::now() + WAIT;
    let tls = locus_tls::connect(tcp, std::sync::Arc::new(h2_config), name, deadline).await.unwrap();
    assert_eq!(tls.alpn(), Some(&b"h2"[..]), "the switch agreed on h2");
    let send = handshake(tls).await;
    for i in 0..3 {
        let got = get(&send, &format!("/t{i}")).await;
        assert_eq!(got.status, 200);
        assert!(got.body == pattern(70_000, 3), "a body over the first window, byte for byte");
        assert_eq!(got.headers["x-saw-proto"], "https");
    }
    // A client offering only http/1.1 is served HTTP/1.1 on the same listener.
    let r = tokio::task::spawn_blocking(move || {
        Client::connect_tls(tls_addr, client_config(&pem), "localhost").get("/plain")
    })
    .await
    .unwrap();
    assert_eq!(r.status, 200);
    let s = switch.status();
    assert_eq!(s["http2"]["connections"], 1);
    assert_eq!(s["http2"]["streams"], 3);
    shut(switch).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_and_response_bodies_stream_with_their_trailers_both_ways() {
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let backend = {
        let seen = seen.clone();
        ScriptedBackend::start(move |r| {
            if r.header("user-agent") != Some("locus-switch-health") {
                let te = r.header("transfer-encoding").map(str::to_string);
                seen.lock().unwrap().push((r.body.len(), te, r.trailers.clone()));
            }
            let mut resp = chunked_response(&[&pattern(100_000, 1), &pattern(50_000, 2)]);
            // The last chunk with a trailer field instead of the bare end.
            resp.truncate(resp.len() - 2);
            resp.extend_from_slice(b"X-Digest: abc\r\n\r\n");
            Action::Reply(resp)
        })
    };
    let switch = SwitchServer::start(one_node_config(Mode::Proxy, backend.addr)).unwrap();
    let send = h2c(switch.addr()).await;
    let mut trailers = HeaderMap::new();
    trailers.insert("x-checksum", "42".parse().unwrap());
    let body = pattern(1 << 20, 9);
    let req = http::Request::post("http://localhost/upload").body(()).unwrap();
    let got = exchange(&send, req, Some(body.clone()), Some(trailers)).await.unwrap();
    assert_eq!(got.status, 200);
    let mut expect = pattern(100_000, 1);
    expect.extend(pattern(50_000, 2));
    assert!(got.body == expect, "the chunked response de-chunked, byte for byte");
    assert_eq!(got.trailers.as_ref().map(|t| t["x-digest"].clone()), Some("abc".parse().unwrap()));
    let (len, te, node_trailers) = seen.lock().unwrap()[0].clone();
    assert_eq!(len, 1 << 20, "the 1 MiB body reached the node whole");
    assert_eq!(te.as_deref(), Some("chunked"), "no length from the client: chunked to the node");
    assert_eq!(node_trailers, b"x-checksum: 42\r\n\r\n");
    // With a content-length the body goes as is.
    let req = http::Request::post("http://localhost/len").header("content-length", "5").body(()).unwrap();
    let got = exchange(&send, req, Some(b"hello".to_vec()), None).await.unwrap();
    assert_eq!(got.status, 200);
    assert_eq!(seen.lock().unwrap()[1].0, 5);
    assert_eq!(seen.lock().unwrap()[1].1, None);
    shut(switch).await;
}

#[test]
fn malformed_streams_are_reset_and_never_reach_a_node() {
    let a = backend("n0", 10);
    let switch = SwitchServer::start(one_node_config(Mode::Proxy, a.addr)).unwrap();
    let mut c = RawH2::connect(switch.addr(), &[]);
    type Fields<'a> = &'a [(&'a str, &'a [u8])];
    let cases: [(&str, &str, Fields); 6] = [
        ("GET", "/", &[("connection", b"close")]),
        ("GET", "/", &[("transfer-encoding", b"chunked")]),
        ("GET", "/", &[("te", b"gzip")]),
        ("GET", "/", &[("upgrade", b"h2c")]),
        ("GET", "relative", &[]),
        ("GET", "/", &[("host", b"elsewhere.example")]),
    ];
    for (i, (method, path, extra)) in cases.iter().enumerate() {
        let id = 1 + 2 * i as u32;
        c.request(id, method, path, extra);
        let f =
            c.until(WAIT, |f| f.stream == id && (f.kind == h2_raw::RST_STREAM || f.kind == h2_raw::HEADERS));
        let f = f.unwrap_or_else(|| panic!("case {i}: an answer on stream {id}"));
        assert_eq!((f.kind, f.code()), (h2_raw::RST_STREAM, Some(h2_raw::PROTOCOL_ERROR)), "case {i}");
    }
    // CONNECT is refused by the switch itself; a good request still goes through after all that.
    let mut block = Vec::new();
    h2_raw::literal(&mut block, ":method", b"CONNECT");
    h2_raw::literal(&mut block, ":authority", b"example.com:443");
    c.send(&h2_raw::frame(h2_raw::HEADERS, h2_raw::END_HEADERS | h2_raw::END_STREAM, 21, &block));
    let f = c.until(WAIT, |f| f.stream == 21 && f.kind == h2_raw::HEADERS).expect("CONNECT answered");
    assert_eq!(switch.status()["responses"]["4xx"], 1, "answered 405 by the switch");
    drop(f);
    c.request(23, "GET", "/fine", &[]);
    let f = c.until(WAIT, |f| f.stream == 23 && f.kind == h2_raw::HEADERS);
    assert!(f.is_some(), "the connection lives on after stream errors");
    assert!(common::wait_until(WAIT, || a.requests() == 1), "only the good request reached the node");
    let s = switch.status();
    // h2 resets the connection-specific fields, `te` and the relative path itself; the
    // switch's own check finds the host that differs from :authority.
    assert_eq!(s["http2"]["resets"]["malformed"], 1, "{}", s["http2"]);
    drop(c);
    switch.shutdown();
}

#[test]
fn an_uppercase_field_name_ends_the_connection_and_reaches_no_node() {
    let a = backend("n0", 10);
    let switch = SwitchServer::start(one_node_config(Mode::Proxy, a.addr)).unwrap();
    let mut c = RawH2::connect(switch.addr(), &[]);
    c.request(1, "GET", "/", &[("X-Upper", b"1")]);
    // h2 takes an uppercase name for a broken HPACK block: a connection error, stricter than
    // the stream error RFC 9113 asks for.
    assert_eq!(c.goaway(WAIT), Some(h2_raw::PROTOCOL_ERROR));
    assert!(c.closed_within(WAIT));
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(a.requests(), 0);
    drop(c);
    switch.shutdown();
}

#[test]
fn shutdown_sends_goaway_and_the_stream_in_flight_finishes() {
    let slow =
        ScriptedBackend::start(|_| Action::Delay(Duration::from_millis(400), ok_response(b"finished", "")));
    let mut config = one_node_config(Mode::Proxy, slow.addr);
    config.health.interval_ms = 60_000;
    let switch = SwitchServer::start(config).unwrap();
    let mut c = RawH2::connect(switch.addr(), &[]);
    c.request(1, "GET", "/slow", &[]);
    assert!(common::wait_until(WAIT, || slow.requests() == 1), "the request reached the node");
    let stopping = std::thread::spawn(move || switch.shutdown());
    let mut goaway = None;
    let mut finished = false;
    while let Some(f) = c.next_frame(WAIT) {
        match f.kind {
            // Acknowledge the shutdown's PING, as a client does, so the final GOAWAY comes.
            h2_raw::PING if f.flags == 0 => {
                c.send(&h2_raw::frame(h2_raw::PING, 0x1, 0, &f.payload));
            }
            h2_raw::GOAWAY => goaway = goaway.or(f.code()),
            h2_raw::DATA if f.stream == 1 => {
                assert_eq!(f.payload, b"finished");
                finished = f.flags & h2_raw::END_STREAM != 0;
            }
            _ => {}
        }
        if finished && goaway.is_some() {
            break;
        }
    }
    assert_eq!(goaway, Some(0), "GOAWAY with NO_ERROR");
    assert!(finished, "the stream in flight finished after the GOAWAY");
    assert!(c.closed_within(WAIT), "then the connection closes");
    stopping.join().unwrap();
}

#[test]
fn an_idle_connection_gets_goaway_after_the_keepalive_timeout() {
    let a = backend("n0", 10);
    let mut config = one_node_config(Mode::Proxy, a.addr);
    config.limits.keepalive_timeout_ms = 300;
    let switch = SwitchServer::start(config).unwrap();
    let mut c = RawH2::connect(switch.addr(), &[]);
    c.request(1, "GET", "/", &[]);
    assert!(c.until(WAIT, |f| f.stream == 1 && f.flags & h2_raw::END_STREAM != 0).is_some());
    assert_eq!(c.goaway(WAIT), Some(0));
    assert_eq!(switch.status()["http2"]["goaways"]["idle"], 1);
    drop(c);
    switch.shutdown();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handoff_switch_serves_http2_two_way_when_asked_and_counts_it() {
    let a = backend("n0", 1000);
    let mut config = one_node_config(Mode::Handoff, a.addr);
    config.http2.enabled = Some(true);
    let switch = SwitchServer::start(config).unwrap();
    let send = h2c(switch.addr()).await;
    let got = get(&send, "/x").await;
    assert_eq!(got.status, 200);
    assert_eq!(got.body.len(), 1000);
    let s = switch.status();
    assert_eq!(s["http2"]["two_way"], 1, "{}", s["http2"]);
    assert_eq!(s["http2"]["enabled"], true);
    drop(send);
    shut(switch).await;
}

#[test]
fn http2_off_answers_the_preface_as_http1_did_and_upgrade_h2c_stays_refused() {
    let a = backend("n0", 10);
    let mut config = one_node_config(Mode::Proxy, a.addr);
    config.http2.enabled = Some(false);
    let switch = SwitchServer::start(config).unwrap();
    let mut c = Client::connect(switch.addr());
    c.send(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");
    assert_eq!(c.response(false).status, 505);
    assert_eq!(switch.status()["http2"]["enabled"], false);
    switch.shutdown();
    // With HTTP/2 on, an HTTP/1.1 upgrade to h2c is served as HTTP/1.1 (no 101).
    let switch = SwitchServer::start(one_node_config(Mode::Proxy, a.addr)).unwrap();
    let mut c = Client::connect(switch.addr());
    c.send(
        "GET /u HTTP/1.1\r\nHost: localhost\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\n\
         HTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n\r\n",
    );
    let r = c.response(false);
    assert_eq!(r.status, 200);
    assert_eq!(r.header("upgrade"), None);
    assert_eq!(switch.status()["http2"]["connections"], 0);
    switch.shutdown();
}
