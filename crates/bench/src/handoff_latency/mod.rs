//! `measure_handoff_latency`: handoffs of established loopback connections, each timed from
//! the start of the dump on the "switch" thread until the switch holds the node's `Ready`
//! (dump, HandOver over an encrypted control channel, restore on the "node" thread, Ready),
//! on the public API of `locus-handoff`; `locus bench handoff` prints it. With TLS (`ends`)
//! the timing also holds the session's export on the switch and its continuation on the node.

mod ends;

use std::io;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, TcpListener};
use std::time::{Duration, Instant};

use ends::{End, TlsSetup, connect_pair, continue_on};

use serde::Serialize;

use locus_handoff::{
    BlockingControlChannel, ConnectionId, ControlChannel, ControlConfig, ControlError, ControlKey,
    ControlListener, DumpError, HandoffHint, HandoffMessage, PreparedSocket, RepairError, RestoreOptions,
    disconnect_dumped, dump_connection_in_place_at, restore_prepared,
};

/// Handoff latency over many handoffs, in microseconds.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct HandoffLatency {
    /// Handoffs measured.
    pub handoffs: usize,
    /// Median of dump → Ready received.
    pub median_us: f64,
    /// 99th percentile of dump → Ready received.
    pub p99_us: f64,
    /// Mean of dump → Ready received.
    pub mean_us: f64,
    /// Slowest handoff.
    pub max_us: f64,
    /// Median time of the dump alone (switch side: `dump_connection_in_place` and
    /// `disconnect_dumped`; the descriptor's close comes after the handoff).
    pub dump_median_us: f64,
    /// Median time of the restore alone (node side, on a socket made ahead).
    pub restore_median_us: f64,
    /// Median of dump start → socket restored on the node (one control hop, no `Ready`).
    pub restored_median_us: f64,
    /// Where the two threads ran.
    pub placement: ThreadPlacement,
    /// Whether each connection carried a TLS session (exported by the switch, continued by
    /// the node, both inside the timing).
    pub tls: bool,
}

impl HandoffLatency {
    /// `{"handoffs": N, "median_us": X, "p99_us": Y}`: the summary `locus bench handoff
    /// --json` prints.
    pub fn summary_json(&self) -> String {
        format!(
            "{{\"handoffs\": {}, \"median_us\": {:.3}, \"p99_us\": {:.3}}}",
            self.handoffs, self.median_us, self.p99_us
        )
    }
}

/// Any failure of a measured handoff (dump, control round trip, restore) or of the loopback
/// rig around it, as returned by `measure_handoff_latency`.
#[derive(Debug, thiserror::Error)]
pub enum LatencyError {
    /// Dumping the connection failed.
    #[error(transparent)]
    Dump(#[from] DumpError),
    /// Restoring it failed.
    #[error("restore failed: {0}")]
    Restore(RepairError),
    /// The control channel failed.
    #[error(transparent)]
    Control(#[from] ControlError),
    /// Another socket operation failed.
    #[error("{during}: {error}")]
    Io {
        /// What was being done.
        during: &'static str,
        /// The error.
        error: io::Error,
    },
    /// The node refused or answered something unexpected.
    #[error("protocol: {0}")]
    Protocol(String),
}

impl LatencyError {
    /// An I/O error during `during`.
    pub fn io(during: &'static str, source: io::Error) -> LatencyError {
        LatencyError::Io { during, error: source }
    }
}

impl From<RepairError> for LatencyError {
    fn from(e: RepairError) -> LatencyError {
        LatencyError::Restore(e)
    }
}

/// Connections opened and handed off per batch (each holds two descriptors at a time).
const BATCH: usize = 250;
/// The request each client sends before its connection is handed off.
const REQUEST: &[u8] = b"GET /bench HTTP/1.1\r\nHost: locus\r\n\r\n";
/// What the node writes on each restored connection, checked by the client.
const RESPONSE: &[u8] = b"HTTP/1.1 204 No Content\r\n\r\n";

/// Where the switch and node threads of a measurement run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum ThreadPlacement {
    /// Both on the CPU the caller was on: the handoff's own cost, every step in sequence,
    /// without cross-CPU wake-ups. The default (see `measure_handoff_latency`).
    OneCpu,
    /// Wherever the scheduler puts them.
    Free,
    /// Each on a CPU of its own (the caller's and another one), both busy-polling their
    /// control socket instead of sleeping: no wake-up at all, each message is seen as soon
    /// as it is there — what a node agent with a dedicated control thread and CPU pays. Burns
    /// both CPUs for the measurement; needs two CPUs.
    TwoCpus,
}

/// How long a busy-polling thread (in [`ThreadPlacement::TwoCpus`]) spins before it sleeps:
/// longer than the switch takes to set a batch up, so every handoff finds the node polling.
const BUSY_POLL: Duration = Duration::from_millis(200);

/// Hand off `count` established connections on loopback, one at a time, and report the
/// latency of each: from the start of the dump on the switch thread until the switch has
/// the node's `Ready` — the dump, encoding and authenticating the `HandOver`, the node
/// thread waking up, checking and decoding it, the restore, and the `Ready` coming back over
/// the control channel (the handshake in tokio, then each side on a blocking socket, like
/// two processes with a control thread each; in [`ThreadPlacement::TwoCpus`] busy-polling).
///
/// As the product would: the switch closes the dumped descriptor after the handoff (it
/// disconnects it silently first, which one host needs), and the node restores onto a socket
/// made and bound ahead ([`PreparedSocket::bound`]; it tops its pool up between
/// batches, while idle); the switch dumps with the addresses it has from its listener and
/// `accept`. Connections are made in batches of 250 outside the timing; after each batch the
/// switch sends `Go` and every client checks the node's response byte for byte, so a broken
/// restore fails the measurement.
///
/// Both threads run on one CPU ([`ThreadPlacement::OneCpu`]): on a small VM a wake-up across
/// CPUs costs tens of µs of hypervisor work (an idle vCPU must be woken) that two real
/// hosts do not pay in that form — they pay the wire instead. Needs CAP_NET_ADMIN.
pub fn measure_handoff_latency(count: usize) -> Result<HandoffLatency, LatencyError> {
    measure_handoff_latency_with(count, ThreadPlacement::OneCpu, false)
}

/// `measure_handoff_latency` with the threads placed as asked; with `tls`, every connection
/// is a TLS 1.3 session that moves with it: the switch takes it over from rustls and exports
/// it into the HandOver, the node continues it before `Ready` (both timed), the client
/// checks the node's response through its session.
pub fn measure_handoff_latency_with(
    count: usize,
    placement: ThreadPlacement,
    tls: bool,
) -> Result<HandoffLatency, LatencyError> {
    let tls = if tls { Some(TlsSetup::new()?) } else { None };
    // SAFETY: sched_getcpu has no arguments.
    let here = Some(unsafe { libc::sched_getcpu() }).filter(|cpu| *cpu >= 0);
    let (switch_cpu, node_cpu, busy_poll) = match placement {
        ThreadPlacement::OneCpu => (here, here, None),
        ThreadPlacement::Free => (None, None, None),
        ThreadPlacement::TwoCpus => {
            let here = here.ok_or_else(|| LatencyError::Protocol("sched_getcpu failed".into()))?;
            let other = allowed_cpus()?.into_iter().find(|cpu| *cpu != here).ok_or_else(|| {
                LatencyError::Protocol("two CPUs placement: this thread may run on one CPU only".into())
            })?;
            (Some(here), Some(other), Some(BUSY_POLL))
        }
    };
    let tls_run = tls.is_some();
    let (key, _) = ControlKey::generate();
    let service =
        TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).map_err(|e| LatencyError::io("bind service", e))?;
    let service_addr = match service.local_addr() {
        Ok(SocketAddr::V4(addr)) => addr,
        Ok(SocketAddr::V6(_)) => return Err(LatencyError::Protocol("service bound to IPv6".into())),
        Err(e) => return Err(LatencyError::io("service address", e)),
    };
    let (ready_tx, ready_rx) = std::sync::mpsc::channel::<Result<SocketAddr, LatencyError>>();
    let node_key = key.clone();
    let node = std::thread::Builder::new()
        .name("handoff-node".into())
        .spawn(move || {
            pin_to(node_cpu)?;
            run_node(node_key, service_addr, busy_poll, ready_tx)
        })
        .map_err(|e| LatencyError::io("spawn node thread", e))?;
    let control_addr = match ready_rx.recv_timeout(Duration::from_secs(10)) {
        Ok(addr) => addr,
        Err(_) => {
            let why = node.join().map(|r| r.err()).ok().flatten();
            let why = why.map(|e| e.to_string()).unwrap_or_else(|| "no reason given".into());
            return Err(LatencyError::Protocol(format!("node thread did not start: {why}")));
        }
    }?;
    let switch = std::thread::Builder::new()
        .name("handoff-switch".into())
        .spawn(move || {
            pin_to(switch_cpu)?;
            run_switch(count, &service, control_addr, &key, busy_poll, tls.as_ref())
        })
        .map_err(|e| LatencyError::io("spawn switch thread", e))?;
    let switch = switch.join().map_err(|_| LatencyError::Protocol("switch thread panicked".into()))?;
    let node = node.join().map_err(|_| LatencyError::Protocol("node thread panicked".into()))?;
    // The node's failure explains the switch's (a channel the node closed by failing).
    let (switch, node) = match (switch, node) {
        (Err(_), Err(node)) => return Err(node),
        pair => pair,
    };
    let SwitchTimes { mut total, mut dump, starts } = switch?;
    let node = node?;
    let mut restore_times: Vec<f64> = node.iter().map(|(_, us, _)| *us).collect();
    let mut restored: Vec<f64> = node
        .iter()
        .filter_map(|(id, _, done)| {
            Some(done.duration_since(*starts.get(id.0 as usize)?).as_secs_f64() * 1e6)
        })
        .collect();
    Ok(HandoffLatency {
        handoffs: total.len(),
        median_us: percentile(&mut total, 0.5),
        p99_us: percentile(&mut total, 0.99),
        mean_us: if total.is_empty() { 0.0 } else { total.iter().sum::<f64>() / total.len() as f64 },
        max_us: total.iter().copied().fold(0.0, f64::max),
        dump_median_us: percentile(&mut dump, 0.5),
        restore_median_us: percentile(&mut restore_times, 0.5),
        restored_median_us: percentile(&mut restored, 0.5),
        placement,
        tls: tls_run,
    })
}

/// Pin the calling thread to `cpu`, if one is given.
fn pin_to(cpu: Option<i32>) -> Result<(), LatencyError> {
    let Some(cpu) = cpu else { return Ok(()) };
    // SAFETY: an all-zero cpu_set_t is a valid empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: CPU_SET writes one bit of the live set; `cpu` is below CPU_SETSIZE (it came from
    // sched_getcpu).
    unsafe { libc::CPU_SET(cpu as usize, &mut set) };
    // SAFETY: sched_setaffinity reads a live cpu_set_t of the given size; 0 is this thread.
    if unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) } != 0 {
        return Err(LatencyError::io("sched_setaffinity", std::io::Error::last_os_error()));
    }
    Ok(())
}

/// The CPUs the calling thread may run on.
fn allowed_cpus() -> Result<Vec<i32>, LatencyError> {
    // SAFETY: an all-zero cpu_set_t is a valid empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: sched_getaffinity writes at most the given size into a live cpu_set_t; 0 is
    // this thread.
    if unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) } != 0 {
        return Err(LatencyError::io("sched_getaffinity", std::io::Error::last_os_error()));
    }
    let cpus = 0..libc::CPU_SETSIZE;
    // SAFETY: CPU_ISSET reads one bit of the live set; every `cpu` is below CPU_SETSIZE.
    Ok(cpus.filter(|cpu| unsafe { libc::CPU_ISSET(*cpu as usize, &set) }).collect())
}

/// The `q` quantile (nearest rank) of `values`, 0 for none.
fn percentile(values: &mut [f64], q: f64) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    values.sort_by(f64::total_cmp);
    let rank = ((values.len() as f64 * q).ceil() as usize).clamp(1, values.len());
    values[rank - 1]
}

fn runtime() -> Result<tokio::runtime::Runtime, LatencyError> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| LatencyError::io("runtime", e))
}

/// The channel's receive timeout: longer than setting a batch up takes (250 TLS handshakes
/// in a debug build take seconds), while the other side waits.
fn control_config() -> ControlConfig {
    ControlConfig { recv_timeout: Some(Duration::from_secs(60)), ..ControlConfig::default() }
}

/// What the node saw of one handoff: the connection, the restore's time (µs), and when the
/// socket was restored.
type NodeRecord = (ConnectionId, f64, Instant);

/// A batch's worth of sockets made ahead, bound to the service address.
fn prepared_sockets(
    options: &RestoreOptions,
    service: SocketAddrV4,
) -> Result<Vec<PreparedSocket>, LatencyError> {
    (0..BATCH).map(|_| PreparedSocket::bound(options, service).map_err(LatencyError::from)).collect()
}

/// The node: accept the switch's control channel (the handshake in a tokio runtime, then on
/// a blocking socket, as an agent's dedicated control thread), restore every HandOver (on a
/// socket made and bound ahead) and answer Ready, write the response on Go, drop the sockets
/// on Closed (and make the next batch's sockets then, while idle).
fn run_node(
    key: ControlKey,
    service: SocketAddrV4,
    busy_poll: Option<Duration>,
    ready: std::sync::mpsc::Sender<Result<SocketAddr, LatencyError>>,
) -> Result<Vec<NodeRecord>, LatencyError> {
    let rt = runtime()?;
    let channel = rt.block_on(async move {
        let listener =
            match ControlListener::bind_with((Ipv4Addr::LOCALHOST, 0), &key, control_config()).await {
                Ok(l) => l,
                Err(e) => {
                    let _ = ready.send(Err(e.into()));
                    return Ok(None);
                }
            };
        let _ = ready.send(listener.local_addr().map_err(LatencyError::from));
        let channel = listener.accept().await?;
        Ok::<_, LatencyError>(Some(channel.into_blocking()?))
    })?;
    let Some(mut channel) = channel else { return Ok(Vec::new()) };
    channel.set_busy_poll(busy_poll);
    let mut restored: Vec<(ConnectionId, End)> = Vec::with_capacity(BATCH);
    let mut records = Vec::new();
    let options = RestoreOptions::default();
    let mut pool = prepared_sockets(&options, service)?;
    loop {
        let message = match channel.recv() {
            Ok(m) => m,
            Err(ControlError::Closed { .. }) => return Ok(records),
            Err(e) => return Err(e.into()),
        };
        match message {
            HandoffMessage::HandOver { id, state, tls, .. } => {
                let t = Instant::now();
                let socket = match pool.pop() {
                    Some(socket) => socket,
                    None => PreparedSocket::bound(&options, service)?,
                };
                let result = restore_prepared(socket, &state, &options)
                    .map_err(|e| e.to_string())
                    .and_then(|stream| continue_on(&rt, stream, tls));
                let done = Instant::now();
                records.push((id, (done - t).as_secs_f64() * 1e6, done));
                match result {
                    Ok(stream) => {
                        restored.push((id, stream));
                        channel.send(&HandoffMessage::Ready { id })?;
                    }
                    Err(reason) => {
                        channel.send(&HandoffMessage::Refused { id, reason })?;
                    }
                }
            }
            HandoffMessage::Go { id } => {
                let stream = restored.iter_mut().find(|(i, _)| *i == id).map(|(_, s)| s);
                let stream = stream.ok_or_else(|| LatencyError::Protocol(format!("Go for unknown {id}")))?;
                stream.write_all(&rt, RESPONSE).map_err(|e| LatencyError::io("node write", e))?;
            }
            HandoffMessage::Closed { .. } => {
                restored.clear();
                // Idle between batches: top the pool up, as an agent does when idle.
                pool = prepared_sockets(&options, service)?;
            }
            other => return Err(LatencyError::Protocol(format!("node got {}", other.kind_name()))),
        }
    }
}

/// What the switch timed: the total and dump times of each handoff in µs, and when each
/// handoff started (by id).
struct SwitchTimes {
    total: Vec<f64>,
    dump: Vec<f64>,
    starts: Vec<Instant>,
}

/// The switch and the clients: batches of connections, each handed off and timed, then
/// checked.
fn run_switch(
    count: usize,
    service: &TcpListener,
    control_addr: SocketAddr,
    key: &ControlKey,
    busy_poll: Option<Duration>,
    tls: Option<&TlsSetup>,
) -> Result<SwitchTimes, LatencyError> {
    let service_addr = match service.local_addr() {
        Ok(SocketAddr::V4(addr)) => addr,
        Ok(SocketAddr::V6(_)) => return Err(LatencyError::Protocol("service bound to IPv6".into())),
        Err(e) => return Err(LatencyError::io("service address", e)),
    };
    let rt = runtime()?;
    let mut channel = rt.block_on(async {
        let channel = ControlChannel::connect_with(control_addr, key, control_config()).await?;
        Ok::<_, LatencyError>(channel.into_blocking()?)
    })?;
    channel.set_busy_poll(busy_poll);
    let mut times = SwitchTimes {
        total: Vec::with_capacity(count),
        dump: Vec::with_capacity(count),
        starts: Vec::with_capacity(count),
    };
    let mut next_id = 0u64;
    let mut request = [0u8; REQUEST.len()];
    while times.total.len() < count {
        let batch = BATCH.min(count - times.total.len());
        let (mut clients, accepted) = open_batch(&rt, service, service_addr, batch, &mut request, tls)?;
        let mut ids = Vec::with_capacity(batch);
        for (server, peer) in accepted {
            let id = ConnectionId(next_id);
            next_id += 1;
            hand_off_timed(&mut channel, id, server, (&request, service_addr, peer), &mut times)?;
            ids.push(id);
        }
        // Outside the timing: every handed-off connection must work.
        check_batch(&rt, &mut channel, &ids, &mut clients)?;
        // Abortive close (RST): no TIME_WAIT, so ports are reused freely.
        for client in &clients {
            set_linger_zero(client.fd());
        }
        drop(clients);
        channel.send(&HandoffMessage::Closed { id: ConnectionId(u64::MAX) })?;
    }
    Ok(times)
}

/// A connection the switch accepted, with the client's address.
type Accepted = (End, SocketAddrV4);

/// `batch` clients connected to the service (over TLS with `tls`), each having sent the
/// request, which the switch read (into `request`) on the accepted side: the clients, and
/// the accepted ends with their peers.
fn open_batch(
    rt: &tokio::runtime::Runtime,
    service: &TcpListener,
    service_addr: SocketAddrV4,
    batch: usize,
    request: &mut [u8],
    tls: Option<&TlsSetup>,
) -> Result<(Vec<End>, Vec<Accepted>), LatencyError> {
    let mut clients = Vec::with_capacity(batch);
    let mut accepted = Vec::with_capacity(batch);
    for _ in 0..batch {
        let (mut client, mut server, peer) = connect_pair(rt, service, service_addr, tls)?;
        client.write_all(rt, REQUEST).map_err(|e| LatencyError::io("client write", e))?;
        server.read_exact(rt, request).map_err(|e| LatencyError::io("switch read", e))?;
        clients.push(client);
        accepted.push((server, peer));
    }
    Ok((clients, accepted))
}

/// One timed handoff of `server` (with the request it read, the service's and the client's
/// address): a TLS session taken over from rustls and exported, dump and disconnect,
/// HandOver, wait for Ready; then close the descriptor.
fn hand_off_timed(
    channel: &mut BlockingControlChannel,
    id: ConnectionId,
    mut server: End,
    (request, service_addr, peer): (&[u8], SocketAddrV4, SocketAddrV4),
    times: &mut SwitchTimes,
) -> Result<(), LatencyError> {
    let t0 = Instant::now();
    // A TLS session carries the request in its plaintext; cleartext puts it back in the queue.
    let (tls, read_back) = match &mut server {
        End::Plain(_) => (None, request),
        End::Tls(t) => {
            let export = t.take_over().and_then(|()| t.session_state(request));
            let session = export.map_err(|e| LatencyError::Protocol(format!("TLS export: {e}")))?;
            (Some(Box::new(session)), &[][..])
        }
    };
    // The addresses come from the listener and `accept`, as a switch has them.
    let state = dump_connection_in_place_at(server.fd(), read_back, service_addr, peer)
        .map_err(|error| DumpError { error, socket: None })?;
    // Out of the kernel's tables now (the node restores it on this same host); the
    // descriptor is closed after the handoff, off the critical path.
    disconnect_dumped(server.fd())?;
    let t_dump = t0.elapsed();
    let hint = HandoffHint { target: "/bench".into(), request_len: read_back.len() as u32 };
    channel.send(&HandoffMessage::HandOver { id, state, hint, tls })?;
    match channel.recv()? {
        HandoffMessage::Ready { id: ready } if ready == id => {}
        HandoffMessage::Refused { reason, .. } => {
            return Err(LatencyError::Protocol(format!("node refused {id}: {reason}")));
        }
        other => {
            return Err(LatencyError::Protocol(format!("expected Ready, got {}", other.kind_name())));
        }
    }
    times.total.push(t0.elapsed().as_secs_f64() * 1e6);
    drop(server);
    times.dump.push(t_dump.as_secs_f64() * 1e6);
    times.starts.push(t0);
    Ok(())
}

/// Send `Go` for each handed-off connection and check that its client gets the node's
/// response byte for byte.
fn check_batch(
    rt: &tokio::runtime::Runtime,
    channel: &mut BlockingControlChannel,
    ids: &[ConnectionId],
    clients: &mut [End],
) -> Result<(), LatencyError> {
    for (id, client) in ids.iter().zip(clients.iter_mut()) {
        channel.send(&HandoffMessage::Go { id: *id })?;
        let mut seen = [0u8; RESPONSE.len()];
        client
            .read_exact(rt, &mut seen)
            .map_err(|e| LatencyError::io("client read of the node's response", e))?;
        if seen != RESPONSE {
            return Err(LatencyError::Protocol(format!("{id}: wrong response bytes")));
        }
    }
    Ok(())
}

/// SO_LINGER {on, 0}: close with RST.
fn set_linger_zero(stream: std::os::fd::BorrowedFd<'_>) {
    use std::os::fd::AsRawFd;
    let linger = libc::linger { l_onoff: 1, l_linger: 0 };
    // SAFETY: setsockopt reads a live `linger` of the given size; the descriptor is open.
    unsafe {
        libc::setsockopt(
            stream.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            (&linger as *const libc::linger).cast(),
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        )
    };
}
