//! Handoff mode: `HandoffPlane` (shared by the workers: the control key, the tc forwarder, the
//! table of handed-off connections and their detached assignments, counters) and `NodeLink`
//! (one authenticated control channel per worker and node, with the replies it waits for).
//! The switch side of the protocol: HandOver → Ready|Refused → forward → Go; Route → RouteTo
//! (holding the forwarder first when the connection moves); Rehandoff → HandOver elsewhere;
//! Closed → release the node's load and remove the forwarding entry a little later.

use crate::config::HandoffSettings;
use crate::dispatch::DetachedAssignment;
use crate::session::{Worker, serve_restored};
use crate::state::Shared;
use locus_bpf::{ConnKey, Forwarder, ForwarderOptions, NodeSlot, NodeTable, SelectionMode};
use locus_core::{NodeId, RequestInfo};
use locus_handoff::{
    ConnectionId, ControlConfig, ControlKey, ControlSender, HandoffHint, HandoffMessage, RestoreOptions,
    TcpRepairState, restore_connection,
};
use parking_lot::Mutex;
use std::cell::RefCell;
use std::collections::HashMap;
use std::io;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio::sync::{oneshot, watch};

/// Slots of the l4 least-connections selection table.
const LC_TABLE: usize = 64;

/// Why the handoff plane could not start.
#[derive(Debug, thiserror::Error)]
pub enum HandoffSetupError {
    #[error("handoff: {0}")]
    Config(crate::ConfigError),
    #[error("handoff: cannot attach the forwarder to {interface}: {error}")]
    Forwarder { interface: String, error: Box<locus_bpf::ForwarderError> },
    #[error("l4: {0}")]
    L4(String),
}

// By hand, not `#[from]`: the message already carries the cause, so it is no `source()`
// (which would print it twice in a `{:#}` chain).
impl From<crate::ConfigError> for HandoffSetupError {
    fn from(e: crate::ConfigError) -> HandoffSetupError {
        HandoffSetupError::Config(e)
    }
}

/// Handoff counters (in `/locus/status` and `/metrics`).
#[derive(Default)]
pub struct HandoffCounters {
    /// Connections handed to a node (first handoffs).
    pub handoffs: AtomicU64,
    /// Connections moved from node to node (re-handoffs).
    pub rehandoffs: AtomicU64,
    /// Handoffs a node refused.
    pub refused: AtomicU64,
    /// Handoffs that failed otherwise (no answer in time, channel lost, dump failed).
    pub failed: AtomicU64,
    /// Connections the switch restored and served itself after a refusal or failure.
    pub served_here: AtomicU64,
    /// Route questions answered.
    pub routes: AtomicU64,
    /// Closes reported by nodes.
    pub closed: AtomicU64,
    /// Control channels up now (every worker keeps one per node).
    pub channels_up: AtomicU64,
}

/// A connection living on a node.
struct HandedOff {
    node: NodeId,
    key: ConnKey,
    /// The node's load for the connection's current request, released at the next Route or
    /// at Closed.
    assignment: Option<DetachedAssignment>,
    /// The node the connection moves to next (answered to a Route, awaiting its Rehandoff).
    next: Option<NodeId>,
    /// Target of the latest request routed, for the next HandOver's hint.
    target: String,
}

/// State of handoff mode shared by every worker.
pub struct HandoffPlane {
    pub key: ControlKey,
    pub settings: HandoffSettings,
    forwarder: Mutex<Option<Forwarder>>,
    /// Each node's MAC and egress interface (forwarder only), resolved at start and retried.
    slots: Mutex<Vec<Option<NodeSlot>>>,
    node_ips: Vec<Option<Ipv4Addr>>,
    conns: Mutex<HashMap<ConnectionId, HandedOff>>,
    /// The virtual IP clients connect to (from the listen address, or learnt).
    vip: Mutex<Option<Ipv4Addr>>,
    pub counters: HandoffCounters,
}

impl HandoffPlane {
    /// Load the key, attach the forwarder (if an interface is configured) and resolve the
    /// nodes' MACs. Call it on a thread in the switch's network namespace.
    pub fn start(config: &crate::SwitchConfig) -> Result<HandoffPlane, HandoffSetupError> {
        let settings = config.handoff.clone();
        let key = if config.mode == crate::Mode::L4 && config.nodes.iter().all(|n| n.handoff.is_none()) {
            // Plain l4 without cloning: no control channels, no key needed.
            ControlKey::new(&[0u8; 32]).map_err(|e| crate::ConfigError::Invalid(e.to_string()))?
        } else {
            settings.load_key()?
        };
        let forwarder = match &settings.interface {
            Some(iface) => {
                let options = ForwarderOptions { pin_dir: settings.pin_dir.clone(), ..Default::default() };
                let f = Forwarder::attach(iface, options).map_err(|source| HandoffSetupError::Forwarder {
                    interface: iface.clone(),
                    error: Box::new(source),
                })?;
                if f.adopted() {
                    tracing::info!(interface = %iface, "forwarder adopted the pinned maps of an earlier switch");
                }
                if !f.replaced_pins().is_empty() {
                    tracing::info!(
                        maps = ?f.replaced_pins(),
                        "forwarder: pinned maps of another layout (an older switch) replaced by fresh ones; \
                         the connections were kept"
                    );
                }
                // Decided once per interface and cached; an error here would fail every hold.
                match f.interface_index().map(|index| f.redirects_into_peer(index)).unwrap_or(Ok(false)) {
                    Ok(true) => tracing::info!(
                        interface = %iface,
                        "forwarder: a veth whose peer is in another namespace; frames for the nodes go \
                         straight into the peer"
                    ),
                    Ok(false) => {}
                    Err(e) => tracing::warn!(interface = %iface, "forwarder: {e}"),
                }
                Some(f)
            }
            None => None,
        };
        let node_ips = config
            .nodes
            .iter()
            .map(|n| match n.addr {
                SocketAddr::V4(a) => Some(*a.ip()),
                SocketAddr::V6(_) => None,
            })
            .collect::<Vec<_>>();
        let vip = match config.listen {
            SocketAddr::V4(a) if !a.ip().is_unspecified() => Some(*a.ip()),
            _ => None,
        };
        let plane = HandoffPlane {
            key,
            settings,
            slots: Mutex::new(vec![None; node_ips.len()]),
            node_ips,
            forwarder: Mutex::new(forwarder),
            conns: Mutex::new(HashMap::new()),
            vip: Mutex::new(vip),
            counters: HandoffCounters::default(),
        };
        let missing = plane.resolve_slots(Duration::from_millis(1000));
        if config.mode == crate::Mode::L4 {
            if missing > 0 {
                return Err(HandoffSetupError::L4(format!(
                    "{missing} node(s) without a known MAC (see above)"
                )));
            }
            plane.direct(config)?;
        }
        Ok(plane)
    }

    /// l4 mode: fill the forwarder's node slots (node `i` is slot `i`), the service (the
    /// virtual IP and port) and the selection table.
    fn direct(&self, config: &crate::SwitchConfig) -> Result<(), HandoffSetupError> {
        let forwarder = self.forwarder.lock();
        let f = forwarder.as_ref().ok_or_else(|| HandoffSetupError::L4("no forwarder".into()))?;
        let slots: Vec<NodeSlot> = self.slots.lock().iter().map(|s| s.expect("all resolved")).collect();
        let fail = |what: &str, e: locus_bpf::ForwarderError| HandoffSetupError::L4(format!("{what}: {e}"));
        f.set_nodes(&slots).map_err(|e| fail("node slots", e))?;
        let SocketAddr::V4(service) = config.listen else {
            return Err(HandoffSetupError::L4("the listen address must be IPv4".into()));
        };
        f.set_services(&[(*service.ip(), service.port())]).map_err(|e| fail("services", e))?;
        let weights = config.weights();
        let (table, mode) = match config.handoff.l4_selection.as_str() {
            "wrr" => (NodeTable::weighted(&weights), SelectionMode::RoundRobin),
            "lc" => (
                NodeTable::least_connections(&vec![0; weights.len()], &weights, LC_TABLE),
                SelectionMode::RoundRobin,
            ),
            "hash" => (NodeTable::round_robin(slots.len()), SelectionMode::Hash),
            _ => (NodeTable::round_robin(slots.len()), SelectionMode::RoundRobin),
        };
        f.set_selection(table.slots()).map_err(|e| fail("selection table", e))?;
        f.set_selection_mode(mode).map_err(|e| fail("selection mode", e))?;
        tracing::info!(service = %service, selection = %config.handoff.l4_selection, nodes = slots.len(), "l4 forwarding on");
        Ok(())
    }

    /// l4 with least connections: rewrite the selection table from the connections the
    /// forwarder directs to each node now.
    pub fn rebalance_least_connections(&self, weights: &[u32]) {
        let forwarder = self.forwarder.lock();
        let Some(f) = forwarder.as_ref() else { return };
        let Ok(entries) = f.entries() else { return };
        let mut counts = vec![0u64; weights.len()];
        for (_, e) in entries {
            if e.is_l4()
                && let Some(c) = counts.get_mut(usize::from(e.node))
            {
                *c += 1;
            }
        }
        let table = NodeTable::least_connections(&counts, weights, LC_TABLE);
        if let Err(e) = f.set_selection(table.slots()) {
            tracing::warn!("l4: cannot rewrite the least-connections table: {e}");
        }
    }

    /// Whether packets are steered by the tc forwarder (else nodes share the switch's host).
    pub fn has_forwarder(&self) -> bool {
        self.forwarder.lock().is_some()
    }

    /// Resolve the MACs of nodes that have none yet; returns how many are still missing.
    pub fn resolve_slots(&self, timeout: Duration) -> usize {
        let forwarder = self.forwarder.lock();
        let Some(f) = forwarder.as_ref() else { return 0 };
        let Some(iface) = f.interface().map(str::to_string) else { return 0 };
        drop(forwarder);
        let ifindex = match locus_bpf::interface(&iface) {
            Ok(i) => i.index,
            Err(e) => {
                tracing::warn!(interface = %iface, "handoff: {e}");
                return self.node_ips.len();
            }
        };
        let mut missing = 0;
        for (i, ip) in self.node_ips.iter().enumerate() {
            if self.slots.lock()[i].is_some() {
                continue;
            }
            let Some(ip) = ip else {
                missing += 1;
                continue;
            };
            match locus_bpf::resolve_neighbour(*ip, timeout) {
                Ok(n) => self.slots.lock()[i] = Some(NodeSlot { mac: n.mac, ifindex }),
                Err(e) => {
                    tracing::warn!(node = %ip, "handoff: cannot resolve the node's MAC: {e}");
                    missing += 1;
                }
            }
        }
        missing
    }

    /// Whether a connection can be steered to `node` now.
    pub fn can_steer_to(&self, node: NodeId) -> bool {
        !self.has_forwarder() || self.slots.lock().get(node.index()).is_some_and(Option::is_some)
    }

    /// Put the client's packets of `key` on hold, pointing at `node` (no-op without forwarder).
    pub fn hold(&self, key: ConnKey, node: NodeId) -> Result<(), String> {
        let forwarder = self.forwarder.lock();
        let Some(f) = forwarder.as_ref() else { return Ok(()) };
        let slot = self.slots.lock().get(node.index()).copied().flatten();
        let slot = slot.ok_or_else(|| format!("no MAC known for node {}", node.0))?;
        f.hold(key, slot).map_err(|e| e.to_string())
    }

    /// Let the held packets of `key` through to the node it points at.
    fn forward(&self, key: ConnKey) -> Result<(), String> {
        let forwarder = self.forwarder.lock();
        let Some(f) = forwarder.as_ref() else { return Ok(()) };
        f.forward(key).map_err(|e| e.to_string())
    }

    /// Delete the forwarding entry of `key` (its packets reach this host's stack again).
    pub fn unforward(&self, key: ConnKey) {
        if let Some(f) = self.forwarder.lock().as_ref()
            && let Err(e) = f.remove(key)
        {
            tracing::warn!(?key, "handoff: cannot remove a forwarding entry: {e}");
        }
    }

    /// Delete forwarding entries idle past `handoff.expire_idle_s`; returns how many.
    pub fn expire(&self) -> usize {
        let idle = Duration::from_secs(self.settings.expire_idle_s);
        match self.forwarder.lock().as_ref().map(|f| f.expire(idle)) {
            Some(Ok(n)) => n,
            Some(Err(e)) => {
                tracing::warn!("handoff: expiring forwarding entries failed: {e}");
                0
            }
            None => 0,
        }
    }

    /// On shutdown: with pinned maps, leave the forwarder running for the next switch.
    pub fn release_forwarder(&self) {
        let Some(f) = self.forwarder.lock().take() else { return };
        if f.pin_dir().is_some() {
            match f.keep_running() {
                Ok(()) => tracing::info!("forwarder left running for the next switch (pinned maps)"),
                Err(e) => tracing::warn!("handoff: cannot leave the forwarder running: {e}"),
            }
        }
    }

    /// Connections living on nodes now.
    pub fn handed_off_now(&self) -> usize {
        self.conns.lock().len()
    }

    /// Number of forwarding entries (0 without forwarder).
    pub fn forwarding_entries(&self) -> usize {
        self.forwarder.lock().as_ref().and_then(|f| f.entries().ok()).map_or(0, |e| e.len())
    }

    fn key_of(&self, id: ConnectionId) -> Option<ConnKey> {
        let vip = (*self.vip.lock())?;
        Some(ConnKey::new(id.client(), SocketAddrV4::new(vip, id.service_port())))
    }

    fn learn_vip(&self, local: SocketAddrV4) {
        let mut vip = self.vip.lock();
        if vip.is_none() {
            *vip = Some(*local.ip());
        }
    }

    /// Forget a connection and give back its node's load.
    fn forget(&self, shared: &Shared, id: ConnectionId) -> Option<HandedOff> {
        let mut gone = self.conns.lock().remove(&id)?;
        if let Some(a) = gone.assignment.take() {
            shared.dispatcher.release(a);
        }
        Some(gone)
    }
}

/// A node's answer to a HandOver.
enum Reply {
    Ready,
    Refused(String),
}

/// One worker's control channel to one node's agent.
pub struct NodeLink {
    node: NodeId,
    addr: SocketAddr,
    sender: RefCell<Option<Rc<tokio::sync::Mutex<ControlSender>>>>,
    waiting: RefCell<HashMap<ConnectionId, oneshot::Sender<Reply>>>,
}

impl NodeLink {
    pub fn is_up(&self) -> bool {
        self.sender.borrow().is_some()
    }

    async fn send(&self, message: &HandoffMessage) -> Result<(), String> {
        let sender = self.sender.borrow().clone().ok_or("no control channel to the node")?;
        let mut sender = sender.lock().await;
        sender.send(message).await.map_err(|e| e.to_string())
    }
}

/// The links of one worker, by node index.
pub type WorkerLinks = Vec<Rc<NodeLink>>;

/// Make the links of a worker and start their tasks (on the worker's `LocalSet`).
pub fn start_links(worker: &Rc<Worker>, shutdown: watch::Receiver<bool>) {
    let Some(links) = &worker.links else { return };
    for link in links {
        tokio::task::spawn_local(run_link(worker.clone(), link.clone(), shutdown.clone()));
    }
}

/// The links for `shared`'s nodes (none unless in handoff mode).
pub fn make_links(shared: &Shared) -> Option<WorkerLinks> {
    shared.handoff.as_ref()?;
    Some(
        shared
            .config
            .nodes
            .iter()
            .enumerate()
            .filter_map(|(i, n)| {
                Some(Rc::new(NodeLink {
                    node: NodeId(i as u32),
                    addr: n.handoff?,
                    sender: RefCell::new(None),
                    waiting: RefCell::new(HashMap::new()),
                }))
            })
            .collect(),
    )
}

/// Keep a control channel to the link's agent up: connect, say Hello, serve its messages;
/// on loss, fail what waits on it and reconnect.
async fn run_link(worker: Rc<Worker>, link: Rc<NodeLink>, mut shutdown: watch::Receiver<bool>) {
    let shared = worker.shared.clone();
    let Some(plane) = shared.handoff.as_ref() else { return };
    let config = ControlConfig::default();
    let peers: Vec<(NodeId, SocketAddr)> =
        shared.nodes.iter().enumerate().map(|(i, n)| (NodeId(i as u32), n.addr)).collect();
    let retry = Duration::from_millis(plane.settings.reconnect_ms);
    let mut warned = false;
    loop {
        let connected = tokio::select! {
            biased;
            _ = shutdown.changed() => return,
            c = locus_handoff::ControlChannel::connect_with(link.addr, &plane.key, config) => c,
        };
        let channel = match connected {
            Ok(c) => c,
            Err(e) => {
                if !warned {
                    tracing::warn!(node = %shared.nodes[link.node.index()].name, agent = %link.addr, "handoff: no control channel: {e}");
                    warned = true;
                }
                tokio::select! {
                    _ = shutdown.changed() => return,
                    () = tokio::time::sleep(retry) => continue,
                }
            }
        };
        warned = false;
        let (mut sender, mut receiver) = channel.into_split();
        let hello = HandoffMessage::Hello { id: ConnectionId(0), node: link.node, peers: peers.clone() };
        if let Err(e) = sender.send(&hello).await {
            tracing::warn!(agent = %link.addr, "handoff: Hello failed: {e}");
            continue;
        }
        tracing::debug!(agent = %link.addr, "handoff: control channel up");
        *link.sender.borrow_mut() = Some(Rc::new(tokio::sync::Mutex::new(sender)));
        plane.counters.channels_up.fetch_add(1, Relaxed);
        loop {
            let message = tokio::select! {
                biased;
                _ = shutdown.changed() => {
                    *link.sender.borrow_mut() = None;
                    plane.counters.channels_up.fetch_sub(1, Relaxed);
                    return;
                }
                m = receiver.recv() => m,
            };
            match message {
                Ok(m) => on_message(&worker, &link, m),
                Err(e) => {
                    tracing::warn!(agent = %link.addr, "handoff: control channel lost: {e}");
                    break;
                }
            }
        }
        *link.sender.borrow_mut() = None;
        plane.counters.channels_up.fetch_sub(1, Relaxed);
        for (_, waiter) in link.waiting.borrow_mut().drain() {
            let _ = waiter.send(Reply::Refused("control channel lost".into()));
        }
    }
}

fn on_message(worker: &Rc<Worker>, link: &Rc<NodeLink>, message: HandoffMessage) {
    let shared = &worker.shared;
    let Some(plane) = shared.handoff.as_ref() else { return };
    match message {
        HandoffMessage::Ready { id } => {
            if let Some(w) = link.waiting.borrow_mut().remove(&id) {
                let _ = w.send(Reply::Ready);
            }
        }
        HandoffMessage::Refused { id, reason } => {
            if let Some(w) = link.waiting.borrow_mut().remove(&id) {
                let _ = w.send(Reply::Refused(reason));
            }
        }
        HandoffMessage::Closed { id } => {
            plane.counters.closed.fetch_add(1, Relaxed);
            let key = match plane.forget(shared, id) {
                Some(gone) => Some(gone.key),
                // Handed off by an earlier switch process (or an l4 connection).
                None => plane.key_of(id),
            };
            if let Some(key) = key
                && plane.has_forwarder()
            {
                let shared = shared.clone();
                let linger = Duration::from_millis(plane.settings.close_linger_ms);
                tokio::task::spawn_local(async move {
                    tokio::time::sleep(linger).await;
                    // A connection on the same 4-tuple may have been handed off meanwhile.
                    if let Some(plane) = shared.handoff.as_ref()
                        && !plane.conns.lock().contains_key(&id)
                    {
                        plane.unforward(key);
                    }
                });
            }
        }
        HandoffMessage::Route { id, target, moves } => {
            tokio::task::spawn_local(answer_route(worker.clone(), link.clone(), id, target, moves));
        }
        HandoffMessage::Rehandoff { id, state } => {
            tokio::task::spawn_local(rehandoff(worker.clone(), link.node, id, state));
        }
        other => {
            tracing::debug!(agent = %link.addr, kind = other.kind_name(), "handoff: unexpected message ignored");
        }
    }
}

/// Answer a node's Route: the policy picks the request's node; if it is another one and the
/// connection `moves`, hold its packets (the asking node dumps it next) and remember where it
/// goes; if it does not move (back-end forwarding), the asking node fetches from that node
/// and nothing changes here but whose load the request counts on.
async fn answer_route(worker: Rc<Worker>, link: Rc<NodeLink>, id: ConnectionId, target: String, moves: bool) {
    let shared = worker.shared.clone();
    let Some(plane) = shared.handoff.as_ref() else { return };
    plane.counters.routes.fetch_add(1, Relaxed);
    let here = link.node;
    let previous = plane.conns.lock().get_mut(&id).and_then(|c| c.assignment.take());
    if let Some(p) = previous {
        shared.dispatcher.release(p);
    }
    let info = RequestInfo::get(&target);
    let chosen = match shared.dispatcher.acquire(&info, shared.config.limits.queue_timeout()).await {
        Ok(a) => Some(a),
        Err(e) => {
            tracing::debug!(%id, "handoff: route falls back to the asking node: {e}");
            None
        }
    };
    let mut node = chosen.as_ref().map_or(here, |a| a.node);
    let movable = node != here
        && worker.links.as_ref().is_some_and(|l| l.get(node.index()).is_some_and(|l| l.is_up()))
        && plane.can_steer_to(node);
    if node != here && moves && !movable {
        node = here;
    }
    {
        let mut conns = plane.conns.lock();
        let key = conns.get(&id).map(|c| c.key).or_else(|| plane.key_of(id));
        match (conns.get_mut(&id), key) {
            (Some(c), _) => {
                c.assignment = chosen.map(|a| a.detach());
                c.target = target;
            }
            (None, Some(key)) => {
                conns.insert(
                    id,
                    HandedOff { node: here, key, assignment: chosen.map(|a| a.detach()), next: None, target },
                );
            }
            (None, None) => node = here,
        }
    }
    if node != here && moves {
        let key = plane.conns.lock().get(&id).map(|c| c.key);
        match key.map(|k| plane.hold(k, node)) {
            Some(Ok(())) => {
                if let Some(c) = plane.conns.lock().get_mut(&id) {
                    c.next = Some(node);
                }
            }
            Some(Err(e)) => {
                tracing::warn!(%id, "handoff: cannot hold for a re-handoff, serving on the same node: {e}");
                node = here;
            }
            None => node = here,
        }
    }
    if let Err(e) = link.send(&HandoffMessage::RouteTo { id, node }).await {
        tracing::debug!(%id, "handoff: RouteTo not sent: {e}");
    }
}

/// A node gave a connection back to move it on: hand it to the node its Route was answered
/// with; if that fails, serve it here.
async fn rehandoff(worker: Rc<Worker>, from: NodeId, id: ConnectionId, state: TcpRepairState) {
    let shared = worker.shared.clone();
    let Some(plane) = shared.handoff.as_ref() else { return };
    let (next, key, target) = {
        let mut conns = plane.conns.lock();
        match conns.get_mut(&id) {
            Some(c) => (c.next.take(), c.key, c.target.clone()),
            None => (None, ConnKey::new(state.peer, state.local), String::new()),
        }
    };
    let result = match next {
        Some(node) => {
            let hint = HandoffHint { target, request_len: 0 };
            let moved = || {
                plane.counters.rehandoffs.fetch_add(1, Relaxed);
                if let Some(c) = plane.conns.lock().get_mut(&id) {
                    c.node = node;
                }
            };
            hand_over(&worker, node, id, key, state, hint, moved).await
        }
        None => Err((state, format!("Rehandoff from node {} without a Route answered elsewhere", from.0))),
    };
    if let Err((state, why)) = result {
        tracing::warn!(%id, "handoff: re-handoff failed, the switch serves the connection: {why}");
        plane.forget(&shared, id);
        match restore_here(plane, &state, key).await {
            Ok(stream) => {
                let peer = SocketAddr::V4(state.peer);
                shared.connections.fetch_add(1, Relaxed);
                serve_restored(worker.clone(), stream, peer, shared.shutdown_tx.subscribe()).await;
            }
            Err(e) => tracing::warn!(%id, "handoff: cannot restore the connection here: {e}"),
        }
    }
}

/// Hand a dumped connection (its packets held, pointing at `node`) to `node`: HandOver, wait
/// for Ready, let its packets through, Go.
/// `on_ready` runs once the node has the connection and before Go lets it answer the client,
/// so what the caller counts for a handoff is there before anything the client can see.
/// On refusal or failure the state comes back, for the switch to serve the connection.
pub async fn hand_over(
    worker: &Rc<Worker>,
    node: NodeId,
    id: ConnectionId,
    key: ConnKey,
    state: TcpRepairState,
    hint: HandoffHint,
    on_ready: impl FnOnce(),
) -> Result<(), (TcpRepairState, String)> {
    let shared = &worker.shared;
    let plane = shared.handoff.as_ref().expect("handoff mode");
    let Some(link) = worker.links.as_ref().and_then(|l| l.get(node.index())).cloned() else {
        return Err((state, "no link to the node".into()));
    };
    // The caller has put the connection's packets on hold, pointing at `node`.
    let (tx, rx) = oneshot::channel();
    link.waiting.borrow_mut().insert(id, tx);
    let message = HandoffMessage::HandOver { id, state, hint };
    let sent = link.send(&message).await;
    let HandoffMessage::HandOver { state, .. } = message else { unreachable!("built above") };
    if let Err(e) = sent {
        link.waiting.borrow_mut().remove(&id);
        plane.counters.failed.fetch_add(1, Relaxed);
        return Err((state, format!("HandOver not sent: {e}")));
    }
    let timeout = Duration::from_millis(plane.settings.ready_timeout_ms);
    match tokio::time::timeout(timeout, rx).await {
        Ok(Ok(Reply::Ready)) => {}
        Ok(Ok(Reply::Refused(reason))) => {
            plane.counters.refused.fetch_add(1, Relaxed);
            return Err((state, format!("node refused: {reason}")));
        }
        Ok(Err(_)) | Err(_) => {
            link.waiting.borrow_mut().remove(&id);
            plane.counters.failed.fetch_add(1, Relaxed);
            return Err((state, format!("no Ready within {} ms", timeout.as_millis())));
        }
    }
    on_ready();
    if let Err(e) = plane.forward(key) {
        // The entry vanished (the client reset and reused its port, or expiry): the node's
        // connection is dead anyway; Go lets the node find out and report Closed.
        tracing::debug!(%id, "handoff: forward failed after Ready: {e}");
    }
    if let Err(e) = link.send(&HandoffMessage::Go { id }).await {
        tracing::warn!(%id, "handoff: Go not sent: {e}");
    }
    Ok(())
}

/// Restore a dumped connection on the switch itself, stop forwarding its packets, and write
/// the part of its send queue that was never sent.
pub async fn restore_here(
    plane: &HandoffPlane,
    state: &TcpRepairState,
    key: ConnKey,
) -> io::Result<TcpStream> {
    let options = RestoreOptions { nonblocking: true, ..Default::default() };
    let restored = restore_connection(state, &options).map_err(io::Error::other);
    plane.unforward(key);
    let mut stream = TcpStream::from_std(restored?)?;
    let _ = stream.set_nodelay(true);
    if !state.unsent_part().is_empty() {
        stream.write_all(state.unsent_part()).await?;
    }
    plane.counters.served_here.fetch_add(1, Relaxed);
    Ok(stream)
}

/// Register a connection about to be handed off (before HandOver, so a Closed racing the
/// registration finds it).
pub fn register(
    plane: &HandoffPlane,
    id: ConnectionId,
    key: ConnKey,
    node: NodeId,
    assignment: DetachedAssignment,
    target: String,
) {
    plane.learn_vip(key.server());
    plane.conns.lock().insert(id, HandedOff { node, key, assignment: Some(assignment), next: None, target });
}

/// Undo `register` after a failed handoff (gives the node's load back).
pub fn unregister(shared: &Shared, id: ConnectionId) {
    if let Some(plane) = shared.handoff.as_ref() {
        plane.forget(shared, id);
    }
}

/// Start the plane's housekeeping on the control thread: expire idle entries, resolve MACs
/// still missing.
pub fn spawn_housekeeping(shared: Arc<Shared>) -> Option<tokio::task::JoinHandle<()>> {
    shared.handoff.as_ref()?;
    Some(tokio::spawn(async move {
        let lc = shared.config.mode == crate::Mode::L4 && shared.config.handoff.l4_selection == "lc";
        let mut tick = tokio::time::interval(Duration::from_secs(if lc { 1 } else { 5 }));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            // Map scans and ARP resolution block: keep them off the health checks' loop.
            let shared = shared.clone();
            let _ = tokio::task::spawn_blocking(move || {
                let plane = shared.handoff.as_ref().expect("checked");
                let expired = plane.expire();
                if expired > 0 {
                    tracing::debug!(expired, "handoff: idle forwarding entries deleted");
                }
                if plane.slots.lock().iter().any(Option::is_none) {
                    plane.resolve_slots(Duration::from_millis(200));
                }
                if shared.config.mode == crate::Mode::L4 && shared.config.handoff.l4_selection == "lc" {
                    plane.rebalance_least_connections(&shared.config.weights());
                }
            })
            .await;
        }
    }))
}
