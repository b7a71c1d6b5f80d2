//! Benches of the handoff: dump + restore of one live loopback connection, handed back and
//! forth in place (criterion: the simple calls, and the fast path with the socket made ahead
//! and the close deferred). Root only. The whole handoff with the control round trip is
//! `locus bench handoff` (`--placement one-cpu|free|two-cpus`).

use std::hint::black_box;
use std::io::{Read, Write};
use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::os::fd::AsFd;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use locus_handoff::{
    PreparedSocket, RestoreOptions, disconnect_dumped, dump_connection, dump_connection_in_place,
    restore_connection, restore_prepared,
};

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// One connection dumped and restored again and again in place: each iteration is one
/// `dump_connection` (with a request put back in front) and one `restore_connection`.
fn dump_and_restore(c: &mut Criterion) {
    if !is_root() {
        eprintln!("skipped: TCP_REPAIR needs CAP_NET_ADMIN (run as root)");
        return;
    }
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    let mut client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
    let (mut server, _) = listener.accept().unwrap();
    let request = b"GET /index.html HTTP/1.1\r\nHost: locus\r\n\r\n";
    client.write_all(request).unwrap();
    let mut consumed = vec![0u8; request.len()];
    server.read_exact(&mut consumed).unwrap();
    let options = RestoreOptions::default();
    let mut holder = Some(server);
    let mut group = c.benchmark_group("handoff");
    group.measurement_time(Duration::from_secs(5));
    group.bench_function("dump_restore", |b| {
        b.iter(|| {
            let socket = holder.take().unwrap();
            let state = dump_connection(socket, b"").unwrap();
            holder = Some(restore_connection(black_box(&state), &options).unwrap());
        })
    });
    // Put the request back once, so each iteration below finds exactly one request to read.
    let state = dump_connection(holder.take().unwrap(), &consumed).unwrap();
    holder = Some(restore_connection(&state, &options).unwrap());
    group.bench_function("dump_restore_with_request", |b| {
        b.iter(|| {
            let mut socket = holder.take().unwrap();
            // Keep the receive queue at exactly one request: read it back, put it in front.
            socket.read_exact(&mut consumed).unwrap();
            let state = dump_connection(socket, &consumed).unwrap();
            holder = Some(restore_connection(black_box(&state), &options).unwrap());
        })
    });
    // What a switch and node do on the critical path: dump in place and disconnect (the close
    // comes later), restore onto a socket made ahead. Only that part is timed.
    group.bench_function("dump_restore_fast_path", |b| {
        b.iter_custom(|iterations| {
            let mut timed = Duration::ZERO;
            for _ in 0..iterations {
                let prepared = PreparedSocket::new(&options).unwrap();
                let mut socket = holder.take().unwrap();
                socket.read_exact(&mut consumed).unwrap();
                let start = Instant::now();
                let state = dump_connection_in_place(socket.as_fd(), &consumed).unwrap();
                disconnect_dumped(socket.as_fd()).unwrap();
                let restored = restore_prepared(prepared, black_box(&state), &options).unwrap();
                timed += start.elapsed();
                drop(socket);
                holder = Some(restored);
            }
            timed
        })
    });
    group.finish();
    // The connection still works after all that.
    let mut server = holder.take().unwrap();
    server.write_all(b"done").unwrap();
    let mut got = [0u8; 4];
    client.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    client.read_exact(&mut got).unwrap();
    assert_eq!(&got, b"done");
}

criterion_group!(benches, dump_and_restore);
criterion_main!(benches);
