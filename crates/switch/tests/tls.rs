//! The switch's TLS listener (`listen_tls` with `[tls]`): every request of one HTTPS
//! connection is dispatched on its own (two nodes take turns under rr), bodies larger than
//! every buffer arrive intact, nodes are told `X-Forwarded-Proto: https` and the client's
//! address; splice mode proxies TLS clients and says so; cleartext on the TLS port is answered
//! 400 and garbage closed, neither reaching a node; the cleartext listener can redirect to
//! HTTPS; l4 mode and a key file others can read are refused at start-up.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

use common::{Action, ScriptedBackend, ok_response, pattern, switch_config};
use locus_switch::{Mode, SwitchConfig, SwitchServer};
use locus_test_support::{Client, client_config, wait_until, write_pair};
use locus_tls::TlsSettings;

/// A back-end answering every request with a body of `len` patterned bytes, its name and the
/// forwarding headers it saw in response headers.
fn backend(name: &'static str, len: usize) -> ScriptedBackend {
    ScriptedBackend::start(move |r| {
        let extra = format!(
            "X-Node: {name}\r\nX-Saw-Proto: {}\r\nX-Saw-For: {}\r\n",
            r.header("x-forwarded-proto").unwrap_or("-"),
            r.header("x-forwarded-for").unwrap_or("-")
        );
        Action::Reply(ok_response(&pattern(len, 7), &extra))
    })
}

/// `config` with a TLS listener on an ephemeral port and a certificate for `localhost`
/// written into `dir`; the certificate's PEM.
fn with_tls(mut config: SwitchConfig, dir: &std::path::Path) -> (SwitchConfig, String) {
    let (crt, key, pem) = write_pair(dir, "switch", &["localhost"], (2020, 2090));
    config.listen_tls = Some("127.0.0.1:0".parse().unwrap());
    config.tls = Some(TlsSettings::single(crt, key));
    (config, pem)
}

#[test]
fn each_request_of_an_https_connection_is_dispatched_and_its_body_arrives_intact() {
    let (a, b) = (backend("n0", 2 << 20), backend("n1", 2 << 20));
    let dir = tempfile::tempdir().unwrap();
    let (config, pem) = with_tls(switch_config(Mode::Proxy, &[a.addr, b.addr], "rr"), dir.path());
    let switch = SwitchServer::start(config).unwrap();
    let mut c = Client::connect_tls(switch.tls_addr().unwrap(), client_config(&pem), "localhost");
    let mut served = Vec::new();
    for i in 0..4 {
        let r = c.get(&format!("/doc{i}"));
        assert_eq!(r.status, 200);
        assert!(r.body == pattern(2 << 20, 7), "request {i}: the 2 MiB body, byte for byte");
        assert_eq!(r.header("x-saw-proto"), Some("https"));
        assert_eq!(r.header("x-saw-for"), Some("127.0.0.1"));
        served.push(r.header("x-node").unwrap().to_string());
    }
    assert_eq!(served, ["n0", "n1", "n0", "n1"], "one connection, every request dispatched on its own");
    let s = switch.status();
    assert_eq!(s["tls"]["handshakes_full"], 1, "{}", s["tls"]);
    assert_eq!(s["tls"]["served_by"], "proxy");
    // The cleartext listener still says http.
    let r = Client::connect(switch.addr()).get("/plain");
    assert_eq!(r.header("x-saw-proto"), Some("http"));
    switch.shutdown();
}

#[test]
fn splice_mode_proxies_tls_clients_and_its_status_says_so() {
    let a = backend("n0", 300_000);
    let dir = tempfile::tempdir().unwrap();
    let (config, pem) = with_tls(switch_config(Mode::Splice, &[a.addr], "rr"), dir.path());
    let switch = SwitchServer::start(config).unwrap();
    let mut c = Client::connect_tls(switch.tls_addr().unwrap(), client_config(&pem), "localhost");
    for _ in 0..2 {
        assert!(c.get("/x").body == pattern(300_000, 7), "kept alive and proxied");
    }
    assert_eq!(switch.status()["tls"]["served_by"], "proxy (splice relays cleartext only)");
    switch.shutdown();
}

#[test]
fn cleartext_on_the_tls_port_is_answered_400_and_garbage_closed_neither_reaching_a_node() {
    let a = backend("n0", 10);
    let dir = tempfile::tempdir().unwrap();
    let (config, _) = with_tls(switch_config(Mode::Proxy, &[a.addr], "rr"), dir.path());
    let switch = SwitchServer::start(config).unwrap();
    let tls_addr = switch.tls_addr().unwrap();
    let r = Client::connect(tls_addr).get("/x");
    assert_eq!(r.status, 400);
    assert!(r.text().contains("HTTPS"));
    let mut garbage = TcpStream::connect(tls_addr).unwrap();
    garbage.write_all(&[0x16, 0x03, 0x01, 0x00, 0x05, 1, 2, 3, 4, 5]).unwrap();
    garbage.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut rest = Vec::new();
    let _ = garbage.read_to_end(&mut rest);
    assert!(rest.is_empty() || rest[0] == 0x15, "closed, or an alert: {rest:?}");
    // Counted once `accept` returns, which may be just after the client saw the close.
    wait_until("both counted", || {
        let failed = &switch.status()["tls"]["handshakes_failed"];
        failed["cleartext"] == 1 && failed["malformed"] == 1
    });
    assert_eq!(a.requests(), 0, "nothing reached a node");
    switch.shutdown();
}

#[test]
fn the_cleartext_listener_redirects_to_https_when_asked() {
    let a = backend("n0", 10);
    let dir = tempfile::tempdir().unwrap();
    let (mut config, _) = with_tls(switch_config(Mode::Proxy, &[a.addr], "rr"), dir.path());
    config.redirect_to_https = true;
    let switch = SwitchServer::start(config).unwrap();
    let port = switch.tls_addr().unwrap().port();
    let mut c = Client::connect(switch.addr());
    c.send("GET /a/b?x=1 HTTP/1.1\r\nHost: www.example.com:8080\r\n\r\n");
    let r = c.response(false);
    assert_eq!(r.status, 308);
    assert_eq!(r.header("location"), Some(format!("https://www.example.com:{port}/a/b?x=1").as_str()));
    assert_eq!(c.get("/again").status, 308, "the connection stays open");
    assert_eq!(a.requests(), 0);
    switch.shutdown();
}

#[test]
fn l4_mode_on_a_tls_listener_and_a_key_file_open_to_others_are_refused_at_start() {
    let a = backend("n0", 10);
    let dir = tempfile::tempdir().unwrap();
    let (config, _) = with_tls(common::one_node_config(Mode::L4, a.addr), dir.path());
    let e = config.validate().expect_err("refused").to_string();
    assert!(e.contains("listen_tls") && e.contains("handoff"), "{e}");
    let (config, _) = with_tls(common::one_node_config(Mode::Handoff, a.addr), dir.path());
    let e = config.validate().err().map(|e| e.to_string());
    assert!(e.as_ref().is_none_or(|e| !e.contains("listen_tls")), "handoff mode terminates TLS: {e:?}");

    let (config, _) = with_tls(switch_config(Mode::Proxy, &[a.addr], "rr"), dir.path());
    let key = &config.tls.as_ref().unwrap().certificates[0].key;
    std::fs::set_permissions(key, std::fs::Permissions::from_mode(0o644)).unwrap();
    let e = SwitchServer::start(config).err().expect("refused").to_string();
    assert!(e.contains("switch.key"), "{e}");
}
