//! The handoff agent of `locus node`, on loopback, with the test playing the one-way switch: a
//! "virtual IP" listener accepts a real client connection and reads its request, dumps it
//! (TCP_REPAIR) and hands it over a control channel; then Ready/Go, per-request routing
//! (local, rehandoff to a second node, back-end forwarding), l4 cloning, the upstream relay,
//! refusals, Closed reports (also queued across a channel loss), and a wrong key. Root only.

mod common;

use std::io::Read;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, TcpListener, TcpStream};
use std::os::fd::AsFd;
use std::time::{Duration, Instant};

use common::{Client, TestNode, pattern};
use locus_core::NodeId;
use locus_handoff::{
    ConnectionId, ControlChannel, ControlKey, HandoffHint, HandoffMessage, TcpRepairState, disconnect_dumped,
    dump_connection_in_place,
};
use locus_node::{HandoffConfig, NodeConfig, RehandoffPolicy};
use locus_test_support::wait_until;

const KEY: &str = "8f1e2d3c4b5a69788796a5b4c3d2e1f00112233445566778899aabbccddeeff0";
const WAIT: Duration = Duration::from_secs(5);

/// For the root-only tests (`#[ignore]`d; `./quickstart test` runs them as root).
fn require_root() {
    locus_test_support::require_root("the handoff agent restores sockets with TCP_REPAIR");
}

fn key() -> ControlKey {
    ControlKey::from_hex(KEY).unwrap()
}

/// A node named `name` with the agent on, files /small (1 KB) and /big (1 MB), and /a, /b.
fn node(name: &str, configure: impl FnOnce(&mut NodeConfig, &mut HandoffConfig)) -> TestNode {
    let node = TestNode::start(|c, _| {
        c.name = name.into();
        let mut h = HandoffConfig { key: Some(KEY.into()), ..HandoffConfig::default() };
        configure(c, &mut h);
        c.handoff = Some(h);
    });
    write_files(&node);
    node
}

fn write_files(node: &TestNode) {
    node.write("small", &pattern(1024, 1));
    node.write("big", &pattern(1 << 20, 2));
    node.write("mid", &pattern(64 * 1024, 3));
    node.write("a", b"document a\n");
    node.write("b", b"document b\n");
}

/// The test's side of a control channel, with its own event loop.
struct Switch {
    channel: ControlChannel,
    rt: tokio::runtime::Runtime,
}

impl Switch {
    /// Connect to `node`'s agent and say hello: "you are `me`", with `peers`.
    fn connect(node: &TestNode, me: u32, peers: &[(u32, SocketAddr)]) -> Switch {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let addr = node.server().handoff_addr().expect("agent runs");
        let channel = rt.block_on(ControlChannel::connect(addr, &key())).unwrap();
        let mut switch = Switch { channel, rt };
        let peers = peers.iter().map(|(n, a)| (NodeId(*n), *a)).collect();
        switch.send(HandoffMessage::Hello { id: ConnectionId(0), node: NodeId(me), peers });
        switch
    }

    fn send(&mut self, message: HandoffMessage) {
        self.rt.block_on(self.channel.send(&message)).unwrap();
    }

    fn recv(&mut self) -> HandoffMessage {
        self.rt.block_on(self.channel.recv_within(WAIT)).expect("a message from the agent")
    }

    /// A message within `limit`, or None.
    fn recv_within(&mut self, limit: Duration) -> Option<HandoffMessage> {
        self.rt.block_on(self.channel.recv_within(limit)).ok()
    }

    /// HandOver, expect Ready, send Go.
    fn hand_over(&mut self, id: ConnectionId, state: TcpRepairState, target: &str) {
        let hint = HandoffHint { target: target.into(), request_len: 0 };
        self.send(HandoffMessage::HandOver { id, state, hint, tls: None });
        assert_eq!(self.recv(), HandoffMessage::Ready { id });
        self.send(HandoffMessage::Go { id });
    }

    fn expect_route(&mut self, id: ConnectionId, target: &str) {
        match self.recv() {
            HandoffMessage::Route { id: got, target: asked, .. } => {
                assert_eq!((got, asked.as_str()), (id, target))
            }
            other => panic!("expected Route, got {other:?}"),
        }
    }

    fn expect_closed(&mut self, id: ConnectionId) {
        assert_eq!(self.recv(), HandoffMessage::Closed { id });
    }
}

/// The switch's client-facing listener.
struct VirtualIp {
    listener: TcpListener,
}

fn get(target: &str) -> String {
    format!("GET {target} HTTP/1.1\r\nHost: localhost\r\n\r\n")
}

fn v4(addr: SocketAddr) -> SocketAddrV4 {
    match addr {
        SocketAddr::V4(a) => a,
        other => panic!("not IPv4: {other}"),
    }
}

impl VirtualIp {
    fn new() -> VirtualIp {
        VirtualIp { listener: TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap() }
    }

    /// A client connects and sends `request`; the switch reads it, dumps the connection with
    /// the request put back in front and takes it out of the kernel's tables.
    fn accept_and_dump(&self, request: &str) -> (Client, ConnectionId, TcpRepairState) {
        self.accept_and_dump_from(TcpStream::connect(self.listener.local_addr().unwrap()).unwrap(), request)
    }

    /// `accept_and_dump` with a client whose receive buffer is tiny (so responses back up
    /// into the server's send queue).
    fn accept_and_dump_small_window(&self, request: &str) -> (Client, ConnectionId, TcpRepairState) {
        let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
        socket.set_recv_buffer_size(4096).unwrap();
        socket.connect(&self.listener.local_addr().unwrap().into()).unwrap();
        self.accept_and_dump_from(socket.into(), request)
    }

    fn accept_and_dump_from(
        &self,
        stream: TcpStream,
        request: &str,
    ) -> (Client, ConnectionId, TcpRepairState) {
        let id = ConnectionId::from_tuple(
            v4(stream.local_addr().unwrap()),
            self.listener.local_addr().unwrap().port(),
        );
        let mut client = Client::from_stream(stream);
        client.send(request);
        let (mut server, _) = self.listener.accept().unwrap();
        server.set_read_timeout(Some(WAIT)).unwrap();
        let mut consumed = vec![0u8; request.len()];
        server.read_exact(&mut consumed).unwrap();
        let state = dump_connection_in_place(server.as_fd(), &consumed).unwrap();
        disconnect_dumped(server.as_fd()).unwrap();
        assert!(state.recv_queue.starts_with(request.as_bytes()));
        (client, id, state)
    }
}

/// Bytes already received, replayed through a loopback connection so `Client` can parse them.
struct TcpListenerless;

impl TcpListenerless {
    fn pair_with(bytes: Vec<u8>) -> TcpStream {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        let reader = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (mut writer, _) = listener.accept().unwrap();
        std::thread::spawn(move || std::io::Write::write_all(&mut writer, &bytes));
        reader
    }
}

fn set_quickack(stream: &TcpStream) {
    use std::os::fd::AsRawFd;
    let on: libc::c_int = 1;
    // SAFETY: setsockopt reads one int that outlives the call; the descriptor is open.
    let rc = unsafe {
        libc::setsockopt(
            stream.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_QUICKACK,
            (&on as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    assert_eq!(rc, 0, "{}", std::io::Error::last_os_error());
}

#[test]
#[ignore = "needs root: TCP_REPAIR needs CAP_NET_ADMIN (./quickstart test runs it as root)"]
fn a_handed_off_connection_is_served_byte_exact_and_its_next_request_is_routed() {
    require_root();
    let n1 = node("n1", |_, _| {});
    let mut switch = Switch::connect(&n1, 1, &[(1, n1.addr())]);
    let vip = VirtualIp::new();
    let (mut client, id, state) = vip.accept_and_dump(&get("/small"));
    switch.hand_over(id, state, "/small");
    let r = client.response(false);
    assert_eq!((r.status, r.header("X-Locus-Node")), (200, Some("n1")));
    assert!(r.body == pattern(1024, 1), "1 KB body differs");

    client.send(get("/big"));
    switch.expect_route(id, "/big");
    switch.send(HandoffMessage::RouteTo { id, node: NodeId(1) });
    let r = client.response(false);
    assert_eq!((r.status, r.header("X-Locus-Node")), (200, Some("n1")));
    assert!(r.body == pattern(1 << 20, 2), "1 MB body differs");

    let stats = n1.server().stats();
    assert_eq!((stats.handoffs_accepted, stats.routes_asked, stats.rehandoffs), (1, 1, 0));
    assert_eq!(stats.active_connections, 1, "the handed-off connection counts as open");
    drop(client);
    switch.expect_closed(id);
    wait_until("the connection is released", || n1.server().stats().active_connections == 0);
    let status = n1.server().status();
    assert_eq!(status["handoffs_accepted"], 1);
    assert_eq!(status["handoff_channels"], 1);
}

#[test]
#[ignore = "needs root: TCP_REPAIR needs CAP_NET_ADMIN (./quickstart test runs it as root)"]
fn a_request_routed_to_another_node_is_handed_back_with_the_request_in_front() {
    require_root();
    let (n1, n2) = (node("n1", |_, _| {}), node("n2", |_, _| {}));
    let peers = [(1, n1.addr()), (2, n2.addr())];
    let (mut s1, mut s2) = (Switch::connect(&n1, 1, &peers), Switch::connect(&n2, 2, &peers));
    let vip = VirtualIp::new();
    let (mut client, id, state) = vip.accept_and_dump(&get("/a"));
    s1.hand_over(id, state, "/a");
    let r = client.response(false);
    assert_eq!((r.text().as_str(), r.header("X-Locus-Node")), ("document a\n", Some("n1")));

    client.send(get("/big"));
    s1.expect_route(id, "/big");
    s1.send(HandoffMessage::RouteTo { id, node: NodeId(2) });
    let HandoffMessage::Rehandoff { id: back, state, .. } = s1.recv() else { panic!("expected Rehandoff") };
    assert_eq!(back, id);
    assert_eq!(state.recv_queue, get("/big").as_bytes(), "the unanswered request goes back in front");
    s2.hand_over(id, state, "/big");
    let r = client.response(false);
    assert_eq!((r.status, r.header("X-Locus-Node")), (200, Some("n2")));
    assert!(r.body == pattern(1 << 20, 2), "1 MB body from n2 differs");
    assert_eq!(n1.server().stats().rehandoffs, 1);
    wait_until("n1 released the connection", || n1.server().stats().active_connections == 0);

    drop(client);
    s2.expect_closed(id);
    assert_eq!(s1.recv_within(Duration::from_millis(200)), None, "n1 must not report Closed: it lives on");
}

#[test]
#[ignore = "needs root: TCP_REPAIR needs CAP_NET_ADMIN (./quickstart test runs it as root)"]
fn pipelined_requests_crossing_nodes_are_answered_in_order() {
    require_root();
    let (n1, n2) = (node("n1", |_, _| {}), node("n2", |_, _| {}));
    let peers = [(1, n1.addr()), (2, n2.addr())];
    let (mut s1, mut s2) = (Switch::connect(&n1, 1, &peers), Switch::connect(&n2, 2, &peers));
    let vip = VirtualIp::new();
    let (mut client, id, state) = vip.accept_and_dump(&get("/small"));
    s1.hand_over(id, state, "/small");
    assert_eq!(client.response(false).header("X-Locus-Node"), Some("n1"));

    let pair = format!("{}{}", get("/a"), get("/b"));
    client.send(&pair);
    s1.expect_route(id, "/a");
    s1.send(HandoffMessage::RouteTo { id, node: NodeId(1) });
    s1.expect_route(id, "/b");
    s1.send(HandoffMessage::RouteTo { id, node: NodeId(2) });
    let HandoffMessage::Rehandoff { state, .. } = s1.recv() else { panic!("expected Rehandoff") };
    assert_eq!(state.recv_queue, get("/b").as_bytes());
    s2.hand_over(id, state, "/b");
    let a = client.response(false);
    let b = client.response(false);
    assert_eq!((a.text().as_str(), a.header("X-Locus-Node")), ("document a\n", Some("n1")));
    assert_eq!((b.text().as_str(), b.header("X-Locus-Node")), ("document b\n", Some("n2")));
}

#[test]
#[ignore = "needs root: TCP_REPAIR needs CAP_NET_ADMIN (./quickstart test runs it as root)"]
fn a_rehandoff_carries_responses_still_in_the_send_queue_and_the_next_node_sends_them_first() {
    require_root();
    let (n1, n2) = (node("n1", |_, _| {}), node("n2", |_, _| {}));
    let peers = [(1, n1.addr()), (2, n2.addr())];
    let (mut s1, mut s2) = (Switch::connect(&n1, 1, &peers), Switch::connect(&n2, 2, &peers));
    let vip = VirtualIp::new();
    let (mut client, id, state) = vip.accept_and_dump_small_window(&get("/a"));
    s1.hand_over(id, state, "/a");
    assert_eq!(client.response(false).header("X-Locus-Node"), Some("n1"));

    // The client does not read until the end: n1 fills its small window and keeps the rest
    // of /mid in the send queue. The client must then stay quiet while the connection is
    // between nodes: on one host a packet then would meet the listener and draw a reset (in
    // the cluster the switch's forwarder holds it). With quick ACKs it answers n1's data at
    // once, and n1's first zero-window probe comes one RTO (200 ms) later: the rehandoff
    // must be done by then.
    set_quickack(&client.stream);
    client.send(format!("{}{}", get("/mid"), get("/b")));
    s1.expect_route(id, "/mid");
    let window_closing = Instant::now();
    s1.send(HandoffMessage::RouteTo { id, node: NodeId(1) });
    s1.expect_route(id, "/b");
    s1.send(HandoffMessage::RouteTo { id, node: NodeId(2) });
    let HandoffMessage::Rehandoff { state, .. } = s1.recv() else { panic!("expected Rehandoff") };
    assert!(
        state.unsent_len > 0,
        "part of /mid was never sent: {} of {}",
        state.unsent_len,
        state.send_queue.len()
    );
    assert_eq!(state.recv_queue, get("/b").as_bytes());
    s2.hand_over(id, state, "/b");
    let quiet_for = window_closing.elapsed();
    let mut raw = client.stream.try_clone().unwrap();
    let mut got = Vec::new();
    let mut chunk = [0u8; 4096];
    let deadline = Instant::now() + Duration::from_secs(20);
    while !got.ends_with(b"document b\n") {
        assert!(Instant::now() < deadline, "only {} bytes in 20 s", got.len());
        match raw.read(&mut chunk) {
            Ok(0) => panic!("closed after {} bytes", got.len()),
            Ok(n) => got.extend_from_slice(&chunk[..n]),
            Err(e)
                if e.kind() == std::io::ErrorKind::ConnectionReset
                    && quiet_for > Duration::from_millis(150) =>
            {
                eprintln!("skipped: the rehandoff took {quiet_for:?}, past n1's first zero-window probe");
                return;
            }
            Err(e) => panic!("after {} bytes ({quiet_for:?} between nodes): {e}", got.len()),
        }
    }
    let mut replay = Client::from_stream(TcpListenerless::pair_with(got));
    let mid = replay.response(false);
    assert_eq!((mid.status, mid.header("X-Locus-Node")), (200, Some("n1")));
    assert!(mid.body == pattern(64 * 1024, 3), "/mid differs after the rehandoff");
    let b = replay.response(false);
    assert_eq!((b.text().as_str(), b.header("X-Locus-Node")), ("document b\n", Some("n2")));
}

#[test]
#[ignore = "needs root: TCP_REPAIR needs CAP_NET_ADMIN (./quickstart test runs it as root)"]
fn handovers_are_refused_at_max_connections_or_when_the_restore_fails() {
    require_root();
    let n1 = node("n1", |c, _| c.limits.max_connections = 1);
    let mut switch = Switch::connect(&n1, 1, &[]);
    let mut occupant = n1.client();
    occupant.send(get("/a"));
    assert_eq!(occupant.response(false).status, 200);

    let vip = VirtualIp::new();
    let (_client, id, state) = vip.accept_and_dump(&get("/a"));
    switch.send(HandoffMessage::HandOver {
        id,
        state: state.clone(),
        hint: HandoffHint::default(),
        tls: None,
    });
    let HandoffMessage::Refused { id: refused, reason } = switch.recv() else { panic!("expected Refused") };
    assert_eq!(refused, id);
    assert!(reason.contains("maximum"), "{reason}");

    drop(occupant);
    wait_until("the occupant closed", || n1.server().stats().active_connections == 0);
    let mut elsewhere = state;
    elsewhere.local = "192.0.2.1:80".parse().unwrap();
    switch.send(HandoffMessage::HandOver { id, state: elsewhere, hint: HandoffHint::default(), tls: None });
    let HandoffMessage::Refused { reason, .. } = switch.recv() else { panic!("expected Refused") };
    assert!(reason.contains("restore failed"), "{reason}");
    let stats = n1.server().stats();
    assert_eq!((stats.handoffs_refused, stats.handoffs_accepted, stats.active_connections), (2, 0, 0));
}

#[test]
#[ignore = "needs root: TCP_REPAIR needs CAP_NET_ADMIN (./quickstart test runs it as root)"]
fn closed_is_kept_while_no_switch_is_connected_and_the_newest_are_sent_on_the_next_channel() {
    require_root();
    let n1 = node("n1", |_, h| h.closed_queue = 2);
    let mut first = Switch::connect(&n1, 1, &[]);
    let vip = VirtualIp::new();
    let mut connections = Vec::new();
    for _ in 0..3 {
        let (mut client, id, state) = vip.accept_and_dump(&get("/a"));
        first.hand_over(id, state, "/a");
        assert_eq!(client.response(false).status, 200);
        connections.push((client, id));
    }
    drop(first);
    wait_until("the agent saw the channel go", || n1.server().stats().handoff_channels == 0);

    let mut ids = Vec::new();
    for (open, (client, id)) in (0..3).rev().zip(connections) {
        drop(client);
        wait_until("the connection ended", || n1.server().stats().active_connections == open);
        ids.push(id);
    }
    let mut second = Switch::connect(&n1, 1, &[]);
    second.expect_closed(ids[1]);
    second.expect_closed(ids[2]);
    assert_eq!(second.recv_within(Duration::from_millis(200)), None, "the oldest report was dropped");
}

#[test]
#[ignore = "needs root: TCP_REPAIR needs CAP_NET_ADMIN (./quickstart test runs it as root)"]
fn without_go_the_restored_connection_is_dropped_silently_and_reported_closed() {
    require_root();
    let n1 = node("n1", |_, h| h.go_timeout_ms = 300);
    let mut switch = Switch::connect(&n1, 1, &[]);
    // Nonsense first: a Go for nobody, messages only a node sends, and a HandOver whose state
    // does not decode (more unsent bytes than the send queue holds) are logged and ignored.
    switch.send(HandoffMessage::Go { id: ConnectionId(77) });
    switch.send(HandoffMessage::Ready { id: ConnectionId(78) });
    switch.send(HandoffMessage::Closed { id: ConnectionId(79) });
    let vip = VirtualIp::new();
    let (_orphan, _, mut broken) = vip.accept_and_dump(&get("/a"));
    broken.unsent_len = broken.send_queue.len() as u32 + 1;
    let hint = HandoffHint::default();
    switch.send(HandoffMessage::HandOver { id: ConnectionId(80), state: broken, hint, tls: None });
    let (mut client, id, state) = vip.accept_and_dump(&get("/a"));
    switch.send(HandoffMessage::HandOver { id, state, hint: HandoffHint::default(), tls: None });
    assert_eq!(switch.recv(), HandoffMessage::Ready { id });
    switch.expect_closed(id);
    assert_eq!(n1.server().stats().active_connections, 0);
    client.stream.set_nonblocking(true).unwrap();
    let mut byte = [0u8; 1];
    let e = client.stream.read(&mut byte).expect_err("no response, no FIN and no RST");
    assert_eq!(e.kind(), std::io::ErrorKind::WouldBlock, "{e}");
    client.stream.set_nonblocking(false).unwrap();
    switch.send(HandoffMessage::Go { id });

    // The agent still works.
    let (mut client, id, state) = vip.accept_and_dump(&get("/a"));
    switch.hand_over(id, state, "/a");
    assert_eq!(client.response(false).status, 200);
}

#[test]
#[ignore = "needs root: TCP_REPAIR needs CAP_NET_ADMIN (./quickstart test runs it as root)"]
fn backend_forwarding_fetches_the_request_from_the_other_node_and_keeps_the_connection() {
    require_root();
    let n2 = TestNode::start(|c, _| c.name = "n2".into());
    write_files(&n2);
    let n1 = node("n1", |_, h| h.rehandoff = RehandoffPolicy::Forward);
    let mut switch = Switch::connect(&n1, 1, &[(1, n1.addr()), (2, n2.addr())]);
    let vip = VirtualIp::new();
    let (mut client, id, state) = vip.accept_and_dump(&get("/a"));
    switch.hand_over(id, state, "/a");
    assert_eq!(client.response(false).header("X-Locus-Node"), Some("n1"));

    for _ in 0..2 {
        client.send(get("/big"));
        switch.expect_route(id, "/big");
        switch.send(HandoffMessage::RouteTo { id, node: NodeId(2) });
        let r = client.response(false);
        // Relayed byte for byte: the header names the node that produced the response.
        assert_eq!((r.status, r.header("X-Locus-Node")), (200, Some("n2")));
        assert!(r.body == pattern(1 << 20, 2), "1 MB body through n1 differs");
    }
    client.send(get("/b"));
    switch.expect_route(id, "/b");
    switch.send(HandoffMessage::RouteTo { id, node: NodeId(1) });
    assert_eq!(client.response(false).header("X-Locus-Node"), Some("n1"), "the connection stayed on n1");

    let (s1, s2) = (n1.server().stats(), n2.server().stats());
    assert_eq!((s1.backend_forwards, s1.rehandoffs, s1.routes_asked), (2, 0, 3));
    assert_eq!((s2.requests, s2.connections_total), (2, 1), "one pooled keep-alive connection to n2");
    drop(client);
    switch.expect_closed(id);
}

#[test]
#[ignore = "needs root: TCP_REPAIR needs CAP_NET_ADMIN (./quickstart test runs it as root)"]
fn upstream_mode_relays_the_connection_to_a_plain_server_in_the_kernel() {
    require_root();
    let plain = TestNode::start(|c, _| c.name = "plain".into());
    write_files(&plain);
    let n1 = node("n1", |_, h| h.upstream = Some(plain.addr()));
    let mut switch = Switch::connect(&n1, 1, &[]);
    let vip = VirtualIp::new();
    let (mut client, id, state) = vip.accept_and_dump(&get("/big"));
    switch.hand_over(id, state, "/big");
    let r = client.response(false);
    assert_eq!((r.status, r.header("X-Locus-Node")), (200, Some("plain")));
    assert!(r.body == pattern(1 << 20, 2), "1 MB body through the relay differs");
    client.send(get("/small"));
    let r = client.response(false);
    assert!(r.body == pattern(1024, 1), "second request on the relayed connection");
    assert_eq!(n1.server().stats().routes_asked, 0, "no per-request routing in upstream mode");
    assert_eq!(plain.server().stats().requests, 2);
    drop(client);
    switch.expect_closed(id);
}

#[test]
#[ignore = "needs root: TCP_REPAIR needs CAP_NET_ADMIN (./quickstart test runs it as root)"]
fn cloned_connections_ask_from_the_first_request_and_serve_locally_without_a_switch() {
    require_root();
    let n1 = node("n1", |_, h| h.clone = true);
    let n2 = node("n2", |_, _| {});
    let mut alone = n1.client();
    alone.send(get("/a"));
    assert_eq!(alone.response(false).header("X-Locus-Node"), Some("n1"), "no switch: served here");
    assert_eq!(n1.server().stats().routes_asked, 0);
    assert_eq!(n1.server().stats().routes_unanswered, 1, "served here for want of an answer");

    let peers = [(1, n1.addr()), (2, n2.addr())];
    let (mut s1, mut s2) = (Switch::connect(&n1, 1, &peers), Switch::connect(&n2, 2, &peers));
    wait_until("n1 sees its switch", || n1.server().stats().handoff_channels == 1);
    let mut client = n1.client();
    let id = ConnectionId::from_tuple(v4(client.stream.local_addr().unwrap()), n1.addr().port());
    client.send(get("/a"));
    s1.expect_route(id, "/a");
    s1.send(HandoffMessage::RouteTo { id, node: NodeId(1) });
    assert_eq!(client.response(false).header("X-Locus-Node"), Some("n1"));
    client.send(get("/b"));
    s1.expect_route(id, "/b");
    s1.send(HandoffMessage::RouteTo { id, node: NodeId(2) });
    let HandoffMessage::Rehandoff { state, .. } = s1.recv() else { panic!("expected Rehandoff") };
    s2.hand_over(id, state, "/b");
    let r = client.response(false);
    assert_eq!((r.text().as_str(), r.header("X-Locus-Node")), ("document b\n", Some("n2")));
    assert_eq!(n1.server().stats().routes_unanswered, 1, "answered routes are not counted");
    drop(client);
    s2.expect_closed(id);
}

#[test]
#[ignore = "needs root: TCP_REPAIR needs CAP_NET_ADMIN (./quickstart test runs it as root)"]
fn with_a_clone_service_a_connection_to_the_nodes_own_address_is_served_here_without_asking() {
    require_root();
    // The l4 service is another address: a connection to the node's own one (a health check,
    // a peer) could be restored on no other node.
    let service: std::net::SocketAddr = "127.0.0.1:9".parse().unwrap();
    let n1 = node("n1", |_, h| {
        h.clone = true;
        h.clone_service = Some(service);
    });
    let _switch = Switch::connect(&n1, 1, &[(1, n1.addr())]);
    wait_until("n1 sees its switch", || n1.server().stats().handoff_channels == 1);
    let mut client = n1.client();
    client.send(get("/a"));
    assert_eq!(client.response(false).header("X-Locus-Node"), Some("n1"));
    let stats = n1.server().stats();
    assert_eq!((stats.routes_asked, stats.routes_unanswered), (0, 0), "not asked about");
}

#[test]
fn a_control_peer_with_the_wrong_key_is_refused_and_the_right_ones_hello_names_the_node() {
    let n1 = node("n1", |_, _| {});
    let addr = n1.server().handoff_addr().unwrap();
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let wrong = ControlKey::from_hex(&"ab".repeat(32)).unwrap();
    let refused = rt.block_on(ControlChannel::connect(addr, &wrong));
    assert!(refused.is_err(), "a wrong key must fail the handshake");
    assert_eq!(n1.server().stats().handoff_node_id, None, "no Hello yet");
    let mut right = rt.block_on(ControlChannel::connect(addr, &key())).unwrap();
    let hello = HandoffMessage::Hello { id: ConnectionId(0), node: NodeId(1), peers: Vec::new() };
    rt.block_on(right.send(&hello)).unwrap();
    wait_until("the channel is counted", || n1.server().stats().handoff_channels == 1);
    wait_until("the node knows its id from the Hello", || n1.server().stats().handoff_node_id == Some(1));
}
