//! Accept errors: with the process out of file descriptors (EMFILE) the accept loop neither
//! spins nor leaves connections hanging (it refuses them with its spare descriptor, or serves
//! them once descriptors are free again), and serves new connections after.
//! This file is its own test binary, so lowering its descriptor limit affects nothing else.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use common::{Client, TestNode};

fn set_fd_limit(soft: u64) -> u64 {
    // SAFETY: plain get/setrlimit on this process with valid pointers.
    unsafe {
        let mut lim: libc::rlimit = std::mem::zeroed();
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim);
        let old = lim.rlim_cur;
        lim.rlim_cur = soft.min(lim.rlim_max);
        assert_eq!(libc::setrlimit(libc::RLIMIT_NOFILE, &lim), 0);
        old
    }
}

/// Ask `stream` for /a.txt (closing) and read to the end: `None` when the read timed out (the
/// connection hangs), else what came back — empty when it was refused by a close or reset.
fn ask(mut stream: TcpStream) -> Option<String> {
    stream.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let _ = stream.write_all(b"GET /a.txt HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    let mut out = Vec::new();
    match stream.read_to_end(&mut out) {
        Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => None,
        _ => Some(String::from_utf8_lossy(&out).into_owned()),
    }
}

#[test]
fn out_of_descriptors_the_accept_loop_refuses_or_later_serves_waiting_connections_without_spinning() {
    let node = TestNode::start(|c, _| {
        c.workers = 1;
        c.cpu_threads = 1;
    });
    node.write("a.txt", b"a");
    let open = std::fs::read_dir("/proc/self/fd").unwrap().count() as u64;
    let old = set_fd_limit(open + 8);
    // Connect until this process has no descriptor left: the kernel still completes the
    // handshakes, so the node's accept now fails with EMFILE for the last ones.
    let mut clients = Vec::new();
    while clients.len() < 64 {
        match TcpStream::connect(node.addr()) {
            Ok(s) => clients.push(s),
            Err(_) => break,
        }
    }
    assert!(!clients.is_empty() && clients.len() < 64, "{}", clients.len());
    // A spinning loop fails its accept hundreds of thousands of times a second; backing off,
    // the loop fails at most once per shed connection and twice per pause. A busy machine
    // makes fewer attempts, never more, so the bound holds however slow the window runs.
    let (before, window_start) = (node.server().stats().accept_errors, Instant::now());
    std::thread::sleep(Duration::from_millis(500));
    let (failed, window) = (node.server().stats().accept_errors - before, window_start.elapsed());
    let pauses = (window.as_millis() / locus_io::ACCEPT_BACKOFF.as_millis()) as u64;
    let bound = clients.len() as u64 + 2 * (pauses + 1);
    assert!(failed <= bound, "accept loop spun: {failed} failed accepts in {window:?} (at most {bound})");

    set_fd_limit(old);
    // Descriptors are back: each connection was refused (a 503, or closed) or is served now.
    for (i, stream) in clients.into_iter().enumerate() {
        let reply = ask(stream).unwrap_or_else(|| panic!("connection {i} hangs"));
        let served = reply.starts_with("HTTP/1.1 200") && reply.ends_with("\r\n\r\na");
        let refused = reply.is_empty() || reply.starts_with("HTTP/1.1 503");
        assert!(served || refused, "connection {i}: {reply:?}");
    }
    let mut c = Client::from_stream(TcpStream::connect(node.addr()).unwrap());
    c.send("GET /a.txt HTTP/1.1\r\nHost: x\r\n\r\n");
    assert_eq!(c.response(false).text(), "a");
    assert_eq!(node.get("/a.txt").status, 200);
}
