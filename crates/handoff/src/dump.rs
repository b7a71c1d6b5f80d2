//! `dump_connection`: take an established TCP connection out of the kernel with TCP_REPAIR, in
//! the order verified on kernel 6.18 (repair on, TCP_INFO, MSS, timestamp, window, queue
//! sizes, receive queue, send queue, addresses), then close the socket silently (no FIN/RST);
//! `dump_connection_in_place` (`_at`: addresses known), `disconnect_dumped` and
//! `resume_connection` to close later or to carry on instead.

use std::net::SocketAddrV4;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};

use crate::error::{DumpError, RepairError, TcpStateName};
use crate::repair_state::TcpRepairState;
use crate::sockopt::{
    self, TCP_INFO_NOTSENT_END, TCP_NO_QUEUE, TCP_RECV_QUEUE, TCP_REPAIR_OFF_NO_WP, TCP_REPAIR_ON,
    TCP_SEND_QUEUE, TCP_STATE_ESTABLISHED, TCPI_OPT_SACK, TCPI_OPT_TIMESTAMPS, TCPI_OPT_WSCALE,
};

/// Dump the established TCP/IPv4 connection `socket` and close it silently.
///
/// `consumed` is what the application already read from the connection (the request it
/// parsed): it is put back in front of the receive queue, so the new owner reads the
/// connection's input from where this application started.
///
/// The peer must be quiet during the dump (the forwarder holds its packets): data arriving
/// between reading the queue sizes and the queues is detected as an error. Needs
/// CAP_NET_ADMIN. On error the socket is given back out of repair mode, still connected, in
/// [`DumpError::socket`].
pub fn dump_connection(socket: impl Into<OwnedFd>, consumed: &[u8]) -> Result<TcpRepairState, DumpError> {
    let socket: OwnedFd = socket.into();
    match dump_connection_in_place(socket.as_fd(), consumed) {
        // Closing in repair mode drops the connection without sending anything.
        Ok(state) => Ok(state),
        Err(error) => Err(DumpError { error, socket: Some(socket) }),
    }
}

/// Dump the connection but leave the socket open, in repair mode: it sends nothing and
/// ignores nothing it already has. The caller then either drops it (a silent close: do that
/// once the `HandOver` is on its way — on another host the close need not come first) or
/// gives it back to service with [`resume_connection`] (when the node refuses). On error the
/// socket is already out of repair mode again.
///
/// On one host (loopback) the connection must leave the kernel's tables before it is
/// restored — the restored socket's 4-tuple would collide with it (the repair-mode `connect`
/// fails with EADDRNOTAVAIL): [`disconnect_dumped`] does that and leaves the close for later.
pub fn dump_connection_in_place(
    socket: BorrowedFd<'_>,
    consumed: &[u8],
) -> Result<TcpRepairState, RepairError> {
    dump_in_place(socket, consumed, None)
}

/// [`dump_connection_in_place`] of a connection whose addresses the caller has already (a
/// switch has the client's from `accept` and its own from the listener, made before the
/// critical path): two system calls fewer. The addresses are taken as given: wrong ones make
/// a state whose restore talks to the wrong peer.
pub fn dump_connection_in_place_at(
    socket: BorrowedFd<'_>,
    consumed: &[u8],
    local: SocketAddrV4,
    peer: SocketAddrV4,
) -> Result<TcpRepairState, RepairError> {
    dump_in_place(socket, consumed, Some((local, peer)))
}

fn dump_in_place(
    socket: BorrowedFd<'_>,
    consumed: &[u8],
    addresses: Option<(SocketAddrV4, SocketAddrV4)>,
) -> Result<TcpRepairState, RepairError> {
    let fd = socket.as_raw_fd();
    sockopt::set_int(fd, libc::SOL_TCP, libc::TCP_REPAIR, TCP_REPAIR_ON, "TCP_REPAIR=1")?;
    dump_in_repair_mode(fd, consumed, addresses).inspect_err(|_| {
        // Best effort: give the socket back usable, without the window probe, so the peer
        // sees nothing of the failed attempt.
        let _ = resume_connection(socket);
    })
}

/// Disconnect a socket left in repair mode by [`dump_connection_in_place`], silently (no FIN,
/// no RST): the connection leaves the kernel's tables at once — so it can be restored on this
/// same host — while closing the descriptor, the dearer half of a close (about 3 µs here), can
/// wait until the handoff is done. After this the socket cannot be resumed.
pub fn disconnect_dumped(socket: BorrowedFd<'_>) -> Result<(), RepairError> {
    let unspecified = libc::sockaddr { sa_family: libc::AF_UNSPEC as libc::sa_family_t, sa_data: [0; 14] };
    sockopt::connect_raw(socket.as_raw_fd(), &unspecified, "connect(AF_UNSPEC) in repair mode")
}

/// Take a socket left in repair mode by [`dump_connection_in_place`] out of it again, without
/// a window probe: it serves on as if nothing had happened (the peer's retransmissions of
/// whatever the forwarder held cover the pause).
pub fn resume_connection(socket: BorrowedFd<'_>) -> Result<(), RepairError> {
    let fd = socket.as_raw_fd();
    sockopt::set_int(fd, libc::SOL_TCP, libc::TCP_REPAIR_QUEUE, TCP_NO_QUEUE, "TCP_REPAIR_QUEUE=NONE")?;
    sockopt::leave_repair_mode(fd, TCP_REPAIR_OFF_NO_WP)
}

/// The dump proper, on a socket already in repair mode.
fn dump_in_repair_mode(
    fd: RawFd,
    consumed: &[u8],
    addresses: Option<(SocketAddrV4, SocketAddrV4)>,
) -> Result<TcpRepairState, RepairError> {
    let (info, info_len) = sockopt::get_tcp_info(fd, "TCP_INFO")?;
    if info.state != TCP_STATE_ESTABLISHED {
        return Err(RepairError::NotEstablished(TcpStateName(info.state)));
    }
    // In repair mode TCP_MAXSEG reports the MSS clamp (what TCPOPT_MAXSEG restores).
    let mss: libc::c_int = sockopt::get_option(fd, libc::SOL_TCP, libc::TCP_MAXSEG, "TCP_MAXSEG")?;
    let timestamps = info.options & TCPI_OPT_TIMESTAMPS != 0;
    let timestamp: u32 = if timestamps {
        sockopt::get_option(fd, libc::SOL_TCP, libc::TCP_TIMESTAMP, "TCP_TIMESTAMP")?
    } else {
        0
    };
    let window = sockopt::get_repair_window(fd, "TCP_REPAIR_WINDOW")?;
    let inq = sockopt::receive_queue_len(fd)?;
    // The send queue's shape from TCP_INFO where the kernel gives it: nothing in flight means
    // the queue is just the unsent bytes (SIOCOUTQ is `write_seq - snd_una`, SIOCOUTQNSD
    // `write_seq - snd_nxt`, and `snd_una == snd_nxt` when no segment is in flight).
    let (outq, unsent) = if info_len >= TCP_INFO_NOTSENT_END {
        let unsent = info.notsent_bytes as usize;
        let outq = if info.unacked == 0 { unsent } else { sockopt::send_queue_len(fd)? };
        (outq, unsent)
    } else {
        let outq = sockopt::send_queue_len(fd)?;
        (outq, if outq > 0 { sockopt::unsent_len(fd)? } else { 0 })
    };
    if unsent > outq {
        return Err(RepairError::InvalidState("SIOCOUTQNSD larger than SIOCOUTQ"));
    }

    sockopt::set_int(fd, libc::SOL_TCP, libc::TCP_REPAIR_QUEUE, TCP_RECV_QUEUE, "TCP_REPAIR_QUEUE=RECV")?;
    let recv_seq: u32 =
        sockopt::get_option(fd, libc::SOL_TCP, libc::TCP_QUEUE_SEQ, "TCP_QUEUE_SEQ (receive)")?;
    let mut recv_queue = Vec::new();
    if !consumed.is_empty() || inq > 0 {
        recv_queue.reserve_exact(consumed.len() + inq + 1);
        recv_queue.extend_from_slice(consumed);
    }
    if inq > 0 {
        sockopt::peek_queue(fd, &mut recv_queue, inq, "recv(MSG_PEEK) of the receive queue")?;
    }

    sockopt::set_int(fd, libc::SOL_TCP, libc::TCP_REPAIR_QUEUE, TCP_SEND_QUEUE, "TCP_REPAIR_QUEUE=SEND")?;
    let send_seq: u32 = sockopt::get_option(fd, libc::SOL_TCP, libc::TCP_QUEUE_SEQ, "TCP_QUEUE_SEQ (send)")?;
    let mut send_queue = Vec::new();
    if outq > 0 {
        sockopt::peek_queue(fd, &mut send_queue, outq, "recv(MSG_PEEK) of the send queue")?;
    }
    // The documented order resets the queue to NO_QUEUE here; nothing needs it (a close in
    // repair mode is silent whatever the queue, and `resume_connection` resets it), so the
    // call is saved.

    let (local, peer) = match addresses {
        Some(known) => known,
        None => (
            sockopt::socket_address(fd, false, "getsockname")?,
            sockopt::socket_address(fd, true, "getpeername")?,
        ),
    };
    let window_scaling = info.options & TCPI_OPT_WSCALE != 0;
    Ok(TcpRepairState {
        local,
        peer,
        recv_seq,
        send_seq,
        recv_queue,
        send_queue,
        unsent_len: unsent as u32,
        mss: u16::try_from(mss).map_err(|_| RepairError::InvalidState("MSS out of range"))?,
        window_scaling,
        snd_wscale: if window_scaling { info.wscale & 0x0f } else { 0 },
        rcv_wscale: if window_scaling { info.wscale >> 4 } else { 0 },
        sack_permitted: info.options & TCPI_OPT_SACK != 0,
        timestamps,
        timestamp,
        window,
    })
}
