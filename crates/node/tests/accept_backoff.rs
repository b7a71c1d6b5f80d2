//! Accept errors: with the process out of file descriptors (EMFILE) the accept loop backs off
//! instead of spinning, and serves the waiting connections once descriptors are free again.
//! This file is its own test binary, so lowering its descriptor limit affects nothing else.

mod common;

use std::net::TcpStream;
use std::time::Duration;

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

#[test]
fn out_of_descriptors_the_accept_loop_backs_off_and_recovers() {
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
    let before = cpu_time();
    std::thread::sleep(Duration::from_millis(500));
    let spent = cpu_time() - before;
    assert!(spent < Duration::from_millis(150), "accept loop spun: {spent:?} of CPU in 500 ms");

    set_fd_limit(old);
    // Descriptors are back: the connections waiting in the backlog get served.
    let mut c = Client::from_stream(clients.pop().unwrap());
    c.send("GET /a.txt HTTP/1.1\r\nHost: x\r\n\r\n");
    assert_eq!(c.response(false).text(), "a");
    drop(clients);
    assert_eq!(node.get("/a.txt").status, 200);
}
