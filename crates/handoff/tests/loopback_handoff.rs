//! Handoff on loopback, in one process and namespace: a connection accepted on 127.0.0.1 is
//! dumped (closed silently) and restored next to the still-open listener, and the client goes
//! on with the exchange byte for byte; the in-place dump, resume and disconnect; and the
//! errors of steps in the wrong state. Root only.

use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddrV4, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::time::Duration;

use std::os::fd::AsFd;

use locus_handoff::{
    PreparedSocket, RepairError, RestoreOptions, TcpRepairState, disconnect_dumped, dump_connection,
    dump_connection_in_place, restore_connection, restore_prepared, resume_connection, sending_mss,
};

/// For the root-only tests (`#[ignore]`d; `./quickstart test` runs them as root).
fn require_root() {
    locus_test_support::require_root("TCP_REPAIR needs CAP_NET_ADMIN");
}

/// A connected pair on loopback: (listener, client, accepted server side).
fn connected_pair() -> (TcpListener, TcpStream, TcpStream) {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    let client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
    let (server, _) = listener.accept().unwrap();
    for s in [&client, &server] {
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        s.set_write_timeout(Some(Duration::from_secs(5))).unwrap();
    }
    (listener, client, server)
}

/// Deterministic, position-dependent bytes, so a shifted or repeated byte is noticed.
fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len).map(|i| (i as u32).wrapping_mul(2_654_435_761).to_le_bytes()[1] ^ seed).collect()
}

/// `read_exact` that also fails when the whole read takes longer than 20 s (a connection that
/// crawls — say, with a wrong window scale — never trips the per-read timeout).
fn read_all_within(stream: &mut TcpStream, buf: &mut [u8]) {
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let mut done = 0;
    while done < buf.len() {
        assert!(std::time::Instant::now() < deadline, "only {done} of {} bytes in 20 s", buf.len());
        match stream.read(&mut buf[done..]) {
            Ok(0) => panic!("connection ended after {done} of {} bytes", buf.len()),
            Ok(n) => done += n,
            Err(e) => panic!("after {done} of {} bytes: {e}", buf.len()),
        }
    }
}

fn bytes_available(stream: &TcpStream) -> usize {
    let mut n: libc::c_int = 0;
    // SAFETY: FIONREAD writes one int through the pointer; the descriptor is open.
    unsafe { libc::ioctl(stream.as_raw_fd(), libc::FIONREAD, &mut n) };
    n as usize
}

fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while !done() {
        assert!(std::time::Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[test]
#[ignore = "needs root: TCP_REPAIR needs CAP_NET_ADMIN (./quickstart test runs it as root)"]
fn loopback_handoff_keeps_the_request_in_front_and_the_client_continues_byte_exact() {
    require_root();
    let (listener, mut client, mut server) = connected_pair();
    let request = b"GET /a HTTP/1.1\r\nHost: x\r\n\r\n";
    let pipelined = b"GET /b HTTP/1.1\r\nHost: x\r\n\r\n";
    client.write_all(request).unwrap();
    let mut consumed = vec![0u8; request.len()];
    server.read_exact(&mut consumed).unwrap();
    client.write_all(pipelined).unwrap();
    wait_until("the pipelined request", || bytes_available(&server) == pipelined.len());

    let state = dump_connection(server, &consumed).unwrap();
    assert_eq!(state.local.port(), listener.local_addr().unwrap().port());
    assert_eq!(
        state.peer,
        match client.local_addr().unwrap() {
            std::net::SocketAddr::V4(a) => a,
            other => panic!("{other}"),
        }
    );
    assert_eq!(state.recv_queue, [&request[..], &pipelined[..]].concat(), "consumed bytes go in front");
    assert!(state.send_queue.is_empty());
    assert!(
        state.timestamps && state.sack_permitted && state.window_scaling,
        "loopback negotiates all: {state:?}"
    );

    // The silent close sent nothing: the client sees no FIN or RST.
    std::thread::sleep(Duration::from_millis(20));
    client.set_nonblocking(true).unwrap();
    let mut probe = [0u8; 1];
    let err = client.read(&mut probe).expect_err("no FIN (read would return 0) and no data");
    assert_eq!(err.kind(), std::io::ErrorKind::WouldBlock, "no RST either: {err}");
    client.set_nonblocking(false).unwrap();

    // Restored next to the listener, which still holds the port.
    let mut restored = restore_connection(&state, &RestoreOptions::default()).unwrap();
    restored.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    restored.set_write_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut again = vec![0u8; state.recv_queue.len()];
    restored.read_exact(&mut again).unwrap();
    assert_eq!(again, state.recv_queue);

    // Two responses, then a third request on the kept-alive connection.
    let small = pattern(5 * 1024, 1);
    let big = pattern(1 << 20, 2);
    let writer = std::thread::spawn(move || {
        restored.write_all(&small).unwrap();
        restored.write_all(&big).unwrap();
        restored
    });
    let mut got = vec![0u8; 5 * 1024 + (1 << 20)];
    read_all_within(&mut client, &mut got);
    let mut restored = writer.join().unwrap();
    assert!(got[..5 * 1024] == pattern(5 * 1024, 1)[..], "5 KB response differs");
    assert!(got[5 * 1024..] == pattern(1 << 20, 2)[..], "1 MB response differs");
    client.write_all(b"GET /c HTTP/1.1\r\n\r\n").unwrap();
    let mut third = [0u8; 19];
    restored.read_exact(&mut third).unwrap();
    assert_eq!(&third, b"GET /c HTTP/1.1\r\n\r\n");
    drop(client);
    assert_eq!(restored.read(&mut third).unwrap(), 0, "the client's FIN reaches the restored socket");
}

#[test]
#[ignore = "needs root: TCP_REPAIR needs CAP_NET_ADMIN (./quickstart test runs it as root)"]
fn loopback_handoff_transfers_the_send_queue_when_the_client_is_not_reading() {
    require_root();
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    // A small receive buffer on the client so the server's writes back up.
    let client = socket_with_small_receive_buffer();
    connect(&client, listener.local_addr().unwrap());
    let mut client = TcpStream::from(client);
    client.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let (mut server, _) = listener.accept().unwrap();
    server.set_nonblocking(true).unwrap();
    set_int_option(&server, libc::SO_SNDBUF, 128 * 1024);
    let body = pattern(2 << 20, 3);
    let mut written = 0;
    while written < body.len() {
        match server.write(&body[written..]) {
            Ok(n) => written += n,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
            Err(e) => panic!("{e}"),
        }
    }
    assert!(written < body.len(), "the send queue must fill up");
    std::thread::sleep(Duration::from_millis(20));
    let mss_before = sending_mss(server.as_fd()).unwrap();
    let state = dump_connection(server, b"").unwrap();
    assert!(!state.send_queue.is_empty(), "data still in the send queue");
    assert!(state.unsent_len > 0, "part of it never sent (zero window): {}", state.unsent_len);
    assert_eq!(&body[written - state.send_queue.len()..written], &state.send_queue[..]);

    let mut restored = restore_connection(&state, &RestoreOptions::default()).unwrap();
    // Bounded by half the client's largest window, as the original was: a segment larger than
    // the small window would only go out as window probes.
    assert_eq!(
        sending_mss(restored.as_fd()).unwrap(),
        mss_before,
        "the restored socket sends segments of the same size"
    );
    restored.set_write_timeout(Some(Duration::from_secs(5))).unwrap();
    let rest = body[written..].to_vec();
    let unsent = state.unsent_part().to_vec();
    let writer = std::thread::spawn(move || {
        restored.write_all(&unsent).unwrap();
        restored.write_all(&rest).unwrap();
    });
    let mut got = vec![0u8; body.len()];
    read_all_within(&mut client, &mut got);
    writer.join().unwrap();
    assert!(got == body, "the client received the whole body byte for byte");
}

fn set_int_option(socket: &impl AsRawFd, name: libc::c_int, value: libc::c_int) {
    // SAFETY: setsockopt reads one live int; the descriptor is open.
    let rc = unsafe {
        libc::setsockopt(socket.as_raw_fd(), libc::SOL_SOCKET, name, (&value as *const libc::c_int).cast(), 4)
    };
    assert_eq!(rc, 0, "{}", std::io::Error::last_os_error());
}

fn socket_with_small_receive_buffer() -> std::os::fd::OwnedFd {
    use std::os::fd::FromRawFd;
    // SAFETY: socket has no memory arguments; the descriptor is owned at once.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) };
    assert!(fd >= 0);
    // SAFETY: a new descriptor that nothing else owns.
    let fd = unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) };
    set_int_option(&fd, libc::SO_RCVBUF, 16 * 1024);
    fd
}

fn connect(fd: &std::os::fd::OwnedFd, addr: std::net::SocketAddr) {
    let std::net::SocketAddr::V4(v4) = addr else { panic!("IPv4 only") };
    let sa = libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: v4.port().to_be(),
        sin_addr: libc::in_addr { s_addr: u32::from_ne_bytes(v4.ip().octets()) },
        sin_zero: [0; 8],
    };
    // SAFETY: a valid sockaddr_in of the given size, only read.
    let rc = unsafe {
        libc::connect(
            fd.as_raw_fd(),
            (&sa as *const libc::sockaddr_in).cast(),
            std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
        )
    };
    assert_eq!(rc, 0, "{}", std::io::Error::last_os_error());
}

#[test]
#[ignore = "needs root: TCP_REPAIR needs CAP_NET_ADMIN (./quickstart test runs it as root)"]
fn dumping_a_listener_fails_at_the_first_step_and_gives_the_socket_back() {
    require_root();
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    let err = dump_connection(listener, b"").unwrap_err();
    assert_eq!(err.error.to_string(), "TCP_REPAIR=1: EPERM (Operation not permitted)");
    let socket = err.socket.expect("the socket comes back");
    let listener = TcpListener::from(socket);
    let client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
    drop(client);
}

#[test]
#[ignore = "needs root: TCP_REPAIR needs CAP_NET_ADMIN (./quickstart test runs it as root)"]
fn dumping_a_half_closed_connection_is_refused_and_the_socket_still_works() {
    require_root();
    let (_listener, mut client, server) = connected_pair();
    client.shutdown(std::net::Shutdown::Write).unwrap();
    std::thread::sleep(Duration::from_millis(20));
    let err = dump_connection(server, b"").unwrap_err();
    assert!(matches!(err.error, RepairError::NotEstablished(_)), "{}", err.error);
    assert!(err.error.to_string().contains("CLOSE_WAIT"), "{}", err.error);
    let mut server = TcpStream::from(err.socket.unwrap());
    server.write_all(b"still here").unwrap();
    let mut got = [0u8; 10];
    client.read_exact(&mut got).unwrap();
    assert_eq!(&got, b"still here");
}

#[test]
#[ignore = "needs root: TCP_REPAIR needs CAP_NET_ADMIN (./quickstart test runs it as root)"]
fn restoring_onto_an_address_this_host_lacks_fails_at_bind_with_eaddrnotavail() {
    require_root();
    let state = TcpRepairState {
        // TEST-NET-1: on no interface here. Nothing is sent: the bind fails first.
        local: SocketAddrV4::new(Ipv4Addr::new(192, 0, 2, 1), 80),
        peer: SocketAddrV4::new(Ipv4Addr::LOCALHOST, 9),
        recv_seq: 1,
        send_seq: 1,
        recv_queue: Vec::new(),
        send_queue: Vec::new(),
        unsent_len: 0,
        mss: 1460,
        window_scaling: false,
        snd_wscale: 0,
        rcv_wscale: 0,
        sack_permitted: false,
        timestamps: false,
        timestamp: 0,
        window: Default::default(),
    };
    let err = restore_connection(&state, &RestoreOptions::default()).unwrap_err();
    assert_eq!(err.to_string(), "bind to the local address: EADDRNOTAVAIL (Cannot assign requested address)");
}

#[test]
#[ignore = "needs root: TCP_REPAIR needs CAP_NET_ADMIN (./quickstart test runs it as root)"]
fn on_one_host_a_dumped_socket_must_leave_the_tables_before_its_restore() {
    require_root();
    let (_listener, mut client, server) = connected_pair();
    let state = dump_connection_in_place(server.as_fd(), b"").unwrap();
    // Still open in repair mode: the restored socket's 4-tuple collides with it.
    let err = restore_connection(&state, &RestoreOptions::default()).unwrap_err();
    assert_eq!(
        err.to_string(),
        "connect to the peer (repair mode): EADDRNOTAVAIL (Cannot assign requested address)"
    );
    // Disconnected silently, it is out of the way; its descriptor is closed after the restore.
    // (This restore also leaves repair mode with the window probe.)
    disconnect_dumped(server.as_fd()).unwrap();
    let options = RestoreOptions { window_probe: true, ..RestoreOptions::default() };
    let prepared = PreparedSocket::new(&options).unwrap();
    let mut restored = restore_prepared(prepared, &state, &options).unwrap();
    drop(server);
    restored.write_all(b"from the restored socket").unwrap();
    let mut got = [0u8; 24];
    client.read_exact(&mut got).unwrap();
    assert_eq!(&got, b"from the restored socket");
}

#[test]
#[ignore = "needs root: TCP_REPAIR needs CAP_NET_ADMIN (./quickstart test runs it as root)"]
fn a_connection_dumped_in_place_and_resumed_serves_on_as_if_nothing_happened() {
    require_root();
    let (_listener, mut client, mut server) = connected_pair();
    client.write_all(b"request").unwrap();
    wait_until("the request", || bytes_available(&server) == 7);
    let state = dump_connection_in_place(server.as_fd(), b"").unwrap();
    assert_eq!(state.recv_queue, b"request");
    // The node refused: the switch carries on with the socket it still has.
    resume_connection(server.as_fd()).unwrap();
    let mut got = [0u8; 7];
    server.read_exact(&mut got).unwrap();
    assert_eq!(&got, b"request", "the receive queue is intact");
    server.write_all(b"response").unwrap();
    let mut got = [0u8; 8];
    client.read_exact(&mut got).unwrap();
    assert_eq!(&got, b"response");
}

/// setsockopt(SOL_TCP) with any plain value; the errno on failure.
fn tcp_option<T>(fd: &impl AsRawFd, name: libc::c_int, value: &T) -> Result<(), i32> {
    // SAFETY: setsockopt reads a live `T` of its size; the descriptor is open.
    let rc = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_TCP,
            name,
            (value as *const T).cast(),
            std::mem::size_of::<T>() as libc::socklen_t,
        )
    };
    if rc == 0 { Ok(()) } else { Err(std::io::Error::last_os_error().raw_os_error().unwrap()) }
}

fn sockaddr(addr: SocketAddrV4) -> libc::sockaddr_in {
    libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: addr.port().to_be(),
        sin_addr: libc::in_addr { s_addr: u32::from_ne_bytes(addr.ip().octets()) },
        sin_zero: [0; 8],
    }
}

#[test]
#[ignore = "needs root: TCP_REPAIR needs CAP_NET_ADMIN (./quickstart test runs it as root)"]
fn the_kernel_refuses_repair_steps_out_of_order_with_these_errnos() {
    require_root();
    let (_listener, mut client, server) = connected_pair();
    client.write_all(b"queued").unwrap();
    wait_until("the request", || bytes_available(&server) == 6);
    let state = dump_connection_in_place(server.as_fd(), b"").unwrap();
    disconnect_dumped(server.as_fd()).unwrap();
    let (repair, queue, queue_seq, options, window, timestamp) = (
        libc::TCP_REPAIR,
        libc::TCP_REPAIR_QUEUE,
        libc::TCP_QUEUE_SEQ,
        libc::TCP_REPAIR_OPTIONS,
        libc::TCP_REPAIR_WINDOW,
        libc::TCP_TIMESTAMP,
    );
    // A plain socket, not in repair mode.
    // SAFETY: socket has no memory arguments; the descriptor is owned at once.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) };
    assert!(fd >= 0);
    // SAFETY: a new descriptor that nothing else owns.
    let socket = unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) };
    let mss_option: [u32; 2] = [2, u32::from(state.mss)];
    // Repair-only options outside repair mode.
    let outside = [
        tcp_option(&socket, queue, &1i32),
        tcp_option(&socket, queue_seq, &1u32),
        tcp_option(&socket, window, &state.window),
        tcp_option(&socket, timestamp, &state.timestamp),
        tcp_option(&socket, options, &mss_option),
    ];
    // Not all EPERM: TCP_QUEUE_SEQ (no queue selected) and TCP_REPAIR_OPTIONS say EINVAL.
    let (eperm, einval) = (Err(libc::EPERM), Err(libc::EINVAL));
    assert_eq!(
        outside,
        [eperm, einval, eperm, eperm, einval],
        "queue, queue_seq, window, timestamp, options"
    );
    // In repair mode, before connect.
    tcp_option(&socket, repair, &1i32).unwrap();
    tcp_option(&socket, queue, &2i32).unwrap();
    tcp_option(&socket, queue_seq, &state.send_seq.wrapping_sub(state.send_queue.len() as u32)).unwrap();
    tcp_option(&socket, queue, &1i32).unwrap();
    tcp_option(&socket, queue_seq, &state.recv_seq.wrapping_sub(state.recv_queue.len() as u32)).unwrap();
    let local = sockaddr(state.local);
    // SAFETY: a valid sockaddr_in of its size, only read.
    let rc = unsafe { libc::bind(socket.as_raw_fd(), (&local as *const libc::sockaddr_in).cast(), 16) };
    assert_eq!(rc, 0, "bind next to the listener: {}", std::io::Error::last_os_error());
    assert_eq!(
        tcp_option(&socket, options, &mss_option),
        Err(libc::EPERM),
        "TCP_REPAIR_OPTIONS before connect"
    );
    assert_eq!(
        tcp_option(&socket, window, &state.window),
        Err(libc::EINVAL),
        "TCP_REPAIR_WINDOW before connect"
    );
    // SAFETY: a live buffer, only read.
    let n = unsafe { libc::send(socket.as_raw_fd(), b"queued".as_ptr().cast(), 6, libc::MSG_NOSIGNAL) };
    assert_eq!(
        (n, std::io::Error::last_os_error().raw_os_error()),
        (-1, Some(libc::EPIPE)),
        "queue before connect"
    );

    // After connect.
    let peer = sockaddr(state.peer);
    // SAFETY: a valid sockaddr_in of its size, only read.
    let rc = unsafe { libc::connect(socket.as_raw_fd(), (&peer as *const libc::sockaddr_in).cast(), 16) };
    assert_eq!(rc, 0, "connect in repair mode: {}", std::io::Error::last_os_error());
    assert_eq!(tcp_option(&socket, queue_seq, &1u32), Err(libc::EPERM), "TCP_QUEUE_SEQ after connect");
    assert_eq!(
        tcp_option(&socket, window, &state.window),
        Err(libc::EINVAL),
        "TCP_REPAIR_WINDOW before the receive queue is written"
    );
    drop(socket);
    drop(server);

    // With an empty receive queue (rcv_wup == rcv_nxt) the window is taken even before
    // connect — and then overwritten by connect: the order matters, the kernel does not say.
    // SAFETY: socket has no memory arguments; the descriptor is owned at once.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) };
    assert!(fd >= 0);
    // SAFETY: a new descriptor that nothing else owns.
    let socket = unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) };
    tcp_option(&socket, repair, &1i32).unwrap();
    tcp_option(&socket, queue, &1i32).unwrap();
    tcp_option(&socket, queue_seq, &state.recv_seq).unwrap();
    let mut empty = state.window;
    empty.rcv_wup = state.recv_seq;
    assert_eq!(tcp_option(&socket, window, &empty), Ok(()), "TCP_REPAIR_WINDOW before connect, empty queue");
}

#[test]
#[ignore = "needs root: TCP_REPAIR needs CAP_NET_ADMIN (./quickstart test runs it as root)"]
fn a_nonblocking_restore_gives_a_socket_tokio_can_take() {
    require_root();
    let (_listener, mut client, server) = connected_pair();
    let state = dump_connection(server, b"GET / HTTP/1.1\r\n\r\n").unwrap();
    let options = RestoreOptions { nonblocking: true, ..RestoreOptions::default() };
    let restored = restore_connection(&state, &options).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut stream = tokio::net::TcpStream::from_std(restored).unwrap();
        let mut request = [0u8; 18];
        stream.read_exact(&mut request).await.unwrap();
        assert_eq!(&request, b"GET / HTTP/1.1\r\n\r\n");
        stream.write_all(b"HTTP/1.1 204 No Content\r\n\r\n").await.unwrap();
    });
    let mut got = [0u8; 27];
    client.read_exact(&mut got).unwrap();
    assert_eq!(&got, b"HTTP/1.1 204 No Content\r\n\r\n");
}

#[test]
#[ignore = "needs root: TCP_REPAIR needs CAP_NET_ADMIN (./quickstart test runs it as root)"]
fn dumping_with_known_addresses_gives_the_state_the_lookups_give() {
    require_root();
    let (listener, mut client, server) = connected_pair();
    client.write_all(b"request").unwrap();
    wait_until("the request", || bytes_available(&server) == 7);
    let looked_up = dump_connection_in_place(server.as_fd(), b"GET ").unwrap();
    resume_connection(server.as_fd()).unwrap();
    let local = match listener.local_addr().unwrap() {
        std::net::SocketAddr::V4(a) => a,
        other => panic!("{other}"),
    };
    let peer = match client.local_addr().unwrap() {
        std::net::SocketAddr::V4(a) => a,
        other => panic!("{other}"),
    };
    let known = locus_handoff::dump_connection_in_place_at(server.as_fd(), b"GET ", local, peer).unwrap();
    // The timestamp clock moves between the two dumps; everything else is the same.
    assert_eq!(TcpRepairState { timestamp: looked_up.timestamp, ..known.clone() }, looked_up);
    assert_eq!((known.local, known.peer), (local, peer));
    assert_eq!(known.recv_queue, b"GET request");
}

#[test]
#[ignore = "needs root: TCP_REPAIR needs CAP_NET_ADMIN (./quickstart test runs it as root)"]
fn a_socket_bound_ahead_restores_only_its_own_address_and_the_client_continues() {
    require_root();
    let (listener, mut client, server) = connected_pair();
    client.write_all(b"ping").unwrap();
    wait_until("the request", || bytes_available(&server) == 4);
    let state = dump_connection_in_place(server.as_fd(), b"").unwrap();
    disconnect_dumped(server.as_fd()).unwrap();
    let options = RestoreOptions::default();
    let elsewhere = SocketAddrV4::new(Ipv4Addr::LOCALHOST, state.local.port().wrapping_add(1).max(1));
    let wrong = PreparedSocket::bound(&options, elsewhere).unwrap();
    assert_eq!(wrong.local_addr(), Some(elsewhere));
    assert!(matches!(restore_prepared(wrong, &state, &options), Err(RepairError::InvalidState(_))));
    // Bound next to the listener and to another socket bound ahead to the same address.
    let local = match listener.local_addr().unwrap() {
        std::net::SocketAddr::V4(a) => a,
        other => panic!("{other}"),
    };
    let _spare = PreparedSocket::bound(&options, local).unwrap();
    let prepared = PreparedSocket::bound(&options, local).unwrap();
    let mut restored = restore_prepared(prepared, &state, &options).unwrap();
    drop(server);
    let mut got = [0u8; 4];
    restored.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    restored.read_exact(&mut got).unwrap();
    assert_eq!(&got, b"ping");
    restored.write_all(b"pong").unwrap();
    client.read_exact(&mut got).unwrap();
    assert_eq!(&got, b"pong");
}

/// A listener on `addr` as servers bind theirs: SO_REUSEADDR, then bind and listen.
fn listen_reusing(addr: std::net::SocketAddr) -> std::io::Result<TcpListener> {
    let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None)?;
    socket.set_reuse_address(true)?;
    socket.bind(&addr.into())?;
    socket.listen(16)?;
    Ok(socket.into())
}

#[test]
#[ignore = "needs root: TCP_REPAIR needs CAP_NET_ADMIN (./quickstart test runs it as root)"]
fn the_time_wait_of_a_restored_or_resumed_connection_does_not_keep_its_listener_from_binding_again() {
    require_root();
    // Restored: the restored socket closes first, so its side is the one in TIME_WAIT.
    let (listener, mut client, server) = connected_pair();
    let addr = listener.local_addr().unwrap();
    let state = dump_connection_in_place(server.as_fd(), b"").unwrap();
    disconnect_dumped(server.as_fd()).unwrap();
    let restored = restore_connection(&state, &RestoreOptions::default()).unwrap();
    drop(server);
    drop(listener);
    drop(restored);
    let mut rest = Vec::new();
    client.read_to_end(&mut rest).unwrap();
    drop(client);
    listen_reusing(addr).expect("a listener binds over a restored connection's TIME_WAIT");

    // Resumed after a dump (a refused handoff): the same.
    let (listener, mut client, server) = connected_pair();
    let addr = listener.local_addr().unwrap();
    dump_connection_in_place(server.as_fd(), b"").unwrap();
    resume_connection(server.as_fd()).unwrap();
    drop(listener);
    drop(server);
    client.read_to_end(&mut rest).unwrap();
    drop(client);
    listen_reusing(addr).expect("a listener binds over a resumed connection's TIME_WAIT");
}
