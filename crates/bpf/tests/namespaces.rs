//! End to end in network namespaces: client, switch and two nodes on a bridge, the switch owning
//! the VIP, the nodes carrying it on `lo` (arp_ignore=1, arp_announce=2). The forwarder on the
//! switch's `eth0` directs TCP connections to VIP:port round robin (l4 mode); the nodes' TCP
//! servers answer the client directly, which the switch's interface counters show. Frames go
//! to the nodes through the switch's veth peer (`FLAG_PEER`) in one test and out of the veth in
//! the other; `peer_in_other_namespace` is checked on veth pairs within and across namespaces.

mod common;

use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddrV4, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use common::*;
use locus_bpf::{
    Forwarder, ForwarderOptions, NodeSlot, NodeTable, SelectionMode, interface, peer_in_other_namespace,
    resolve_neighbour,
};

const VIP: Ipv4Addr = Ipv4Addr::new(10, 9, 2, 100);
const PORT: u16 = 8080;
const CLIENT: Ipv4Addr = Ipv4Addr::new(10, 9, 2, 2);
const SWITCH: Ipv4Addr = Ipv4Addr::new(10, 9, 2, 3);
const NODES: [Ipv4Addr; 2] = [Ipv4Addr::new(10, 9, 2, 11), Ipv4Addr::new(10, 9, 2, 12)];
const RESPONSE_BYTES: usize = 200_000;
const CONNECTIONS: usize = 4;

/// Client, switch, two nodes, and the bridge joining them; removed on drop (the hosts'
/// namespaces first, which takes their veth pairs along, then the bridge's). The bridge lives
/// in a namespace of its own, where the machine's firewall does not see the frames it
/// switches, so the test needs nothing of the machine's firewall rules.
struct Lan {
    client: NetnsGuard,
    switch: NetnsGuard,
    nodes: Vec<NetnsGuard>,
    /// The bridge's namespace.
    lan: NetnsGuard,
    /// The bridge's port (in `lan`) whose veth peer is the switch's `eth0`.
    switch_port: String,
}

fn write_sysctl(key: &str, value: &str) {
    let path = format!("/proc/sys/{}", key.replace('.', "/"));
    std::fs::write(&path, value).unwrap_or_else(|e| panic!("{path}: {e}"));
}

impl Lan {
    fn build() -> Lan {
        let lan = NetnsGuard::new("l");
        lan.on(|| {
            for table in ["iptables", "ip6tables", "arptables"] {
                let key = format!("net.bridge.bridge-nf-call-{table}");
                // Absent when br_netfilter is not loaded: then bridged frames skip the firewall.
                if std::path::Path::new(&format!("/proc/sys/{}", key.replace('.', "/"))).exists() {
                    write_sysctl(&key, "0");
                }
            }
        });
        let bridge = unique("b");
        run(&["ip", "-n", &lan.name, "link", "add", &bridge, "type", "bridge"]);
        run(&["ip", "-n", &lan.name, "link", "set", &bridge, "up"]);
        let plug = |ns: &NetnsGuard, addr: Ipv4Addr| {
            let port = unique("v");
            run(&[
                "ip", "-n", &lan.name, "link", "add", &port, "type", "veth", "peer", "name", "eth0", "netns",
                &ns.name,
            ]);
            run(&["ip", "-n", &lan.name, "link", "set", &port, "master", &bridge, "up"]);
            run(&["ip", "-n", &ns.name, "addr", "add", &format!("{addr}/24"), "dev", "eth0"]);
            run(&["ip", "-n", &ns.name, "link", "set", "eth0", "up"]);
            port
        };
        let client = NetnsGuard::new("c");
        let switch = NetnsGuard::new("s");
        let nodes = vec![NetnsGuard::new("n"), NetnsGuard::new("n")];
        plug(&client, CLIENT);
        let switch_port = plug(&switch, SWITCH);
        run(&["ip", "-n", &switch.name, "addr", "add", &format!("{VIP}/32"), "dev", "eth0"]);
        for (ns, addr) in nodes.iter().zip(NODES) {
            plug(ns, addr);
            run(&["ip", "-n", &ns.name, "addr", "add", &format!("{VIP}/32"), "dev", "lo"]);
            ns.on(|| {
                for dev in ["all", "eth0"] {
                    write_sysctl(&format!("net.ipv4.conf.{dev}.arp_ignore"), "1");
                    write_sysctl(&format!("net.ipv4.conf.{dev}.arp_announce"), "2");
                }
            });
        }
        Lan { client, switch, nodes, lan, switch_port }
    }
}

/// What a node server does with a connection.
#[derive(Clone, Copy)]
enum Serve {
    /// Read one line, answer the node's name and RESPONSE_BYTES bytes, close.
    Download,
    /// Answer every line with `name:line` until the client closes.
    Echo,
}

/// A TCP server on VIP:PORT in a node namespace, one connection at a time. Stopped and joined on
/// drop; gives up after 60 s on its own.
struct NodeServer {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl NodeServer {
    fn start(ns: &NetnsGuard, name: &'static str, serve: Serve) -> NodeServer {
        let stop = Arc::new(AtomicBool::new(false));
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let ns_name = ns.name.clone();
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            enter(&ns_name);
            let listener = TcpListener::bind((VIP, PORT)).expect("bind VIP:PORT on a node");
            listener.set_nonblocking(true).unwrap();
            ready_tx.send(()).unwrap();
            let deadline = Instant::now() + Duration::from_secs(60);
            let body = vec![b'x'; RESPONSE_BYTES];
            while !flag.load(Ordering::Relaxed) && Instant::now() < deadline {
                match listener.accept() {
                    Ok((mut s, _)) => {
                        s.set_nonblocking(false).unwrap();
                        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
                        match serve {
                            Serve::Download => {
                                let _ = read_line(&mut s);
                                let _ = s
                                    .write_all(format!("{name}\n").as_bytes())
                                    .and_then(|()| s.write_all(&body));
                            }
                            Serve::Echo => {
                                while let Some(line) = read_line(&mut s) {
                                    if s.write_all(format!("{name}:{line}\n").as_bytes()).is_err() {
                                        break;
                                    }
                                }
                            }
                        }
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(5)),
                }
            }
        });
        ready_rx.recv_timeout(Duration::from_secs(5)).expect("node server listening");
        NodeServer { stop, thread: Some(thread) }
    }
}

impl Drop for NodeServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// One line without its newline; `None` at the end of the stream or on a timeout.
fn read_line(s: &mut TcpStream) -> Option<String> {
    let mut line = Vec::new();
    let mut byte = [0u8; 1];
    loop {
        match s.read(&mut byte) {
            Ok(1) if byte[0] == b'\n' => return Some(String::from_utf8_lossy(&line).into_owned()),
            Ok(1) => line.push(byte[0]),
            _ => return None,
        }
    }
}

/// (rx_bytes, tx_bytes) of `eth0` in the calling thread's namespace.
fn eth0_bytes() -> (u64, u64) {
    interface_bytes("eth0")
}

/// (received, transmitted) bytes of interface `name` in the calling thread's namespace.
fn interface_bytes(name: &str) -> (u64, u64) {
    let dev = std::fs::read_to_string("/proc/thread-self/net/dev").unwrap();
    let prefix = format!("{name}:");
    let line = dev.lines().find(|l| l.trim_start().starts_with(&prefix)).expect("the interface in net/dev");
    let f: Vec<u64> =
        line.split(':').nth(1).unwrap().split_whitespace().map(|v| v.parse().unwrap()).collect();
    (f[0], f[8])
}

/// On a thread in the switch's namespace: the forwarder attached to `eth0`, directing VIP:PORT
/// round robin over the two nodes (their MACs resolved by ARP), and the node slots.
fn l4_switch(peer_redirect: bool) -> (Forwarder, Vec<NodeSlot>) {
    let eth0 = interface("eth0").unwrap();
    let slots: Vec<NodeSlot> = NODES
        .iter()
        .map(|&ip| NodeSlot {
            mac: resolve_neighbour(ip, Duration::from_secs(3)).unwrap().mac,
            ifindex: eth0.index,
        })
        .collect();
    let f = Forwarder::attach("eth0", ForwarderOptions { peer_redirect, ..Default::default() }).unwrap();
    assert_eq!(f.redirects_into_peer(eth0.index).unwrap(), peer_redirect, "eth0's peer is on the bridge");
    f.set_nodes(&slots).unwrap();
    f.set_selection_mode(SelectionMode::RoundRobin).unwrap();
    f.set_selection(NodeTable::round_robin(2).slots()).unwrap();
    f.set_services(&[(VIP, PORT)]).unwrap();
    (f, slots)
}

/// One request from the client: the answering node's name and the body length.
fn fetch() -> (String, usize) {
    let mut s = TcpStream::connect_timeout(&SocketAddrV4::new(VIP, PORT).into(), Duration::from_secs(5))
        .expect("connect to VIP:PORT");
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(b"GET\n").unwrap();
    let mut all = Vec::new();
    s.read_to_end(&mut all).expect("read the response");
    let nl = all.iter().position(|&b| b == b'\n').expect("a name line");
    (String::from_utf8_lossy(&all[..nl]).into_owned(), all.len() - nl - 1)
}

#[test]
#[ignore = "needs root: BPF and network namespaces (./quickstart test runs it as root)"]
fn l4_round_robin_sends_connections_to_both_nodes_and_responses_bypass_the_switch() {
    require_root();
    let created: Vec<String>;
    {
        let lan = Lan::build();
        created = [&lan.client, &lan.switch, &lan.nodes[0], &lan.nodes[1], &lan.lan]
            .iter()
            .map(|n| n.name.clone())
            .collect();
        let _servers = [
            NodeServer::start(&lan.nodes[0], "node1", Serve::Download),
            NodeServer::start(&lan.nodes[1], "node2", Serve::Download),
        ];
        let (forwarder, before) = lan.switch.on(|| {
            let (f, _) = l4_switch(true);
            (f, eth0_bytes())
        });
        let port_before = lan.lan.on(|| interface_bytes(&lan.switch_port));
        let answers: Vec<(String, usize)> = lan.client.on(|| (0..CONNECTIONS).map(|_| fetch()).collect());
        let after = lan.switch.on(eth0_bytes);
        let port_after = lan.lan.on(|| interface_bytes(&lan.switch_port));

        for (node, len) in &answers {
            assert_eq!(*len, RESPONSE_BYTES, "{node} sent the whole body");
        }
        assert_ne!(
            answers[0].0, answers[1].0,
            "two connections in a row land on different nodes: {answers:?}"
        );
        for name in ["node1", "node2"] {
            assert!(answers.iter().any(|(n, _)| n == name), "{name} got connections: {answers:?}");
        }
        let stats = forwarder.stats().unwrap();
        assert_eq!(stats.l4_new, CONNECTIONS as u64, "{stats:?}");
        assert!(stats.forwarded >= 3 * CONNECTIONS as u64, "SYN, request, ACKs forwarded: {stats:?}");
        let entries = forwarder.entries().unwrap();
        assert_eq!(entries.len(), CONNECTIONS);
        assert!(entries.iter().all(|(k, e)| k.server() == SocketAddrV4::new(VIP, PORT) && e.is_l4()));
        assert!(entries.iter().all(|(_, e)| e.into_peer()), "l4 entries take the node slots' FLAG_PEER");
        let (rx, tx) = (after.0 - before.0, after.1 - before.1);
        // Redirected into the peer, forwarded frames skip eth0's transmit counters and show up
        // as received by the bridge's port.
        let into_bridge = port_after.0 - port_before.0;
        let responses = (CONNECTIONS * RESPONSE_BYTES) as u64;
        eprintln!(
            "switch eth0: rx {rx} B, tx {tx} B, its bridge port rx {into_bridge} B for {responses} B of \
             responses; {stats:?}; {answers:?}"
        );
        assert!(rx < responses / 10, "the switch received {rx} bytes for {responses} bytes of responses");
        assert!(
            into_bridge >= rx / 2 + tx,
            "what it received went back to the bridge through the peer: rx {rx}, tx {tx}, port rx {into_bridge}"
        );
        drop(forwarder); // detaches from the switch's namespace while on this (root) thread
        assert!(!output(&["tc", "-n", &lan.switch.name, "qdisc", "show", "dev", "eth0"]).contains("clsact"));
    }
    let namespaces = output(&["ip", "netns", "list"]);
    for name in &created {
        assert!(!namespaces.contains(name.as_str()), "{name} left behind (the bridge's with it)");
    }
}

#[test]
#[ignore = "needs root: BPF and network namespaces (./quickstart test runs it as root)"]
fn a_held_live_connection_loses_nothing_once_forwarded_again() {
    require_root();
    let lan = Lan::build();
    let _servers = [
        NodeServer::start(&lan.nodes[0], "node1", Serve::Echo),
        NodeServer::start(&lan.nodes[1], "node2", Serve::Echo),
    ];
    // Out of eth0 (no peer redirect): the path a switch with a physical interface takes.
    let (forwarder, slots) = lan.switch.on(|| l4_switch(false));
    lan.client.on(|| {
        let mut s = TcpStream::connect_timeout(&SocketAddrV4::new(VIP, PORT).into(), Duration::from_secs(5))
            .expect("connect to VIP:PORT");
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        s.write_all(b"one\n").unwrap();
        let first = read_line(&mut s).expect("echo of the first line");
        let node = first.split(':').next().unwrap().to_string();
        assert_eq!(first, format!("{node}:one"));
        let key = locus_bpf::ConnKey::new(
            match s.local_addr().unwrap() {
                std::net::SocketAddr::V4(a) => a,
                other => panic!("{other}"),
            },
            SocketAddrV4::new(VIP, PORT),
        );
        let slot = slots[if node == "node1" { 0 } else { 1 }];
        // Hold: the next line is dropped at the switch (the client keeps retransmitting it).
        forwarder.hold(key, slot).unwrap();
        assert!(!forwarder.get(key).unwrap().unwrap().into_peer());
        s.write_all(b"two\n").unwrap();
        s.set_read_timeout(Some(Duration::from_millis(400))).unwrap();
        assert_eq!(read_line(&mut s), None, "nothing gets through while held");
        assert!(forwarder.stats().unwrap().held >= 1);
        // Forward: a retransmission carries the line to the same node's socket, in order.
        forwarder.forward(key).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        assert_eq!(read_line(&mut s).as_deref(), Some(format!("{node}:two").as_str()));
        s.write_all(b"three\n").unwrap();
        assert_eq!(read_line(&mut s).as_deref(), Some(format!("{node}:three").as_str()));
    });
}

#[test]
#[ignore = "needs root: BPF and network namespaces (./quickstart test runs it as root)"]
fn peer_redirect_is_chosen_only_for_a_veth_whose_peer_is_in_another_namespace() {
    require_root();
    let ns = NetnsGuard::new("p");
    let across = LinkGuard { name: unique("x") };
    run(&["ip", "link", "add", &across.name, "type", "veth", "peer", "name", "inner", "netns", &ns.name]);
    let within = LinkGuard { name: unique("w") };
    let within_peer = unique("w");
    run(&["ip", "link", "add", &within.name, "type", "veth", "peer", "name", &within_peer]);
    let bridge = LinkGuard { name: unique("b") };
    run(&["ip", "link", "add", &bridge.name, "type", "bridge"]);

    let index = |name: &str| interface(name).unwrap().index;
    assert!(peer_in_other_namespace(index(&across.name)).unwrap(), "root end of a pair across namespaces");
    assert!(ns.on(|| peer_in_other_namespace(index("inner")).unwrap()), "namespace end of that pair");
    assert!(!peer_in_other_namespace(index(&within.name)).unwrap(), "a pair within one namespace");
    assert!(!peer_in_other_namespace(index(&within_peer)).unwrap(), "its other end");
    assert!(!peer_in_other_namespace(index(&bridge.name)).unwrap(), "a bridge is no pair");
    assert!(!peer_in_other_namespace(index("lo")).unwrap(), "loopback");
    let missing = index(&across.name) + 10_000;
    let err = ns.on(|| peer_in_other_namespace(missing)).unwrap_err();
    assert!(err.to_string().contains("no such interface"), "{err}");
}
