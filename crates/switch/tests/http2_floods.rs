//! HTTP/2 floods and abuse, each stopped: rapid reset (CVE-2023-44487), MadeYouReset
//! (CVE-2025-8671), a CONTINUATION flood (CVE-2024-27316), an HPACK bomb, SETTINGS and PING
//! floods (GOAWAY ENHANCE_YOUR_CALM, counted by reason); a client that never opens its window
//! and one that never sends its body (the stream ends after the node timeout); more streams
//! than allowed (refused) and a header block over the limit (431). After each, a client that
//! connected before it is still served, and nothing malformed reached the node.

mod common;

use common::h2_raw::{self, RawH2, frame};
use common::{Action, ScriptedBackend, ok_response, one_node_config, pattern};
use locus_switch::{Mode, SwitchConfig, SwitchServer};
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(5);

/// One node answering `len` patterned bytes after `delay` (1 MiB for `/big`).
fn backend(len: usize, delay: Duration) -> ScriptedBackend {
    ScriptedBackend::start(move |r| {
        let len = if r.target == "/big" { 1 << 20 } else { len };
        Action::Delay(delay, ok_response(&pattern(len, 1), ""))
    })
}

/// A proxy-mode switch before `node`, with `tune` applied.
fn switch(node: &ScriptedBackend, tune: impl FnOnce(&mut SwitchConfig)) -> SwitchServer {
    let mut config = one_node_config(Mode::Proxy, node.addr);
    config.health.interval_ms = 60_000;
    tune(&mut config);
    SwitchServer::start(config).unwrap()
}

/// A client connected before the abuse: `served` checks it still gets an answer after.
struct Bystander(RawH2, u32);

impl Bystander {
    fn new(switch: &SwitchServer) -> Bystander {
        let mut c = RawH2::connect(switch.addr(), &[]);
        assert!(c.until(WAIT, |f| f.kind == h2_raw::SETTINGS).is_some());
        Bystander(c, 1)
    }

    fn served(&mut self) {
        let id = self.1;
        self.1 += 2;
        self.0.request(id, "GET", "/bystander", &[]);
        let done = self.0.until(WAIT, |f| f.stream == id && f.flags & h2_raw::END_STREAM != 0);
        assert!(done.is_some_and(|f| f.kind != h2_raw::RST_STREAM), "the other client is still served");
    }
}

/// Close the test's `clients`, then stop the switch: a client that never acknowledges the
/// PING of the shutdown's GOAWAY would hold the drain until its timeout.
fn stop<T>(switch: SwitchServer, clients: T) {
    drop(clients);
    switch.shutdown();
}

/// Counters of the `http2` status object.
fn h2_status(switch: &SwitchServer, group: &str, name: &str) -> u64 {
    switch.status()["http2"][group][name].as_u64().unwrap()
}

/// Wait until the `http2` counter reaches `want`: h2 closes the connection before it hands the
/// switch the error it is counted by, so a client can see the close first.
fn h2_counted(switch: &SwitchServer, group: &str, name: &str, want: u64) {
    let reached = common::wait_until(WAIT, || h2_status(switch, group, name) >= want);
    assert!(reached, "http2.{group}.{name} = {}, not {want}", h2_status(switch, group, name));
    assert_eq!(h2_status(switch, group, name), want);
}

#[test]
fn rapid_reset_is_stopped_with_enhance_your_calm_and_bounded_node_work() {
    let node = backend(10, Duration::ZERO);
    let s = switch(&node, |_| {});
    let mut by = Bystander::new(&s);
    let mut c = RawH2::connect(s.addr(), &[]);
    let mut burst = Vec::new();
    for i in 0..2000u32 {
        let id = 1 + 2 * i;
        burst.extend(frame(
            h2_raw::HEADERS,
            h2_raw::END_HEADERS | h2_raw::END_STREAM,
            id,
            &h2_raw::request_block("GET", "/r", &[]),
        ));
        burst.extend(frame(h2_raw::RST_STREAM, 0, id, &h2_raw::CANCEL.to_be_bytes()));
    }
    c.send(&burst);
    assert_eq!(c.goaway(WAIT), Some(h2_raw::ENHANCE_YOUR_CALM));
    assert!(c.closed_within(WAIT));
    let stopped = || h2_status(&s, "goaways", "control_flood") + h2_status(&s, "goaways", "too_many_errors");
    assert!(common::wait_until(WAIT, || stopped() >= 1), "counted");
    assert_eq!(stopped(), 1);
    by.served();
    // At most the burst of resets, each with its stream, passed before the flood was called.
    let defaults = locus_switch::Http2Settings::default();
    let bound = (defaults.control_frame_burst + defaults.max_concurrent_streams) as usize;
    assert!(node.requests() <= bound, "{} requests reached the node", node.requests());
    stop(s, (by, c));
}

#[test]
fn made_you_reset_is_stopped_once_the_switch_has_reset_too_many_streams() {
    let node = backend(10, Duration::ZERO);
    let s = switch(&node, |c| c.http2.control_frame_burst = 100_000);
    let mut by = Bystander::new(&s);
    let mut c = RawH2::connect(s.addr(), &[]);
    let mut burst = Vec::new();
    for i in 0..300u32 {
        let id = 1 + 2 * i;
        // An open stream (its body to come), then a window increment that overflows its
        // window: a stream error the switch must answer with RST_STREAM. (h2 takes a zero
        // increment, the other classic, for a connection error at once.)
        let block = h2_raw::request_block("POST", "/m", &[("content-length", b"1")]);
        burst.extend(frame(h2_raw::HEADERS, h2_raw::END_HEADERS, id, &block));
        burst.extend(frame(h2_raw::WINDOW_UPDATE, 0, id, &0x7fff_ffffu32.to_be_bytes()));
    }
    c.send(&burst);
    assert_eq!(c.goaway(WAIT), Some(h2_raw::ENHANCE_YOUR_CALM));
    assert!(c.closed_within(WAIT));
    h2_counted(&s, "goaways", "too_many_errors", 1);
    by.served();
    stop(s, (by, c));
}

#[test]
fn a_continuation_flood_is_stopped_and_nothing_reaches_the_node() {
    let node = backend(10, Duration::ZERO);
    let s = switch(&node, |_| {});
    let mut by = Bystander::new(&s);
    let mut c = RawH2::connect(s.addr(), &[]);
    let block = h2_raw::request_block("GET", "/c", &[]);
    let mut burst = frame(h2_raw::HEADERS, 0, 1, &block);
    for _ in 0..10_000 {
        burst.extend(frame(h2_raw::CONTINUATION, 0, 1, &[]));
    }
    c.send(&burst);
    assert_eq!(c.goaway(WAIT), Some(h2_raw::ENHANCE_YOUR_CALM));
    assert!(c.closed_within(WAIT));
    h2_counted(&s, "goaways", "too_many_errors", 1);
    by.served();
    assert_eq!(node.requests(), 1, "only the bystander's request");
    stop(s, (by, c));
}

#[test]
fn an_hpack_bomb_is_stopped_before_it_expands_and_nothing_reaches_the_node() {
    let node = backend(10, Duration::ZERO);
    let s = switch(&node, |_| {});
    let mut by = Bystander::new(&s);
    let mut c = RawH2::connect(s.addr(), &[]);
    let mut block = h2_raw::request_block("GET", "/b", &[]);
    // 4 kB into the dynamic table once, then referred to 3,000 times: 12 MB from 7 kB.
    h2_raw::literal_indexed(&mut block, "x-bomb", &[b'a'; 4000]);
    for _ in 0..3000 {
        h2_raw::indexed(&mut block, 62);
    }
    c.send(&frame(h2_raw::HEADERS, h2_raw::END_HEADERS | h2_raw::END_STREAM, 1, &block));
    assert_eq!(c.goaway(WAIT), Some(h2_raw::ENHANCE_YOUR_CALM));
    assert!(c.closed_within(WAIT));
    h2_counted(&s, "goaways", "too_many_errors", 1);
    by.served();
    assert_eq!(node.requests(), 1, "only the bystander's request");
    stop(s, (by, c));
}

/// `frames` of one kind, sent as fast as possible, are called a flood.
fn control_flood(one: Vec<u8>) {
    let node = backend(10, Duration::ZERO);
    let s = switch(&node, |_| {});
    let mut by = Bystander::new(&s);
    let mut c = RawH2::connect(s.addr(), &[]);
    c.send(&one.repeat(5000));
    assert_eq!(c.goaway(WAIT), Some(h2_raw::ENHANCE_YOUR_CALM));
    assert!(c.closed_within(WAIT));
    h2_counted(&s, "goaways", "control_flood", 1);
    by.served();
    stop(s, by);
}

#[test]
fn a_settings_flood_is_stopped() {
    control_flood(frame(h2_raw::SETTINGS, 0, 0, &[]));
}

#[test]
fn a_ping_flood_is_stopped() {
    control_flood(frame(h2_raw::PING, 0, 0, &[1; 8]));
}

#[test]
fn a_client_that_never_opens_its_window_loses_the_stream_after_the_node_timeout() {
    let node = backend(10, Duration::ZERO);
    let s = switch(&node, |c| c.limits.node_timeout_ms = 400);
    let mut by = Bystander::new(&s);
    // SETTINGS_INITIAL_WINDOW_SIZE = 0: not one DATA byte may be sent.
    let mut c = RawH2::connect(s.addr(), &[(0x4, 0)]);
    c.request(1, "GET", "/big", &[]);
    let f = c.until(WAIT, |f| f.stream == 1 && f.kind == h2_raw::RST_STREAM).expect("the stream is reset");
    assert_eq!(f.code(), Some(h2_raw::CANCEL));
    h2_counted(&s, "resets", "slow_read", 1);
    by.served();
    stop(s, (by, c));
}

#[test]
fn a_stream_that_never_sends_its_body_is_answered_408_after_the_node_timeout() {
    let node = backend(10, Duration::ZERO);
    let s = switch(&node, |c| c.limits.node_timeout_ms = 400);
    let mut by = Bystander::new(&s);
    let mut c = RawH2::connect(s.addr(), &[]);
    let block = h2_raw::request_block("POST", "/upload", &[("content-length", b"10")]);
    c.send(&frame(h2_raw::HEADERS, h2_raw::END_HEADERS, 1, &block));
    assert!(c.until(WAIT, |f| f.stream == 1 && f.kind == h2_raw::HEADERS).is_some(), "answered");
    h2_counted(&s, "resets", "body_timeout", 1);
    assert_eq!(s.status()["responses"]["4xx"], 1);
    by.served();
    assert_eq!(node.requests(), 1, "only the bystander's request was whole at the node");
    stop(s, (by, c));
}

#[test]
fn streams_past_the_limit_are_refused_and_never_reach_the_node() {
    let node = backend(10, Duration::from_millis(500));
    let s = switch(&node, |c| c.http2.max_concurrent_streams = 4);
    let mut c = RawH2::connect(s.addr(), &[]);
    // Wait for the switch's SETTINGS, so its limit is known to apply.
    assert!(c.until(WAIT, |f| f.kind == h2_raw::SETTINGS && f.flags == 0).is_some());
    let mut burst = Vec::new();
    for i in 0..10u32 {
        burst.extend(frame(
            h2_raw::HEADERS,
            h2_raw::END_HEADERS | h2_raw::END_STREAM,
            1 + 2 * i,
            &h2_raw::request_block("GET", "/s", &[]),
        ));
    }
    c.send(&burst);
    let (mut refused, mut answered) = (0, 0);
    while refused + answered < 10 {
        let Some(f) = c.until(WAIT, |f| {
            f.stream != 0 && (f.kind == h2_raw::RST_STREAM || f.flags & h2_raw::END_STREAM != 0)
        }) else {
            break;
        };
        if f.kind == h2_raw::RST_STREAM {
            assert_eq!(f.code(), Some(h2_raw::REFUSED_STREAM));
            refused += 1;
        } else {
            answered += 1;
        }
    }
    assert_eq!((answered, refused), (4, 6));
    assert_eq!(node.requests(), 4);
    stop(s, c);
}

#[test]
fn a_header_block_over_the_limit_is_answered_431_and_the_connection_lives_on() {
    let node = backend(10, Duration::ZERO);
    let s = switch(&node, |_| {});
    let mut c = RawH2::connect(s.addr(), &[]);
    let block = h2_raw::request_block("GET", "/h", &[("x-big", &[b'v'; 20_000])]);
    let (first, rest) = block.split_at(16_000);
    let mut bytes = frame(h2_raw::HEADERS, h2_raw::END_STREAM, 1, first);
    bytes.extend(frame(h2_raw::CONTINUATION, h2_raw::END_HEADERS, 1, rest));
    c.send(&bytes);
    let f = c.until(WAIT, |f| f.stream == 1 && (f.kind == h2_raw::HEADERS || f.kind == h2_raw::RST_STREAM));
    assert_eq!(f.map(|f| f.kind), Some(h2_raw::HEADERS), "answered (431), not reset");
    c.request(3, "GET", "/after", &[]);
    assert!(c.until(WAIT, |f| f.stream == 3 && f.kind == h2_raw::HEADERS).is_some(), "still served");
    assert_eq!(node.requests(), 1, "only the request after it reached the node");
    stop(s, c);
}
