//! `restore_connection`: re-create a dumped TCP connection with TCP_REPAIR, in the order
//! verified on kernel 6.18 (socket, repair on, send queue selected — possibly made ahead as a
//! `PreparedSocket`, and bound too —, buffers, queue sequences, bind, connect, repair
//! options, timestamp, queues, window, MSS sync, repair off). The unsent part of the send
//! queue is the caller's to write.

use std::net::{SocketAddrV4, TcpStream};
use std::os::fd::{AsRawFd, OwnedFd};

use crate::error::RepairError;
use crate::repair_state::TcpRepairState;
use crate::sockopt::{
    self, SO_RCVBUFFORCE, SO_SNDBUFFORCE, TCP_RECV_QUEUE, TCP_REPAIR_OFF, TCP_REPAIR_OFF_NO_WP,
    TCP_REPAIR_ON, TCP_SEND_QUEUE, TCPOPT_MAXSEG, TCPOPT_SACK_PERM, TCPOPT_TIMESTAMP, TCPOPT_WINDOW,
    TcpRepairOpt,
};

/// How `restore_connection` makes the socket.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RestoreOptions {
    /// Set IP_FREEBIND before binding, so the local address (the virtual IP) need not be
    /// configured on this host. Off by default: the lab nodes carry the VIP on `lo`.
    pub freebind: bool,
    /// Make the socket non-blocking (for tokio). Off by default.
    pub nonblocking: bool,
    /// Leave repair mode with the kernel's window probe (an ACK the peer answers at once).
    /// Off by default: in the handoff order (hold → dump → restore → forward → go) the
    /// peer's answer reaches the switch while the forwarder still holds the connection and is
    /// dropped, so the probe only costs a packet and ~2.5 µs; the node's first write after
    /// `Go` draws the same ACK. Off, the restored socket sends nothing until it writes.
    pub window_probe: bool,
}

/// Send queues up to this size fit the default send buffer; larger ones get SO_SNDBUFFORCE.
const DEFAULT_SEND_ROOM: usize = 8 * 1024;
/// Receive queues up to this size fit the default receive buffer.
const DEFAULT_RECEIVE_ROOM: usize = 64 * 1024;

/// A new TCP socket already in repair mode, ready for `restore_prepared`. Making a socket is
/// the dearest step of a restore (about 4 µs here), so a node agent keeps a few of these made
/// ahead, off the critical path, and makes the next one after answering `Ready`. Made with
/// [`PreparedSocket::bound`], it is bound to the service address too, which saves the restore
/// its `bind`.
#[derive(Debug)]
pub struct PreparedSocket {
    socket: OwnedFd,
    /// The local address it is bound to already, if any.
    local: Option<SocketAddrV4>,
}

impl PreparedSocket {
    /// `socket()` (non-blocking if `options.nonblocking`), `TCP_REPAIR=1` (which also forces
    /// address reuse: the bind of the restore succeeds next to a listener on the same port)
    /// and the send queue selected (the restore's first step).
    pub fn new(options: &RestoreOptions) -> Result<PreparedSocket, RepairError> {
        let socket = sockopt::tcp_socket(options.nonblocking)?;
        let fd = socket.as_raw_fd();
        sockopt::set_int(fd, libc::SOL_TCP, libc::TCP_REPAIR, TCP_REPAIR_ON, "TCP_REPAIR=1")?;
        sockopt::set_int(fd, libc::SOL_TCP, libc::TCP_REPAIR_QUEUE, TCP_SEND_QUEUE, "TCP_REPAIR_QUEUE=SEND")?;
        Ok(PreparedSocket { socket, local: None })
    }

    /// `new`, then bound to `local` (with IP_FREEBIND first if `options.freebind`): the
    /// service address the connections handed to this node have (the virtual IP and port).
    /// Only states with that local address can be restored onto it. Many sockets may be
    /// bound ahead to one address: in repair mode a bind reuses the address by force.
    pub fn bound(options: &RestoreOptions, local: SocketAddrV4) -> Result<PreparedSocket, RepairError> {
        let mut prepared = PreparedSocket::new(options)?;
        bind_local(&prepared.socket, local, options)?;
        prepared.local = Some(local);
        Ok(prepared)
    }

    /// The local address the socket is bound to, if it is.
    pub fn local_addr(&self) -> Option<SocketAddrV4> {
        self.local
    }
}

/// IP_FREEBIND if asked, and bind to `local`.
fn bind_local(socket: &OwnedFd, local: SocketAddrV4, options: &RestoreOptions) -> Result<(), RepairError> {
    if options.freebind {
        sockopt::set_int(socket.as_raw_fd(), libc::SOL_IP, libc::IP_FREEBIND, 1, "IP_FREEBIND")?;
    }
    sockopt::bind(socket.as_raw_fd(), local, "bind to the local address")
}

/// Re-create the connection of `state` as a connected socket owned by this host.
///
/// On return the socket is out of repair mode and established: it holds the receive queue
/// (to be read by the application) and the already-sent part of the send queue (which the
/// kernel retransmits if the peer lost it). The **unsent part** (`state.unsent_part()`) is
/// not written: the caller writes it, before anything else, once it may send (after `Go`,
/// when the forwarder delivers the peer's ACKs here). Needs CAP_NET_ADMIN, and the local
/// address on this host unless `options.freebind`.
pub fn restore_connection(
    state: &TcpRepairState,
    options: &RestoreOptions,
) -> Result<TcpStream, RepairError> {
    restore_prepared(PreparedSocket::new(options)?, state, options)
}

/// `restore_connection` on a socket made ahead (its blocking mode is the one it was made
/// with). A socket bound ahead ([`PreparedSocket::bound`]) takes only states with its local
/// address.
pub fn restore_prepared(
    socket: PreparedSocket,
    state: &TcpRepairState,
    options: &RestoreOptions,
) -> Result<TcpStream, RepairError> {
    let PreparedSocket { socket, local } = socket;
    restore_on(&socket, state, options, local)?;
    Ok(TcpStream::from(socket))
}

/// The restore proper, on a socket in repair mode with the send queue selected, bound to
/// `bound` if that is given.
fn restore_on(
    socket: &OwnedFd,
    state: &TcpRepairState,
    options: &RestoreOptions,
    bound: Option<SocketAddrV4>,
) -> Result<(), RepairError> {
    if state.unsent_len as usize > state.send_queue.len() {
        return Err(RepairError::InvalidState("unsent part longer than the send queue"));
    }
    if bound.is_some_and(|local| local != state.local) {
        return Err(RepairError::InvalidState("socket bound ahead to another local address"));
    }
    let fd = socket.as_raw_fd();
    let (tcp, sock) = (libc::SOL_TCP, libc::SOL_SOCKET);
    // Buffers only when the default ones are too small (locking a size turns autotuning off).
    if state.send_queue.len() > DEFAULT_SEND_ROOM {
        let size = buffer_size(state.send_queue.len());
        sockopt::set_int(fd, sock, SO_SNDBUFFORCE, size, "SO_SNDBUFFORCE")?;
    }
    if state.recv_queue.len() > DEFAULT_RECEIVE_ROOM {
        let size = buffer_size(state.recv_queue.len());
        sockopt::set_int(fd, sock, SO_RCVBUFFORCE, size, "SO_RCVBUFFORCE")?;
    }

    // Queue sequence numbers, before connect (after it they are refused with EPERM). The send
    // queue's first (selected when the socket was made), so the receive queue stays selected
    // for writing it after connect.
    let send_start = state.send_seq.wrapping_sub(state.send_queue.len() as u32);
    let recv_start = state.recv_seq.wrapping_sub(state.recv_queue.len() as u32);
    sockopt::set_option(fd, tcp, libc::TCP_QUEUE_SEQ, &send_start, "TCP_QUEUE_SEQ (send) before connect")?;
    sockopt::set_int(
        fd,
        tcp,
        libc::TCP_REPAIR_QUEUE,
        TCP_RECV_QUEUE,
        "TCP_REPAIR_QUEUE=RECV before connect",
    )?;
    sockopt::set_option(fd, tcp, libc::TCP_QUEUE_SEQ, &recv_start, "TCP_QUEUE_SEQ (receive) before connect")?;

    if bound.is_none() {
        bind_local(socket, state.local, options)?;
    }
    sockopt::connect(fd, state.peer, "connect to the peer (repair mode)")?;

    // Negotiated options, all in one call (refused before connect with EPERM).
    let mut opts = [TcpRepairOpt::default(); 4];
    let mut n = 0;
    opts[n] = TcpRepairOpt { code: TCPOPT_MAXSEG, value: u32::from(state.mss) };
    n += 1;
    if state.window_scaling {
        let value = u32::from(state.snd_wscale) | (u32::from(state.rcv_wscale) << 16);
        opts[n] = TcpRepairOpt { code: TCPOPT_WINDOW, value };
        n += 1;
    }
    if state.sack_permitted {
        opts[n] = TcpRepairOpt { code: TCPOPT_SACK_PERM, value: 0 };
        n += 1;
    }
    if state.timestamps {
        opts[n] = TcpRepairOpt { code: TCPOPT_TIMESTAMP, value: 0 };
        n += 1;
    }
    sockopt::set_option_slice(
        fd,
        tcp,
        libc::TCP_REPAIR_OPTIONS,
        &opts[..n],
        "TCP_REPAIR_OPTIONS after connect",
    )?;
    if state.timestamps {
        // The low bit (microsecond timestamps) is passed through as dumped.
        sockopt::set_option(fd, tcp, libc::TCP_TIMESTAMP, &state.timestamp, "TCP_TIMESTAMP after connect")?;
    }

    // The queues (writing them before connect fails with EPIPE). The receive queue is
    // selected already.
    if !state.recv_queue.is_empty() {
        sockopt::send_all(fd, &state.recv_queue, usize::MAX, "send of the receive queue (repair mode)")?;
    }
    let sent = state.sent_part();
    if !sent.is_empty() {
        sockopt::set_int(
            fd,
            tcp,
            libc::TCP_REPAIR_QUEUE,
            TCP_SEND_QUEUE,
            "TCP_REPAIR_QUEUE=SEND after connect",
        )?;
        let chunk = usize::from(state.mss).max(536);
        sockopt::send_all(fd, sent, chunk, "send of the sent part of the send queue (repair mode)")?;
    }

    // The window, after the receive queue (before it, the kernel refuses with EINVAL).
    sockopt::set_option(fd, tcp, libc::TCP_REPAIR_WINDOW, &state.window, "TCP_REPAIR_WINDOW after connect")?;
    // The MSS the socket sends with is computed in the repair-mode connect, from the MSS clamp
    // and window it has then: the kernel's default clamp (536) and no window. Neither
    // TCP_REPAIR_OPTIONS (the real clamp) nor TCP_REPAIR_WINDOW computes it again, so the
    // restored socket would send 524-byte segments for the rest of its life — three for a
    // 1 KiB response, each drawing the client's ACK. Setting (empty) IP options makes the
    // kernel compute it again now, from the restored clamp, header length and largest window
    // (as the original socket had it: bounded by half the peer's largest window).
    sockopt::set_option_slice::<u8>(fd, libc::IPPROTO_IP, libc::IP_OPTIONS, &[], "IP_OPTIONS (MSS sync)")?;
    let off = if options.window_probe { TCP_REPAIR_OFF } else { TCP_REPAIR_OFF_NO_WP };
    sockopt::leave_repair_mode(fd, off)
}

/// The MSS a connected socket sends with (TCP_MAXSEG outside repair mode): what a restore
/// must give back, and what a socket restored by hand (see `restore_on`) can be checked by.
pub fn sending_mss(socket: std::os::fd::BorrowedFd<'_>) -> Result<u32, RepairError> {
    let mss: libc::c_int =
        sockopt::get_option(socket.as_raw_fd(), libc::SOL_TCP, libc::TCP_MAXSEG, "TCP_MAXSEG")?;
    u32::try_from(mss).map_err(|_| RepairError::InvalidState("negative MSS"))
}

/// A socket buffer size for a queue of `len` bytes (the kernel doubles it for overhead; a
/// margin is added for the headers of many small segments).
fn buffer_size(len: usize) -> libc::c_int {
    libc::c_int::try_from(len.saturating_mul(2).saturating_add(64 * 1024)).unwrap_or(libc::c_int::MAX)
}
