//! Accept errors: with the process out of file descriptors (EMFILE) the accept loop neither
//! spins nor leaves connections hanging (it refuses them with its spare descriptor, or serves
//! them once descriptors are free again), and serves new connections after.
//! This file is its own test binary, so lowering its descriptor limit affects nothing else.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use common::{Client, TestNode};

fn cpu_time() -> Duration {
    // SAFETY: an all-zero rusage is valid storage for getrusage to fill.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: RUSAGE_SELF with a valid pointer.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(usage.ru_utime) + tv(usage.ru_stime)
}

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
    std::thread::sleep(Duration::from_millis(100));
    // A spinning loop would take a whole CPU; backing off, the process uses a small share of
    // one over the window measured (a window stretched by a busy machine only loosens this).
    let (before, window_start) = (cpu_time(), Instant::now());
    std::thread::sleep(Duration::from_millis(500));
    let (spent, window) = (cpu_time() - before, window_start.elapsed());
    assert!(spent < window.mul_f64(0.3), "accept loop spun: {spent:?} of CPU in {window:?}");

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
