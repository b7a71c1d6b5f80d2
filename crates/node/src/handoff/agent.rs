//! `HandoffAgent`: the node's side of one-way TCP handoff. It listens for the switch's control
//! channels, restores handed-over connections (`HandOver` → `Ready`/`Refused`, then `Go`),
//! gives them to the worker event loops, answers the connections' `Route` questions, carries
//! their `Rehandoff`s back, and reports `Closed` — queued while no switch is connected.

use std::collections::{HashMap, VecDeque};
use std::net::{SocketAddr, SocketAddrV4};
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use locus_core::NodeId;
use locus_handoff::{
    ConnectionId, ControlChannel, ControlConfig, ControlError, ControlKey, ControlReceiver, ControlSender,
    HandoffMessage, PreparedSocket, RestoreOptions, TcpRepairState, restore_prepared,
};
use locus_io::{AcceptBackoff, ConnectionSlot};
use locus_tls::SessionExport;
use parking_lot::Mutex;
use tokio::sync::{mpsc, oneshot, watch};

use crate::config::{HandoffConfig, RehandoffPolicy};
use crate::context::{NodeContext, count};

/// How often restored connections are checked for a `Go` that did not come.
const GO_SWEEP: Duration = Duration::from_millis(100);
/// A control channel whose switch stops answering (host down, no FIN) is declared dead after
/// about this long: TCP keepalive probes when idle, TCP_USER_TIMEOUT for unacknowledged
/// frames. Until then, frames written to it are lost with it.
const DEAD_SWITCH: Duration = Duration::from_secs(10);

/// A restored connection on its way to a worker event loop, after `Go`.
pub struct AdoptedConnection {
    /// The restored socket (non-blocking, established).
    pub stream: std::net::TcpStream,
    /// Its place in `active_connections`, claimed at `HandOver`.
    pub slot: ConnectionSlot,
    /// The switch's name for it.
    pub id: ConnectionId,
    /// The unsent part of the send queue, to write before anything else.
    pub unsent: Vec<u8>,
    /// The TLS session to continue on it (one-way HTTPS), its request in the plaintext.
    pub tls: Option<Box<SessionExport>>,
}

/// Where the switch wants the next request of a connection served.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RouteDecision {
    /// Here (also when the switch did not answer in time, or no switch is connected).
    Local,
    /// On another node: give the connection back with `Rehandoff` on channel `channel`.
    Rehandoff {
        /// The channel the answer came on.
        channel: u64,
    },
    /// On another node, fetched over HTTP from this address (back-end forwarding).
    Forward(SocketAddr),
}

/// What `Hello` told the agent: its own id and the cluster's HTTP addresses.
#[derive(Clone, Debug)]
struct ClusterView {
    node: NodeId,
    peers: Vec<(NodeId, SocketAddr)>,
}

/// The sending side of one live control channel (its writer task owns the `ControlSender`).
struct ChannelOutbox {
    serial: u64,
    outbox: mpsc::UnboundedSender<HandoffMessage>,
}

/// A restored connection waiting for `Go`.
struct AwaitingGo {
    stream: std::net::TcpStream,
    slot: ConnectionSlot,
    unsent: Vec<u8>,
    tls: Option<Box<SessionExport>>,
    deadline: Instant,
}

/// A `RouteTo` as it arrived: the node, and the channel it came on.
struct RouteAnswer {
    node: NodeId,
    channel: u64,
}

/// The node's handoff agent. Shared by the agent's thread (control channels) and every worker
/// (routing, rehandoff, `Closed`).
///
/// It restores `HandOver`ed connections and answers `Ready` or `Refused`, hands a restored
/// connection to a worker on `Go` (closing it silently after `go_timeout_ms` without one), asks
/// `Route` and sends `Rehandoff` for a worker, and reports `Closed` (kept in a bounded backlog
/// while no switch is connected). The protocol, message by message: `docs/modes.md`.
pub struct HandoffAgent {
    node: Arc<NodeContext>,
    upstream: Option<SocketAddr>,
    clone_mode: bool,
    clone_service: Option<SocketAddr>,
    rehandoff: RehandoffPolicy,
    go_timeout: Duration,
    route_timeout: Duration,
    prepared_target: usize,
    closed_backlog_limit: usize,
    restore: RestoreOptions,
    /// Live channels, newest last.
    channels: Mutex<Vec<ChannelOutbox>>,
    next_serial: AtomicU64,
    cluster: Mutex<Option<ClusterView>>,
    awaiting_go: Mutex<HashMap<ConnectionId, AwaitingGo>>,
    /// Connections waiting for `RouteTo`, with the channel their `Route` went out on.
    routes: Mutex<HashMap<ConnectionId, (u64, oneshot::Sender<RouteAnswer>)>>,
    /// `Closed` reports waiting for a channel, oldest first.
    closed_backlog: Mutex<VecDeque<ConnectionId>>,
    prepared: Mutex<Vec<PreparedSocket>>,
    /// One adoption queue per worker event loop.
    workers: Vec<mpsc::UnboundedSender<AdoptedConnection>>,
    next_worker: AtomicUsize,
}

impl HandoffAgent {
    /// An agent for `node` that gives restored connections to `workers` round-robin.
    pub fn new(
        node: Arc<NodeContext>,
        config: &HandoffConfig,
        workers: Vec<mpsc::UnboundedSender<AdoptedConnection>>,
    ) -> HandoffAgent {
        HandoffAgent {
            node,
            upstream: config.upstream,
            clone_mode: config.clone,
            clone_service: config.clone_service,
            rehandoff: config.rehandoff,
            go_timeout: Duration::from_millis(config.go_timeout_ms),
            route_timeout: Duration::from_millis(config.route_timeout_ms),
            prepared_target: config.prepared_sockets,
            closed_backlog_limit: config.closed_queue.max(1),
            restore: RestoreOptions { nonblocking: true, freebind: config.freebind, window_probe: false },
            channels: Mutex::new(Vec::new()),
            next_serial: AtomicU64::new(1),
            cluster: Mutex::new(None),
            awaiting_go: Mutex::new(HashMap::new()),
            routes: Mutex::new(HashMap::new()),
            closed_backlog: Mutex::new(VecDeque::new()),
            prepared: Mutex::new(Vec::new()),
            workers,
            next_worker: AtomicUsize::new(0),
        }
    }

    /// The unmodified server handed-off connections are relayed to, if any.
    pub fn upstream(&self) -> Option<SocketAddr> {
        self.upstream
    }

    /// Whether connections accepted by the node's own listener ask the switch too (l4 mode
    /// with socket cloning).
    pub fn clone_mode(&self) -> bool {
        self.clone_mode
    }

    /// Whether a connection accepted at `local` is cloned (asks the switch per request).
    pub fn clones(&self, local: SocketAddr) -> bool {
        self.clone_mode && self.clone_service.is_none_or(|s| s == local)
    }

    /// Accept control channels on `listener` (authenticated with `key`, each handshake in a
    /// task of its own so a slow peer delays no other) and serve them until `shutdown`; then
    /// drop every connection still waiting for `Go`, silently.
    pub async fn run(
        self: Arc<Self>,
        listener: tokio::net::TcpListener,
        key: ControlKey,
        mut shutdown: watch::Receiver<bool>,
    ) {
        self.refill_prepared();
        let mut tasks = tokio::task::JoinSet::new();
        let mut backoff = AcceptBackoff::new();
        let mut sweep = tokio::time::interval(GO_SWEEP);
        sweep.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let (channels_tx, mut channels_rx) = mpsc::unbounded_channel();
        loop {
            tokio::select! {
                biased;
                _ = shutdown.changed() => break,
                Some(channel) = channels_rx.recv() => {
                    while tasks.try_join_next().is_some() {}
                    self.open_channel(channel, &mut tasks);
                }
                accepted = listener.accept() => match accepted {
                    Ok((stream, peer)) => {
                        detect_dead_peer(&stream);
                        let (key, channels_tx) = (key.clone(), channels_tx.clone());
                        tasks.spawn(async move {
                            match ControlChannel::respond(stream, &key, ControlConfig::default()).await {
                                Ok(channel) => {
                                    let _ = channels_tx.send(channel);
                                }
                                Err(e) => tracing::warn!(%peer, error = %e, "handoff control channel refused"),
                            }
                        });
                    }
                    Err(e) => {
                        backoff.after("handoff control listener", &e).await;
                    }
                },
                _ = sweep.tick() => self.expire_awaiting_go(),
            }
        }
        self.channels.lock().clear();
        self.node.metrics.handoff_channels.store(0, Ordering::Relaxed);
        let waiting: Vec<AwaitingGo> = self.awaiting_go.lock().drain().map(|(_, a)| a).collect();
        for a in waiting {
            close_silently(a.stream);
        }
        tasks.shutdown().await;
    }

    /// Start the reader and writer of a new channel, and send it the `Closed` backlog.
    fn open_channel(self: &Arc<Self>, channel: ControlChannel, tasks: &mut tokio::task::JoinSet<()>) {
        let serial = self.next_serial.fetch_add(1, Ordering::Relaxed);
        let peer = channel.peer_addr();
        let (sender, receiver) = channel.into_split();
        let (outbox, queue) = mpsc::unbounded_channel();
        let backlog: Vec<ConnectionId> = {
            let mut channels = self.channels.lock();
            channels.push(ChannelOutbox { serial, outbox: outbox.clone() });
            self.node.metrics.handoff_channels.store(channels.len() as u64, Ordering::Relaxed);
            self.closed_backlog.lock().drain(..).collect()
        };
        tracing::info!(%peer, channel = serial, backlog = backlog.len(), "handoff control channel up");
        for id in backlog {
            let _ = outbox.send(HandoffMessage::Closed { id });
        }
        tasks.spawn(self.clone().write_channel(serial, sender, queue));
        tasks.spawn(self.clone().read_channel(serial, receiver, outbox));
    }

    /// Write what the agent and the connections queue for channel `serial`. When the channel
    /// fails, the `Closed` reports not yet written go back to the backlog.
    async fn write_channel(
        self: Arc<Self>,
        serial: u64,
        mut sender: ControlSender,
        mut queue: mpsc::UnboundedReceiver<HandoffMessage>,
    ) {
        while let Some(message) = queue.recv().await {
            if let Err(e) = sender.send(&message).await {
                tracing::warn!(channel = serial, error = %e, message = message.kind_name(), "handoff control send failed");
                self.forget_channel(serial);
                queue.close();
                self.keep_closed(message);
                while let Ok(message) = queue.try_recv() {
                    self.keep_closed(message);
                }
                return;
            }
        }
    }

    /// A message that could not be written: a `Closed` report is kept for the next channel.
    fn keep_closed(&self, message: HandoffMessage) {
        if let HandoffMessage::Closed { id } = message {
            self.backlog_closed(id);
        }
    }

    /// Read channel `serial` until it fails; answer on `outbox`.
    async fn read_channel(
        self: Arc<Self>,
        serial: u64,
        mut receiver: ControlReceiver,
        outbox: mpsc::UnboundedSender<HandoffMessage>,
    ) {
        loop {
            match receiver.recv().await {
                Ok(message) => {
                    let refill = self.on_message(serial, message, &outbox);
                    if refill {
                        // Off the critical path: let the writer send `Ready` first.
                        tokio::task::yield_now().await;
                        self.refill_prepared();
                    }
                }
                Err(ControlError::Decode(e)) => {
                    tracing::warn!(channel = serial, error = %e, "handoff control: undecodable message ignored");
                }
                Err(ControlError::Closed { .. }) => {
                    tracing::info!(channel = serial, "handoff control channel closed by the switch");
                    break;
                }
                Err(e) => {
                    tracing::warn!(channel = serial, error = %e, "handoff control channel failed");
                    break;
                }
            }
        }
        self.forget_channel(serial);
    }

    /// Channel `serial` is gone: stop using it, and let the connections waiting for an
    /// answer on it serve their requests locally now.
    fn forget_channel(&self, serial: u64) {
        let mut channels = self.channels.lock();
        channels.retain(|c| c.serial != serial);
        self.node.metrics.handoff_channels.store(channels.len() as u64, Ordering::Relaxed);
        drop(channels);
        self.routes.lock().retain(|_, (on, _)| *on != serial);
    }

    /// Handle one message from the switch; true when a prepared socket was used up.
    fn on_message(
        &self,
        serial: u64,
        message: HandoffMessage,
        outbox: &mpsc::UnboundedSender<HandoffMessage>,
    ) -> bool {
        match message {
            HandoffMessage::Hello { node, peers, .. } => {
                tracing::info!(channel = serial, node = node.0, peers = peers.len(), "switch says hello");
                *self.cluster.lock() = Some(ClusterView { node, peers });
                self.node.metrics.handoff_node_id.store(u64::from(node.0) + 1, Ordering::Relaxed);
                false
            }
            HandoffMessage::HandOver { id, state, hint, tls } => {
                let encrypted = tls.is_some();
                let reply = match self.take_over(id, &state, tls) {
                    Ok(()) => {
                        count(&self.node.metrics.handoffs_accepted);
                        tracing::debug!(%id, client = %state.peer, target = %hint.target, encrypted, "handoff restored; ready");
                        HandoffMessage::Ready { id }
                    }
                    Err(reason) => {
                        count(&self.node.metrics.handoffs_refused);
                        tracing::warn!(%id, client = %state.peer, %reason, "handoff refused");
                        HandoffMessage::Refused { id, reason }
                    }
                };
                if outbox.send(reply).is_err() {
                    tracing::warn!(%id, "handoff control channel gone before the answer");
                }
                true
            }
            HandoffMessage::Go { id } => {
                self.go(id);
                false
            }
            HandoffMessage::RouteTo { id, node } => {
                match self.routes.lock().remove(&id) {
                    Some((_, waiting)) => {
                        let _ = waiting.send(RouteAnswer { node, channel: serial });
                    }
                    None => tracing::debug!(%id, node = node.0, "RouteTo for no waiting request (too late?)"),
                }
                false
            }
            other => {
                tracing::warn!(channel = serial, id = %other.id(), kind = other.kind_name(), "unexpected message from the switch ignored");
                false
            }
        }
    }

    /// Restore a handed-over connection (with its TLS session, if any) and keep it until
    /// `Go`; Err: the refusal reason.
    fn take_over(
        &self,
        id: ConnectionId,
        state: &TcpRepairState,
        tls: Option<Box<SessionExport>>,
    ) -> Result<(), String> {
        if self.node.is_shutting_down() {
            return Err("node is shutting down".into());
        }
        if tls.is_some() && self.upstream.is_some() {
            return Err("a TLS session cannot be relayed to the upstream (it needs the record layer)".into());
        }
        if self.awaiting_go.lock().contains_key(&id) {
            return Err(format!("{id} is already restored and waiting for Go"));
        }
        let slot = self.node.claim_connection().ok_or_else(|| {
            format!("node is at its maximum of {} connections", self.node.metrics.connections.max())
        })?;
        let prepared = match self.prepared.lock().pop() {
            Some(socket) => socket,
            None => PreparedSocket::new(&self.restore).map_err(|e| format!("making a socket: {e}"))?,
        };
        let stream =
            restore_prepared(prepared, state, &self.restore).map_err(|e| format!("restore failed: {e}"))?;
        let waiting = AwaitingGo {
            stream,
            slot,
            unsent: state.unsent_part().to_vec(),
            tls,
            deadline: Instant::now() + self.go_timeout,
        };
        self.awaiting_go.lock().insert(id, waiting);
        Ok(())
    }

    /// `Go`: give the connection to a worker, round-robin.
    fn go(&self, id: ConnectionId) {
        let Some(waiting) = self.awaiting_go.lock().remove(&id) else {
            tracing::warn!(%id, "Go for a connection that is not waiting (unknown, or timed out)");
            return;
        };
        let mut adopted = AdoptedConnection {
            stream: waiting.stream,
            slot: waiting.slot,
            id,
            unsent: waiting.unsent,
            tls: waiting.tls,
        };
        for _ in 0..self.workers.len() {
            let i = self.next_worker.fetch_add(1, Ordering::Relaxed) % self.workers.len();
            match self.workers[i].send(adopted) {
                Ok(()) => {
                    tracing::debug!(%id, worker = i, "go: connection adopted");
                    return;
                }
                Err(mpsc::error::SendError(back)) => adopted = back,
            }
        }
        tracing::warn!(%id, "go: no worker takes connections (shutting down); closing it");
        drop(adopted);
        self.connection_closed(id);
    }

    /// Drop connections whose `Go` is overdue (silently: the switch may still hold the
    /// client's packets) and report them closed.
    fn expire_awaiting_go(&self) {
        let now = Instant::now();
        let expired: Vec<(ConnectionId, AwaitingGo)> = {
            let mut waiting = self.awaiting_go.lock();
            let ids: Vec<ConnectionId> =
                waiting.iter().filter(|(_, a)| a.deadline <= now).map(|(id, _)| *id).collect();
            ids.into_iter().filter_map(|id| waiting.remove(&id).map(|a| (id, a))).collect()
        };
        for (id, a) in expired {
            tracing::warn!(%id, timeout = ?self.go_timeout, "no Go in time; restored connection dropped");
            close_silently(a.stream);
            self.connection_closed(id);
        }
    }

    /// Keep `prepared_sockets` sockets made ahead (best effort: without CAP_NET_ADMIN every
    /// attempt fails and restores fail later with the reason).
    fn refill_prepared(&self) {
        loop {
            if self.prepared.lock().len() >= self.prepared_target {
                return;
            }
            match PreparedSocket::new(&self.restore) {
                Ok(socket) => self.prepared.lock().push(socket),
                Err(e) => {
                    tracing::debug!(error = %e, "cannot make a socket ahead for restores");
                    return;
                }
            }
        }
    }

    /// The newest live channel.
    fn newest_channel(&self) -> Option<(u64, mpsc::UnboundedSender<HandoffMessage>)> {
        self.channels.lock().last().map(|c| (c.serial, c.outbox.clone()))
    }

    /// Channel `serial` if it is still live, else the newest.
    fn channel_or_newest(&self, serial: u64) -> Option<(u64, mpsc::UnboundedSender<HandoffMessage>)> {
        let channels = self.channels.lock();
        channels
            .iter()
            .find(|c| c.serial == serial)
            .or_else(|| channels.last())
            .map(|c| (c.serial, c.outbox.clone()))
    }

    /// Whether a switch is connected now.
    pub fn has_channel(&self) -> bool {
        !self.channels.lock().is_empty()
    }

    /// Report that connection `id` ended: on the newest live channel, or kept (bounded) for
    /// the next channel.
    pub fn connection_closed(&self, id: ConnectionId) {
        if let Some((serial, outbox)) = self.newest_channel()
            && outbox.send(HandoffMessage::Closed { id }).is_ok()
        {
            tracing::debug!(%id, channel = serial, "closed reported");
            return;
        }
        self.backlog_closed(id);
    }

    fn backlog_closed(&self, id: ConnectionId) {
        let mut backlog = self.closed_backlog.lock();
        if backlog.len() >= self.closed_backlog_limit {
            let dropped = backlog.pop_front();
            tracing::warn!(dropped = ?dropped, limit = self.closed_backlog_limit, "Closed backlog full; oldest report dropped");
        }
        backlog.push_back(id);
        tracing::debug!(%id, backlog = backlog.len(), "no switch connected; Closed kept for the next channel");
    }

    /// Ask the switch which node serves the next request (`target`) of connection `id`.
    /// `Local` when no switch is connected, it does not answer within the route timeout, it
    /// names this node, or it names a node this agent cannot reach.
    pub async fn route(&self, id: ConnectionId, target: &str) -> RouteDecision {
        let Some((serial, outbox)) = self.newest_channel() else { return self.unanswered() };
        let (answer_tx, answer_rx) = oneshot::channel();
        self.routes.lock().insert(id, (serial, answer_tx));
        count(&self.node.metrics.routes_asked);
        let moves = self.rehandoff == RehandoffPolicy::Handoff;
        if outbox.send(HandoffMessage::Route { id, target: target.to_string(), moves }).is_err() {
            self.routes.lock().remove(&id);
            return self.unanswered();
        }
        let answer = match tokio::time::timeout(self.route_timeout, answer_rx).await {
            Ok(Ok(answer)) => answer,
            Ok(Err(_)) => {
                tracing::warn!(%id, channel = serial, "control channel lost while waiting for RouteTo; serving locally");
                return self.unanswered();
            }
            Err(_) => {
                self.routes.lock().remove(&id);
                tracing::warn!(%id, channel = serial, timeout = ?self.route_timeout, "no RouteTo in time; serving locally");
                return self.unanswered();
            }
        };
        let cluster = self.cluster.lock().clone();
        let Some(cluster) = cluster else {
            tracing::warn!(%id, "RouteTo before any Hello: own node id unknown; serving locally");
            return self.unanswered();
        };
        if answer.node == cluster.node {
            return RouteDecision::Local;
        }
        match self.rehandoff {
            RehandoffPolicy::Handoff => RouteDecision::Rehandoff { channel: answer.channel },
            RehandoffPolicy::Forward => match cluster.peers.iter().find(|(n, _)| *n == answer.node) {
                Some((_, addr)) => RouteDecision::Forward(*addr),
                None => {
                    tracing::warn!(%id, node = answer.node.0, "RouteTo a node not in Hello's peers; serving locally");
                    self.unanswered()
                }
            },
        }
    }

    /// `Local` for a request whose `Route` got no usable answer, counted.
    fn unanswered(&self) -> RouteDecision {
        count(&self.node.metrics.routes_unanswered);
        RouteDecision::Local
    }

    /// Give connection `id` back to the switch (dumped, next request in front or in its TLS
    /// session's plaintext), on channel `channel` or, if it died, the newest. False when no
    /// switch is connected (the connection is lost then).
    pub fn rehandoff(
        &self,
        id: ConnectionId,
        state: TcpRepairState,
        tls: Option<Box<SessionExport>>,
        channel: u64,
    ) -> bool {
        let client = state.peer;
        let Some((serial, outbox)) = self.channel_or_newest(channel) else {
            tracing::warn!(%id, %client, "rehandoff: no switch connected; connection lost");
            return false;
        };
        if outbox.send(HandoffMessage::Rehandoff { id, state, tls }).is_err() {
            tracing::warn!(%id, %client, channel = serial, "rehandoff: channel closed; connection lost");
            return false;
        }
        count(&self.node.metrics.rehandoffs);
        tracing::debug!(%id, %client, channel = serial, "connection handed back to the switch");
        true
    }
}

/// Keepalive and user timeout on a control connection, so a switch that vanished without a
/// FIN is noticed within about `DEAD_SWITCH` and later `Closed` reports wait in the backlog.
fn detect_dead_peer(stream: &tokio::net::TcpStream) {
    let socket = socket2::SockRef::from(stream);
    let keepalive = socket2::TcpKeepalive::new()
        .with_time(DEAD_SWITCH / 2)
        .with_interval(DEAD_SWITCH / 10)
        .with_retries(5);
    if let Err(e) =
        socket.set_tcp_keepalive(&keepalive).and_then(|()| socket.set_tcp_user_timeout(Some(DEAD_SWITCH)))
    {
        tracing::debug!(error = %e, "keepalive on a control connection");
    }
}

/// The switch's name for a connection accepted by this node's own listener (l4 mode): from
/// the 4-tuple; `None` for IPv6.
pub fn cloned_connection_id(peer: SocketAddr, local: SocketAddr) -> Option<ConnectionId> {
    match peer {
        SocketAddr::V4(peer) => {
            Some(ConnectionId::from_tuple(SocketAddrV4::new(*peer.ip(), peer.port()), local.port()))
        }
        SocketAddr::V6(_) => None,
    }
}

/// Close a restored socket without a FIN or RST (back into repair mode first): the client's
/// connection may still live on elsewhere.
pub fn close_silently(stream: std::net::TcpStream) {
    let on: libc::c_int = 1;
    // SAFETY: setsockopt reads one int that lives across the call; the descriptor is open.
    let rc = unsafe {
        libc::setsockopt(
            stream.as_raw_fd(),
            libc::SOL_TCP,
            libc::TCP_REPAIR,
            (&on as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        tracing::debug!(error = %std::io::Error::last_os_error(), "TCP_REPAIR for a silent close failed");
    }
    drop(stream);
}
