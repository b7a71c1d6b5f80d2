//! The kernel interface of TCP_REPAIR: its constants (not all are in the `libc` crate) and one
//! typed wrapper per kind of call (setsockopt, getsockopt, ioctl, bind, connect, send, peek),
//! each taking the name of its step so a failure says which step failed with which errno.

use std::mem::{size_of, size_of_val};
use std::net::{Ipv4Addr, SocketAddrV4};
use std::os::fd::RawFd;

use crate::error::{Errno, RepairError};
use crate::repair_state::TcpRepairWindow;

/// `TCP_REPAIR` values (linux/tcp.h).
pub(crate) const TCP_REPAIR_ON: libc::c_int = 1;
pub(crate) const TCP_REPAIR_OFF: libc::c_int = 0;
/// Leave repair mode without sending a window probe.
pub(crate) const TCP_REPAIR_OFF_NO_WP: libc::c_int = -1;

/// `TCP_REPAIR_QUEUE` values.
pub(crate) const TCP_NO_QUEUE: libc::c_int = 0;
pub(crate) const TCP_RECV_QUEUE: libc::c_int = 1;
pub(crate) const TCP_SEND_QUEUE: libc::c_int = 2;

/// `TCP_REPAIR_OPTIONS` option codes (the TCPOPT_* numbers).
pub(crate) const TCPOPT_MAXSEG: u32 = 2;
pub(crate) const TCPOPT_WINDOW: u32 = 3;
pub(crate) const TCPOPT_SACK_PERM: u32 = 4;
pub(crate) const TCPOPT_TIMESTAMP: u32 = 8;

/// `tcpi_options` bits.
pub(crate) const TCPI_OPT_TIMESTAMPS: u8 = 1;
pub(crate) const TCPI_OPT_SACK: u8 = 2;
pub(crate) const TCPI_OPT_WSCALE: u8 = 4;

/// `TCP_ESTABLISHED` as `tcpi_state`.
pub(crate) const TCP_STATE_ESTABLISHED: u8 = 1;

/// ioctls: bytes in the receive queue, in the send queue, and not yet sent.
const SIOCINQ: libc::c_ulong = 0x541B;
const SIOCOUTQ: libc::c_ulong = 0x5411;
const SIOCOUTQNSD: libc::c_ulong = 0x894B;

/// `SO_SNDBUFFORCE` / `SO_RCVBUFFORCE` (asm-generic/socket.h; x86_64, arm64, riscv).
pub(crate) const SO_SNDBUFFORCE: libc::c_int = 32;
pub(crate) const SO_RCVBUFFORCE: libc::c_int = 33;

/// The kernel's `struct tcp_repair_opt`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub(crate) struct TcpRepairOpt {
    pub(crate) code: u32,
    pub(crate) value: u32,
}

/// The head of `struct tcp_info`, up to `tcpi_min_rtt`: all a dump needs (state, options,
/// window scales, and the send queue's shape: segments in flight, bytes not yet sent).
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub(crate) struct TcpInfoHead {
    pub(crate) state: u8,
    ca_state: u8,
    retransmits: u8,
    probes: u8,
    backoff: u8,
    pub(crate) options: u8,
    /// `tcpi_snd_wscale : 4, tcpi_rcv_wscale : 4` (snd in the low bits).
    pub(crate) wscale: u8,
    delivery_rate_app_limited: u8,
    /// rto, ato, snd_mss, rcv_mss.
    timers: [u32; 4],
    /// `tp->packets_out`: segments sent and not yet acknowledged.
    pub(crate) unacked: u32,
    /// sacked … total_retrans.
    counters: [u32; 19],
    /// pacing_rate, max_pacing_rate, bytes_acked, bytes_received.
    rates: [u64; 4],
    segs: [u32; 2],
    /// `write_seq - snd_nxt`: bytes queued and never sent (as SIOCOUTQNSD).
    pub(crate) notsent_bytes: u32,
    min_rtt: u32,
}

/// Bytes of `struct tcp_info` up to and including `tcpi_notsent_bytes` (Linux 4.6 and later).
pub(crate) const TCP_INFO_NOTSENT_END: usize = 148;

/// TCP_INFO, and how many bytes of it the kernel filled.
pub(crate) fn get_tcp_info(fd: RawFd, step: &'static str) -> Result<(TcpInfoHead, usize), RepairError> {
    let mut value = TcpInfoHead::default();
    let mut len = socklen::<TcpInfoHead>();
    // SAFETY: `value` is a live `TcpInfoHead` of `len` bytes the kernel may write to; `len` is
    // updated with the bytes written. The struct is plain integers, valid for any bytes.
    let rc = unsafe {
        libc::getsockopt(fd, libc::SOL_TCP, libc::TCP_INFO, (&mut value as *mut TcpInfoHead).cast(), &mut len)
    };
    if rc != 0 { Err(fail(step)) } else { Ok((value, len as usize)) }
}

fn fail(step: &'static str) -> RepairError {
    RepairError::Syscall { step, errno: Errno::last() }
}

fn socklen<T>() -> libc::socklen_t {
    size_of::<T>() as libc::socklen_t
}

/// setsockopt with any plain-data value.
pub(crate) fn set_option<T: Copy>(
    fd: RawFd,
    level: libc::c_int,
    name: libc::c_int,
    value: &T,
    step: &'static str,
) -> Result<(), RepairError> {
    // SAFETY: `value` points to a live, initialised `T` of `size_of::<T>()` bytes, which the
    // kernel only reads.
    let rc = unsafe { libc::setsockopt(fd, level, name, (value as *const T).cast(), socklen::<T>()) };
    if rc != 0 { Err(fail(step)) } else { Ok(()) }
}

/// setsockopt with an array of values (TCP_REPAIR_OPTIONS).
pub(crate) fn set_option_slice<T: Copy>(
    fd: RawFd,
    level: libc::c_int,
    name: libc::c_int,
    values: &[T],
    step: &'static str,
) -> Result<(), RepairError> {
    let len = size_of_val(values) as libc::socklen_t;
    // SAFETY: `values` is a live slice of `len` initialised bytes, which the kernel only reads.
    let rc = unsafe { libc::setsockopt(fd, level, name, values.as_ptr().cast(), len) };
    if rc != 0 { Err(fail(step)) } else { Ok(()) }
}

/// setsockopt with an `int`.
pub(crate) fn set_int(
    fd: RawFd,
    level: libc::c_int,
    name: libc::c_int,
    value: libc::c_int,
    step: &'static str,
) -> Result<(), RepairError> {
    set_option(fd, level, name, &value, step)
}

/// getsockopt of a plain-data value (whose every bit pattern is valid); the kernel may fill
/// less than `size_of::<T>()` bytes, the rest stays zero.
pub(crate) fn get_option<T: Copy + Default>(
    fd: RawFd,
    level: libc::c_int,
    name: libc::c_int,
    step: &'static str,
) -> Result<T, RepairError> {
    let mut value = T::default();
    let mut len = socklen::<T>();
    // SAFETY: `value` is a live `T` of `len` bytes the kernel may write to; `len` is updated
    // with the bytes written. `T` is plain data (integers), valid for any bytes.
    let rc = unsafe { libc::getsockopt(fd, level, name, (&mut value as *mut T).cast(), &mut len) };
    if rc != 0 { Err(fail(step)) } else { Ok(value) }
}

/// An ioctl that reports an `int`.
fn ioctl_int(fd: RawFd, request: libc::c_ulong, step: &'static str) -> Result<usize, RepairError> {
    let mut value: libc::c_int = 0;
    // SAFETY: the request writes one int through the pointer, which points to a live int.
    let rc = unsafe { libc::ioctl(fd, request as _, &mut value as *mut libc::c_int) };
    if rc != 0 {
        return Err(fail(step));
    }
    usize::try_from(value).map_err(|_| RepairError::InvalidState("negative queue length"))
}

/// Bytes in the receive queue not yet read (SIOCINQ).
pub(crate) fn receive_queue_len(fd: RawFd) -> Result<usize, RepairError> {
    ioctl_int(fd, SIOCINQ, "SIOCINQ")
}

/// Bytes in the send queue not yet acknowledged, sent or not (SIOCOUTQ).
pub(crate) fn send_queue_len(fd: RawFd) -> Result<usize, RepairError> {
    ioctl_int(fd, SIOCOUTQ, "SIOCOUTQ")
}

/// Bytes in the send queue never sent (SIOCOUTQNSD).
pub(crate) fn unsent_len(fd: RawFd) -> Result<usize, RepairError> {
    ioctl_int(fd, SIOCOUTQNSD, "SIOCOUTQNSD")
}

/// TCP_REPAIR_WINDOW as a struct.
pub(crate) fn get_repair_window(fd: RawFd, step: &'static str) -> Result<TcpRepairWindow, RepairError> {
    get_option(fd, libc::SOL_TCP, libc::TCP_REPAIR_WINDOW, step)
}

/// Append the selected repair queue to `out` with `recv(MSG_PEEK | MSG_DONTWAIT)`, expecting
/// exactly `len` bytes. One byte more is asked for, so a queue that grew during the dump is
/// noticed.
pub(crate) fn peek_queue(
    fd: RawFd,
    out: &mut Vec<u8>,
    len: usize,
    step: &'static str,
) -> Result<(), RepairError> {
    let start = out.len();
    out.resize(start + len + 1, 0);
    let room = &mut out[start..];
    // SAFETY: `room` is writable memory of `room.len()` bytes; the kernel writes at most that
    // many bytes into it.
    let n =
        unsafe { libc::recv(fd, room.as_mut_ptr().cast(), room.len(), libc::MSG_PEEK | libc::MSG_DONTWAIT) };
    if n < 0 {
        out.truncate(start);
        return Err(fail(step));
    }
    let n = n as usize;
    out.truncate(start + n.min(len + 1));
    if n != len {
        return Err(RepairError::QueueLength { step, done: n, expected: len });
    }
    Ok(())
}

/// `send` all of `data` (in repair mode: into the selected queue), in pieces of at most
/// `chunk` bytes.
pub(crate) fn send_all(fd: RawFd, data: &[u8], chunk: usize, step: &'static str) -> Result<(), RepairError> {
    let mut done = 0;
    while done < data.len() {
        let piece = &data[done..data.len().min(done + chunk)];
        // SAFETY: `piece` is a live slice; the kernel only reads `piece.len()` bytes of it.
        let n = unsafe { libc::send(fd, piece.as_ptr().cast(), piece.len(), libc::MSG_NOSIGNAL) };
        if n < 0 {
            if Errno::last().0 == libc::EINTR {
                continue;
            }
            return Err(fail(step));
        }
        if n == 0 {
            return Err(RepairError::QueueLength { step, done, expected: data.len() });
        }
        done += n as usize;
    }
    Ok(())
}

fn to_sockaddr(addr: SocketAddrV4) -> libc::sockaddr_in {
    libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: addr.port().to_be(),
        sin_addr: libc::in_addr { s_addr: u32::from_ne_bytes(addr.ip().octets()) },
        sin_zero: [0; 8],
    }
}

/// `bind` to an IPv4 address.
pub(crate) fn bind(fd: RawFd, addr: SocketAddrV4, step: &'static str) -> Result<(), RepairError> {
    let sa = to_sockaddr(addr);
    // SAFETY: `sa` is a valid sockaddr_in of the given length, only read by the kernel.
    let rc =
        unsafe { libc::bind(fd, (&sa as *const libc::sockaddr_in).cast(), socklen::<libc::sockaddr_in>()) };
    if rc != 0 { Err(fail(step)) } else { Ok(()) }
}

/// `connect` to an IPv4 address (in repair mode: no handshake, immediately established).
pub(crate) fn connect(fd: RawFd, addr: SocketAddrV4, step: &'static str) -> Result<(), RepairError> {
    let sa = to_sockaddr(addr);
    // SAFETY: `sa` is a valid sockaddr_in of the given length, only read by the kernel.
    let rc = unsafe {
        libc::connect(fd, (&sa as *const libc::sockaddr_in).cast(), socklen::<libc::sockaddr_in>())
    };
    if rc != 0 { Err(fail(step)) } else { Ok(()) }
}

/// `connect` with any socket address (AF_UNSPEC disconnects).
pub(crate) fn connect_raw(fd: RawFd, addr: &libc::sockaddr, step: &'static str) -> Result<(), RepairError> {
    // SAFETY: `addr` is a valid sockaddr of the given length, only read by the kernel.
    let rc = unsafe { libc::connect(fd, addr, socklen::<libc::sockaddr>()) };
    if rc != 0 { Err(fail(step)) } else { Ok(()) }
}

/// The local (`peer == false`) or remote address of a socket, which must be IPv4.
pub(crate) fn socket_address(fd: RawFd, peer: bool, step: &'static str) -> Result<SocketAddrV4, RepairError> {
    let mut sin = to_sockaddr(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0));
    let mut len = socklen::<libc::sockaddr_in>();
    let ptr = (&mut sin as *mut libc::sockaddr_in).cast::<libc::sockaddr>();
    // SAFETY: `ptr` points to a live sockaddr_in of `len` bytes; the kernel writes at most
    // `len` bytes (a longer address is cut, and `len` then says so) and updates `len`.
    let rc = unsafe {
        if peer { libc::getpeername(fd, ptr, &mut len) } else { libc::getsockname(fd, ptr, &mut len) }
    };
    if rc != 0 {
        return Err(fail(step));
    }
    if i32::from(sin.sin_family) != libc::AF_INET || len != socklen::<libc::sockaddr_in>() {
        return Err(RepairError::NotIpv4(step));
    }
    let ip = Ipv4Addr::from(sin.sin_addr.s_addr.to_ne_bytes());
    Ok(SocketAddrV4::new(ip, u16::from_be(sin.sin_port)))
}

/// A new TCP/IPv4 socket, close-on-exec, non-blocking if asked.
pub(crate) fn tcp_socket(nonblocking: bool) -> Result<std::os::fd::OwnedFd, RepairError> {
    let flags = libc::SOCK_STREAM | libc::SOCK_CLOEXEC | if nonblocking { libc::SOCK_NONBLOCK } else { 0 };
    // SAFETY: socket has no memory arguments.
    let fd = unsafe { libc::socket(libc::AF_INET, flags, 0) };
    if fd < 0 {
        return Err(fail("socket"));
    }
    // SAFETY: `fd` is a new descriptor that nothing else owns.
    Ok(unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) })
}

/// Leave repair mode (`off`: [`TCP_REPAIR_OFF`] or [`TCP_REPAIR_OFF_NO_WP`]) and set
/// SO_REUSEADDR again: the kernel clears a socket's address reuse when it leaves repair mode,
/// and the TIME_WAIT such a socket ends in would then keep a server's own listener (which
/// binds with SO_REUSEADDR) from binding its address again for a minute.
pub(crate) fn leave_repair_mode(fd: RawFd, off: libc::c_int) -> Result<(), RepairError> {
    set_int(fd, libc::SOL_TCP, libc::TCP_REPAIR, off, "TCP_REPAIR=0")?;
    set_int(fd, libc::SOL_SOCKET, libc::SO_REUSEADDR, 1, "SO_REUSEADDR after repair mode")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tcp_info_head_has_the_kernel_layout_up_to_notsent_bytes() {
        assert_eq!(std::mem::offset_of!(TcpInfoHead, options), 5);
        assert_eq!(std::mem::offset_of!(TcpInfoHead, unacked), 24);
        assert_eq!(std::mem::offset_of!(TcpInfoHead, rates), 104);
        assert_eq!(std::mem::offset_of!(TcpInfoHead, notsent_bytes) + 4, TCP_INFO_NOTSENT_END);
        assert_eq!(size_of::<TcpInfoHead>(), 152);
    }
}
