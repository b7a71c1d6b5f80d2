//! Test fixtures for the switch's integration tests: a scripted back-end whose every answer
//! (including chunked bodies, stalls and dropped connections) is chosen by the test and which
//! counts what reached it, and a one-node switch configuration in any mode; the client is
//! `locus_test_support::Client`.

#![allow(dead_code)]

pub mod h2_raw;

use locus_http::{BodyKind, BodyTracker, Limits, RequestHead, parse_request};
use locus_policy::PolicyConfig;
use locus_switch::{HandoffSettings, Mode, NodeEntry, SwitchConfig};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

/// How long a test waits for the switch to close a connection (`Client::closed_or_silent`).
pub const CLOSE_WAIT: Duration = Duration::from_secs(3);

/// What a scripted back-end does with a request.
pub enum Action {
    /// Send these bytes (a whole response) and keep the connection.
    Reply(Vec<u8>),
    /// Send these bytes and close.
    ReplyAndClose(Vec<u8>),
    /// Close without answering.
    Close,
    /// Wait this long, then send the bytes.
    Delay(Duration, Vec<u8>),
}

/// A request as a scripted back-end saw it.
pub struct SeenRequest {
    pub method: String,
    pub target: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// A chunked body's trailer section as sent (field lines and the empty line).
    pub trailers: Vec<u8>,
}

impl SeenRequest {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }
}

type Handler = dyn Fn(&SeenRequest) -> Action + Send + Sync;

/// A back-end on 127.0.0.1 whose answers come from a closure.
pub struct ScriptedBackend {
    pub addr: SocketAddr,
    pub requests: Arc<AtomicUsize>,
    pub connections: Arc<AtomicUsize>,
    /// Replies written whole (on loopback, by then in the switch's receive queue).
    pub replies: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
}

impl ScriptedBackend {
    pub fn start(handler: impl Fn(&SeenRequest) -> Action + Send + Sync + 'static) -> ScriptedBackend {
        ScriptedBackend::start_on("127.0.0.1:0".parse().unwrap(), handler)
    }

    /// Start on a given address (to bring a stopped back-end back on its old port).
    pub fn start_on(
        addr: SocketAddr,
        handler: impl Fn(&SeenRequest) -> Action + Send + Sync + 'static,
    ) -> ScriptedBackend {
        let listener = TcpListener::bind(addr).unwrap();
        let addr = listener.local_addr().unwrap();
        listener.set_nonblocking(true).unwrap();
        let requests = Arc::new(AtomicUsize::new(0));
        let connections = Arc::new(AtomicUsize::new(0));
        let replies = Arc::new(AtomicUsize::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let handler: Arc<Handler> = Arc::new(handler);
        {
            let (requests, connections, replies, stop) =
                (requests.clone(), connections.clone(), replies.clone(), stop.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    match listener.accept() {
                        Ok((s, _)) => {
                            connections.fetch_add(1, Ordering::Relaxed);
                            let (handler, requests, replies, stop) =
                                (handler.clone(), requests.clone(), replies.clone(), stop.clone());
                            std::thread::spawn(move || {
                                serve_scripted(s, &*handler, &requests, &replies, &stop)
                            });
                        }
                        Err(_) => std::thread::sleep(Duration::from_millis(5)),
                    }
                }
            });
        }
        ScriptedBackend { addr, requests, connections, replies, stop }
    }

    pub fn requests(&self) -> usize {
        self.requests.load(Ordering::Relaxed)
    }
}

impl Drop for ScriptedBackend {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// Read what `s` has into `buf` (through `chunk`); a read timeout is no error. `false` when
/// the connection ended or failed.
fn read_some(s: &mut TcpStream, buf: &mut Vec<u8>, chunk: &mut [u8]) -> bool {
    match s.read(chunk) {
        Ok(0) => false,
        Ok(n) => {
            buf.extend_from_slice(&chunk[..n]);
            true
        }
        Err(e) => matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut),
    }
}

fn serve_scripted(
    mut s: TcpStream,
    handler: &Handler,
    requests: &AtomicUsize,
    replies: &AtomicUsize,
    stop: &AtomicBool,
) {
    s.set_nonblocking(false).unwrap();
    s.set_read_timeout(Some(Duration::from_millis(200))).unwrap();
    let mut buf = Vec::new();
    let mut chunk = [0u8; 65536];
    let limits = Limits::default();
    loop {
        let mut head = RequestHead::default();
        // Read a head.
        loop {
            if stop.load(Ordering::Relaxed) {
                return;
            }
            match parse_request(&buf, &limits, &mut head) {
                Ok(true) => break,
                Ok(false) => {}
                Err(_) => return,
            }
            if !read_some(&mut s, &mut buf, &mut chunk) {
                return;
            }
        }
        let seen_head = SeenRequest {
            method: head.method_str(&buf).to_string(),
            target: head.target_str(&buf).to_string(),
            headers: head
                .header_pairs(&buf)
                .map(|(n, v)| {
                    (String::from_utf8_lossy(n).into_owned(), String::from_utf8_lossy(v).into_owned())
                })
                .collect(),
            body: Vec::new(),
            trailers: Vec::new(),
        };
        let mut seen = seen_head;
        buf.drain(..head.head_len);
        let mut tracker =
            BodyTracker::new(if head.body == BodyKind::Empty { BodyKind::Empty } else { head.body });
        loop {
            let (body, trailers) = (&mut seen.body, &mut seen.trailers);
            let p = match tracker.advance_parts(
                &buf,
                |d| body.extend_from_slice(d),
                |t| trailers.extend_from_slice(t),
            ) {
                Ok(p) => p,
                Err(_) => return,
            };
            buf.drain(..p.consumed);
            if p.done {
                break;
            }
            if !read_some(&mut s, &mut buf, &mut chunk) {
                return;
            }
        }
        // The switch's own health checks are not traffic.
        if seen.header("user-agent") != Some("locus-switch-health") {
            requests.fetch_add(1, Ordering::Relaxed);
        }
        match handler(&seen) {
            Action::Reply(bytes) => {
                if s.write_all(&bytes).is_err() {
                    return;
                }
                replies.fetch_add(1, Ordering::Relaxed);
            }
            Action::ReplyAndClose(bytes) => {
                let _ = s.write_all(&bytes);
                return;
            }
            Action::Close => return,
            Action::Delay(d, bytes) => {
                std::thread::sleep(d);
                if s.write_all(&bytes).is_err() {
                    return;
                }
                replies.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

/// A plain 200 response with a body.
pub fn ok_response(body: &[u8], extra_headers: &str) -> Vec<u8> {
    let mut v =
        format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n{extra_headers}\r\n", body.len()).into_bytes();
    v.extend_from_slice(body);
    v
}

/// A chunked 200 response whose body is `parts` in order.
pub fn chunked_response(parts: &[&[u8]]) -> Vec<u8> {
    let mut v = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
    for p in parts {
        v.extend_from_slice(format!("{:x}\r\n", p.len()).as_bytes());
        v.extend_from_slice(p);
        v.extend_from_slice(b"\r\n");
    }
    v.extend_from_slice(b"0\r\n\r\n");
    v
}

/// Deterministic pseudo-random bytes.
pub fn pattern(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

/// Poll `cond` every 10 ms for up to `limit`.
pub fn wait_until(limit: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let start = std::time::Instant::now();
    while start.elapsed() < limit {
        if cond() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    cond()
}

/// The control-channel key of `one_node_config`'s handoff mode.
const KEY: &str = "00112233445566778899aabbccddeeff";

/// A switch in `mode` before one back-end, with policy rr and the served name
/// `www.example.com`. Handoff mode is the handoff never tried: no channel to an agent.
pub fn one_node_config(mode: Mode, backend: SocketAddr) -> SwitchConfig {
    // Handoff mode: an agent address nobody listens on, so no channel comes up and the switch
    // serves what it routes by proxy; the check comes before that choice.
    let agent = (mode == Mode::Handoff).then(|| "127.0.0.1:9".parse().unwrap());
    SwitchConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        workers: 1,
        mode,
        policy: PolicyConfig::from_name("rr").unwrap(),
        nodes: vec![NodeEntry {
            name: Some("n0".into()),
            addr: backend,
            weight: 1,
            handoff: agent,
            admin: None,
        }],
        server_names: vec!["www.example.com".into()],
        handoff: HandoffSettings { key: Some(KEY.into()), ..HandoffSettings::default() },
        ..SwitchConfig::default()
    }
}

/// A switch in `mode` before `backends` (named n0, n1, …, weight 1) under the policy named
/// `policy`, on two workers.
pub fn switch_config(mode: Mode, backends: &[SocketAddr], policy: &str) -> SwitchConfig {
    SwitchConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        workers: 2,
        mode,
        policy: PolicyConfig::from_name(policy).unwrap(),
        nodes: backends
            .iter()
            .enumerate()
            .map(|(i, a)| NodeEntry {
                name: Some(format!("n{i}")),
                addr: *a,
                weight: 1,
                handoff: None,
                admin: None,
            })
            .collect(),
        ..SwitchConfig::default()
    }
}

/// The site the node-backed tests serve: `f0.txt`..`f39.txt` (`file i` repeated i + 1 times)
/// and `big.bin` (3 MiB).
pub fn write_site(root: &std::path::Path) {
    for i in 0..40 {
        std::fs::write(root.join(format!("f{i}.txt")), format!("file {i}\n").repeat(i + 1)).unwrap();
    }
    std::fs::write(root.join("big.bin"), pattern(3 << 20, 11)).unwrap();
}
