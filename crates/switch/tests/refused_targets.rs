//! Requests the switch answers itself in every mode that parses requests (proxy, splice, and
//! handoff's first request): a path that climbs above the root once percent-decoded is 400,
//! an absolute-form target naming a host the switch does not serve is 404, and the back-end
//! never sees either; the same connection's good requests still reach it.

mod common;

use common::*;
use locus_switch::{Mode, SwitchServer};
use locus_test_support::{Client, Response, get};
use std::net::SocketAddr;

fn first_request(addr: SocketAddr, target: &str) -> Response {
    let mut c = Client::connect(addr);
    c.send(format!("GET {target} HTTP/1.1\r\nHost: www.example.com\r\n\r\n").as_bytes());
    let r = c.read_response(false).unwrap_or_else(|| panic!("no response to {target}"));
    assert!(c.closed_or_silent(CLOSE_WAIT), "{target}: the connection stays open after a refusal");
    r
}

fn refusals_never_reach_the_backend(mode: Mode) {
    let backend = ScriptedBackend::start(|r| Action::Reply(ok_response(r.target.as_bytes(), "")));
    let sw = SwitchServer::start(one_node_config(mode, backend.addr)).unwrap();
    let climbing = ["/../etc/passwd", "/%2e%2e/x", "/%2E%2E/%2e%2E/x", "/a/../../b", "/a/..%2f..%2fb"];
    for target in climbing {
        let r = first_request(sw.addr(), target);
        assert_eq!(r.status, 400, "{mode:?} {target}");
        assert!(!r.body.is_empty() && r.body.len() < 64, "{mode:?} {target}: {:?}", r.body);
    }
    for target in ["http://other.example/x", "http://10.9.8.7/x", "https://other.example:443/"] {
        assert_eq!(first_request(sw.addr(), target).status, 404, "{mode:?} {target}");
    }
    assert_eq!(backend.requests(), 0, "{mode:?}: a refused request reached the back-end");
    let own = format!("http://{}/own", sw.addr());
    for target in ["/a/../b", "http://www.example.com/named", own.as_str()] {
        let r = get(sw.addr(), target);
        assert_eq!(r.status, 200, "{mode:?} {target}");
    }
    assert_eq!(backend.requests(), 3, "{mode:?}");
    sw.shutdown();
}

#[test]
fn proxy_mode_answers_bad_targets_itself() {
    refusals_never_reach_the_backend(Mode::Proxy);
}

#[test]
fn splice_mode_answers_bad_first_targets_itself() {
    refusals_never_reach_the_backend(Mode::Splice);
}

#[test]
fn handoff_mode_answers_bad_first_targets_itself() {
    refusals_never_reach_the_backend(Mode::Handoff);
}
