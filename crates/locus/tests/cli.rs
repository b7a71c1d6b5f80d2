//! End-to-end tests of the `locus` executable: configuration errors name the key and line,
//! and a switch and node started from the command line serve, then drain and exit cleanly on
//! SIGTERM.

use locus_test_support::get;
use std::io::{BufRead, BufReader, Read};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const LOCUS: &str = env!("CARGO_BIN_EXE_locus");

/// A child killed on drop.
struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Start `locus args…` and read its address from the first stdout line containing "http://"
/// or "listening on".
fn start(args: &[&str]) -> (Proc, SocketAddr) {
    let mut child =
        Command::new(LOCUS).args(args).stdout(Stdio::piped()).stderr(Stdio::null()).spawn().unwrap();
    let stdout = child.stdout.take().unwrap();
    let mut line = String::new();
    BufReader::new(stdout).read_line(&mut line).unwrap();
    let addr = line
        .split_whitespace()
        .find_map(|w| w.trim_start_matches("http://").parse::<SocketAddr>().ok())
        .unwrap_or_else(|| panic!("no address in {line:?}"));
    (Proc(child), addr)
}

fn sigterm_and_wait(p: &mut Proc) -> std::process::ExitStatus {
    // SAFETY: kill with a pid of our own child.
    unsafe { libc::kill(p.0.id() as i32, libc::SIGTERM) };
    let start = Instant::now();
    loop {
        if let Some(status) = p.0.try_wait().unwrap() {
            return status;
        }
        assert!(start.elapsed() < Duration::from_secs(10), "no exit within 10 s of SIGTERM");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn config_errors_name_the_bad_key_and_its_line() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("switch.toml");
    std::fs::write(&path, "listen = \"127.0.0.1:0\"\n\n[health]\nintervl_ms = 5\n").unwrap();
    let out = Command::new(LOCUS).args(["switch", "--check", "-c"]).arg(&path).output().unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("intervl_ms") && err.contains("line 4"), "{err}");
    assert!(err.contains("switch.toml"), "{err}");

    let path = dir.path().join("node.toml");
    std::fs::write(&path, "name = \"n\"\n[cache]\ncapacty = \"1MiB\"\n").unwrap();
    let out = Command::new(LOCUS).args(["node", "--config"]).arg(&path).output().unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("capacty") && err.contains("line 3"), "{err}");
}

#[test]
fn switch_and_node_serve_then_exit_cleanly_on_sigterm() {
    let root = tempfile::tempdir().unwrap();
    std::fs::write(root.path().join("hello.txt"), "hello from the node\n").unwrap();
    let root_arg = root.path().to_str().unwrap();
    let (mut node, node_addr) =
        start(&["node", "--listen", "127.0.0.1:0", "--root", root_arg, "--name", "n1", "--workers", "1"]);
    let node_spec = format!("n1={node_addr}");
    let (mut switch, addr) = start(&[
        "switch",
        "--listen",
        "127.0.0.1:0",
        "--node",
        &node_spec,
        "--policy",
        "lard",
        "--workers",
        "1",
    ]);
    let reply = get(addr, "/hello.txt");
    assert_eq!(reply.status, 200, "{reply:?}");
    assert!(reply.served_by().is_some_and(|n| n.starts_with("n1")), "{reply:?}");
    assert!(reply.text().ends_with("hello from the node\n"), "{reply:?}");
    assert!(sigterm_and_wait(&mut switch).success());
    assert!(TcpStream::connect(addr).is_err(), "switch still accepting after exit");
    assert!(sigterm_and_wait(&mut node).success());
}

#[test]
fn a_sigterm_right_after_the_address_is_printed_still_drains_and_exits_cleanly() {
    let root = tempfile::tempdir().unwrap();
    let root_arg = root.path().to_str().unwrap();
    for _ in 0..5 {
        let (mut node, node_addr) =
            start(&["node", "--listen", "127.0.0.1:0", "--root", root_arg, "--name", "n1", "--workers", "1"]);
        let node_spec = format!("n1={node_addr}");
        let (mut switch, _) =
            start(&["switch", "--listen", "127.0.0.1:0", "--node", &node_spec, "--workers", "1"]);
        assert!(sigterm_and_wait(&mut switch).success(), "the switch was killed by the signal");
        assert!(sigterm_and_wait(&mut node).success(), "the node was killed by the signal");
    }
}

#[test]
fn switch_help_lists_every_mode_including_l4() {
    let out = Command::new(LOCUS).args(["switch", "--help"]).output().unwrap();
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout);
    let mode_help = &help[help.find("--mode").expect("--mode in the help")..];
    let mode_help = &mode_help[..mode_help.find("--policy").unwrap_or(mode_help.len())];
    for mode in ["proxy", "splice", "handoff", "l4"] {
        assert!(mode_help.contains(&format!("{mode}:")), "--mode help lacks {mode}: {mode_help}");
    }
}

#[test]
fn logs_written_to_a_pipe_carry_no_colour_escapes() {
    let root = tempfile::tempdir().unwrap();
    let mut child = Command::new(LOCUS)
        .args(["node", "--listen", "127.0.0.1:0", "--workers", "1", "--root"])
        .arg(root.path())
        .env_remove("LOCUS_LOG")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let mut node = Proc(child);
    let mut stderr = BufReader::new(stderr);
    // Up to the start line (a warning may come first, e.g. max_connections fitted to the
    // open-file limit), then the rest of the log, to its end: the reader stays open until the
    // node has exited.
    let mut line = String::new();
    while !line.contains("node started") {
        assert!(line.lines().count() < 20, "no start line in {line:?}");
        assert!(stderr.read_line(&mut line).unwrap() > 0, "the log ended before the start line: {line:?}");
    }
    let status = sigterm_and_wait(&mut node);
    stderr.read_to_string(&mut line).unwrap();
    assert!(status.success(), "{status}: {line}");
    assert!(!line.contains("\x1b["), "colour escapes in a piped log: {line:?}");
}

#[test]
fn node_takes_dash_c_and_check_like_the_switch() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("site");
    std::fs::create_dir(&root).unwrap();
    let path = dir.path().join("node.toml");
    std::fs::write(&path, "name = \"n3\"\nroot = \"site\"\nlisten = \"127.0.0.1:1\"\n").unwrap();
    let out = Command::new(LOCUS).args(["node", "--check", "-c"]).arg(&path).output().unwrap();
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{stdout}{stderr}");
    assert!(stdout.starts_with("configuration OK: node n3"), "{stdout}");

    // --check reads what the node would start from: a missing document root fails it.
    std::fs::remove_dir(&root).unwrap();
    let out = Command::new(LOCUS).args(["node", "--check", "-c"]).arg(&path).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && out.stdout.is_empty(), "{stderr}");
    assert!(stderr.contains("document root") && stderr.contains("site"), "{stderr}");

    let path = dir.path().join("switch.toml");
    std::fs::write(&path, "[[node]]\naddr = \"127.0.0.1:1\"\n").unwrap();
    let out = Command::new(LOCUS).args(["switch", "--check", "-c"]).arg(&path).output().unwrap();
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("configuration OK: 1 nodes"));
}

#[test]
fn an_os_error_is_printed_once() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing");
    let missing = missing.to_str().unwrap();
    let key = format!("--handoff-key-file={missing}");
    let runs: [&[&str]; 4] = [
        &["switch", "-c", missing],
        &["switch", "--check", "--mode", "handoff", "--node", "n=127.0.0.1:1@127.0.0.1:2", &key],
        &["node", "--listen", "127.0.0.1:0", "--root", missing],
        &["node", "--check", "-c", missing],
    ];
    for args in runs {
        let out = Command::new(LOCUS).args(args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} succeeded");
        assert!(err.contains(missing), "{args:?}: {err}");
        assert_eq!(err.matches("os error").count(), 1, "{args:?}: {err}");
    }
}

/// The first address after `prefix` in the next lines of `out`.
fn address_after(out: &mut impl BufRead, prefix: &str) -> SocketAddr {
    let mut line = String::new();
    while out.read_line(&mut line).unwrap() > 0 {
        if let Some(rest) = line.split(prefix).nth(1) {
            let addr = rest.trim().trim_start_matches("http://").split('/').next().unwrap();
            return addr.parse().unwrap_or_else(|_| panic!("no address in {line:?}"));
        }
        line.clear();
    }
    panic!("no line with {prefix:?}");
}

#[test]
fn a_node_slower_than_the_health_check_is_reported_as_timed_out() {
    // Every request for / costs 400 ms of modelled disk time (no cache); the check allows 100.
    let root = tempfile::tempdir().unwrap();
    std::fs::write(root.path().join("index.html"), "hi\n").unwrap();
    let mut node = Command::new(LOCUS)
        .args(["node", "--listen", "127.0.0.1:0", "--workers", "1", "--cache-size", "0"])
        .args(["--storage", "seek_ms=400,mb_s=10,disks=1", "--root"])
        .arg(root.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut node_out = BufReader::new(node.stdout.take().unwrap());
    let _node = Proc(node);
    let node_addr = address_after(&mut node_out, "listening on ");
    let config = root.path().join("switch.toml");
    let toml = format!(
        "listen = \"127.0.0.1:0\"\nadmin = \"127.0.0.1:0\"\nworkers = 1\n[[node]]\nname = \"slow\"\naddr = \"{node_addr}\"\n\
         [health]\ninterval_ms = 50\ntimeout_ms = 100\nfall = 1\n"
    );
    std::fs::write(&config, toml).unwrap();
    let mut switch = Command::new(LOCUS)
        .args(["switch", "-c"])
        .arg(&config)
        .env("LOCUS_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut switch_out = BufReader::new(switch.stdout.take().unwrap());
    let switch_err = BufReader::new(switch.stderr.take().unwrap());
    let _switch = Proc(switch);
    let admin = address_after(&mut switch_out, "admin on ");

    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in switch_err.lines().map_while(Result::ok) {
            if line.contains("node out of the view") && tx.send(line).is_err() {
                return;
            }
        }
    });
    let log = rx.recv_timeout(Duration::from_secs(10)).expect("no 'node out of the view' in the log");
    assert!(log.contains("slow") && log.contains("timed out") && log.contains("100 ms"), "{log}");

    let status: serde_json::Value = serde_json::from_slice(&get(admin, "/locus/status").body).unwrap();
    let node = &status["nodes"][0];
    assert_eq!(node["up"], false, "{node}");
    let check = &node["last_check"];
    assert_eq!(check["passed"], false, "{check}");
    assert!(check["failure"].as_str().unwrap().contains("timed out"), "{check}");
    assert!(check["took_ms"].as_u64().unwrap() >= 100, "{check}");
}
