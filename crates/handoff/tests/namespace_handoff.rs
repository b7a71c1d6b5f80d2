//! Handoff between network namespaces on a bridge, as in the lab: a client, a switch owning
//! the virtual IP, and nodes carrying it on `lo` (arp_ignore=1, arp_announce=2). The BPF
//! forwarder is stood in for by the client's neighbour entry for the VIP: a dead MAC while the
//! connection is held, the node's MAC once it forwards. Names start `lho<pid>`; removed on
//! drop, even when a test fails. Root only.

use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddrV4, TcpListener, TcpStream};
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use locus_core::NodeId;
use locus_handoff::{
    ConnectionId, ControlChannel, ControlConfig, ControlKey, ControlListener, HandoffHint, HandoffMessage,
    RestoreOptions, TcpRepairState, dump_connection, restore_connection, sending_mss,
};

const VIP: Ipv4Addr = Ipv4Addr::new(10, 77, 0, 100);
const CONTROL_PORT: u16 = 7000;
const IO_LIMIT: Duration = Duration::from_secs(10);
/// The MAC nobody has: the client's packets to the VIP are dropped (the forwarder's *hold*).
const HOLD_MAC: &str = "02:4c:48:4f:ff:ff";

/// Labs made by this process (names must differ between tests running in parallel).
static LABS: AtomicU32 = AtomicU32::new(0);

/// One host of the lab: its role, namespace, bridge port, address and MAC.
struct LabHost {
    role: &'static str,
    namespace: String,
    port: String,
    addr: Ipv4Addr,
    mac: String,
}

/// The namespaces and the bridge of one test; all removed on drop. The bridge lives in a
/// namespace of its own (`lan`), where the machine's firewall does not see the frames it
/// switches, so the test needs nothing of the machine's firewall rules.
struct HandoffLab {
    lan: String,
    bridge: String,
    hosts: Vec<LabHost>,
}

fn ip(args: &[&str]) {
    let out = Command::new("ip").args(args).output().expect("run ip (iproute2)");
    assert!(out.status.success(), "ip {}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr).trim());
}

impl HandoffLab {
    /// For the tests, which are `#[ignore]`d (`./quickstart test` runs them as root).
    fn require() {
        locus_test_support::require_namespaces("network namespaces and TCP_REPAIR");
    }

    /// A client, a switch and `nodes` nodes on a bridge.
    fn create(nodes: u8) -> HandoffLab {
        let n = LABS.fetch_add(1, Ordering::Relaxed);
        let prefix = format!("lho{}x{n}", std::process::id());
        let mut roles = vec![("client", 2u8), ("switch", 3)];
        const NODE_ROLES: [&str; 3] = ["node1", "node2", "node3"];
        roles.extend(NODE_ROLES.iter().take(usize::from(nodes)).enumerate().map(|(i, r)| (*r, 11 + i as u8)));
        let hosts = roles
            .iter()
            .enumerate()
            .map(|(k, (role, last))| LabHost {
                role,
                port: format!("{prefix}p{k}"),
                namespace: match *role {
                    "client" => format!("{prefix}c"),
                    "switch" => format!("{prefix}s"),
                    node => format!("{prefix}n{}", &node[4..]),
                },
                addr: Ipv4Addr::new(10, 77, 0, *last),
                mac: format!("02:4c:48:4f:00:{last:02x}"),
            })
            .collect();
        // The guard exists before anything is made: whatever was made is removed on a panic.
        let lab = HandoffLab { lan: format!("{prefix}l"), bridge: format!("{prefix}br"), hosts };
        let lan = lab.lan.as_str();
        ip(&["netns", "add", lan]);
        let off =
            "for f in /proc/sys/net/bridge/bridge-nf-call-*; do [ -e \"$f\" ] && echo 0 > \"$f\"; done; true";
        let out =
            Command::new("ip").args(["netns", "exec", lan, "sh", "-c", off]).output().expect("ip netns exec");
        assert!(
            out.status.success(),
            "bridge-nf-call off in {lan}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        ip(&["-n", lan, "link", "add", &lab.bridge, "type", "bridge"]);
        ip(&["-n", lan, "link", "set", &lab.bridge, "up"]);
        for h in &lab.hosts {
            ip(&["netns", "add", &h.namespace]);
            ip(&[
                "-n",
                lan,
                "link",
                "add",
                &h.port,
                "type",
                "veth",
                "peer",
                "name",
                "eth0",
                "netns",
                &h.namespace,
            ]);
            ip(&["-n", lan, "link", "set", &h.port, "master", &lab.bridge, "up"]);
            ip(&["-n", &h.namespace, "link", "set", "eth0", "address", &h.mac]);
            ip(&["-n", &h.namespace, "addr", "add", &format!("{}/24", h.addr), "dev", "eth0"]);
            ip(&["-n", &h.namespace, "link", "set", "eth0", "up"]);
            ip(&["-n", &h.namespace, "link", "set", "lo", "up"]);
        }
        let vip = format!("{VIP}/32");
        ip(&["-n", &lab.host("switch").namespace, "addr", "add", &vip, "dev", "eth0"]);
        for h in lab.hosts.iter().filter(|h| h.role.starts_with("node")) {
            ip(&["-n", &h.namespace, "addr", "add", &vip, "dev", "lo"]);
            lab.on(h.role, || {
                for dev in ["all", "eth0"] {
                    std::fs::write(format!("/proc/sys/net/ipv4/conf/{dev}/arp_ignore"), "1").unwrap();
                    std::fs::write(format!("/proc/sys/net/ipv4/conf/{dev}/arp_announce"), "2").unwrap();
                }
            });
        }
        // The client reaches the VIP at the switch (what ARP would find), fixed so the test
        // can move it.
        lab.forward_to("switch");
        lab
    }

    fn host(&self, role: &str) -> &LabHost {
        self.hosts.iter().find(|h| h.role == role).unwrap_or_else(|| panic!("no host {role}"))
    }

    /// Run `f` on a thread inside `role`'s namespace (sockets it makes live there).
    fn on<T: Send>(&self, role: &str, f: impl FnOnce() -> T + Send) -> T {
        let path = format!("/run/netns/{}", self.host(role).namespace);
        std::thread::scope(|s| {
            s.spawn(|| {
                let ns = std::fs::File::open(&path).unwrap();
                // SAFETY: setns on a namespace descriptor we hold; it moves only this thread.
                let rc = unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) };
                assert_eq!(rc, 0, "setns {path}: {}", std::io::Error::last_os_error());
                f()
            })
            .join()
            .unwrap()
        })
    }

    /// The forwarder holds the connection: the client's packets to the VIP go nowhere.
    fn hold(&self) {
        self.point_vip(HOLD_MAC);
    }

    /// The forwarder delivers the client's packets to the VIP to `role`.
    fn forward_to(&self, role: &str) {
        let mac = self.host(role).mac.clone();
        self.point_vip(&mac);
    }

    fn point_vip(&self, mac: &str) {
        let ns = &self.host("client").namespace;
        ip(&[
            "-n",
            ns,
            "neigh",
            "replace",
            &VIP.to_string(),
            "lladdr",
            mac,
            "dev",
            "eth0",
            "nud",
            "permanent",
        ]);
    }

    /// Bytes received on a host's eth0.
    fn received_bytes(&self, role: &str) -> u64 {
        self.on(role, || {
            let dev = std::fs::read_to_string("/proc/thread-self/net/dev").unwrap();
            let line = dev.lines().find(|l| l.trim_start().starts_with("eth0:")).unwrap().to_string();
            line.split_once(':').unwrap().1.split_whitespace().next().unwrap().parse().unwrap()
        })
    }
}

impl Drop for HandoffLab {
    fn drop(&mut self) {
        for h in &self.hosts {
            // The port first: a namespace outlives its name while sockets in it linger (a
            // failed test leaves connections with data in flight), and so would its veth pair.
            let _ = Command::new("ip").args(["-n", &self.lan, "link", "del", &h.port]).output();
            let _ = Command::new("ip").args(["netns", "del", &h.namespace]).output();
        }
        let _ = Command::new("ip").args(["-n", &self.lan, "link", "del", &self.bridge]).output();
        let _ = Command::new("ip").args(["netns", "del", &self.lan]).output();
    }
}

/// Deterministic, position-dependent bytes: a shifted, lost or repeated byte is noticed.
fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len).map(|i| (i as u32).wrapping_mul(2_654_435_761).to_le_bytes()[1] ^ seed).collect()
}

fn limit(stream: &TcpStream) {
    stream.set_read_timeout(Some(IO_LIMIT)).unwrap();
    stream.set_write_timeout(Some(IO_LIMIT)).unwrap();
}

/// Read one request head (`GET /<size> HTTP/1.1\r\n\r\n`) byte by byte; returns its bytes.
fn read_request(stream: &mut TcpStream) -> Vec<u8> {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        assert_eq!(stream.read(&mut byte).unwrap(), 1, "connection ended inside a request: {head:?}");
        head.push(byte[0]);
    }
    head
}

/// The size a request asks for.
fn requested_size(head: &[u8]) -> usize {
    let text = std::str::from_utf8(head).unwrap();
    text.split_whitespace().nth(1).unwrap().trim_start_matches('/').parse().unwrap()
}

fn request(size: usize) -> Vec<u8> {
    format!("GET /{size} HTTP/1.1\r\n\r\n").into_bytes()
}

/// Read `len` bytes, failing if that takes more than 20 s in all (a connection that crawls —
/// say, with a wrong window scale — never trips the per-read timeout).
fn read_within(stream: &mut TcpStream, len: usize) -> Vec<u8> {
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let mut buf = vec![0u8; len];
    let mut done = 0;
    while done < len {
        assert!(std::time::Instant::now() < deadline, "only {done} of {len} bytes in 20 s");
        match stream.read(&mut buf[done..]) {
            Ok(0) => panic!("connection ended after {done} of {len} bytes"),
            Ok(n) => done += n,
            Err(e) => panic!("after {done} of {len} bytes: {e}"),
        }
    }
    buf
}

/// The client side of one exchange: send a request, read `size` bytes, compare.
fn exchange(client: &mut TcpStream, size: usize, seed: u8) {
    client.write_all(&request(size)).unwrap();
    let got = read_within(client, size);
    assert!(got == pattern(size, seed), "response of {size} bytes differs");
}

/// The node side of one exchange: read a request, answer `size` bytes of `pattern`.
fn serve(stream: &mut TcpStream, seed: u8) -> usize {
    let head = read_request(stream);
    let size = requested_size(&head);
    stream.write_all(&pattern(size, seed)).unwrap();
    size
}

fn control_config() -> ControlConfig {
    ControlConfig { recv_timeout: Some(IO_LIMIT), ..ControlConfig::default() }
}

/// Control channels from the switch to each node: (switch end, node end) per node.
fn control_channels(
    lab: &HandoffLab,
    rt: &tokio::runtime::Runtime,
    key: &ControlKey,
    nodes: &[&str],
) -> Vec<(ControlChannel, ControlChannel)> {
    nodes
        .iter()
        .map(|node| {
            let addr = SocketAddrV4::new(lab.host(node).addr, CONTROL_PORT);
            let listener = lab.on(node, || TcpListener::bind(addr).unwrap());
            let stream = lab.on("switch", || TcpStream::connect(addr).unwrap());
            rt.block_on(async {
                listener.set_nonblocking(true).unwrap();
                stream.set_nonblocking(true).unwrap();
                let listener = ControlListener::from_std(listener, key, control_config()).unwrap();
                let stream = tokio::net::TcpStream::from_std(stream).unwrap();
                let (switch_end, node_end) =
                    tokio::join!(ControlChannel::initiate(stream, key, control_config()), listener.accept());
                (switch_end.unwrap(), node_end.unwrap())
            })
        })
        .collect()
}

/// Hand the dumped connection `state` from the switch to `node` in the documented order
/// (HandOver → restore → Ready → forward → Go); returns the node's socket.
fn hand_over(
    lab: &HandoffLab,
    rt: &tokio::runtime::Runtime,
    (switch_end, node_end): &mut (ControlChannel, ControlChannel),
    node: &str,
    id: ConnectionId,
    state: TcpRepairState,
) -> TcpStream {
    let hint = HandoffHint { target: "/".into(), request_len: state.recv_queue.len() as u32 };
    rt.block_on(switch_end.send(&HandoffMessage::HandOver { id, state, hint, tls: None })).unwrap();
    let HandoffMessage::HandOver { id: got, state, .. } = rt.block_on(node_end.recv()).unwrap() else {
        panic!("expected HandOver")
    };
    assert_eq!(got, id);
    let restored = lab.on(node, || restore_connection(&state, &RestoreOptions::default())).unwrap();
    limit(&restored);
    rt.block_on(node_end.send(&HandoffMessage::Ready { id })).unwrap();
    assert_eq!(rt.block_on(switch_end.recv()).unwrap(), HandoffMessage::Ready { id });
    lab.forward_to(node);
    rt.block_on(switch_end.send(&HandoffMessage::Go { id })).unwrap();
    assert_eq!(rt.block_on(node_end.recv()).unwrap(), HandoffMessage::Go { id });
    // Only now may the node write: first what its predecessor never sent.
    let mut restored = restored;
    restored.write_all(state.unsent_part()).unwrap();
    restored
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap()
}

#[test]
#[ignore = "needs root: network namespaces and TCP_REPAIR (./quickstart test runs it as root)"]
fn namespace_handoff_serves_5kb_and_1mb_byte_exact_keeps_alive_and_hands_on_to_another_node() {
    HandoffLab::require();
    let lab = HandoffLab::create(2);
    let rt = runtime();
    let key = ControlKey::generate().0;
    let mut channels = control_channels(&lab, &rt, &key, &["node1", "node2"]);
    let service = lab.on("switch", || TcpListener::bind((VIP, 80)).unwrap());
    let mut client = lab.on("client", || TcpStream::connect((VIP, 80)).unwrap());
    limit(&client);
    let id = ConnectionId(1);

    // The switch accepts and reads the first request, then holds and dumps the connection.
    client.write_all(&request(5 * 1024)).unwrap();
    let (mut accepted, _) = service.accept().unwrap();
    limit(&accepted);
    let first = read_request(&mut accepted);
    let mss_before = sending_mss(accepted.as_fd()).unwrap();
    assert_eq!(mss_before, 1448, "1460 less the timestamp option");
    lab.hold();
    let state = dump_connection(accepted, &first).unwrap();
    assert_eq!(state.local, SocketAddrV4::new(VIP, 80));
    assert_eq!(*state.peer.ip(), lab.host("client").addr);
    assert_eq!(state.recv_queue, first, "the request read by the switch is put back in front");
    assert!(state.timestamps && state.window_scaling && state.sack_permitted, "{state:?}");
    assert_eq!(state.mss, 1460, "the MSS clamp of a 1500-byte MTU");

    // node1 takes it over and answers the client directly: 5 KB, then 1 MB on the same
    // (kept-alive) connection, none of it through the switch.
    let mut node1 = hand_over(&lab, &rt, &mut channels[0], "node1", id, state);
    assert_eq!(
        sending_mss(node1.as_fd()).unwrap(),
        mss_before,
        "the restored socket sends full-sized segments"
    );
    let switch_before = lab.received_bytes("switch");
    let client_before = lab.received_bytes("client");
    std::thread::scope(|s| {
        let server = s.spawn(|| {
            assert_eq!(serve(&mut node1, 1), 5 * 1024);
            assert_eq!(serve(&mut node1, 2), 1 << 20);
        });
        let got = read_within(&mut client, 5 * 1024);
        assert!(got == pattern(5 * 1024, 1), "5 KB response differs");
        exchange(&mut client, 1 << 20, 2);
        server.join().unwrap();
    });
    let through_switch = lab.received_bytes("switch") - switch_before;
    let to_client = lab.received_bytes("client") - client_before;
    assert!(to_client > 1 << 20, "the client received the responses: {to_client} bytes");
    assert!(through_switch < 64 * 1024, "responses bypass the switch: it received {through_switch} bytes");

    // Third request: node1 asks where it goes; node2 serves it, so node1 hands the live
    // connection back (request in front) and the switch hands it on.
    client.write_all(&request(777)).unwrap();
    let third = read_request(&mut node1);
    let (to_node1, at_node1) = &mut channels[0];
    rt.block_on(at_node1.send(&HandoffMessage::Route { id, target: "/777".into(), moves: true })).unwrap();
    assert_eq!(
        rt.block_on(to_node1.recv()).unwrap(),
        HandoffMessage::Route { id, target: "/777".into(), moves: true }
    );
    rt.block_on(to_node1.send(&HandoffMessage::RouteTo { id, node: NodeId(2) })).unwrap();
    assert_eq!(rt.block_on(at_node1.recv()).unwrap(), HandoffMessage::RouteTo { id, node: NodeId(2) });
    lab.hold();
    let state = dump_connection(node1, &third).unwrap();
    assert_eq!(state.recv_queue, third);
    rt.block_on(at_node1.send(&HandoffMessage::Rehandoff { id, state, tls: None })).unwrap();
    let HandoffMessage::Rehandoff { id: back, state, .. } = rt.block_on(to_node1.recv()).unwrap() else {
        panic!("expected Rehandoff")
    };
    assert_eq!(back, id);
    let mut node2 = hand_over(&lab, &rt, &mut channels[1], "node2", id, state);
    assert_eq!(sending_mss(node2.as_fd()).unwrap(), mss_before, "and so does the one restored again");
    std::thread::scope(|s| {
        let server = s.spawn(|| assert_eq!(serve(&mut node2, 3), 777));
        let got = read_within(&mut client, 777);
        assert!(got == pattern(777, 3), "third response differs");
        server.join().unwrap();
    });

    // The client closes; node2 sees the end and reports it, so the switch can drop the entry.
    drop(client);
    let mut end = [0u8; 1];
    assert_eq!(node2.read(&mut end).unwrap(), 0, "the client's FIN reaches node2");
    let (to_node2, at_node2) = &mut channels[1];
    rt.block_on(at_node2.send(&HandoffMessage::Closed { id })).unwrap();
    assert_eq!(rt.block_on(to_node2.recv()).unwrap(), HandoffMessage::Closed { id });
}

#[test]
#[ignore = "needs root: network namespaces and TCP_REPAIR (./quickstart test runs it as root)"]
fn namespace_handoff_transfers_unacknowledged_and_unsent_data_in_the_send_queue() {
    HandoffLab::require();
    let lab = HandoffLab::create(1);
    let rt = runtime();
    let key = ControlKey::generate().0;
    let mut channels = control_channels(&lab, &rt, &key, &["node1"]);
    let service = lab.on("switch", || TcpListener::bind((VIP, 80)).unwrap());
    // A client with a small receive buffer, which does not read until told.
    let mut client = lab.on("client", || {
        // SAFETY: socket has no memory arguments; the descriptor is owned at once below.
        let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) };
        assert!(fd >= 0);
        // SAFETY: a new descriptor that nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let size: libc::c_int = 64 * 1024;
        // SAFETY: setsockopt reads one live int.
        let rc = unsafe {
            libc::setsockopt(
                fd.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_RCVBUF,
                (&size as *const libc::c_int).cast(),
                4,
            )
        };
        assert_eq!(rc, 0);
        let sa = libc::sockaddr_in {
            sin_family: libc::AF_INET as libc::sa_family_t,
            sin_port: 80u16.to_be(),
            sin_addr: libc::in_addr { s_addr: u32::from_ne_bytes(VIP.octets()) },
            sin_zero: [0; 8],
        };
        // SAFETY: a valid sockaddr_in of the given size, only read.
        let rc = unsafe {
            libc::connect(
                fd.as_raw_fd(),
                (&sa as *const libc::sockaddr_in).cast(),
                size_of::<libc::sockaddr_in>() as _,
            )
        };
        assert_eq!(rc, 0, "{}", std::io::Error::last_os_error());
        TcpStream::from(fd)
    });
    limit(&client);
    client.write_all(&request(4 << 20)).unwrap();
    let (mut accepted, _) = service.accept().unwrap();
    let head = read_request(&mut accepted);
    let body = pattern(4 << 20, 4);

    // Held from here: the client's ACKs are lost, so what the switch sends stays
    // unacknowledged, and what the window does not allow stays unsent.
    lab.hold();
    accepted.set_nonblocking(true).unwrap();
    let mut written = 0;
    let deadline = std::time::Instant::now() + Duration::from_millis(100);
    while std::time::Instant::now() < deadline {
        match accepted.write(&body[written..]) {
            Ok(n) => written += n,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(5))
            }
            Err(e) => panic!("{e}"),
        }
    }
    let state = dump_connection(accepted, &head).unwrap();
    let sent = state.sent_part().len();
    let unsent = state.unsent_part().len();
    assert!(sent > 0, "unacknowledged data in the send queue");
    assert!(unsent > 0, "unsent data in the send queue");
    assert_eq!(&state.send_queue[..], &body[written - state.send_queue.len()..written]);

    let mut node = hand_over(&lab, &rt, &mut channels[0], "node1", ConnectionId(7), state);
    std::thread::scope(|s| {
        let server = s.spawn(|| {
            // The restored socket starts with the request, as the switch read it.
            assert_eq!(read_request(&mut node), head);
            node.write_all(&body[written..]).unwrap();
        });
        let got = read_within(&mut client, body.len());
        server.join().unwrap();
        let first_bad = got.iter().zip(&body).position(|(a, b)| a != b);
        assert!(first_bad.is_none(), "body differs from byte {first_bad:?} (sent {sent}, unsent {unsent})");
    });
}
