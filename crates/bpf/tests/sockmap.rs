//! The sockmap relay on loopback (root only): bytes relayed exactly both ways at several sizes,
//! half-closes and resets passed on by the watcher, a hundred pairs at once, bytes queued before
//! the join, a socket joined twice refused, and unjoin handing back sockets that work as plain sockets.

mod common;

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::thread;
use std::time::Duration;

use common::require_root;
use locus_bpf::{PairReport, RelayError, SockmapRelay};

const LIMIT: Duration = Duration::from_secs(20);

/// A connected loopback pair, both ends with read and write timeouts.
fn tcp_pair() -> (TcpStream, TcpStream) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let a = TcpStream::connect(l.local_addr().unwrap()).unwrap();
    let (b, _) = l.accept().unwrap();
    for s in [&a, &b] {
        s.set_read_timeout(Some(LIMIT)).unwrap();
        s.set_write_timeout(Some(LIMIT)).unwrap();
    }
    (a, b)
}

/// client ↔ a (switch) … b (switch) ↔ node, with a and b joined.
struct Relayed {
    client: TcpStream,
    node: TcpStream,
    a: TcpStream,
    b: TcpStream,
}

fn relayed() -> Relayed {
    let (client, a) = tcp_pair();
    let (b, node) = tcp_pair();
    Relayed { client, node, a, b }
}

fn pattern(len: usize, seed: u32) -> Vec<u8> {
    (0..len as u32).map(|i| (i.wrapping_mul(seed) % 251) as u8).collect()
}

/// Write `data` from one thread while reading `data.len()` bytes on `rx` here.
fn send_and_receive(mut tx: TcpStream, mut rx: TcpStream, data: Vec<u8>) -> (Vec<u8>, TcpStream, TcpStream) {
    let len = data.len();
    let writer = thread::spawn(move || {
        tx.write_all(&data).unwrap();
        tx
    });
    let mut got = vec![0u8; len];
    rx.read_exact(&mut got).unwrap();
    (got, writer.join().unwrap(), rx)
}

#[test]
#[ignore = "needs root: loads the BPF sockmap program (./quickstart test runs it as root)"]
fn bytes_are_relayed_exactly_both_ways_at_1k_64k_1m_and_8m() {
    require_root();
    let relay = SockmapRelay::load().unwrap();
    for size in [1 << 10, 64 << 10, 1 << 20, 8 << 20] {
        let Relayed { client, node, a, b } = relayed();
        let pair = relay.join(&a, &b).unwrap();
        drop((a, b));
        let up = pattern(size, 7);
        let down = pattern(size, 13);
        // Both directions at once: a request streaming up while a response streams down.
        let (c2, n2) = (client.try_clone().unwrap(), node.try_clone().unwrap());
        let up_side = {
            let up = up.clone();
            thread::spawn(move || send_and_receive(c2, n2, up))
        };
        let (got_down, _node, _client) = send_and_receive(node, client, down.clone());
        let (got_up, _c2, _n2) = up_side.join().unwrap();
        assert!(got_up == up, "{size} bytes up differ");
        assert!(got_down == down, "{size} bytes down differ");
        let report = relay.unjoin(pair, LIMIT).unwrap();
        assert_eq!(report, PairReport { a_to_b: size as u64, b_to_a: size as u64, reset: false });
    }
}

#[test]
#[ignore = "needs root: loads the BPF sockmap program (./quickstart test runs it as root)"]
fn a_half_close_is_passed_on_after_the_last_byte_each_way() {
    require_root();
    let relay = SockmapRelay::load().unwrap();
    let Relayed { mut client, mut node, a, b } = relayed();
    let pair = relay.join(&a, &b).unwrap();
    drop((a, b));
    let upload = pattern(3 << 20, 3);
    let download = pattern(5 << 20, 11);
    let node_side = {
        let download = download.clone();
        thread::spawn(move || {
            let mut got = Vec::new();
            node.read_to_end(&mut got).unwrap();
            node.write_all(&download).unwrap();
            node.shutdown(Shutdown::Write).unwrap();
            got
        })
    };
    client.write_all(&upload).unwrap();
    client.shutdown(Shutdown::Write).unwrap();
    let mut got = Vec::new();
    client.read_to_end(&mut got).unwrap();
    assert!(got == download, "download differs: {} of {} bytes", got.len(), download.len());
    assert!(node_side.join().unwrap() == upload, "upload differs");
    let report = relay.wait(pair, LIMIT).unwrap();
    assert_eq!(report, PairReport { a_to_b: 3 << 20, b_to_a: 5 << 20, reset: false });
    assert_eq!(relay.pairs(), 0, "a waited pair is forgotten");
    assert!(matches!(relay.wait(pair, LIMIT), Err(RelayError::UnknownPair(_))));
}

#[test]
#[ignore = "needs root: loads the BPF sockmap program (./quickstart test runs it as root)"]
fn a_reset_ends_the_pair_and_closes_the_other_side() {
    require_root();
    let relay = SockmapRelay::load().unwrap();
    let Relayed { client, mut node, a, b } = relayed();
    let pair = relay.join(&a, &b).unwrap();
    drop((a, b));
    // Linger 0: close sends RST.
    socket2::SockRef::from(&client).set_linger(Some(Duration::ZERO)).unwrap();
    drop(client);
    let mut rest = Vec::new();
    let r = node.read_to_end(&mut rest);
    assert!(r.is_ok() && rest.is_empty(), "the node sees the connection end: {r:?}, {} bytes", rest.len());
    let report = relay.wait(pair, LIMIT).unwrap();
    assert!(report.reset, "{report:?}");
}

#[test]
#[ignore = "needs root: loads the BPF sockmap program (./quickstart test runs it as root)"]
fn a_hundred_pairs_relay_at_once_without_mixing_bytes() {
    require_root();
    let relay = SockmapRelay::load().unwrap();
    let mut pairs = Vec::new();
    for i in 0..100u32 {
        let Relayed { client, node, a, b } = relayed();
        let id = relay.join(&a, &b).unwrap();
        pairs.push((i, id, client, node));
    }
    assert_eq!(relay.pairs(), 100);
    let threads: Vec<_> = pairs
        .into_iter()
        .map(|(i, id, mut client, mut node)| {
            thread::spawn(move || {
                let request = pattern(16 << 10, 2 * i + 3);
                let response = pattern(64 << 10, 2 * i + 5);
                client.write_all(&request).unwrap();
                client.shutdown(Shutdown::Write).unwrap();
                let mut got = Vec::new();
                node.read_to_end(&mut got).unwrap();
                assert!(got == request, "pair {i}: request differs");
                node.write_all(&response).unwrap();
                drop(node);
                let mut got = Vec::new();
                client.read_to_end(&mut got).unwrap();
                assert!(got == response, "pair {i}: response differs");
                id
            })
        })
        .collect();
    for t in threads {
        let id = t.join().unwrap();
        let report = relay.wait(id, LIMIT).unwrap();
        assert_eq!(report, PairReport { a_to_b: 16 << 10, b_to_a: 64 << 10, reset: false });
    }
    assert_eq!(relay.pairs(), 0);
}

#[test]
#[ignore = "needs root: loads the BPF sockmap program (./quickstart test runs it as root)"]
fn bytes_queued_before_the_join_are_relayed_without_more_traffic() {
    require_root();
    let relay = SockmapRelay::load().unwrap();
    let Relayed { mut client, mut node, a, b } = relayed();
    client.write_all(b"early request").unwrap();
    // Let it land in a's receive queue before the join.
    thread::sleep(Duration::from_millis(50));
    let pair = relay.join(&a, &b).unwrap();
    let mut got = [0u8; 13];
    node.read_exact(&mut got).unwrap();
    assert_eq!(&got, b"early request");
    relay.unjoin(pair, LIMIT).unwrap();
}

#[test]
#[ignore = "needs root: loads the BPF sockmap program (./quickstart test runs it as root)"]
fn unjoin_hands_back_sockets_that_work_as_plain_sockets() {
    require_root();
    let relay = SockmapRelay::load().unwrap();
    let Relayed { mut client, mut node, mut a, mut b } = relayed();
    let pair = relay.join(&a, &b).unwrap();
    client.write_all(b"through the relay").unwrap();
    let mut got = [0u8; 17];
    node.read_exact(&mut got).unwrap();
    assert_eq!(&got, b"through the relay");
    let report = relay.unjoin(pair, LIMIT).unwrap();
    assert_eq!(report, PairReport { a_to_b: 17, b_to_a: 0, reset: false });
    assert_eq!(relay.pairs(), 0);

    // Each side now talks to its own remote only, blocking reads included.
    client.write_all(b"to the switch").unwrap();
    let mut got = [0u8; 13];
    a.read_exact(&mut got).unwrap();
    assert_eq!(&got, b"to the switch");
    a.write_all(b"from the switch").unwrap();
    let mut got = [0u8; 15];
    client.read_exact(&mut got).unwrap();
    assert_eq!(&got, b"from the switch");
    node.write_all(b"node reply").unwrap();
    let mut got = [0u8; 10];
    b.read_exact(&mut got).unwrap();
    assert_eq!(&got, b"node reply");
    // And an EOF is an EOF again, not passed on by anyone.
    drop(client);
    let mut rest = Vec::new();
    a.read_to_end(&mut rest).unwrap();
    assert!(rest.is_empty());
    b.write_all(b"still open").unwrap();
    let mut got = [0u8; 10];
    node.read_exact(&mut got).unwrap();
    assert_eq!(&got, b"still open");
}

#[test]
#[ignore = "needs root: loads the BPF sockmap program (./quickstart test runs it as root)"]
fn joining_a_socket_twice_is_refused_and_leaves_its_pair_relaying() {
    require_root();
    let relay = SockmapRelay::load().unwrap();
    let Relayed { mut client, mut node, a, b } = relayed();
    let (_other_peer, other) = tcp_pair();
    let pair = relay.join(&a, &b).unwrap();
    let refused = relay.join(&other, &b);
    assert!(matches!(refused, Err(RelayError::Map { op: "insert", .. })), "{refused:?}");
    assert_eq!(relay.pairs(), 1);
    client.write_all(b"still relayed").unwrap();
    let mut got = [0u8; 13];
    node.read_exact(&mut got).unwrap();
    assert_eq!(&got, b"still relayed");
    node.write_all(b"and back").unwrap();
    let mut got = [0u8; 8];
    client.read_exact(&mut got).unwrap();
    assert_eq!(&got, b"and back");
    relay.unjoin(pair, LIMIT).unwrap();
}
