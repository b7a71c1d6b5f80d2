//! A node serving HTTPS (`[tls]`): files of every path (in the output queue, cached pages,
//! streamed from disk) arrive byte for byte over keep-alive and pipelined requests; cleartext
//! HTTP on the port is answered 400 in cleartext; garbage and stalled handshakes are closed
//! and counted by reason; a renegotiation is refused; a handshake flood is shed at its bound
//! while an established connection is still served; a key file others can read stops the node.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

use common::{Client, TestNode, pattern};
use locus_node::{NodeConfig, NodeServer};
use locus_test_support::{client_config, wait_until, write_pair};
use locus_tls::TlsSettings;

/// A node serving TLS with a certificate for `localhost` (written into a directory beside the
/// root), `edit` applied to its settings; and the certificate's PEM.
fn tls_node(edit: impl FnOnce(&mut TlsSettings, &mut NodeConfig)) -> (TestNode, tempfile::TempDir, String) {
    let keys = tempfile::tempdir().unwrap();
    let (crt, key, pem) = write_pair(keys.path(), "node", &["localhost"], (2020, 2090));
    let node = TestNode::start(|c, _| {
        let mut tls = TlsSettings::single(crt, key);
        edit(&mut tls, c);
        c.tls = Some(tls);
    });
    (node, keys, pem)
}

fn tls_status(node: &TestNode) -> serde_json::Value {
    node.server().status()["tls"].clone()
}

#[test]
fn files_of_every_size_arrive_intact_over_keep_alive_and_pipelined_https() {
    let (node, _keys, pem) = tls_node(|_, _| {});
    let files = [("small.txt", 700), ("cached.bin", 300 << 10), ("large.bin", 3 << 20)];
    for (i, (name, len)) in files.iter().enumerate() {
        node.write(name, &pattern(*len, i as u8));
    }
    let mut c = Client::connect_tls(node.addr(), client_config(&pem), "localhost");
    // Twice each: the second time the cached ones come from the cache's pages.
    for _ in 0..2 {
        for (i, (name, len)) in files.iter().enumerate() {
            let r = c.get(&format!("/{name}"));
            assert_eq!(r.status, 200, "{name}");
            assert!(r.body == pattern(*len, i as u8), "{name}: {} bytes, not the file", r.body.len());
        }
    }
    // Three pipelined in one write.
    c.send(
        files
            .iter()
            .map(|(n, _)| format!("GET /{n} HTTP/1.1\r\nHost: localhost\r\n\r\n"))
            .collect::<String>(),
    );
    for (i, (name, len)) in files.iter().enumerate() {
        assert!(c.response(false).body == pattern(*len, i as u8), "pipelined {name}");
    }
    let s = tls_status(&node);
    assert_eq!(s["handshakes_full"], 1, "{s}");
    assert_eq!(s["versions"]["TLSv1.3"], 1, "{s}");
    assert_eq!(s["certificates"][0]["names"][0], "localhost", "{s}");
    assert!(s["days_to_first_expiry"].as_i64().unwrap() > 365, "{s}");
}

#[test]
fn cleartext_http_on_the_https_port_is_answered_400_in_cleartext() {
    let (node, _keys, _) = tls_node(|_, _| {});
    let r = node.get("/anything");
    assert_eq!(r.status, 400);
    assert!(r.text().contains("HTTPS"), "{}", r.text());
    assert_eq!(r.served_by(), Some("t1"));
    assert_eq!(tls_status(&node)["handshakes_failed"]["cleartext"], 1);
}

#[test]
fn garbage_and_a_stalled_handshake_are_closed_and_counted_by_reason() {
    let (node, _keys, _) = tls_node(|_, c| c.limits.header_timeout_ms = 300);
    let mut garbage = TcpStream::connect(node.addr()).unwrap();
    garbage.write_all(&[0x16, 0x03, 0x01, 0x00, 0x05, 1, 2, 3, 4, 5]).unwrap();
    garbage.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut rest = Vec::new();
    let _ = garbage.read_to_end(&mut rest);
    assert!(rest.is_empty() || rest[0] == 0x15, "closed, or an alert: {rest:?}");

    let mut stalled = TcpStream::connect(node.addr()).unwrap();
    stalled.write_all(&[0x16, 0x03, 0x01]).unwrap();
    stalled.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut rest = Vec::new();
    let _ = stalled.read_to_end(&mut rest);
    assert!(rest.is_empty(), "nothing but a close: {rest:?}");
    wait_until("both failures counted", || {
        let s = tls_status(&node);
        s["handshakes_failed"]["malformed"] == 1 && s["handshakes_failed"]["timeout"] == 1
    });
    assert_eq!(node.server().status()["requests_total"], 0, "no request was made of either");
}

#[test]
fn a_handshake_flood_is_shed_at_its_bound_while_an_established_connection_is_served() {
    let (node, _keys, pem) = tls_node(|t, c| {
        t.max_handshakes = 4;
        c.limits.header_timeout_ms = 20_000;
    });
    node.write("a.txt", b"a");
    let mut established = Client::connect_tls(node.addr(), client_config(&pem), "localhost");
    assert_eq!(established.get("/a.txt").text(), "a");
    // Eight handshakes begun and never finished (within the 20-s header timeout): four hold the
    // bound, four are shed.
    let stalled: Vec<TcpStream> = (0..8)
        .map(|_| {
            let mut s = TcpStream::connect(node.addr()).unwrap();
            s.write_all(&[0x16, 0x03, 0x01]).unwrap();
            s
        })
        .collect();
    wait_until("four shed", || tls_status(&node)["handshakes_failed"]["shed"] == 4);
    assert_eq!(tls_status(&node)["handshakes_in_progress"], 4);
    assert_eq!(established.get("/a.txt").text(), "a", "the established connection is still served");
    drop(stalled);
    wait_until("the bound free again", || tls_status(&node)["handshakes_in_progress"] == 0);
    let mut fresh = Client::connect_tls(node.addr(), client_config(&pem), "localhost");
    assert_eq!(fresh.get("/a.txt").text(), "a");
}

#[test]
fn a_key_file_others_can_read_stops_the_node_from_starting_naming_the_file() {
    let keys = tempfile::tempdir().unwrap();
    let root = tempfile::tempdir().unwrap();
    let (crt, key, _) = write_pair(keys.path(), "node", &["localhost"], (2020, 2090));
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o644)).unwrap();
    let config = NodeConfig {
        root: root.path().to_path_buf(),
        tls: Some(TlsSettings::single(crt, key)),
        ..NodeConfig::default()
    };
    let e = NodeServer::start(config).err().expect("refused").to_string();
    assert!(e.contains("node.key"), "{e}");
}

#[test]
fn cleartext_from_a_configured_peers_address_is_served_for_node_to_node_traffic() {
    let (node, _keys, pem) = tls_node(|_, c| {
        c.coop =
            Some(locus_node::CoopConfig { peers: vec!["http://127.0.0.1:9".into()], ..Default::default() });
    });
    node.write("a.txt", b"a");
    assert_eq!(node.get("/a.txt").text(), "a", "a peer on 127.0.0.1 speaks cleartext");
    let mut c = Client::connect_tls(node.addr(), client_config(&pem), "localhost");
    assert_eq!(c.get("/a.txt").text(), "a", "and clients HTTPS");
}

#[test]
fn a_renegotiation_attempt_is_refused_and_the_node_serves_on() {
    let (node, _keys, pem) = tls_node(|_, _| {});
    node.write("a.txt", b"a");
    // OpenSSL's client renegotiates when it reads a line `R` (TLS 1.2; 1.3 has none).
    let mut client = std::process::Command::new("openssl")
        .args(["s_client", "-connect", &node.addr().to_string(), "-tls1_2", "-servername", "localhost"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("openssl (./quickstart installs it)");
    let mut stdin = client.stdin.take().unwrap();
    stdin.write_all(b"R\n").unwrap();
    let out = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_secs(2));
        drop(stdin);
    });
    let output = client.wait_with_output().unwrap();
    out.join().unwrap();
    let text = String::from_utf8_lossy(&output.stdout).to_string() + &String::from_utf8_lossy(&output.stderr);
    assert!(text.contains("RENEGOTIATING") && text.contains("no renegotiation"), "{text}");
    let mut fresh = Client::connect_tls(node.addr(), client_config(&pem), "localhost");
    assert_eq!(fresh.get("/a.txt").text(), "a", "the node serves on");
    assert_eq!(tls_status(&node)["versions"]["TLSv1.2"], 1, "the refused session was TLS 1.2");
}
