//! Packet fixtures through the real program with `BPF_PROG_TEST_RUN` (aya's `TestRun` on the
//! loaded classifier, no interface needed): frames built in Rust, verdicts, output bytes, map
//! entries and counters checked for handoff entries, l4 selection and everything to let pass.

mod common;

use std::net::SocketAddrV4;
use std::time::Duration;

use common::*;
use locus_bpf::{
    Action, ConnKey, Forwarder, ForwarderError, ForwarderOptions, NodeSlot, NodeTable, SelectionMode, Stats,
    Verdict,
};

const NODE1: NodeSlot = NodeSlot { mac: NODE1_MAC, ifindex: 7 };
const NODE2: NodeSlot = NodeSlot { mac: NODE2_MAC, ifindex: 8 };

fn forwarder(max_entries: u32) -> Forwarder {
    Forwarder::load(ForwarderOptions {
        max_entries,
        switch_mac: Some(SWITCH_MAC),
        peer_redirect: false,
        ..Default::default()
    })
    .expect("load the forwarder")
}

fn client(port: u16) -> SocketAddrV4 {
    SocketAddrV4::new(ip("10.9.0.2"), port)
}

fn vip() -> SocketAddrV4 {
    addr("10.9.0.100:80")
}

/// Keep the test thread on CPU 0, so per-CPU state (the rotating index) is one CPU's.
fn pin_to_cpu0() {
    // SAFETY: an all-zero cpu_set_t is the empty set; CPU_SET adds CPU 0; pid 0 = this thread.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(0, &mut set);
        assert_eq!(libc::sched_setaffinity(0, size_of::<libc::cpu_set_t>(), &set), 0);
    }
}

#[test]
#[ignore = "needs root: loads BPF programs (./quickstart test runs it as root)"]
fn hold_drops_the_clients_packets_and_counts_them() {
    require_root();
    let f = forwarder(1024);
    let key = ConnKey::new(client(40000), vip());
    f.hold(key, NODE1).unwrap();
    let frame = Frame::tcp(client(40000), vip()).payload(b"GET / HTTP/1.1\r\n\r\n").build();
    for _ in 0..3 {
        assert_eq!(f.run_frame(&frame).unwrap().verdict, Verdict::Drop);
    }
    let entry = f.get(key).unwrap().unwrap();
    assert_eq!(entry.action(), Some(Action::Hold));
    assert_eq!(entry.packets, 0, "held packets are not forwarded packets");
    let s = f.stats().unwrap();
    assert_eq!((s.handled, s.held, s.forwarded), (3, 3, 0));
}

#[test]
#[ignore = "needs root: loads BPF programs (./quickstart test runs it as root)"]
fn forward_redirects_and_rewrites_both_macs_but_no_ip_or_tcp_byte() {
    require_root();
    let f = forwarder(1024);
    let key = ConnKey::new(client(40001), vip());
    f.hold(key, NODE1).unwrap();
    f.forward(key).unwrap();
    let before = f.get(key).unwrap().unwrap();
    std::thread::sleep(Duration::from_millis(2));
    let frame = Frame::tcp(client(40001), vip()).flags(TCP_ACK | TCP_PSH).payload(&[7u8; 300]).build();
    let run = f.run_frame(&frame).unwrap();
    assert_eq!(run.verdict, Verdict::Redirect);
    assert_eq!(run.frame.len(), frame.len());
    assert_eq!(&run.frame[0..6], &NODE1_MAC.0, "destination MAC is the node's");
    assert_eq!(&run.frame[6..12], &SWITCH_MAC.0, "source MAC is the switch's");
    assert_eq!(&run.frame[12..], &frame[12..], "ethertype, IP and TCP bytes (checksums too) untouched");
    let after = f.get(key).unwrap().unwrap();
    assert_eq!((after.packets, after.bytes), (1, frame.len() as u64));
    assert!(after.last_seen_ns > before.last_seen_ns, "a forwarded packet refreshes last_seen");
    assert_eq!(f.stats().unwrap().forwarded, 1);
}

#[test]
#[ignore = "needs root: loads BPF programs (./quickstart test runs it as root)"]
fn pure_syn_on_a_handoff_entry_deletes_it_and_passes_but_syn_ack_does_not() {
    require_root();
    let f = forwarder(1024);
    let key = ConnKey::new(client(40002), vip());
    f.hold(key, NODE1).unwrap();
    f.forward(key).unwrap();
    // A SYN+ACK is no port reuse: it is forwarded like any segment.
    let syn_ack = Frame::tcp(client(40002), vip()).flags(TCP_SYN | TCP_ACK).build();
    assert_eq!(f.run_frame(&syn_ack).unwrap().verdict, Verdict::Redirect);
    let syn = Frame::tcp(client(40002), vip()).flags(TCP_SYN).build();
    let run = f.run_frame(&syn).unwrap();
    assert_eq!(run.verdict, Verdict::Pass);
    assert_eq!(run.frame, syn, "a passed SYN is unchanged");
    assert_eq!(f.get(key).unwrap(), None, "the stale entry is gone");
    // Also on hold (a SYN while a handoff is under way): the entry goes, forward() then fails.
    f.hold(key, NODE1).unwrap();
    assert_eq!(f.run_frame(&syn).unwrap().verdict, Verdict::Pass);
    assert!(matches!(f.forward(key), Err(ForwarderError::NoEntry(k)) if k == key));
    let s = f.stats().unwrap();
    assert_eq!((s.syn_resets, s.forwarded), (2, 1));
}

#[test]
#[ignore = "needs root: loads BPF programs (./quickstart test runs it as root)"]
fn unmapped_traffic_passes_unchanged() {
    require_root();
    let f = forwarder(1024);
    f.hold(ConnKey::new(client(40003), vip()), NODE1).unwrap();
    for frame in [
        Frame::tcp(client(40004), vip()).payload(b"other connection"),
        Frame::tcp(client(40003), addr("10.9.0.100:81")),
        Frame::tcp(client(40004), vip()).flags(TCP_SYN),
        Frame::tcp(client(40004), vip()).flags(TCP_FIN | TCP_ACK),
    ] {
        let frame = frame.build();
        let run = f.run_frame(&frame).unwrap();
        assert_eq!(run.verdict, Verdict::Pass);
        assert_eq!(run.frame, frame);
    }
    assert_eq!(f.get(ConnKey::new(client(40004), vip())).unwrap(), None, "no service: a SYN makes no entry");
    assert_eq!(f.stats().unwrap().forwarded, 0);
}

#[test]
#[ignore = "needs root: loads BPF programs (./quickstart test runs it as root)"]
fn non_ipv4_non_tcp_fragments_and_truncated_headers_pass_even_with_an_entry() {
    require_root();
    let f = forwarder(1024);
    let key = ConnKey::new(client(40005), vip());
    f.hold(key, NODE1).unwrap();
    f.forward(key).unwrap();
    let base = Frame::tcp(client(40005), vip()).payload(b"abcd");
    let mut cases: Vec<(&str, Vec<u8>)> = Vec::new();
    let mut arp = base.clone();
    arp.ethertype = 0x0806;
    cases.push(("arp ethertype", arp.build()));
    let mut ipv6 = base.clone();
    ipv6.ethertype = 0x86dd;
    cases.push(("ipv6 ethertype", ipv6.build()));
    let mut vlan = base.clone();
    vlan.ethertype = 0x8100;
    cases.push(("vlan tag", vlan.build()));
    let mut udp = base.clone();
    udp.protocol = 17;
    cases.push(("udp", udp.build()));
    let mut more_fragments = base.clone();
    more_fragments.frag = 0x2000;
    cases.push(("first fragment (MF)", more_fragments.build()));
    let mut later_fragment = base.clone();
    later_fragment.frag = 0x0010;
    cases.push(("later fragment", later_fragment.build()));
    let mut bad_ihl = base.build();
    bad_ihl[14] = 0x44;
    cases.push(("ihl < 5", bad_ihl));
    let mut bad_version = base.build();
    bad_version[14] = 0x65;
    cases.push(("ip version 6 in an IPv4 frame", bad_version));
    cases.push(("truncated tcp header", base.build()[..14 + 20 + 12].to_vec()));
    // (A truncated IP header cannot be a fixture: BPF_PROG_TEST_RUN refuses IPv4 frames shorter
    // than an IP header with EINVAL.)
    for (what, frame) in cases {
        let run = f.run_frame(&frame).unwrap_or_else(|e| panic!("{what}: {e}"));
        assert_eq!(run.verdict, Verdict::Pass, "{what}");
        assert_eq!(run.frame, frame, "{what}: unchanged");
    }
    let s = f.stats().unwrap();
    assert_eq!((s.forwarded, s.handled), (0, 0), "none of them was looked up");
    // The same connection's plain segment is forwarded: the cases above passed on their merits.
    assert_eq!(f.run_frame(&base.build()).unwrap().verdict, Verdict::Redirect);
}

#[test]
#[ignore = "needs root: loads BPF programs (./quickstart test runs it as root)"]
fn ip_options_are_skipped_by_ihl_to_find_the_ports() {
    require_root();
    let f = forwarder(1024);
    let key = ConnKey::new(client(40006), vip());
    f.hold(key, NODE2).unwrap();
    f.forward(key).unwrap();
    for options in [vec![1, 1, 1, 0], vec![1; 40]] {
        let mut frame = Frame::tcp(client(40006), vip()).payload(b"x");
        frame.ip_options = options.clone();
        let frame = frame.build();
        let run = f.run_frame(&frame).unwrap();
        assert_eq!(run.verdict, Verdict::Redirect, "{} bytes of options", options.len());
        assert_eq!(&run.frame[0..6], &NODE2_MAC.0);
        assert_eq!(&run.frame[12..], &frame[12..]);
    }
    // With options, bytes 34..38 are option bytes, not ports: a frame whose option bytes look like
    // the mapped ports but whose real ports differ must not match.
    let mut decoy = Frame::tcp(client(40007), vip());
    let mut opts = Vec::new();
    opts.extend_from_slice(&40006u16.to_be_bytes());
    opts.extend_from_slice(&80u16.to_be_bytes());
    decoy.ip_options = opts;
    assert_eq!(f.run_frame(&decoy.build()).unwrap().verdict, Verdict::Pass);
}

#[test]
#[ignore = "needs root: loads BPF programs (./quickstart test runs it as root)"]
fn forward_and_repoint_need_an_entry_and_repoint_moves_it() {
    require_root();
    let f = forwarder(1024);
    let key = ConnKey::new(client(40008), vip());
    assert!(matches!(f.forward(key), Err(ForwarderError::NoEntry(_))));
    assert!(matches!(f.repoint(key, NODE2), Err(ForwarderError::NoEntry(_))));
    assert!(f.get(key).unwrap().is_none(), "a failed forward creates nothing");
    f.hold(key, NODE1).unwrap();
    f.forward(key).unwrap();
    let frame = Frame::tcp(client(40008), vip()).build();
    assert_eq!(&f.run_frame(&frame).unwrap().frame[0..6], &NODE1_MAC.0);
    f.repoint(key, NODE2).unwrap();
    let entry = f.get(key).unwrap().unwrap();
    assert_eq!((entry.node_mac, entry.ifindex, entry.action()), (NODE2_MAC, 8, Some(Action::Forward)));
    assert_eq!(entry.packets, 1, "repoint keeps the counters");
    let run = f.run_frame(&frame).unwrap();
    assert_eq!((run.verdict, &run.frame[0..6]), (Verdict::Redirect, &NODE2_MAC.0[..]));
    // Re-handoff with holding: hold toward node 1 drops, forward flips to it.
    f.hold(key, NODE1).unwrap();
    assert_eq!(f.run_frame(&frame).unwrap().verdict, Verdict::Drop);
    f.forward(key).unwrap();
    assert_eq!(&f.run_frame(&frame).unwrap().frame[0..6], &NODE1_MAC.0);
    assert!(f.remove(key).unwrap());
    assert!(!f.remove(key).unwrap());
    assert_eq!(f.run_frame(&frame).unwrap().verdict, Verdict::Pass);
}

#[test]
#[ignore = "needs root: loads BPF programs (./quickstart test runs it as root)"]
fn expire_deletes_only_entries_idle_for_longer_than_asked() {
    require_root();
    let f = forwarder(1024);
    let idle = ConnKey::new(client(40010), vip());
    let busy = ConnKey::new(client(40011), vip());
    let fresh = ConnKey::new(client(40012), vip());
    f.hold(idle, NODE1).unwrap();
    f.hold(busy, NODE1).unwrap();
    f.forward(busy).unwrap();
    std::thread::sleep(Duration::from_millis(600));
    // A packet refreshes `busy`; `fresh` is written now.
    assert_eq!(f.run_frame(&Frame::tcp(client(40011), vip()).build()).unwrap().verdict, Verdict::Redirect);
    f.hold(fresh, NODE2).unwrap();
    assert_eq!(f.expire(Duration::from_millis(300)).unwrap(), 1);
    assert!(f.get(idle).unwrap().is_none());
    assert!(f.get(busy).unwrap().is_some() && f.get(fresh).unwrap().is_some());
    assert_eq!(f.entries().unwrap().len(), 2);
    assert_eq!(f.expire(Duration::from_secs(60)).unwrap(), 0);
}

fn l4_forwarder(max_entries: u32, mode: SelectionMode, table: &NodeTable) -> Forwarder {
    let f = forwarder(max_entries);
    f.set_nodes(&[NODE1, NODE2]).unwrap();
    f.set_services(&[(*vip().ip(), vip().port())]).unwrap();
    f.set_selection_mode(mode).unwrap();
    f.set_selection(table.slots()).unwrap();
    f
}

#[test]
#[ignore = "needs root: loads BPF programs (./quickstart test runs it as root)"]
fn l4_syn_to_a_service_creates_entries_round_robin_over_the_nodes() {
    require_root();
    pin_to_cpu0();
    let f = l4_forwarder(1024, SelectionMode::RoundRobin, &NodeTable::round_robin(2));
    let mut picked = Vec::new();
    for port in 41000..41006 {
        let syn = Frame::tcp(client(port), vip()).flags(TCP_SYN).build();
        let run = f.run_frame(&syn).unwrap();
        assert_eq!(run.verdict, Verdict::Redirect);
        assert_eq!(&run.frame[6..12], &SWITCH_MAC.0);
        assert_eq!(&run.frame[12..], &syn[12..]);
        let entry = f.get(ConnKey::new(client(port), vip())).unwrap().expect("the SYN made an entry");
        assert!(entry.is_l4());
        assert_eq!(entry.action(), Some(Action::Forward));
        assert_eq!(&run.frame[0..6], &entry.node_mac.0);
        picked.push(entry.node);
    }
    // CPU 0's index starts at 0 after set_selection.
    assert_eq!(picked, [0, 1, 0, 1, 0, 1]);
    // Later segments follow their entry.
    let ack = Frame::tcp(client(41001), vip()).payload(b"GET / HTTP/1.1\r\n\r\n").build();
    assert_eq!(&f.run_frame(&ack).unwrap().frame[0..6], &NODE2_MAC.0);
    // Not a service, or not a SYN: passed.
    let other_port = Frame::tcp(client(41100), addr("10.9.0.100:443")).flags(TCP_SYN).build();
    assert_eq!(f.run_frame(&other_port).unwrap().verdict, Verdict::Pass);
    let stray_ack = Frame::tcp(client(41101), vip()).build();
    assert_eq!(f.run_frame(&stray_ack).unwrap().verdict, Verdict::Pass);
    assert!(f.get(ConnKey::new(client(41101), vip())).unwrap().is_none());
    let s = f.stats().unwrap();
    assert_eq!((s.l4_new, s.forwarded, s.dropped), (6, 7, 0));
}

#[test]
#[ignore = "needs root: loads BPF programs (./quickstart test runs it as root)"]
fn l4_weighted_table_follows_its_weights() {
    require_root();
    pin_to_cpu0();
    let f = l4_forwarder(1024, SelectionMode::RoundRobin, &NodeTable::weighted(&[3, 1]));
    let mut counts = [0; 2];
    for port in 42000..42008 {
        f.run_frame(&Frame::tcp(client(port), vip()).flags(TCP_SYN).build()).unwrap();
        counts[f.get(ConnKey::new(client(port), vip())).unwrap().unwrap().node as usize] += 1;
    }
    assert_eq!(counts, [6, 2]);
}

#[test]
#[ignore = "needs root: loads BPF programs (./quickstart test runs it as root)"]
fn l4_hash_selection_is_stable_per_4_tuple_and_matches_flow_hash() {
    require_root();
    let table = NodeTable::from_slots(vec![0, 1, 1, 0, 1]);
    let f = l4_forwarder(1024, SelectionMode::Hash, &table);
    let mut seen = [0; 2];
    for port in 43000..43040 {
        let key = ConnKey::new(client(port), vip());
        let syn = Frame::tcp(client(port), vip()).flags(TCP_SYN).build();
        assert_eq!(f.run_frame(&syn).unwrap().verdict, Verdict::Redirect);
        let first = f.get(key).unwrap().unwrap().node;
        let expected = table.slots()[(key.flow_hash() % 5) as usize];
        assert_eq!(u32::from(first), expected, "{key}");
        // Forget it and connect again: the same 4-tuple lands on the same node.
        f.remove(key).unwrap();
        f.run_frame(&syn).unwrap();
        assert_eq!(f.get(key).unwrap().unwrap().node, first);
        seen[first as usize] += 1;
    }
    assert!(seen[0] > 0 && seen[1] > 0, "40 tuples use both nodes: {seen:?}");
}

#[test]
#[ignore = "needs root: loads BPF programs (./quickstart test runs it as root)"]
fn l4_syn_retransmission_reuses_its_entry() {
    require_root();
    pin_to_cpu0();
    let f = l4_forwarder(1024, SelectionMode::RoundRobin, &NodeTable::round_robin(2));
    let syn = Frame::tcp(client(44000), vip()).flags(TCP_SYN).build();
    let first = f.run_frame(&syn).unwrap();
    let again = f.run_frame(&syn).unwrap();
    assert_eq!(again.verdict, Verdict::Redirect);
    assert_eq!(first.frame, again.frame, "same node both times");
    let s = f.stats().unwrap();
    assert_eq!((s.l4_new, s.syn_resets), (1, 0));
}

#[test]
#[ignore = "needs root: loads BPF programs (./quickstart test runs it as root)"]
fn l4_drops_syns_it_cannot_place_and_counts_them() {
    require_root();
    // No selection table yet.
    let f = forwarder(2);
    f.set_services(&[(*vip().ip(), vip().port())]).unwrap();
    let syn = |port| Frame::tcp(client(port), vip()).flags(TCP_SYN).build();
    assert_eq!(f.run_frame(&syn(45000)).unwrap().verdict, Verdict::Drop);
    // A table pointing at an empty node slot.
    f.set_selection(&[5]).unwrap();
    assert_eq!(f.run_frame(&syn(45001)).unwrap().verdict, Verdict::Drop);
    // A full connection map (capacity 2).
    f.set_nodes(&[NODE1]).unwrap();
    f.set_selection(&[0]).unwrap();
    assert_eq!(f.run_frame(&syn(45002)).unwrap().verdict, Verdict::Redirect);
    assert_eq!(f.run_frame(&syn(45003)).unwrap().verdict, Verdict::Redirect);
    assert_eq!(f.run_frame(&syn(45004)).unwrap().verdict, Verdict::Drop);
    let s = f.stats().unwrap();
    assert_eq!((s.dropped, s.l4_new, s.handled), (3, 2, 5));
    // Removing the service turns the path off: SYNs pass to the switch's stack.
    f.set_services(&[]).unwrap();
    assert_eq!(f.run_frame(&syn(45005)).unwrap().verdict, Verdict::Pass);
}

#[test]
#[ignore = "needs root: loads BPF programs (./quickstart test runs it as root)"]
fn port_reuse_on_an_l4_service_deletes_the_handoff_entry_and_places_the_syn_anew() {
    require_root();
    pin_to_cpu0();
    let f = l4_forwarder(1024, SelectionMode::RoundRobin, &NodeTable::round_robin(2));
    let key = ConnKey::new(client(46000), vip());
    // A connection a node cloned elsewhere (user-space entry, no l4 flag).
    f.hold(key, NODE2).unwrap();
    f.forward(key).unwrap();
    let run = f.run_frame(&Frame::tcp(client(46000), vip()).flags(TCP_SYN).build()).unwrap();
    assert_eq!(run.verdict, Verdict::Redirect);
    let entry = f.get(key).unwrap().unwrap();
    assert!(entry.is_l4() && entry.node == 0, "{entry:?}");
    let s = f.stats().unwrap();
    assert_eq!((s.syn_resets, s.l4_new), (1, 1));
}

#[test]
#[ignore = "needs root: loads BPF programs (./quickstart test runs it as root)"]
fn counters_count_every_outcome() {
    require_root();
    pin_to_cpu0();
    let f = l4_forwarder(1024, SelectionMode::RoundRobin, &NodeTable::round_robin(2));
    let held = ConnKey::new(client(47000), vip());
    let fwd = ConnKey::new(client(47001), vip());
    let reused = ConnKey::new(client(47002), addr("10.9.0.100:8080"));
    f.hold(held, NODE1).unwrap();
    f.hold(fwd, NODE1).unwrap();
    f.forward(fwd).unwrap();
    f.hold(reused, NODE1).unwrap();
    let frames = [
        Frame::tcp(client(47000), vip()).build(), // held
        Frame::tcp(client(47001), vip()).build(), // forwarded
        Frame::tcp(client(47002), addr("10.9.0.100:8080")).flags(TCP_SYN).build(), // syn reset, passed
        Frame::tcp(client(47003), vip()).flags(TCP_SYN).build(), // l4 new + forwarded
        Frame::tcp(client(47004), vip()).flags(TCP_RST | TCP_ACK).build(), // no entry: passed
    ];
    for frame in &frames {
        f.run_frame(frame).unwrap();
    }
    assert_eq!(
        f.stats().unwrap(),
        Stats { handled: 5, forwarded: 2, held: 1, dropped: 0, syn_resets: 1, l4_new: 1 }
    );
}

#[test]
#[ignore = "needs root: loads BPF programs (./quickstart test runs it as root)"]
fn bad_tables_and_lists_are_refused_with_what_was_wrong() {
    require_root();
    let f = forwarder(16);
    let err = f.set_selection(&[0, 300]).unwrap_err().to_string();
    assert!(err.contains("selection table") && err.contains("300"), "{err}");
    let err = f.set_selection(&vec![0; locus_bpf::MAX_SELECTION + 1]).unwrap_err().to_string();
    assert!(err.contains("65537"), "{err}");
    let nodes = vec![NODE1; locus_bpf::MAX_NODES + 1];
    assert!(f.set_nodes(&nodes).is_err());
    let err = f.hold(ConnKey::new(client(1), vip()), NodeSlot { mac: NODE1_MAC, ifindex: 0 }).unwrap_err();
    assert!(err.to_string().contains("ifindex 0"), "{err}");
    assert!(matches!(f.keep_running(), Err(ForwarderError::NotPinned)));
    let err = Forwarder::load(ForwarderOptions { max_entries: 0, ..Default::default() }).err().unwrap();
    assert!(err.to_string().contains("max_entries"), "{err}");
}

#[test]
#[ignore = "needs root: loads BPF programs (./quickstart test runs it as root)"]
fn the_default_capacity_is_262144_and_the_forwarder_is_shareable() {
    require_root();
    fn shareable<T: Send + Sync>() {}
    shareable::<Forwarder>();
    let f = Forwarder::load(ForwarderOptions {
        switch_mac: Some(SWITCH_MAC),
        peer_redirect: false,
        ..Default::default()
    })
    .unwrap();
    assert_eq!(f.capacity(), 262_144);
    // Threads write entries concurrently through &Forwarder.
    std::thread::scope(|s| {
        for t in 0..4u16 {
            let f = &f;
            s.spawn(move || {
                for i in 0..200u16 {
                    f.hold(ConnKey::new(client(10_000 + t * 1000 + i), vip()), NODE1).unwrap();
                }
            });
        }
    });
    assert_eq!(f.entries().unwrap().len(), 800);
}
