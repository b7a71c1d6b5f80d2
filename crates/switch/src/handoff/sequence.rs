//! The switch side of moving a connection to a node: hold its packets, dump it (with the
//! bytes read put back), HandOver, wait for Ready, forward, Go; and when the node refuses or
//! the handoff fails, restore the connection on the switch. `hand_off` runs it for a
//! session's first request and says how it ended; re-handoffs reuse `hand_over`. A TLS
//! session taken over from rustls travels in the HandOver, its request in its plaintext.

use super::links::{Reply, WorkerLinks};
use super::plane::HandoffPlane;
use crate::dispatch::{Candidates, DetachedAssignment};
use locus_bpf::ConnKey;
use locus_core::{NodeId, RequestInfo};
use locus_handoff::{
    ConnectionId, HandoffHint, HandoffMessage, RestoreOptions, TcpRepairState, disconnect_dumped,
    dump_connection_in_place, restore_connection,
};
use locus_tls::SessionExport;
use std::io;
use std::net::{SocketAddr, SocketAddrV4};
use std::os::fd::AsFd;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio::sync::oneshot;

/// How a session's handoff ended.
pub enum HandoffOutcome<'d> {
    /// Nothing was done (no channel to the node, no MAC, hold or dump refused): the
    /// connection is as it was; serve the request by proxy, with the request's dispatch
    /// given back (the policy is not asked twice for one request).
    NotTried(Candidates<'d>),
    /// The node has the connection; the session ends (its dumped descriptor closes silently).
    HandedOff,
    /// The node refused or the handoff failed, and the connection was restored on the switch
    /// as this socket (its read bytes went back to the client's side of the dump): serve it
    /// here from now on, by proxy, never handed off again. The request's dispatch comes back
    /// with it, for the request read again from the socket.
    Restored(TcpStream, Option<DetachedAssignment>),
    /// Refused, and the connection could not be restored: the session ends.
    Lost,
}

/// A client connection's two IPv4 ends (handoff moves IPv4 connections only).
#[derive(Clone, Copy)]
pub struct ConnectionAddrs {
    client: SocketAddrV4,
    local: SocketAddrV4,
}

impl ConnectionAddrs {
    /// The ends of `stream` (from `peer`), when both are IPv4.
    pub fn of(stream: &TcpStream, peer: SocketAddr) -> Option<ConnectionAddrs> {
        match (peer, stream.local_addr()) {
            (SocketAddr::V4(client), Ok(SocketAddr::V4(local))) => Some(ConnectionAddrs { client, local }),
            _ => None,
        }
    }
}

/// A handoff a node did not take: the dumped state and TLS session come back, for the switch
/// to serve the connection, with why.
pub(super) struct NotTaken {
    pub(super) state: TcpRepairState,
    pub(super) tls: Option<Box<SessionExport>>,
    pub(super) why: String,
}

/// What moves with a connection besides its TCP state: the bytes the switch read from it,
/// in cleartext (put back in front of its receive queue), or its TLS session (the request in
/// its plaintext; nothing is put back).
pub enum Payload<'r> {
    Read(&'r [u8]),
    Tls(Box<SessionExport>),
}

/// Move the connection `stream` (with `payload`, the request `req` first; its client
/// round-trip time `rtt`) to the first of the request's `candidates`: hold its packets, dump
/// it with what was read put back, HandOver, Ready, forward, Go. A node's refusal restores it
/// here. The policy hears of the request (`observe`) once the node has the connection.
pub async fn hand_off<'d>(
    links: &WorkerLinks,
    stream: &TcpStream,
    addrs: ConnectionAddrs,
    payload: Payload<'_>,
    req: &RequestInfo<'_>,
    rtt: Duration,
    candidates: Candidates<'d>,
) -> HandoffOutcome<'d> {
    let shared = &links.shared;
    let Some(plane) = shared.handoff.as_ref() else { return HandoffOutcome::NotTried(candidates) };
    let node = candidates.node();
    if !links.is_up(node) || !plane.can_steer_to(node) {
        return HandoffOutcome::NotTried(candidates);
    }
    let peer = SocketAddr::V4(addrs.client);
    let key = ConnKey::new(addrs.client, addrs.local);
    let id = ConnectionId::from_tuple(addrs.client, addrs.local.port());
    let target = req.target.to_string();
    let (read, tls) = match payload {
        Payload::Read(read) => (read, None),
        Payload::Tls(session) => (&[][..], Some(session)),
    };
    let encrypted = tls.is_some();
    let hint = HandoffHint { target: target.clone(), request_len: read.len() as u32 };
    // Hold before the dump: from here the client's packets wait (it retransmits).
    if let Err(e) = plane.hold(key, node) {
        tracing::debug!(%peer, "handoff: cannot hold, proxying: {e}");
        return HandoffOutcome::NotTried(candidates);
    }
    let Some(state) = dump(plane, stream, read, key, peer) else {
        return HandoffOutcome::NotTried(candidates);
    };
    plane.register(id, key, node, candidates.detach(), target, rtt);
    let handed = || {
        plane.counters.handoffs.fetch_add(1, Relaxed);
        if encrypted {
            plane.counters.tls_handoffs.fetch_add(1, Relaxed);
        }
        shared.nodes.get(node).requests.fetch_add(1, Relaxed);
        shared.dispatcher.observe(node, req, rtt);
    };
    let Err(NotTaken { state, why, .. }) = hand_over(links, node, id, key, state, hint, tls, handed).await
    else {
        return HandoffOutcome::HandedOff;
    };
    let dispatch = plane.withdraw(id);
    tracing::info!(%peer, node = %shared.nodes.get(node).name, "handoff not taken, the switch serves the connection: {why}");
    match restore_here(plane, &state, key).await {
        Ok(stream) => HandoffOutcome::Restored(stream, dispatch),
        Err(e) => {
            tracing::warn!(%peer, "handoff: cannot restore the connection here: {e}");
            if let Some(d) = dispatch {
                shared.dispatcher.release(d);
            }
            HandoffOutcome::Lost
        }
    }
}

/// Dump the held connection `stream` with `read` put back, and disconnect the dumped socket;
/// `None` (the connection resumed and forwarding undone) when either fails.
fn dump(
    plane: &HandoffPlane,
    stream: &TcpStream,
    read: &[u8],
    key: ConnKey,
    peer: SocketAddr,
) -> Option<TcpRepairState> {
    let state = match dump_connection_in_place(stream.as_fd(), read) {
        Ok(state) => state,
        Err(e) => {
            plane.unforward(key);
            plane.counters.failed.fetch_add(1, Relaxed);
            tracing::warn!(%peer, "handoff: dump failed, proxying: {e}");
            return None;
        }
    };
    if let Err(e) = disconnect_dumped(stream.as_fd()) {
        let _ = locus_handoff::resume_connection(stream.as_fd());
        plane.unforward(key);
        plane.counters.failed.fetch_add(1, Relaxed);
        tracing::warn!(%peer, "handoff: disconnect failed, proxying: {e}");
        return None;
    }
    Some(state)
}

/// Hand a dumped connection (its packets held, pointing at `node`) to `node`: HandOver, wait
/// for Ready, let its packets through, Go.
/// `on_ready` runs once the node has the connection and before Go lets it answer the client,
/// so what the caller counts for a handoff is there before anything the client can see.
/// On refusal or failure the state (and TLS session) comes back, for the switch to serve the
/// connection.
#[expect(clippy::too_many_arguments, reason = "one handoff's parts, each used once")]
pub(super) async fn hand_over(
    links: &WorkerLinks,
    node: NodeId,
    id: ConnectionId,
    key: ConnKey,
    state: TcpRepairState,
    hint: HandoffHint,
    tls: Option<Box<SessionExport>>,
    on_ready: impl FnOnce(),
) -> Result<(), NotTaken> {
    let plane = links.shared.handoff.as_ref().expect("handoff mode");
    let Some(link) = links.get(node) else {
        return Err(NotTaken { state, tls, why: "no link to the node".into() });
    };
    // The caller has put the connection's packets on hold, pointing at `node`.
    let (tx, rx) = oneshot::channel();
    link.waiting.borrow_mut().insert(id, tx);
    let message = HandoffMessage::HandOver { id, state, hint, tls };
    let sent = link.send(&message).await;
    let HandoffMessage::HandOver { state, tls, .. } = message else { unreachable!("built above") };
    let not_taken = |why: String| NotTaken { state, tls, why };
    if let Err(e) = sent {
        link.waiting.borrow_mut().remove(&id);
        plane.counters.failed.fetch_add(1, Relaxed);
        return Err(not_taken(format!("HandOver not sent: {e}")));
    }
    let timeout = Duration::from_millis(plane.settings.ready_timeout_ms);
    match tokio::time::timeout(timeout, rx).await {
        Ok(Ok(Reply::Ready)) => {}
        Ok(Ok(Reply::Refused(reason))) => {
            plane.counters.refused.fetch_add(1, Relaxed);
            return Err(not_taken(format!("node refused: {reason}")));
        }
        Ok(Err(_)) | Err(_) => {
            link.waiting.borrow_mut().remove(&id);
            plane.counters.failed.fetch_add(1, Relaxed);
            return Err(not_taken(format!("no Ready within {} ms", timeout.as_millis())));
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
pub(super) async fn restore_here(
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
