//! `SockmapRelay`: joins two TCP sockets in the kernel with a BPF sockmap. An
//! `sk_skb/stream_verdict` program (`bpf/relay.c`) redirects every skb received on a joined socket
//! to its peer's egress; a watcher thread passes half-closes and resets on, which the sockmap does
//! not. Measured against splice(2) by `benches/relay.rs`; the conclusion is below.
//!
//! # How a pair is joined
//! Two socket hashes keyed by socket cookie: `targets` (no program) holds every joined socket as
//! a redirect target, `socks` (the verdict program attached) holds the sockets whose received
//! bytes are relayed; `peers` maps a socket's cookie to its peer's cookie and counts the bytes
//! redirected. `join` puts both sockets into `targets` and `peers` first and only then into
//! `socks`, so no skb can be redirected to a socket that is not yet a target (it would be
//! dropped after TCP acknowledged it).
//!
//! # Known problems of the sockmap, and what the relay does about them
//! - **FIN is not forwarded**: the verdict program sees data only. The watcher (one thread, epoll
//!   on `EPOLLRDHUP`, edge-triggered) sees the EOF and shuts the peer's write side — but only once
//!   every byte redirected from the closed side has been written to the peer socket: redirected
//!   skbs are sent by the peer's psock work item (a kworker), so at the moment of the EOF some
//!   may still be queued there, and a `shutdown(SHUT_WR)` before them would lose them (the
//!   kworker's send fails with EPIPE). "Written" is `tcpi_bytes_acked + SIOCOUTQ` of the peer
//!   since the join, compared with the program's byte count; the watcher polls it every
//!   [`DRAIN_POLL`] while a direction drains.
//! - **Resets**: an `EPOLLERR` (or `EPOLLHUP` without `EPOLLRDHUP`) on one side shuts both
//!   directions of the other; the pair ends with `reset` set.
//! - **Bytes already queued at join** would wait for the next segment (the verdict runs from
//!   `sk_data_ready`): `join` sets `SO_RCVLOWAT` to 1 (the default) on both sockets, which makes
//!   TCP call `sk_data_ready` at once when bytes are queued.
//! - **A blocking `recv` on a socket in the map can return EAGAIN when woken** (its bytes went to
//!   the peer): the owner must not read or write a joined socket; the relay holds duplicates of
//!   both descriptors until the pair ends, so the owner may close its own.
//! - **Removing a socket with bytes still in its psock queue loses them**: `unjoin` first takes
//!   both sockets out of `socks` (new bytes then stay on their socket), waits until what was
//!   redirected has been written to the peers, and only then drops them from `targets`. Call it
//!   at a protocol boundary; bytes arriving during it are kept on their socket, not relayed.
//!
//! # Measured against splice(2) and a user-space copy: the switch keeps splice(2)
//! `cargo bench -p locus-bpf --bench relay -- --rounds 7` (loopback, one keep-alive connection,
//! client, server and switch in one process, 2 shared vCPUs at load 3–5; medians of 21 runs,
//! the spread of requests/s is wide because of the other builds):
//!
//! | response | relay | requests/s | switch threads µs/req | process + kworker µs/req |
//! |---|---|---|---|---|
//! | 1 KiB | copy | 24054 | 18.8 | 37.7 |
//! | 1 KiB | splice | 22137 | 22.6 | 42.7 |
//! | 1 KiB | sockmap | 21681 | 0.0 | 38.2 |
//! | 64 KiB | copy | 18102 | 26.1 | 52.1 |
//! | 64 KiB | splice | 17991 | 26.6 | 55.0 |
//! | 64 KiB | sockmap | 19135 | 0.0 | 49.7 |
//! | 1 MiB | copy | 1989 | 250.9 | 499.1 |
//! | 1 MiB | splice | 1722 | 243.3 | 573.1 |
//! | 1 MiB | sockmap | 1096 | 0.0 | 659.5 |
//!
//! - Up to 64 KiB the three are equal within the noise, in requests/s and in total CPU. The
//!   sockmap takes the switch's thread out of the path (no wakeup, no syscalls: 0 µs), but the
//!   work reappears in the kernel: a redirect to egress is queued on the peer's psock and sent
//!   by a kworker (14–22 µs/req of kworker time, about what the switch thread spent).
//! - At 1 MiB the sockmap is the slowest (0.64–0.67× splice in both full runs) and costs the
//!   most CPU (340 µs/req in kworkers): every batch takes the extra hop through the kworker,
//!   which backs off whenever the peer's send buffer is full (`sk_psock_backlog` gets EAGAIN
//!   and is rescheduled), so the transfer runs in bursts with a third runnable thread competing
//!   for two CPUs; the run-to-run spread is the widest of all. splice(2) moves the same pages
//!   from the switch's own thread, batched by the 256 KiB pipe.
//! - Beyond speed the sockmap needs CAP_BPF, a watcher that passes FINs on only after the
//!   redirected bytes reached the peer (the drain accounting above), and is all-or-nothing per
//!   socket, while the switch must still see heads and chunk framing between spliced bodies.
//!
//! So the switch keeps splice(2); the sockmap would only pay where the switch's thread, not
//! the machine's CPU, is the bottleneck and connections are long two-way tunnels of small
//! messages.

use std::collections::HashMap;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use aya::maps::{Map, MapData, SockHash};
use aya::programs::SkSkb;
use aya::{Ebpf, EbpfLoader};

use crate::error::RelayError;
use crate::sys;

static OBJECT: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/relay.o"));

const SOCKS: &str = "socks";
const TARGETS: &str = "targets";
const PEERS: &str = "peers";
const PROGRAM: &str = "relay_verdict";

/// Pairs that can be joined at once: `MAX_SOCKETS` of `bpf/relay.c`, two sockets per pair.
pub const MAX_PAIRS: usize = 65536 / 2;

/// How often the watcher checks whether a closed side's bytes have reached its peer: the FIN
/// follows the last byte by about this much.
pub const DRAIN_POLL: Duration = Duration::from_millis(1);

/// `BPF_NOEXIST`: refuse a socket that is already joined.
const BPF_NOEXIST: u64 = 1;
/// `SO_COOKIE` (not in every libc).
const SO_COOKIE: libc::c_int = 57;
/// Offset of `tcpi_bytes_acked` in `struct tcp_info` (linux/tcp.h, since 4.1).
const TCPI_BYTES_ACKED: usize = 120;
/// epoll token of the watcher's eventfd.
const WAKE: u64 = u64::MAX;

/// A joined pair.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PairId(u64);

impl std::fmt::Display for PairId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// How a pair ended: bytes the program redirected each way (`a` and `b` as given to `join`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PairReport {
    /// Bytes received on `a` and redirected to `b`.
    pub a_to_b: u64,
    /// Bytes received on `b` and redirected to `a`.
    pub b_to_a: u64,
    /// One side was reset (or failed); the other was shut down both ways.
    pub reset: bool,
}

struct Side {
    fd: Option<OwnedFd>,
    cookie: u64,
    /// Bytes written to this socket before the join (an upper bound).
    base: u64,
    /// Its remote sent FIN.
    eof: bool,
    /// That FIN was passed on (the peer's write side is shut).
    forwarded: bool,
}

struct Pair {
    sides: [Side; 2],
    reset: bool,
    done: Option<PairReport>,
}

impl Pair {
    fn draining(&self) -> bool {
        self.done.is_none() && self.sides.iter().any(|s| s.eof && !s.forwarded)
    }
}

#[derive(Default)]
struct State {
    next: u64,
    pairs: HashMap<u64, Pair>,
}

struct Shared {
    socks: OwnedFd,
    targets: OwnedFd,
    peers: OwnedFd,
    epoll: OwnedFd,
    wake: OwnedFd,
    stop: AtomicBool,
    state: Mutex<State>,
    changed: Condvar,
}

/// The loaded relay: the verdict program attached to `socks`, its maps and the watcher thread.
/// Every method takes `&self`; dropping it ends every pair still joined (their sockets leave the
/// maps and work as plain sockets again) and detaches the program.
pub struct SockmapRelay {
    shared: Arc<Shared>,
    watcher: Option<JoinHandle<()>>,
    _maps: Vec<MapData>,
    _socks: SockHash<MapData, u64>,
    _ebpf: Ebpf,
}

fn map_err(op: &'static str, map: &'static str) -> impl FnOnce(io::Error) -> RelayError {
    move |source| RelayError::Map { op, map, error: source }
}

fn sock_err(op: &'static str) -> impl FnOnce(io::Error) -> RelayError {
    move |source| RelayError::Socket { op, error: source }
}

fn take(ebpf: &mut Ebpf, name: &'static str) -> Result<Map, RelayError> {
    ebpf.take_map(name).ok_or_else(|| RelayError::Object(format!("no map `{name}`")))
}

fn cvt(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 { Err(io::Error::last_os_error()) } else { Ok(r) }
}

fn cookie(fd: BorrowedFd<'_>) -> io::Result<u64> {
    let mut value = 0u64;
    let mut len = size_of::<u64>() as libc::socklen_t;
    // SAFETY: SO_COOKIE writes a u64 into `value`, whose size is passed in `len`.
    cvt(unsafe {
        libc::getsockopt(fd.as_raw_fd(), libc::SOL_SOCKET, SO_COOKIE, (&raw mut value).cast(), &mut len)
    })?;
    Ok(value)
}

fn bytes_acked(fd: RawFd) -> io::Result<u64> {
    let mut info = [0u8; 256];
    let mut len = info.len() as libc::socklen_t;
    // SAFETY: TCP_INFO writes at most `len` bytes into `info`.
    cvt(unsafe {
        libc::getsockopt(fd, libc::IPPROTO_TCP, libc::TCP_INFO, info.as_mut_ptr().cast(), &mut len)
    })?;
    if (len as usize) < TCPI_BYTES_ACKED + 8 {
        return Err(io::Error::other("TCP_INFO without tcpi_bytes_acked (kernel older than 4.1)"));
    }
    let field: [u8; 8] = info[TCPI_BYTES_ACKED..TCPI_BYTES_ACKED + 8].try_into().expect("8 bytes");
    Ok(u64::from_ne_bytes(field))
}

fn unsent(fd: RawFd) -> io::Result<u64> {
    let mut n: libc::c_int = 0;
    // SAFETY: SIOCOUTQ writes an int.
    cvt(unsafe { libc::ioctl(fd, libc::TIOCOUTQ, &mut n) })?;
    Ok(n as u64)
}

/// Bytes written to a TCP socket so far (`write_seq - isn`), as acked + still queued. Read in
/// this order an ACK between the two reads makes the sum too small...
fn written_at_most(fd: RawFd) -> io::Result<u64> {
    let acked = bytes_acked(fd)?;
    Ok(acked + unsent(fd)?)
}

/// ...and in this order too large.
fn written_at_least_as_much(fd: RawFd) -> io::Result<u64> {
    let queued = unsent(fd)?;
    Ok(bytes_acked(fd)? + queued)
}

fn shutdown(fd: &Option<OwnedFd>, how: libc::c_int) {
    if let Some(fd) = fd {
        // SAFETY: shutdown on a descriptor we own; ENOTCONN (already closed) is fine.
        unsafe { libc::shutdown(fd.as_raw_fd(), how) };
    }
}

fn peer_value(peer_cookie: u64) -> [u8; 16] {
    let mut v = [0u8; 16];
    v[..8].copy_from_slice(&peer_cookie.to_ne_bytes());
    v
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Bytes the program redirected from the socket with `cookie` (0 once its entry is gone).
    fn relayed(&self, cookie: u64) -> Result<u64, RelayError> {
        let mut v = [0u8; 16];
        let found = sys::map_lookup(self.peers.as_fd(), &cookie.to_ne_bytes(), &mut v)
            .map_err(map_err("lookup", "peers"))?;
        Ok(if found { u64::from_ne_bytes(v[8..].try_into().expect("8 bytes")) } else { 0 })
    }

    /// Bytes redirected from side `from` that are not yet written to the other side.
    fn pending(&self, pair: &Pair, from: usize) -> Result<u64, RelayError> {
        let to = &pair.sides[1 - from];
        let Some(fd) = &to.fd else { return Ok(0) };
        let relayed = self.relayed(pair.sides[from].cookie)?;
        let written = written_at_most(fd.as_raw_fd())
            .map_err(sock_err("read TCP_INFO and SIOCOUTQ"))?
            .saturating_sub(to.base);
        Ok(relayed.saturating_sub(written))
    }

    fn remove(&self, map: &'static str, cookie: u64) -> Result<(), RelayError> {
        let fd = match map {
            SOCKS => self.socks.as_fd(),
            TARGETS => self.targets.as_fd(),
            _ => self.peers.as_fd(),
        };
        // Not found is fine: the kernel drops a socket from its maps when it closes.
        sys::map_delete(fd, &cookie.to_ne_bytes()).map(drop).map_err(map_err("remove", map))
    }

    fn unwatch(&self, pair: &Pair) {
        for side in &pair.sides {
            if let Some(fd) = &side.fd {
                // SAFETY: EPOLL_CTL_DEL on our epoll; the event argument is ignored.
                unsafe {
                    libc::epoll_ctl(
                        self.epoll.as_raw_fd(),
                        libc::EPOLL_CTL_DEL,
                        fd.as_raw_fd(),
                        std::ptr::null_mut(),
                    )
                };
            }
        }
    }

    /// Take the pair's sockets out of the maps (first `socks`, so nothing new is redirected)
    /// and report its byte counts. The first error is returned after all removals were tried.
    fn release(&self, pair: &Pair, drain: Option<Instant>) -> Result<PairReport, RelayError> {
        let mut first: Option<RelayError> = None;
        let mut keep = |r: Result<(), RelayError>| {
            if let Err(e) = r {
                first.get_or_insert(e);
            }
        };
        for side in &pair.sides {
            keep(self.remove(SOCKS, side.cookie));
        }
        if let Some(deadline) = drain {
            loop {
                let pending = match (self.pending(pair, 0), self.pending(pair, 1)) {
                    (Ok(x), Ok(y)) => x + y,
                    (Err(e), _) | (_, Err(e)) => {
                        keep(Err(e));
                        break;
                    }
                };
                if pending == 0 {
                    break;
                }
                if Instant::now() >= deadline {
                    keep(Err(RelayError::Undrained { pair: 0, pending }));
                    break;
                }
                std::thread::sleep(DRAIN_POLL);
            }
        }
        for side in &pair.sides {
            keep(self.remove(TARGETS, side.cookie));
        }
        let a_to_b = self.relayed(pair.sides[0].cookie);
        let b_to_a = self.relayed(pair.sides[1].cookie);
        for side in &pair.sides {
            keep(self.remove(PEERS, side.cookie));
        }
        let report = PairReport { a_to_b: a_to_b?, b_to_a: b_to_a?, reset: pair.reset };
        match first {
            Some(e) => Err(e),
            None => Ok(report),
        }
    }

    /// Pass on what can be passed on; end the pair when both directions are over.
    fn progress(&self, pair: &mut Pair) {
        if pair.done.is_some() {
            return;
        }
        if !pair.reset {
            for from in 0..2 {
                if pair.sides[from].eof && !pair.sides[from].forwarded {
                    // An error reading the counters leaves the direction draining; the pair
                    // still ends if a side fails.
                    if let Ok(0) = self.pending(pair, from) {
                        shutdown(&pair.sides[1 - from].fd, libc::SHUT_WR);
                        pair.sides[from].forwarded = true;
                    }
                }
            }
        }
        if pair.reset || pair.sides.iter().all(|s| s.forwarded) {
            if pair.reset {
                for side in &pair.sides {
                    shutdown(&side.fd, libc::SHUT_RDWR);
                }
            }
            self.unwatch(pair);
            let report = self.release(pair, None).unwrap_or(PairReport { reset: true, ..Default::default() });
            pair.done = Some(PairReport { reset: pair.reset || report.reset, ..report });
            for side in &mut pair.sides {
                side.fd = None;
            }
        }
    }

    fn watch(&self) {
        let mut events = [libc::epoll_event { events: 0, u64: 0 }; 64];
        loop {
            let draining = self.lock().pairs.values().any(Pair::draining);
            let timeout = if draining { DRAIN_POLL.as_millis() as libc::c_int } else { -1 };
            // SAFETY: epoll_wait writes at most `events.len()` entries into `events`.
            let n = unsafe {
                libc::epoll_wait(
                    self.epoll.as_raw_fd(),
                    events.as_mut_ptr(),
                    events.len() as libc::c_int,
                    timeout,
                )
            };
            if self.stop.load(Ordering::Acquire) {
                return;
            }
            let n = match cvt(n) {
                Ok(n) => n as usize,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => 0,
                // Not expected on a valid epoll; keep the loop from spinning.
                Err(_) => {
                    std::thread::sleep(DRAIN_POLL);
                    0
                }
            };
            let mut state = self.lock();
            for ev in &events[..n] {
                let (token, flags) = (ev.u64, ev.events);
                if token == WAKE {
                    let mut count = 0u64;
                    // SAFETY: an eventfd read writes 8 bytes.
                    unsafe { libc::read(self.wake.as_raw_fd(), (&raw mut count).cast(), 8) };
                    continue;
                }
                let Some(pair) = state.pairs.get_mut(&(token >> 1)) else { continue };
                let side = (token & 1) as usize;
                let (err, hup, rdhup) = (
                    flags & libc::EPOLLERR as u32 != 0,
                    flags & libc::EPOLLHUP as u32 != 0,
                    flags & libc::EPOLLRDHUP as u32 != 0,
                );
                if err || (hup && !rdhup) {
                    pair.reset = true;
                } else if rdhup {
                    pair.sides[side].eof = true;
                }
            }
            let mut ended = false;
            for pair in state.pairs.values_mut() {
                let before = pair.done.is_some();
                self.progress(pair);
                ended |= !before && pair.done.is_some();
            }
            drop(state);
            if ended {
                self.changed.notify_all();
            }
        }
    }
}

impl SockmapRelay {
    /// Load the program and its maps, attach the verdict to `socks` and start the watcher.
    pub fn load() -> Result<SockmapRelay, RelayError> {
        let mut ebpf = EbpfLoader::new().btf(None).load(OBJECT).map_err(RelayError::Load)?;
        let socks: SockHash<MapData, u64> = take(&mut ebpf, SOCKS)?
            .try_into()
            .map_err(|e| RelayError::Object(format!("map `{SOCKS}`: {e}")))?;
        let targets = match take(&mut ebpf, TARGETS)? {
            Map::SockHash(m) => m,
            other => return Err(RelayError::Object(format!("map `{TARGETS}` is a {other:?}"))),
        };
        let peers = match take(&mut ebpf, PEERS)? {
            Map::HashMap(m) => m,
            other => return Err(RelayError::Object(format!("map `{PEERS}` is a {other:?}"))),
        };
        let program: &mut SkSkb = ebpf
            .program_mut(PROGRAM)
            .ok_or_else(|| RelayError::Object(format!("no program `{PROGRAM}`")))?
            .try_into()
            .map_err(|e| RelayError::Program { step: "find", error: e })?;
        program.load().map_err(|e| RelayError::Program { step: "load", error: e })?;
        program.attach(socks.fd()).map_err(|e| RelayError::Program { step: "attach", error: e })?;

        let dup = |fd: BorrowedFd<'_>| fd.try_clone_to_owned().map_err(RelayError::Watcher);
        // SAFETY: plain descriptor-creating calls; the results are checked and then owned.
        let epoll = cvt(unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) }).map_err(RelayError::Watcher)?;
        let epoll = unsafe { OwnedFd::from_raw_fd(epoll) };
        // SAFETY: as above.
        let wake = cvt(unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) })
            .map_err(RelayError::Watcher)?;
        let wake = unsafe { OwnedFd::from_raw_fd(wake) };
        let mut ev = libc::epoll_event { events: libc::EPOLLIN as u32, u64: WAKE };
        // SAFETY: registering our eventfd with our epoll.
        cvt(unsafe { libc::epoll_ctl(epoll.as_raw_fd(), libc::EPOLL_CTL_ADD, wake.as_raw_fd(), &mut ev) })
            .map_err(RelayError::Watcher)?;
        let shared = Arc::new(Shared {
            socks: dup(socks.fd().as_fd())?,
            targets: dup(targets.fd().as_fd())?,
            peers: dup(peers.fd().as_fd())?,
            epoll,
            wake,
            stop: AtomicBool::new(false),
            state: Mutex::new(State::default()),
            changed: Condvar::new(),
        });
        let watcher = {
            let shared = Arc::clone(&shared);
            std::thread::Builder::new()
                .name("sockmap-relay".into())
                .spawn(move || shared.watch())
                .map_err(RelayError::Watcher)?
        };
        Ok(SockmapRelay {
            shared,
            watcher: Some(watcher),
            _maps: vec![targets, peers],
            _socks: socks,
            _ebpf: ebpf,
        })
    }

    /// Join two connected TCP sockets: from now on what either receives is sent by the other,
    /// in the kernel, until both directions ended (each FIN passed on) or a side was reset. The
    /// caller must neither read nor write them meanwhile; it may close its descriptors (the
    /// relay holds duplicates until the pair ends).
    pub fn join(&self, a: impl AsFd, b: impl AsFd) -> Result<PairId, RelayError> {
        let s = &self.shared;
        let fds = [
            a.as_fd().try_clone_to_owned().map_err(sock_err("dup"))?,
            b.as_fd().try_clone_to_owned().map_err(sock_err("dup"))?,
        ];
        let mut sides = [0, 1].map(|_| Side { fd: None, cookie: 0, base: 0, eof: false, forwarded: false });
        for (side, fd) in sides.iter_mut().zip(fds) {
            side.cookie = cookie(fd.as_fd()).map_err(sock_err("read SO_COOKIE"))?;
            side.base =
                written_at_least_as_much(fd.as_raw_fd()).map_err(sock_err("read TCP_INFO and SIOCOUTQ"))?;
            side.fd = Some(fd);
        }
        let pair = Pair { sides, reset: false, done: None };
        let mut state = s.lock();
        let id = state.next;
        state.next += 1;
        let mut inserted = Vec::new();
        if let Err(e) = self.enter(id, &pair, &mut inserted) {
            // Undo only what this join inserted: a socket refused because it is already joined
            // keeps its entries in the other pair.
            s.unwatch(&pair);
            for (map, cookie) in inserted.into_iter().rev() {
                let _ = s.remove(map, cookie);
            }
            return Err(e);
        }
        state.pairs.insert(id, pair);
        Ok(PairId(id))
    }

    fn enter(&self, id: u64, pair: &Pair, inserted: &mut Vec<(&'static str, u64)>) -> Result<(), RelayError> {
        let s = &self.shared;
        let [a, b] = &pair.sides;
        let fd = |side: &Side| side.fd.as_ref().expect("set by join").as_raw_fd() as u32;
        for side in [a, b] {
            sys::map_update(
                s.targets.as_fd(),
                &side.cookie.to_ne_bytes(),
                &fd(side).to_ne_bytes(),
                BPF_NOEXIST,
            )
            .map_err(map_err("insert", TARGETS))?;
            inserted.push((TARGETS, side.cookie));
        }
        for (side, peer) in [(a, b), (b, a)] {
            sys::map_update(
                s.peers.as_fd(),
                &side.cookie.to_ne_bytes(),
                &peer_value(peer.cookie),
                BPF_NOEXIST,
            )
            .map_err(map_err("insert", PEERS))?;
            inserted.push((PEERS, side.cookie));
        }
        for side in [a, b] {
            sys::map_update(
                s.socks.as_fd(),
                &side.cookie.to_ne_bytes(),
                &fd(side).to_ne_bytes(),
                BPF_NOEXIST,
            )
            .map_err(map_err("insert", SOCKS))?;
            inserted.push((SOCKS, side.cookie));
        }
        for (i, side) in [a, b].into_iter().enumerate() {
            let raw = fd(side) as RawFd;
            let mut ev = libc::epoll_event {
                events: (libc::EPOLLRDHUP | libc::EPOLLET) as u32,
                u64: id << 1 | i as u64,
            };
            // SAFETY: registering a socket we hold a duplicate of with our epoll.
            cvt(unsafe { libc::epoll_ctl(s.epoll.as_raw_fd(), libc::EPOLL_CTL_ADD, raw, &mut ev) })
                .map_err(sock_err("register with epoll"))?;
            // Bytes queued before the join: make TCP run the verdict on them now.
            let one: libc::c_int = 1;
            // SAFETY: SO_RCVLOWAT reads an int.
            cvt(unsafe {
                libc::setsockopt(
                    raw,
                    libc::SOL_SOCKET,
                    libc::SO_RCVLOWAT,
                    (&raw const one).cast(),
                    size_of::<libc::c_int>() as libc::socklen_t,
                )
            })
            .map_err(sock_err("set SO_RCVLOWAT"))?;
        }
        Ok(())
    }

    /// Wait until the pair ended (both FINs passed on, or a reset) and forget it.
    pub fn wait(&self, pair: PairId, limit: Duration) -> Result<PairReport, RelayError> {
        let deadline = Instant::now() + limit;
        let mut state = self.shared.lock();
        loop {
            match state.pairs.get(&pair.0) {
                None => return Err(RelayError::UnknownPair(pair.0)),
                Some(p) if p.done.is_some() => {
                    let done = p.done.expect("checked");
                    state.pairs.remove(&pair.0);
                    return Ok(done);
                }
                Some(_) => {}
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(RelayError::StillRelaying(pair.0));
            }
            state = self.shared.changed.wait_timeout(state, left).unwrap_or_else(|p| p.into_inner()).0;
        }
    }

    /// Whether the pair has ended (`wait` then returns at once).
    pub fn ended(&self, pair: PairId) -> Result<bool, RelayError> {
        let state = self.shared.lock();
        let p = state.pairs.get(&pair.0).ok_or(RelayError::UnknownPair(pair.0))?;
        Ok(p.done.is_some())
    }

    /// Hand the sockets back to their owner: stop relaying, wait up to `drain_limit` for the
    /// bytes already redirected to be written to the other socket, leave the maps. Bytes that
    /// arrive meanwhile stay on their socket for the owner to read. Meant for a protocol
    /// boundary (nothing in flight); with `Undrained` the sockets are released anyway and the
    /// missing bytes are lost.
    pub fn unjoin(&self, pair: PairId, drain_limit: Duration) -> Result<PairReport, RelayError> {
        let s = &self.shared;
        let taken = s.lock().pairs.remove(&pair.0).ok_or(RelayError::UnknownPair(pair.0))?;
        if let Some(done) = taken.done {
            return Ok(done);
        }
        s.unwatch(&taken);
        s.release(&taken, Some(Instant::now() + drain_limit)).map_err(|e| match e {
            RelayError::Undrained { pending, .. } => RelayError::Undrained { pair: pair.0, pending },
            e => e,
        })
    }

    /// Pairs joined and not yet collected by `wait` or `unjoin`.
    pub fn pairs(&self) -> usize {
        self.shared.lock().pairs.len()
    }
}

impl Drop for SockmapRelay {
    fn drop(&mut self) {
        let s = &self.shared;
        s.stop.store(true, Ordering::Release);
        let one = 1u64;
        // SAFETY: an eventfd write reads 8 bytes.
        unsafe { libc::write(s.wake.as_raw_fd(), (&raw const one).cast(), 8) };
        if let Some(w) = self.watcher.take() {
            let _ = w.join();
        }
        let pairs: Vec<Pair> = s.lock().pairs.drain().map(|(_, p)| p).collect();
        for pair in pairs.iter().filter(|p| p.done.is_none()) {
            s.unwatch(pair);
            let _ = s.release(pair, None);
        }
    }
}
