//! `locus node --tls-cert --tls-key` as an operator runs it: it serves HTTPS, SIGHUP makes new
//! handshakes use the certificate now in the files while an open connection goes on being
//! served, and a key file made readable by others is refused on reload (logged, naming the
//! file) with the running certificate kept.

use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::process::{Child, Command, Stdio};

use locus_test_support::{Client, client_config, wait_until, write_pair};

const LOCUS: &str = env!("CARGO_BIN_EXE_locus");

/// The node process, killed on drop.
struct Node(Child);

impl Drop for Node {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn sighup(node: &Node) {
    // SAFETY: kill on our own child's pid.
    assert_eq!(unsafe { libc::kill(node.0.id() as i32, libc::SIGHUP) }, 0);
}

/// Whether a client trusting only `pem` completes a handshake and a request.
fn served_with(addr: std::net::SocketAddr, pem: &str) -> bool {
    let config = client_config(pem);
    let tcp = std::net::TcpStream::connect(addr).unwrap();
    tcp.set_read_timeout(Some(std::time::Duration::from_secs(10))).unwrap();
    let conn = rustls::ClientConnection::new(config, "localhost".try_into().unwrap()).unwrap();
    let mut stream = rustls::StreamOwned::new(conn, tcp);
    while stream.conn.is_handshaking() {
        if stream.conn.complete_io(&mut stream.sock).is_err() {
            return false;
        }
    }
    Client::from_tls_stream(stream).get("/a.txt").text() == "a"
}

#[test]
fn sighup_reloads_the_certificate_for_new_handshakes_and_keeps_open_connections() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    std::fs::create_dir(&root).unwrap();
    std::fs::write(root.join("a.txt"), "a").unwrap();
    let (crt, key, first) = write_pair(dir.path(), "site", &["localhost"], (2020, 2090));
    let log = dir.path().join("node.log");
    let args = ["node", "--listen", "127.0.0.1:0", "--root", root.to_str().unwrap(), "--workers", "1"];
    let child = Command::new(LOCUS)
        .args(args)
        .args(["--tls-cert", crt.to_str().unwrap(), "--tls-key", key.to_str().unwrap()])
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let mut node = Node(child);
    let mut line = String::new();
    BufReader::new(node.0.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let addr: std::net::SocketAddr = line.trim().rsplit("https://").next().unwrap().parse().unwrap();

    let mut open = Client::connect_tls(addr, client_config(&first), "localhost");
    assert_eq!(open.get("/a.txt").text(), "a");

    // A new certificate and key in the same files, then SIGHUP.
    let (_, _, second) = write_pair(dir.path(), "site", &["localhost"], (2021, 2091));
    sighup(&node);
    wait_until("new handshakes use the new certificate", || served_with(addr, &second));
    assert!(!served_with(addr, &first), "the old certificate is no longer offered");
    assert_eq!(open.get("/a.txt").text(), "a", "the connection opened before goes on");

    // A key file open to others: refused on reload, the running certificate stays.
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o644)).unwrap();
    sighup(&node);
    wait_until("the refusal logged", || std::fs::read_to_string(&log).unwrap().contains("reload refused"));
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(text.contains("site.key"), "the log names the file: {text}");
    assert!(served_with(addr, &second));
    drop(node);
}
