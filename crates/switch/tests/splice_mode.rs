//! Integration tests of the switch in splice mode: the first request of a connection is
//! parsed and routed, then the client and node sockets are joined in the kernel; bodies both
//! ways arrive byte-exact, later requests on the connection stay on the node chosen first,
//! and a node that cannot be reached is replaced before the tunnel starts.

mod common;

use common::*;
use locus_switch::{Mode, SwitchServer};
use locus_test_support::{Client, get};
use std::net::SocketAddr;
use std::sync::Arc;

#[test]
fn tunnel_relays_large_chunked_and_uploaded_bodies_byte_exact() {
    let big = Arc::new(pattern(6 << 20, 21));
    let parts: Vec<Vec<u8>> = (0..20).map(|i| pattern(3000 + i * 1111, i as u64)).collect();
    let backend = {
        let (big, parts) = (big.clone(), parts.clone());
        ScriptedBackend::start(move |r| match r.target.as_str() {
            "/big" => Action::Reply(ok_response(&big, "")),
            "/chunked" => {
                let refs: Vec<&[u8]> = parts.iter().map(|p| p.as_slice()).collect();
                Action::Reply(chunked_response(&refs))
            }
            _ => {
                let sum: u64 = r.body.iter().map(|&b| b as u64).sum();
                Action::Reply(ok_response(format!("{} {sum}", r.body.len()).as_bytes(), ""))
            }
        })
    };
    let sw = SwitchServer::start(switch_config(Mode::Splice, &[backend.addr], "lard")).unwrap();
    let mut c = Client::connect(sw.addr());
    assert!(c.get("/big").body == *big, "6 MiB body differs");
    assert_eq!(c.get("/chunked").body, parts.concat());
    let upload = pattern(2 << 20, 5);
    let sum: u64 = upload.iter().map(|&b| b as u64).sum();
    c.send(format!("PUT /up HTTP/1.1\r\nHost: t\r\nContent-Length: {}\r\n\r\n", upload.len()).as_bytes());
    c.send(&upload);
    assert_eq!(c.read_response(false).unwrap().body, format!("{} {sum}", upload.len()).into_bytes());
    let status = sw.status();
    assert_eq!(status["mode"], "splice");
    assert_eq!(status["requests"], 1, "only the first request of a tunnel is parsed: {status}");
    assert_eq!(status["policy_assignments"], 1, "one dispatch for the tunnel: {status}");
    // A live tunnel would hold the shutdown until the drain timeout.
    drop(c);
    sw.shutdown();
}

#[test]
fn later_requests_on_a_tunnel_stay_on_the_first_node_while_new_connections_are_routed() {
    let a = ScriptedBackend::start(|r| Action::Reply(ok_response(r.target.as_bytes(), "X-Served-By: a\r\n")));
    let b = ScriptedBackend::start(|r| Action::Reply(ok_response(r.target.as_bytes(), "X-Served-By: b\r\n")));
    let sw = SwitchServer::start(switch_config(Mode::Splice, &[a.addr, b.addr], "rr")).unwrap();
    let mut seen_first = Vec::new();
    for _ in 0..4 {
        let mut c = Client::connect(sw.addr());
        let first = c.get("/x").header("x-served-by").unwrap().to_string();
        for i in 0..5 {
            let r = c.get(&format!("/y{i}"));
            assert_eq!(r.body, format!("/y{i}").into_bytes());
            assert_eq!(r.header("x-served-by").unwrap(), first, "a tunnel is bound to its node");
        }
        seen_first.push(first);
    }
    assert!(seen_first.contains(&"a".to_string()) && seen_first.contains(&"b".to_string()), "{seen_first:?}");
    sw.shutdown();
}

#[test]
fn an_unreachable_node_is_replaced_before_the_tunnel_starts() {
    let dead: SocketAddr = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    let good = ScriptedBackend::start(|r| Action::Reply(ok_response(r.target.as_bytes(), "")));
    let mut cfg = switch_config(Mode::Splice, &[dead, good.addr], "rr");
    cfg.health.interval_ms = 60_000;
    let sw = SwitchServer::start(cfg).unwrap();
    for i in 0..4 {
        assert_eq!(get(sw.addr(), &format!("/t{i}")).status, 200);
    }
    assert_eq!(sw.node_is_up("n0"), Some(false));
    sw.shutdown();
}

#[test]
fn malformed_requests_are_refused_before_any_tunnel() {
    let backend = ScriptedBackend::start(|r| Action::Reply(ok_response(r.target.as_bytes(), "")));
    let sw = SwitchServer::start(switch_config(Mode::Splice, &[backend.addr], "rr")).unwrap();
    let mut c = Client::connect(sw.addr());
    c.send(b"POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n");
    assert_eq!(c.read_response(false).unwrap().status, 400);
    assert!(c.closed_or_silent(CLOSE_WAIT));
    assert_eq!(backend.requests(), 0);
    sw.shutdown();
}
