//! Integration tests of the binary upgrade (in-process switches, proxy mode, a scripted
//! back-end): a new switch takes the running one's listening sockets over its control socket
//! while clients keep connecting, and no request fails; the old one stops accepting and
//! drains; a third generation is refused while the first is still draining and taken once it
//! has gone; a takeover from nowhere, or one whose new switch cannot start, leaves the running
//! switch serving.

mod common;

use common::*;
use locus_policy::PolicyConfig;
use locus_switch::{NodeEntry, SwitchConfig, SwitchError, SwitchServer};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::Relaxed};
use std::time::Duration;

fn config(backend: SocketAddr, socket: &Path) -> SwitchConfig {
    SwitchConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        control_socket: Some(socket.to_path_buf()),
        workers: 2,
        policy: PolicyConfig::from_name("rr").unwrap(),
        nodes: vec![NodeEntry {
            name: Some("n0".into()),
            addr: backend,
            weight: 1,
            handoff: None,
            admin: None,
        }],
        ..SwitchConfig::default()
    }
}

fn backend() -> ScriptedBackend {
    ScriptedBackend::start(|r| {
        let reply = ok_response(b"hello", "");
        if r.target == "/slow" {
            Action::Delay(Duration::from_millis(800), reply)
        } else {
            Action::Reply(reply)
        }
    })
}

/// One request on a new connection: whether a whole 200 came back.
fn one_request(addr: SocketAddr, path: &str) -> bool {
    let Ok(mut s) = TcpStream::connect(addr) else { return false };
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    if s.write_all(format!("GET {path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n").as_bytes()).is_err()
    {
        return false;
    }
    let mut answer = Vec::new();
    s.read_to_end(&mut answer).is_ok() && answer.starts_with(b"HTTP/1.1 200") && answer.ends_with(b"hello")
}

/// Clients making a connection per request until `stop`; (done, failed).
fn load(addr: SocketAddr, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<(usize, usize)> {
    std::thread::spawn(move || {
        let (done, failed) = (AtomicUsize::new(0), AtomicUsize::new(0));
        while !stop.load(Relaxed) {
            let counter = if one_request(addr, "/x") { &done } else { &failed };
            counter.fetch_add(1, Relaxed);
        }
        (done.into_inner(), failed.into_inner())
    })
}

#[test]
fn a_new_switch_takes_the_sockets_over_and_no_request_fails() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("switch.sock");
    let b = backend();
    let old = SwitchServer::start(config(b.addr, &socket)).unwrap();
    let addr = old.addr();
    let stop = Arc::new(AtomicBool::new(false));
    let clients: Vec<_> = (0..3).map(|_| load(addr, stop.clone())).collect();
    assert!(wait_until(Duration::from_secs(5), || b.requests() >= 50), "load running");
    let new = SwitchServer::start_taking_over(config(b.addr, &socket), &socket).unwrap();
    assert_eq!(new.addr(), addr, "the same sockets");
    assert!(
        wait_until(Duration::from_secs(5), || old.status()["shutting_down"] == true),
        "the old switch stopped accepting"
    );
    let served_before = new.status()["requests"].as_u64().unwrap();
    assert!(wait_until(Duration::from_secs(5), || new.status()["requests"].as_u64().unwrap()
        >= served_before + 50));
    old.shutdown();
    assert!(socket.exists(), "the control socket's file stays, the new switch serves it");
    stop.store(true, Relaxed);
    let (done, failed): (usize, usize) =
        clients.into_iter().map(|c| c.join().unwrap()).fold((0, 0), |(d, f), (a, b)| (d + a, f + b));
    assert_eq!(failed, 0, "{done} requests done");
    // The new switch answers its control socket.
    let mut s = std::os::unix::net::UnixStream::connect(&socket).unwrap();
    s.write_all(b"nodes\n").unwrap();
    let mut answer = String::new();
    std::io::BufRead::read_line(&mut std::io::BufReader::new(s), &mut answer).unwrap();
    assert!(answer.contains("\"ok\":true"), "{answer}");
    new.shutdown();
    assert!(!socket.exists());
}

#[test]
fn a_third_generation_waits_until_the_first_has_drained() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("switch.sock");
    let b = backend();
    let first = SwitchServer::start(config(b.addr, &socket)).unwrap();
    let addr = first.addr();
    // Half a request keeps the first generation draining until the rest is sent (the first
    // switch has accepted it: its session is reading the head).
    let mut pending = TcpStream::connect(addr).unwrap();
    pending.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    pending.write_all(b"GET /x HTTP/1.1\r\nHost: t\r\n").unwrap();
    assert!(
        wait_until(Duration::from_secs(5), || first.status()["connections"] == 1),
        "the first switch has it"
    );
    let second = SwitchServer::start_taking_over(config(b.addr, &socket), &socket).unwrap();
    let draining = std::thread::spawn(move || first.shutdown());
    // Refused: by the second (its predecessor drains) or, when the first took the connection
    // on the socket they share for a moment, by the first (it has handed its sockets over).
    for _ in 0..3 {
        match SwitchServer::start_taking_over(config(b.addr, &socket), &socket) {
            Err(SwitchError::Takeover(e)) if e.to_string().contains("still draining") => {}
            Err(SwitchError::Takeover(e)) if e.to_string().contains("handed its sockets over already") => {}
            Err(e) => panic!("{e}"),
            Ok(_) => panic!("three generations at once"),
        }
    }
    assert!(one_request(addr, "/x"), "the second generation serves on");
    // The rest of the request: the first switch answers it, drains and exits.
    pending.write_all(b"\r\n").unwrap();
    let mut answer = Vec::new();
    pending.read_to_end(&mut answer).unwrap();
    assert!(
        answer.starts_with(b"HTTP/1.1 200") && answer.ends_with(b"hello"),
        "the first generation's request finished"
    );
    draining.join().unwrap();
    let third = SwitchServer::start_taking_over(config(b.addr, &socket), &socket).unwrap();
    assert!(one_request(addr, "/x"));
    second.shutdown();
    third.shutdown();
}

#[test]
fn a_failed_takeover_leaves_the_running_switch_serving() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("switch.sock");
    let nowhere = SwitchServer::start_taking_over(config(backend().addr, &socket), &socket);
    assert!(matches!(nowhere, Err(SwitchError::Takeover(_))), "no switch to take over from");
    let b = backend();
    let old = SwitchServer::start(config(b.addr, &socket)).unwrap();
    // The new switch's configuration does not check: it never starts, the old one serves on.
    let mut bad = config(b.addr, &socket);
    bad.nodes.clear();
    assert!(SwitchServer::start_taking_over(bad, &socket).is_err());
    assert!(wait_until(Duration::from_secs(5), || one_request(old.addr(), "/x")));
    assert_eq!(old.status()["shutting_down"], false);
    // And it can still be taken over afterwards.
    let new = SwitchServer::start_taking_over(config(b.addr, &socket), &socket).unwrap();
    assert!(one_request(new.addr(), "/x"));
    old.shutdown();
    new.shutdown();
}
