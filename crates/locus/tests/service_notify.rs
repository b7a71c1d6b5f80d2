//! The servers' notifications to a service manager (systemd's `Type=notify`): with
//! `$NOTIFY_SOCKET` set, `locus node` and `locus switch` send READY=1 once their listeners
//! accept, RELOADING=1 with MONOTONIC_USEC and then READY=1 around a SIGHUP, and STOPPING=1
//! at SIGTERM before they drain and exit 0. The test plays the manager's datagram socket.

use std::io::{BufRead, BufReader};
use std::net::{SocketAddr, TcpStream};
use std::os::unix::net::UnixDatagram;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

const LOCUS: &str = env!("CARGO_BIN_EXE_locus");

/// A child killed on drop.
struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// CLOCK_MONOTONIC in microseconds, the clock MONOTONIC_USEC is read from.
fn monotonic_usec() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes the timespec it is given.
    assert_eq!(unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) }, 0);
    ts.tv_sec as u64 * 1_000_000 + ts.tv_nsec as u64 / 1_000
}

fn signal(p: &Proc, signal: i32) {
    // SAFETY: kill with the pid of our own child.
    assert_eq!(unsafe { libc::kill(p.0.id() as i32, signal) }, 0);
}

/// The next notification, as its lines.
fn next(socket: &UnixDatagram) -> Vec<String> {
    let mut buf = [0u8; 4096];
    let n = socket.recv(&mut buf).expect("a notification within 20 s");
    String::from_utf8(buf[..n].to_vec()).unwrap().lines().map(str::to_string).collect()
}

/// `locus args…` started with `$NOTIFY_SOCKET` at a socket in `dir` (`name`d): the manager's
/// socket, the server (killed on drop) and the address it printed first.
fn start_notifying(dir: &Path, name: &str, args: &[&str]) -> (UnixDatagram, Proc, SocketAddr) {
    let path = dir.join(format!("notify-{name}.sock"));
    let socket = UnixDatagram::bind(&path).unwrap();
    socket.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let mut child = Command::new(LOCUS)
        .args(args)
        .env("NOTIFY_SOCKET", &path)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let server = Proc(child);
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    // Keep reading: a closed pipe would fail any further line the server prints.
    std::thread::spawn(move || std::io::copy(&mut stdout, &mut std::io::sink()));
    let addr: SocketAddr = line
        .split_whitespace()
        .find_map(|w| w.trim_start_matches("http://").parse().ok())
        .unwrap_or_else(|| panic!("no address in {line:?}"));
    (socket, server, addr)
}

/// Start `locus args…` with `$NOTIFY_SOCKET` at `dir`, and follow its life: ready when its
/// printed address accepts, reloading around SIGHUP, stopping at SIGTERM, exit 0.
fn notifies_its_life_cycle(dir: &Path, args: &[&str]) {
    let (socket, mut server, addr) = start_notifying(dir, args[0], args);

    assert_eq!(next(&socket), ["READY=1"], "{} is ready once it listens", args[0]);
    TcpStream::connect(addr).expect("ready means the listener accepts");

    let before = monotonic_usec();
    signal(&server, libc::SIGHUP);
    let reloading = next(&socket);
    let after = monotonic_usec();
    assert_eq!(reloading.len(), 2, "{reloading:?}");
    assert_eq!(reloading[0], "RELOADING=1");
    let usec: u64 = reloading[1]
        .strip_prefix("MONOTONIC_USEC=")
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("MONOTONIC_USEC=<µs> after RELOADING=1: {reloading:?}"));
    assert!((before..=after).contains(&usec), "MONOTONIC_USEC {usec} read between {before} and {after}");
    assert_eq!(next(&socket), ["READY=1"], "ready again after the reload");

    signal(&server, libc::SIGTERM);
    assert_eq!(next(&socket), ["STOPPING=1"]);
    let status = server.0.wait().unwrap();
    assert!(status.success(), "{} exits 0 after draining: {status}", args[0]);
}

#[test]
fn the_node_tells_the_service_manager_ready_reloading_and_stopping() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("www");
    std::fs::create_dir(&root).unwrap();
    let root = root.to_str().unwrap();
    notifies_its_life_cycle(
        dir.path(),
        &["node", "--listen", "127.0.0.1:0", "--root", root, "--name", "n1", "--workers", "1"],
    );
}

#[test]
fn the_switch_tells_the_service_manager_ready_reloading_and_stopping() {
    let dir = tempfile::tempdir().unwrap();
    // A node nobody listens on: the switch starts and serves 503s all the same.
    notifies_its_life_cycle(
        dir.path(),
        &["switch", "--listen", "127.0.0.1:0", "--node", "n1=127.0.0.1:9", "--workers", "1"],
    );
}

#[test]
fn at_sigusr2_the_switch_starts_its_successor_which_becomes_the_main_process_and_serves() {
    // The successor is the old switch's child; once the old one exits it is this process's,
    // so it is stopped and reaped here (as systemd does for a service's processes).
    // SAFETY: prctl with a constant option and no pointers.
    assert_eq!(unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) }, 0);
    let dir = tempfile::tempdir().unwrap();
    let control = dir.path().join("switch.sock");
    let config = dir.path().join("switch.toml");
    std::fs::write(
        &config,
        format!("control_socket = {:?}\n[[node]]\naddr = \"127.0.0.1:9\"\n", control.to_str().unwrap()),
    )
    .unwrap();
    let args = ["switch", "-c", config.to_str().unwrap(), "--listen", "127.0.0.1:0", "--workers", "1"];
    let (socket, mut old, addr) = start_notifying(dir.path(), "upgrade", &args);
    assert_eq!(next(&socket), ["READY=1"]);

    signal(&old, libc::SIGUSR2);
    // The successor says it is the main process now; the old one drains and exits 0 without
    // a word (it is not the main process any more).
    let took_over = next(&socket);
    let pid: i32 = took_over
        .iter()
        .find_map(|l| l.strip_prefix("MAINPID=")?.parse().ok())
        .unwrap_or_else(|| panic!("MAINPID=<pid> from the successor: {took_over:?}"));
    // Stopped (and reaped) at the end, whatever happens.
    struct Successor(i32);
    impl Drop for Successor {
        fn drop(&mut self) {
            // SAFETY: kill and waitpid with the successor's pid, read from its own
            // notification; it is this process's child by then (the subreaper above).
            unsafe {
                libc::kill(self.0, libc::SIGTERM);
                libc::waitpid(self.0, std::ptr::null_mut(), 0);
            }
        }
    }
    let successor = Successor(pid);
    assert!(took_over.contains(&"READY=1".to_string()) && pid != old.0.id() as i32, "{took_over:?}");
    assert!(old.0.wait().unwrap().success(), "the old switch drains and exits 0");
    TcpStream::connect(addr).expect("the successor serves the same address");
    drop(successor);
}
