//! The policy is asked once per request in every mode that parses requests: proxy, splice
//! (the tunnel's first request) and handoff with the handoff not tried (no channel to the
//! node's agent, so the switch serves by proxy with the dispatch it already made). The
//! switch's `policy_assignments` counts the policy's `on_assign` calls. A handoff refused by
//! its node and l4's per-request Routes need namespaces: `lab/tests/handoff_lab.rs` counts
//! them.

mod common;

use common::*;
use locus_switch::{Mode, SwitchServer};
use locus_test_support::Client;
use std::time::Duration;

fn policy_asked_once_per_request(mode: Mode) {
    let backend = ScriptedBackend::start(|r| Action::Reply(ok_response(r.target.as_bytes(), "")));
    let sw = SwitchServer::start(one_node_config(mode, backend.addr)).unwrap();
    let mut requests = 0;
    for _ in 0..3 {
        let mut c = Client::connect(sw.addr());
        assert_eq!(c.get("/a").status, 200, "{mode:?}");
        requests += 1;
        if mode != Mode::Splice {
            // Keep-alive and pipelined requests are each dispatched (a tunnel's are not).
            assert_eq!(c.get("/b").status, 200, "{mode:?}");
            c.send(b"GET /c HTTP/1.1\r\nHost: t\r\n\r\nGET /d HTTP/1.1\r\nHost: t\r\n\r\n");
            for _ in 0..2 {
                assert_eq!(c.read_response(false).unwrap().status, 200, "{mode:?}");
            }
            requests += 3;
        }
    }
    let status = sw.status();
    assert_eq!(status["requests"], requests, "{mode:?}: {status}");
    assert_eq!(status["policy_assignments"], requests, "{mode:?}: one dispatch per request: {status}");
    // Every dispatch completes once its connection is gone (a tunnel's when the tunnel ends).
    assert!(
        wait_until(Duration::from_secs(5), || sw.status()["in_flight"] == 0),
        "{mode:?}: {}",
        sw.status()
    );
    sw.shutdown();
}

#[test]
fn proxy_mode_asks_the_policy_once_per_request() {
    policy_asked_once_per_request(Mode::Proxy);
}

#[test]
fn splice_mode_asks_the_policy_once_per_tunnel() {
    policy_asked_once_per_request(Mode::Splice);
}

#[test]
fn handoff_mode_asks_the_policy_once_when_the_handoff_is_not_tried() {
    policy_asked_once_per_request(Mode::Handoff);
}
