//! Each link's control channel task (connect, Hello, serve the agent's messages, reconnect)
//! and what the agents ask of the switch: Ready/Refused to the waiting handoff, Route
//! (answered by the policy, holding the connection's packets when it moves), Rehandoff (hand
//! it to the node the Route chose, or restore it here), Closed (release the node's load and
//! unforward a little later). Also the plane's periodic housekeeping.

use super::links::{NodeLink, Reply, WorkerLinks};
use super::plane::HandedOff;
use super::sequence::{NotTaken, hand_over, restore_here};
use crate::client_stream::ClientStream;
use crate::dispatch::DetachedAssignment;
use crate::mode::{L4Selection, Mode};
use crate::state::Shared;
use locus_bpf::ConnKey;
use locus_core::{NodeId, RequestInfo};
use locus_handoff::{ConnectionId, ControlConfig, HandoffHint, HandoffMessage, TcpRepairState};
use locus_io::ConnectionSlot;
use locus_policy::PolicyConfig;
use locus_tls::{SessionExport, TlsStream};
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;
use tokio::sync::watch;

/// What the control tasks need of a worker thread: its links, and a session for a connection
/// restored on the switch after a failed re-handoff. The worker implements it where its
/// sessions live, so that handoff never calls into the session module itself.
pub trait HandoffWorker {
    /// The worker's links (none outside handoff mode).
    fn links(&self) -> Option<&Rc<WorkerLinks>>;
    /// Start a session for a restored connection, holding `slot` (its place in
    /// `connections`) until it closes; `dispatch` is the dispatch of the request it will
    /// read first (the one its node asked a Route for).
    fn spawn_restored(
        self: Rc<Self>,
        stream: ClientStream,
        peer: SocketAddr,
        slot: ConnectionSlot,
        dispatch: Option<DetachedAssignment>,
    );
}

/// Starts a session for a connection restored on the switch (see
/// [`HandoffWorker::spawn_restored`]).
type ServeRestored = Rc<dyn Fn(ClientStream, SocketAddr, ConnectionSlot, Option<DetachedAssignment>)>;

/// Start the tasks of a worker's links (on the worker's `LocalSet`).
pub fn start_links<W: HandoffWorker + 'static>(worker: &Rc<W>, shutdown: watch::Receiver<bool>) {
    let Some(links) = worker.links().cloned() else { return };
    let owner = worker.clone();
    let serve: ServeRestored = Rc::new(move |stream, peer, slot, dispatch| {
        owner.clone().spawn_restored(stream, peer, slot, dispatch)
    });
    let start = {
        let (links, shutdown) = (links.clone(), shutdown.clone());
        move |link: Rc<NodeLink>| {
            tokio::task::spawn_local(run_link(links.clone(), link, serve.clone(), shutdown.clone()));
        }
    };
    let initial: Vec<Rc<NodeLink>> =
        (0..links.shared.nodes.len()).filter_map(|i| links.get(NodeId(i as u32))).collect();
    initial.into_iter().for_each(&start);
    // Links for the nodes reloads add, as they come.
    let (mut reloads, mut stop) = (links.shared.nodes_changed.subscribe(), shutdown);
    tokio::task::spawn_local(async move {
        loop {
            tokio::select! {
                _ = stop.changed() => return,
                changed = reloads.changed() => if changed.is_err() { return },
            }
            links.add_missing().into_iter().for_each(&start);
        }
    });
}

/// Keep a control channel to the link's agent up: connect, say Hello, serve its messages;
/// on loss, fail what waits on it and reconnect.
async fn run_link(
    links: Rc<WorkerLinks>,
    link: Rc<NodeLink>,
    serve: ServeRestored,
    mut shutdown: watch::Receiver<bool>,
) {
    let shared = links.shared.clone();
    let Some(plane) = shared.handoff.as_ref() else { return };
    let config = ControlConfig::default();
    let peers: Vec<(NodeId, SocketAddr)> =
        shared.nodes.all().iter().enumerate().map(|(i, n)| (NodeId(i as u32), n.addr)).collect();
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
                plane.counters.channel_failures.fetch_add(1, Relaxed);
                if !warned {
                    tracing::warn!(node = %shared.nodes.get(link.node).name, agent = %link.addr, "handoff: no control channel: {e}");
                    warned = true;
                }
                tokio::select! {
                    _ = shutdown.changed() => return,
                    () = tokio::time::sleep(retry) => {
                        if shared.nodes.get(link.node).is_retired() {
                            return;
                        }
                        continue;
                    }
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
                Ok(m) => on_message(&links, &link, &serve, m),
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

/// Act on one message from the link's agent.
fn on_message(links: &Rc<WorkerLinks>, link: &Rc<NodeLink>, serve: &ServeRestored, message: HandoffMessage) {
    let shared = &links.shared;
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
            let key = match plane.forget(&shared.dispatcher, id) {
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
            tokio::task::spawn_local(answer_route(links.clone(), link.clone(), id, target, moves));
        }
        HandoffMessage::Rehandoff { id, state, tls } => {
            tokio::task::spawn_local(rehandoff(links.clone(), serve.clone(), link.node, id, state, tls));
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
async fn answer_route(
    links: Rc<WorkerLinks>,
    link: Rc<NodeLink>,
    id: ConnectionId,
    target: String,
    moves: bool,
) {
    let shared = links.shared.clone();
    let Some(plane) = shared.handoff.as_ref() else { return };
    plane.counters.routes.fetch_add(1, Relaxed);
    let here = link.node;
    let previous = plane.conns.lock().get_mut(&id).and_then(|c| c.assignment.take());
    if let Some(p) = previous {
        shared.dispatcher.release(p);
    }
    // A Route carries the target only: no method (GET assumed) and no conditional date.
    let mut info = RequestInfo::get(&target);
    info.class = shared.classifier().classify(&target);
    let rtt = plane.conns.lock().get(&id).map_or(Duration::ZERO, |c| c.rtt);
    let chosen = match shared.dispatcher.acquire(&info, shared.config().limits.queue_timeout()).await {
        Ok(a) => Some(a),
        Err(e) => {
            tracing::debug!(%id, "handoff: route falls back to the asking node: {e}");
            None
        }
    };
    let mut node = chosen.as_ref().map_or(here, |a| a.node);
    let movable = node != here && links.is_up(node) && plane.can_steer_to(node);
    if node != here && moves && !movable {
        node = here;
    }
    {
        let mut conns = plane.conns.lock();
        let key = conns.get(&id).map(|c| c.key).or_else(|| plane.key_of(id));
        match (conns.get_mut(&id), key) {
            (Some(c), _) => {
                c.assignment = chosen.map(|a| a.detach());
                c.target = target.clone();
            }
            (None, Some(key)) => {
                let assignment = chosen.map(|a| a.detach());
                conns.insert(
                    id,
                    HandedOff { node: here, key, assignment, next: None, target: target.clone(), rtt },
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
    shared.dispatcher.observe(node, &info, rtt);
    if let Err(e) = link.send(&HandoffMessage::RouteTo { id, node }).await {
        tracing::debug!(%id, "handoff: RouteTo not sent: {e}");
    }
}

/// A node gave a connection back to move it on: hand it to the node its Route was answered
/// with; if that fails, restore it here and have the worker serve it (`serve`), counted in
/// `connections` whatever their number: it cannot be turned away.
async fn rehandoff(
    links: Rc<WorkerLinks>,
    serve: ServeRestored,
    from: NodeId,
    id: ConnectionId,
    state: TcpRepairState,
    tls: Option<Box<SessionExport>>,
) {
    let shared = links.shared.clone();
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
            hand_over(&links, node, id, key, state, hint, tls, moved).await
        }
        None => Err(NotTaken {
            state,
            tls,
            why: format!("Rehandoff from node {} without a Route answered elsewhere", from.0),
        }),
    };
    if let Err(NotTaken { state, tls, why }) = result {
        tracing::warn!(%id, "handoff: re-handoff failed, the switch serves the connection: {why}");
        let dispatch = plane.withdraw(id);
        let restored = restore_here(plane, &state, key).await.and_then(|tcp| match tls {
            None => Ok(ClientStream::Plain(tcp)),
            Some(session) => TlsStream::continued(tcp, *session)
                .map(|t| ClientStream::Tls(Box::new(t)))
                .map_err(std::io::Error::other),
        });
        match restored {
            Ok(stream) => {
                serve(stream, SocketAddr::V4(state.peer), shared.connections.claim_always(), dispatch)
            }
            Err(e) => {
                tracing::warn!(%id, "handoff: cannot restore the connection here: {e}");
                if let Some(d) = dispatch {
                    shared.dispatcher.release(d);
                }
            }
        }
    }
}

/// Start the plane's housekeeping on the control thread: expire idle entries, resolve MACs
/// still missing.
pub fn spawn_housekeeping(shared: Arc<Shared>) -> Option<tokio::task::JoinHandle<()>> {
    shared.handoff.as_ref()?;
    Some(tokio::spawn(async move {
        let config = shared.config();
        let lc = config.mode == Mode::L4 && config.handoff.l4_selection == L4Selection::Lc;
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
                if lc {
                    plane.rebalance_least_connections(&shared.config().weights());
                }
            })
            .await;
        }
    }))
}

/// l4 mode with a policy that computes per-node weights: every period of the policy's
/// estimate (CSLD's `period_ms`, the metric-fed WRR's poll period), rewrite the forwarder's
/// selection table from them (`HandoffPlane::rebalance_by_policy`). Without cloning agents
/// the policy learns of connections from the forwarder's entries; with them, of requests
/// from the nodes' Routes.
pub fn spawn_l4_policy(shared: Arc<Shared>) -> Option<tokio::task::JoinHandle<()>> {
    shared.handoff.as_ref()?;
    if shared.config().mode != Mode::L4 {
        return None;
    }
    let period = match shared.config().policy {
        PolicyConfig::Csld(p) => Duration::from_millis(p.period_ms),
        PolicyConfig::WrrMetrics { variant } => variant.period(),
        _ => return None,
    };
    let count_connections = shared.config().nodes.iter().all(|n| n.handoff.is_none());
    Some(tokio::spawn(async move {
        let mut tick = tokio::time::interval(period.max(Duration::from_millis(1)));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            let shared = shared.clone();
            // Map scans block: off the health checks' loop.
            let weighted = tokio::task::spawn_blocking(move || {
                let plane = shared.handoff.as_ref().expect("checked");
                plane.rebalance_by_policy(&shared.dispatcher, count_connections)
            })
            .await;
            if !matches!(weighted, Ok(true)) {
                return;
            }
        }
    }))
}
