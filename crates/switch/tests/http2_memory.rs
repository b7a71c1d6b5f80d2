//! The switch's memory under HTTP/2 abuse from many connections at once, in a process of its
//! own (this file's one test) so that the peak resident size is the switch's: 20 clients that
//! open 100 streams of 1 MiB each with windows wide open and never read their socket, then 20
//! of each flood (HPACK bomb, CONTINUATION, SETTINGS, PING, rapid reset). Each phase's growth
//! of the peak is printed and held under the bound docs/http2.md states. The node is a small
//! tokio server writing one shared 1 MiB body, so that the growth is the switch's.

mod common;

use common::h2_raw::{self, RawH2, frame};
use common::{one_node_config, pattern};
use locus_switch::{Mode, SwitchServer};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const CLIENTS: usize = 20;
const WAIT: Duration = Duration::from_secs(20);
/// What one connection may hold, however it misbehaves (docs/http2.md): 100 streams of
/// 32 KiB of response each, its request windows, and the connection's own state.
const BOUND_PER_CONNECTION: u64 = 6 << 20;

/// The process's peak resident size (VmHWM), in bytes.
fn peak_rss() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse::<u64>().unwrap() * 1024
}

/// Clients that ask for 100 large responses each with the windows wide open, then stop reading.
fn slow_readers(addr: std::net::SocketAddr) -> Vec<RawH2> {
    (0..CLIENTS)
        .map(|_| {
            let mut c = RawH2::connect(addr, &[(0x4, 0x7fff_ffff)]);
            c.send(&frame(h2_raw::WINDOW_UPDATE, 0, 0, &(0x7fff_ffffu32 - 65_535).to_be_bytes()));
            let mut burst = Vec::new();
            for i in 0..100u32 {
                let block = h2_raw::request_block("GET", "/big", &[]);
                burst.extend(frame(
                    h2_raw::HEADERS,
                    h2_raw::END_HEADERS | h2_raw::END_STREAM,
                    1 + 2 * i,
                    &block,
                ));
            }
            c.send(&burst);
            c
        })
        .collect()
}

/// `CLIENTS` connections sending `bytes` at once; each must get GOAWAY ENHANCE_YOUR_CALM.
fn flood(addr: std::net::SocketAddr, bytes: &[u8]) {
    let threads: Vec<_> = (0..CLIENTS)
        .map(|_| {
            let bytes = bytes.to_vec();
            std::thread::spawn(move || {
                let mut c = RawH2::connect(addr, &[]);
                c.send(&bytes);
                c.goaway(WAIT)
            })
        })
        .collect();
    for t in threads {
        assert_eq!(t.join().unwrap(), Some(h2_raw::ENHANCE_YOUR_CALM));
    }
}

/// Every flood of `http2_floods.rs`, as bytes.
fn floods() -> Vec<(&'static str, Vec<u8>)> {
    let mut bomb = h2_raw::request_block("GET", "/b", &[]);
    h2_raw::literal_indexed(&mut bomb, "x-bomb", &[b'a'; 4000]);
    for _ in 0..3000 {
        h2_raw::indexed(&mut bomb, 62);
    }
    let mut continuation = frame(h2_raw::HEADERS, 0, 1, &h2_raw::request_block("GET", "/c", &[]));
    for _ in 0..10_000 {
        continuation.extend(frame(h2_raw::CONTINUATION, 0, 1, &[]));
    }
    let mut reset = Vec::new();
    for i in 0..2000u32 {
        let block = h2_raw::request_block("GET", "/r", &[]);
        reset.extend(frame(h2_raw::HEADERS, h2_raw::END_HEADERS | h2_raw::END_STREAM, 1 + 2 * i, &block));
        reset.extend(frame(h2_raw::RST_STREAM, 0, 1 + 2 * i, &h2_raw::CANCEL.to_be_bytes()));
    }
    vec![
        ("hpack bomb", frame(h2_raw::HEADERS, h2_raw::END_HEADERS | h2_raw::END_STREAM, 1, &bomb)),
        ("continuation", continuation),
        ("settings", frame(h2_raw::SETTINGS, 0, 0, &[]).repeat(5000)),
        ("ping", frame(h2_raw::PING, 0, 0, &[1; 8]).repeat(5000)),
        ("rapid reset", reset),
    ]
}

/// A node answering `/big` with `body` (one buffer, shared) and anything else with its first
/// 10 bytes, counting
/// the requests it read; on a thread of its own.
fn node(body: &'static [u8]) -> (std::net::SocketAddr, Arc<AtomicUsize>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let addr = listener.local_addr().unwrap();
    let requests = Arc::new(AtomicUsize::new(0));
    let counted = requests.clone();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            while let Ok((mut s, _)) = listener.accept().await {
                let counted = counted.clone();
                tokio::spawn(async move {
                    let mut buf = [0u8; 2048];
                    let mut seen = Vec::new();
                    while let Ok(n) = s.read(&mut buf).await {
                        if n == 0 {
                            return;
                        }
                        seen.extend_from_slice(&buf[..n]);
                        while let Some(end) = seen.windows(4).position(|w| w == b"\r\n\r\n") {
                            // `/big` gets the whole body, anything else its first 10 bytes.
                            let body = if seen.starts_with(b"GET /big ") { body } else { &body[..10] };
                            seen.drain(..end + 4);
                            counted.fetch_add(1, Relaxed);
                            let head = format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n", body.len());
                            if s.write_all(head.as_bytes()).await.is_err() || s.write_all(body).await.is_err()
                            {
                                return;
                            }
                        }
                    }
                });
            }
        });
    });
    (addr, requests)
}

#[test]
fn memory_stays_under_its_bound_whatever_twenty_clients_each_try() {
    let big: &'static [u8] = pattern(1 << 20, 1).leak();
    let (node_addr, requests) = node(big);
    let mut config = one_node_config(Mode::Proxy, node_addr);
    config.health.interval_ms = 60_000;
    // 2,000 node connections opened at once overflow a listen backlog: a SYN sent again after
    // a second must still be in time.
    config.limits.connect_timeout_ms = 5_000;
    let switch = SwitchServer::start(config).unwrap();
    let addr = switch.addr();
    let mut warm = RawH2::connect(addr, &[]);
    warm.request(1, "GET", "/warm", &[]);
    assert!(warm.until(WAIT, |f| f.stream == 1 && f.flags & h2_raw::END_STREAM != 0).is_some());
    let base = peak_rss();
    let readers = slow_readers(addr);
    // Until the switch holds all it will: the node has answered every stream it was asked.
    let all = common::wait_until(WAIT, || requests.load(Relaxed) >= CLIENTS * 100);
    assert!(all, "{} requests at the node", requests.load(Relaxed));
    std::thread::sleep(Duration::from_millis(500));
    let slow = peak_rss().saturating_sub(base);
    eprintln!(
        "slow readers: {CLIENTS} connections x 100 streams: peak grew {:.1} MiB",
        slow as f64 / 1048576.0
    );
    assert!(slow <= CLIENTS as u64 * BOUND_PER_CONNECTION, "{slow} bytes for {CLIENTS} slow readers");
    drop(readers);
    for (name, bytes) in floods() {
        let before = peak_rss();
        flood(addr, &bytes);
        let grew = peak_rss().saturating_sub(before);
        eprintln!("{name}: {CLIENTS} connections: peak grew {:.1} MiB", grew as f64 / 1048576.0);
        assert!(grew <= CLIENTS as u64 * BOUND_PER_CONNECTION, "{name}: {grew} bytes");
    }
    drop(warm);
    switch.shutdown();
}
