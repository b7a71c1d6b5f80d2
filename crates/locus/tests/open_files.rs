//! The switch's and the node's own descriptor limits, end to end on `locus` processes whose
//! RLIMIT_NOFILE a test sets (at spawn with `pre_exec`, while running with `prlimit`): they
//! raise the soft limit at start, fit `max_connections` to it with a warning (`--check` says
//! the same), shed new connections with 503 when descriptors run short while the open ones
//! are still served, never take a node out of the view for the switch's own EMFILE, and serve
//! again as soon as descriptors are free.

use serde_json::Value;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

const LOCUS: &str = env!("CARGO_BIN_EXE_locus");
const READ_TIMEOUT: Duration = Duration::from_secs(5);
/// How long service may take to come back once descriptors are free: "within a second",
/// asserted generously for a loaded machine (the time taken is printed).
const RECOVERY: Duration = Duration::from_secs(3);

/// A `locus` process, killed on drop; its standard error goes to a file.
struct Server {
    child: Child,
    /// Kept open: the process may still print.
    _stdout: BufReader<ChildStdout>,
    log: std::path::PathBuf,
    /// The addresses printed at start, in order.
    addrs: Vec<SocketAddr>,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn rlimit(soft: u64, hard: u64) -> libc::rlimit {
    libc::rlimit { rlim_cur: soft as libc::rlim_t, rlim_max: hard as libc::rlim_t }
}

impl Server {
    /// Start `locus args…` in `dir` (its log goes there), with RLIMIT_NOFILE `limit` if given,
    /// and read `lines` address lines from its standard output.
    fn start(dir: &Path, name: &str, args: &[&str], limit: Option<(u64, u64)>, lines: usize) -> Server {
        let log = dir.join(format!("{name}.log"));
        let mut cmd = Command::new(LOCUS);
        cmd.args(args).stdin(Stdio::null()).stdout(Stdio::piped());
        cmd.stderr(std::fs::File::create(&log).unwrap());
        if let Some((soft, hard)) = limit {
            // SAFETY: the closure only calls setrlimit (async-signal-safe) on the child.
            unsafe {
                cmd.pre_exec(move || {
                    if libc::setrlimit(libc::RLIMIT_NOFILE, &rlimit(soft, hard)) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
        }
        let mut child = cmd.spawn().unwrap();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut addrs = Vec::new();
        for _ in 0..lines {
            let mut line = String::new();
            stdout.read_line(&mut line).unwrap();
            let addr = line
                .split_whitespace()
                .find_map(|w| w.trim_start_matches("http://").split('/').next()?.parse().ok());
            match addr {
                Some(a) => addrs.push(a),
                None => {
                    let _ = child.kill();
                    let log = std::fs::read_to_string(&log).unwrap_or_default();
                    panic!("{name}: no address in {line:?}; its log:\n{log}");
                }
            }
        }
        Server { child, _stdout: stdout, log, addrs }
    }

    fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap()
    }

    /// RLIMIT_NOFILE of the process now.
    fn limit(&self) -> (u64, u64) {
        let mut old = rlimit(0, 0);
        // SAFETY: prlimit on our own child, reading only.
        assert_eq!(unsafe { libc::prlimit(self.pid(), libc::RLIMIT_NOFILE, std::ptr::null(), &mut old) }, 0);
        (old.rlim_cur, old.rlim_max)
    }

    /// Set the process's soft limit (its hard limit stays).
    fn set_soft_limit(&self, soft: u64) {
        let new = rlimit(soft, self.limit().1);
        // SAFETY: prlimit on our own child with a valid rlimit.
        let rc = unsafe { libc::prlimit(self.pid(), libc::RLIMIT_NOFILE, &new, std::ptr::null_mut()) };
        assert_eq!(rc, 0, "prlimit: {}", std::io::Error::last_os_error());
    }

    /// How many of the process's sockets are connected to a port in `ports` (on loopback).
    fn connections_to(&self, ports: &[u16]) -> usize {
        let inodes: std::collections::BTreeSet<String> =
            std::fs::read_dir(format!("/proc/{}/fd", self.pid()))
                .unwrap()
                .filter_map(|e| {
                    let target = std::fs::read_link(e.ok()?.path()).ok()?;
                    Some(target.to_str()?.strip_prefix("socket:[")?.strip_suffix(']')?.to_string())
                })
                .collect();
        // Columns: sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode.
        let table = std::fs::read_to_string(format!("/proc/{}/net/tcp", self.pid())).unwrap();
        table
            .lines()
            .skip(1)
            .map(|l| l.split_whitespace().collect::<Vec<_>>())
            .filter(|cols| cols.len() > 9 && inodes.contains(cols[9]))
            .filter(|cols| {
                let port = cols[2].rsplit(':').next().and_then(|p| u16::from_str_radix(p, 16).ok());
                port.is_some_and(|p| ports.contains(&p))
            })
            .count()
    }

    /// The process's descriptors, by number, with what each one is.
    fn descriptors(&self) -> std::collections::BTreeMap<u64, String> {
        std::fs::read_dir(format!("/proc/{}/fd", self.pid()))
            .unwrap()
            .filter_map(|e| {
                let e = e.ok()?;
                let target =
                    std::fs::read_link(e.path()).map_or_else(|_| "?".into(), |t| t.display().to_string());
                Some((e.file_name().to_str()?.parse().ok()?, target))
            })
            .collect()
    }

    /// The lowest descriptor number the process does not use, once its table holds still
    /// (the same over 50 ms: a connection it is still closing, such as the last status
    /// request's, would otherwise make the number too high), with the table it was read from.
    fn lowest_free_descriptor(&self) -> (u64, String) {
        let mut table = self.descriptors();
        wait_for("the descriptor table to hold still", READ_TIMEOUT, || {
            std::thread::sleep(Duration::from_millis(50));
            let now = self.descriptors();
            std::mem::replace(&mut table, now) == table
        });
        let free = (0..).find(|n| !table.contains_key(n)).unwrap();
        (free, format!("{table:?}"))
    }
}

/// Two nodes serving `dir/root`.
fn start_nodes(dir: &Path) -> Vec<Server> {
    let root = dir.join("root");
    std::fs::create_dir_all(&root).unwrap();
    for (name, text) in [("hello.txt", "hello\n"), ("a.txt", "a\n"), ("b.txt", "b\n"), ("c.txt", "c\n")] {
        std::fs::write(root.join(name), text).unwrap();
    }
    let root = root.to_str().unwrap();
    ["n1", "n2"]
        .iter()
        .map(|n| {
            let args = ["node", "--listen", "127.0.0.1:0", "--root", root, "--name", n, "--workers", "1"];
            Server::start(dir, n, &args, None, 1)
        })
        .collect()
}

/// A switch over `nodes` from a configuration file with `extra` appended.
fn start_switch(dir: &Path, nodes: &[Server], extra: &str, limit: Option<(u64, u64)>) -> Server {
    let mut config = String::from("listen = \"127.0.0.1:0\"\nadmin = \"127.0.0.1:0\"\nworkers = 1\n");
    for (i, n) in nodes.iter().enumerate() {
        config += &format!("[[node]]\nname = \"n{}\"\naddr = \"{}\"\n", i + 1, n.addrs[0]);
    }
    config += extra;
    let path = dir.join("switch.toml");
    std::fs::write(&path, config).unwrap();
    Server::start(dir, "switch", &["switch", "-c", path.to_str().unwrap()], limit, 2)
}

/// Send `request` on `stream` and read one response: `None` when none came within the
/// timeout (the connection hangs), otherwise the text, empty when the peer closed or reset.
fn exchange(stream: &mut TcpStream, request: &str) -> Option<String> {
    stream.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
    let _ = stream.write_all(request.as_bytes());
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
            let len = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .map_or(0, |v| v.trim().parse::<usize>().unwrap());
            if buf.len() >= end + 4 + len {
                return Some(String::from_utf8_lossy(&buf[..end + 4 + len]).into_owned());
            }
        }
        match stream.read(&mut chunk) {
            Ok(0) => return Some(String::from_utf8_lossy(&buf).into_owned()),
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {
                return None;
            }
            Err(_) => return Some(String::from_utf8_lossy(&buf).into_owned()),
        }
    }
}

fn get_request(path: &str) -> String {
    format!("GET {path} HTTP/1.1\r\nHost: t\r\n\r\n")
}

/// GET `path` on a new connection.
fn get(addr: SocketAddr, path: &str) -> Option<String> {
    exchange(&mut TcpStream::connect(addr).unwrap(), &get_request(path))
}

fn status(admin: SocketAddr) -> Value {
    let reply = get(admin, "/locus/status").expect("status");
    let body = &reply[reply.find("\r\n\r\n").expect("status head") + 4..];
    serde_json::from_str(body).unwrap_or_else(|e| panic!("status {e}: {reply}"))
}

/// Every node is in the view and none has a failure counted.
fn assert_nodes_healthy(switch: &Server) {
    let s = status(switch.addrs[1]);
    for n in s["nodes"].as_array().unwrap() {
        assert!(n["up"] == true && n["failures"] == 0, "a node was taken out: {n}\n{}", switch.log());
    }
    assert!(!switch.log().contains("out of the view"), "{}", switch.log());
}

/// Poll `check` every 10 ms until it holds, for up to `limit`: the time it took.
fn wait_for(what: &str, limit: Duration, mut check: impl FnMut() -> bool) -> Duration {
    let start = Instant::now();
    while !check() {
        assert!(start.elapsed() < limit, "not within {limit:?}: {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
    start.elapsed()
}

/// RLIMIT_NOFILE of this (test) process.
fn own_limit() -> (u64, u64) {
    let mut lim = rlimit(0, 0);
    // SAFETY: getrlimit on this process with a valid pointer.
    assert_eq!(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) }, 0);
    (lim.rlim_cur, lim.rlim_max)
}

/// This process may need `n` descriptors: its own soft limit is raised toward its hard one
/// if need be (this process only).
fn ensure_own_descriptors(n: u64) {
    let (soft, hard) = own_limit();
    assert!(hard >= n, "this test needs {n} descriptors; the hard limit is {hard}");
    if soft < n {
        // SAFETY: setrlimit on this process with a valid rlimit, soft ≤ hard.
        assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &rlimit(n, hard)) }, 0);
    }
}

fn is_status(reply: &str, status: u16) -> bool {
    reply.starts_with(&format!("HTTP/1.1 {status} "))
}

#[test]
fn with_a_1024_descriptor_limit_1100_idle_clients_get_503s_past_the_lowered_limit_and_no_node_leaves() {
    ensure_own_descriptors(1_400);
    let dir = tempfile::tempdir().unwrap();
    let nodes = start_nodes(dir.path());
    let switch = start_switch(dir.path(), &nodes, "", Some((1024, 1024)));
    let log = switch.log();
    let cap: u64 = log
        .split("taking at most ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next()?.parse().ok())
        .unwrap_or_else(|| panic!("no warning about max_connections in:\n{log}"));
    assert!(log.contains("max_connections = 10000") && cap > 50 && cap < 1024, "{log}");
    assert_eq!(status(switch.addrs[1])["max_connections"], cap, "the status shows the limit in force");

    let mut idle: Vec<TcpStream> = (0..1100).map(|_| TcpStream::connect(switch.addrs[0]).unwrap()).collect();
    wait_for("every connection accepted", READ_TIMEOUT, || status(switch.addrs[1])["accepted"] == 1100);
    let reply = get(switch.addrs[0], "/hello.txt").expect("a new client is answered, not left hanging");
    assert!(reply.is_empty() || is_status(&reply, 503), "past the limit: {reply}");
    // The first client came in under the limit, and its requests still reach a node.
    let reply = exchange(&mut idle[0], &get_request("/hello.txt")).unwrap();
    assert!(is_status(&reply, 200) && reply.ends_with("hello\n"), "{reply}");
    assert_eq!(status(switch.addrs[1])["connections"], cap, "the lowered limit is the one enforced");
    assert_nodes_healthy(&switch);

    drop(idle);
    let took = wait_for("serving a new client again", RECOVERY, || {
        get(switch.addrs[0], "/hello.txt").is_some_and(|r| is_status(&r, 200))
    });
    eprintln!("served again {took:?} after the idle clients closed");
    assert_nodes_healthy(&switch);
}

#[test]
fn short_of_descriptors_the_switch_answers_new_clients_503_and_still_connects_for_open_ones() {
    let dir = tempfile::tempdir().unwrap();
    let nodes = start_nodes(dir.path());
    // No health check after the first, so nothing else opens descriptors meanwhile.
    let switch = start_switch(dir.path(), &nodes, "[health]\ninterval_ms = 600000\n", None);
    let mut idle: Vec<TcpStream> = (0..20).map(|_| TcpStream::connect(switch.addrs[0]).unwrap()).collect();
    wait_for("20 connections open", READ_TIMEOUT, || status(switch.addrs[1])["connections"] == 20);
    // The descriptor numbers below are read from the switch's table, so it must hold still:
    // the first health checks' connections (made at start, closed after) must be gone.
    let node_ports: Vec<u16> = nodes.iter().map(|n| n.addrs[0].port()).collect();
    wait_for("the first health checks done", READ_TIMEOUT, || switch.connections_to(&node_ports) == 0);
    let original = switch.limit().0;

    // A few descriptors left, fewer than the headroom: new clients are shed, open ones are
    // served over a new node connection.
    let (free, table) = switch.lowest_free_descriptor();
    switch.set_soft_limit(free + 8);
    let reply = get(switch.addrs[0], "/a.txt").expect("a shed client is answered");
    let shed = is_status(&reply, 503) && reply.contains("Connection: close");
    assert!(shed, "{reply}\nthe limit was {} from the table {table}", free + 8);
    let reply = exchange(&mut idle[0], &get_request("/a.txt")).unwrap();
    assert!(is_status(&reply, 200) && reply.ends_with("a\n"), "{reply}");

    // None left: accepting fails (EMFILE). The new client is answered 503 with the spare
    // descriptor, or — when the spare's number lies above a limit lowered this far — waits
    // in the listen queue and is served once descriptors are free; either way it is answered.
    switch.set_soft_limit(switch.lowest_free_descriptor().0);
    let mut waiting = TcpStream::connect(switch.addrs[0]).unwrap();
    waiting.write_all(get_request("/b.txt").as_bytes()).unwrap();
    std::thread::sleep(Duration::from_millis(100));
    switch.set_soft_limit(original);
    let took = wait_for("serving a new client again", RECOVERY, || {
        get(switch.addrs[0], "/b.txt").is_some_and(|r| is_status(&r, 200))
    });
    eprintln!("served again {took:?} after the limit was restored");
    let reply = exchange(&mut waiting, "").expect("the client that came while none were left is answered");
    assert!(is_status(&reply, 503) || is_status(&reply, 200) && reply.ends_with("b\n"), "{reply}");
    let s = status(switch.addrs[1]);
    assert!(s["shed_no_descriptors"] == 1 || s["shed_no_descriptors"] == 2, "{s}");
    assert_nodes_healthy(&switch);
}

#[test]
fn out_of_descriptors_connects_and_health_checks_fail_without_a_node_leaving_and_service_returns_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let nodes = start_nodes(dir.path());
    let switch = start_switch(dir.path(), &nodes, "[health]\ninterval_ms = 100\nfall = 2\n", None);
    let mut open = TcpStream::connect(switch.addrs[0]).unwrap();
    wait_for("the connection open", READ_TIMEOUT, || status(switch.addrs[1])["connections"] == 1);
    assert_nodes_healthy(&switch);
    let original = switch.limit().0;

    // Only the standard streams fit: every connect, accept and health check fails (EMFILE).
    switch.set_soft_limit(3);
    let reply = exchange(&mut open, &get_request("/hello.txt")).expect("answered, not left hanging");
    assert!(is_status(&reply, 503) && reply.contains("Connection: close"), "{reply}");
    let mut waiting = TcpStream::connect(switch.addrs[0]).unwrap();
    waiting.write_all(get_request("/hello.txt").as_bytes()).unwrap();
    // Long enough for many failed health checks (fall = 2 at 100 ms) and no longer.
    std::thread::sleep(Duration::from_secs(1));

    switch.set_soft_limit(original);
    let freed = Instant::now();
    let reply = exchange(&mut waiting, "").expect("the waiting client is served");
    let took = freed.elapsed();
    assert!(took < RECOVERY, "served {took:?} after descriptors were free");
    assert!(is_status(&reply, 200) && reply.ends_with("hello\n"), "{reply}");
    eprintln!("the waiting client was served {took:?} after descriptors were free again");
    assert_nodes_healthy(&switch);
    assert!(switch.log().contains("Too many open files"), "{}", switch.log());
}

#[test]
fn short_of_descriptors_a_node_answers_new_connections_503_serves_open_ones_and_recovers() {
    let dir = tempfile::tempdir().unwrap();
    let nodes = start_nodes(dir.path());
    let node = &nodes[0];
    let mut open = TcpStream::connect(node.addrs[0]).unwrap();
    let reply = exchange(&mut open, &get_request("/hello.txt")).unwrap();
    assert!(is_status(&reply, 200), "{reply}");
    let original = node.limit().0;

    // Within the headroom: new connections are shed, the open one still opens files.
    let (free, table) = node.lowest_free_descriptor();
    node.set_soft_limit(free + 8);
    let reply = get(node.addrs[0], "/hello.txt").expect("a shed connection is answered");
    let shed = is_status(&reply, 503) && reply.contains("X-Locus-Node: n1");
    assert!(shed, "{reply}\nthe limit was {} from the table {table}", free + 8);
    let reply = exchange(&mut open, &get_request("/a.txt")).unwrap();
    assert!(is_status(&reply, 200) && reply.ends_with("a\n"), "{reply}");

    // None left: a new connection is refused with the spare descriptor, and a document that
    // cannot be opened is a 503, not a 500.
    node.set_soft_limit(node.lowest_free_descriptor().0);
    let reply = get(node.addrs[0], "/hello.txt").expect("a refused connection is answered");
    assert!(is_status(&reply, 503), "{reply}");
    let reply = exchange(&mut open, &get_request("/b.txt")).unwrap();
    assert!(is_status(&reply, 503), "{reply}");

    node.set_soft_limit(original);
    let took = wait_for("the node serving a new connection", RECOVERY, || {
        get(node.addrs[0], "/b.txt").is_some_and(|r| is_status(&r, 200))
    });
    eprintln!("the node served again {took:?} after the limit was restored");
    let reply = exchange(&mut open, &get_request("/c.txt")).unwrap();
    assert!(is_status(&reply, 200) && reply.ends_with("c\n"), "{reply}");
}

#[test]
fn switch_and_node_raise_their_soft_limit_to_the_hard_one() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("root")).unwrap();
    let root = dir.path().join("root");
    let args = ["node", "--listen", "127.0.0.1:0", "--root", root.to_str().unwrap(), "--workers", "1"];
    let hard = own_limit().1.min(4096);
    let node = Server::start(dir.path(), "node", &args, Some((hard / 2, hard)), 1);
    assert_eq!(node.limit(), (hard, hard));
    let spec = node.addrs[0].to_string();
    let args = ["switch", "--listen", "127.0.0.1:0", "--node", &spec, "--workers", "1"];
    let switch = Server::start(dir.path(), "switch", &args, Some((hard / 2, hard)), 1);
    assert_eq!(switch.limit(), (hard, hard));
    assert!(switch.log().contains("raised the open-file limit"), "{}", switch.log());
}

#[test]
fn a_node_whose_limit_cannot_hold_max_connections_starts_with_fewer_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("root")).unwrap();
    let root = dir.path().join("root");
    let args = ["node", "--listen", "127.0.0.1:0", "--root", root.to_str().unwrap(), "--workers", "1"];
    std::fs::write(root.join("hello.txt"), "hello\n").unwrap();
    let node = Server::start(dir.path(), "node", &args, Some((256, 256)), 1);
    let log = node.log();
    assert!(log.contains("max_connections = 10000") && log.contains("taking at most"), "{log}");
    assert!(is_status(&get(node.addrs[0], "/hello.txt").unwrap(), 200));
}

#[test]
fn switch_check_reports_a_lowered_connection_limit_and_refuses_a_limit_without_room() {
    let check = |soft: u64| {
        let mut cmd = Command::new(LOCUS);
        cmd.args(["switch", "--check", "--node", "127.0.0.1:1", "--workers", "2"]);
        // SAFETY: the closure only calls setrlimit (async-signal-safe) on the child.
        unsafe {
            cmd.pre_exec(move || {
                if libc::setrlimit(libc::RLIMIT_NOFILE, &rlimit(soft, soft)) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        cmd.output().unwrap()
    };
    let out = check(1024);
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("warning: limits.max_connections = 10000 needs"), "{stderr}");
    assert!(stderr.contains("open-file limit is 1024 (hard 1024)"), "{stderr}");
    assert!(stdout.contains("configuration OK") && stdout.contains("open-file limit 1024"), "{stdout}");

    let out = check(64);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains("cannot hold one connection"), "{stderr}");
}
