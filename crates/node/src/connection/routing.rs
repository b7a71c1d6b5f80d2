//! Per-request routing of a handed-off connection by the switch (`RequestRouter`): ask where
//! the request just parsed is served, then serve it here, fetch it from another node and relay
//! the answer, or dump the connection and hand it back to the switch.

use std::io;
use std::net::SocketAddr;

use locus_core::Method;
use locus_handoff::dump_connection;
use locus_http::{BodyKind, BodyTracker, RequestHead};
use tokio::io::AsyncReadExt;

use super::buffer_pool::ConnBuffers;
use super::{Close, Connection, ConnectionEnd, Step, Transport, invalid_data};
use crate::context::count;
use crate::handoff::agent::RouteDecision;
use crate::handoff::backend_forward::{PEER_IO_TIMEOUT, PeerResponse};
use crate::handoff::request_router::RequestRouter;
use crate::out_queue::OutQueue;
use crate::response::{Persistence, simple};

/// Dump the connection with `pending` in front of its receive queue (or, for a TLS session,
/// first in its plaintext) and hand it back to the switch. If that fails the connection is
/// closed here.
pub(super) fn hand_back(
    stream: Transport,
    router: Option<&RequestRouter>,
    channel: u64,
    pending: &[u8],
) -> ConnectionEnd {
    let Some(router) = router else { return ConnectionEnd::Closed };
    let id = router.id();
    let (stream, tls, pending) = match stream {
        Transport::Plain(s) => (s, None, pending),
        Transport::Tls(t) => match t.into_parts(pending) {
            Ok((s, session)) => (s, Some(Box::new(session)), &[][..]),
            Err(e) => {
                tracing::warn!(%id, error = %e, "rehandoff: the TLS session cannot move; closing the connection");
                return ConnectionEnd::Closed;
            }
        },
    };
    let socket = match stream.into_std() {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!(%id, error = %e, "rehandoff: cannot take the socket off the event loop");
            return ConnectionEnd::Closed;
        }
    };
    match dump_connection(socket, pending) {
        Ok(state) => {
            if router.rehandoff(state, tls, channel) {
                ConnectionEnd::HandedBack
            } else {
                ConnectionEnd::Closed
            }
        }
        Err(e) => {
            tracing::warn!(%id, error = %e, "rehandoff: dump failed; closing the connection");
            ConnectionEnd::Closed
        }
    }
}

/// A request that can be fetched from another node: a head alone (no body to carry along).
fn forwardable(head: &RequestHead) -> bool {
    head.body == BodyKind::Empty && matches!(head.method, Method::Get | Method::Head)
}

impl Connection<'_> {
    /// Serve the client request just parsed where the switch routes it: here, from node
    /// `peer`, or (a rehandoff) nowhere, the connection ending with what is unanswered.
    pub(super) async fn answer_client(&mut self, b: &mut ConnBuffers) -> Step {
        let decision = match self.route(b).await {
            Ok(decision) => decision,
            Err(_) => return Step::End(Close::Now),
        };
        let served = match decision {
            RouteDecision::Local => self.handle(b).await,
            RouteDecision::Forward(peer) if forwardable(&b.head) => self.forward(b, peer).await,
            RouteDecision::Forward(_) => self.handle(b).await,
            RouteDecision::Rehandoff { channel } => {
                return Step::End(Close::Rehandoff { channel, pending: b.read[b.start..b.end].to_vec() });
            }
        };
        match served {
            Ok(true) => Step::Answered,
            Ok(false) => Step::End(self.close_after_flush(&mut b.out).await),
            Err(_) => Step::End(Close::Now),
        }
    }

    /// Where the switch wants the request just parsed served (`Local` without a router, or
    /// for a request the router does not ask about). Responses already queued are written
    /// first: they must not wait for the answer, and a handed-back connection must carry them.
    async fn route(&mut self, b: &mut ConnBuffers) -> io::Result<RouteDecision> {
        let target = b.head.target_str(&b.read[b.start..b.end]);
        if !self.router.as_mut().is_some_and(|r| r.should_ask(target)) {
            return Ok(RouteDecision::Local);
        }
        self.flush(&mut b.out).await?;
        let Some(router) = self.router.as_mut() else { return Ok(RouteDecision::Local) };
        Ok(router.route(b.head.target_str(&b.read[b.start..b.end])).await)
    }

    /// Fetch the request just parsed (a head without a body) from node `peer` and relay its
    /// response as it comes. Ok(false): close afterwards.
    async fn forward(&mut self, b: &mut ConnBuffers, peer: SocketAddr) -> io::Result<bool> {
        let w = self.w;
        let counters = w.counters();
        counters.request_started();
        count(&w.node.metrics.backend_forwards);
        let ConnBuffers { read, start, end, head, out, .. } = b;
        let head_len = head.head_len;
        let head_only = head.method == Method::Head;
        let keep = head.keep_alive && !w.node.is_shutting_down();
        let mut response =
            match w.peer_pool.fetch_head(peer, &read[*start..*start + head_len], head_only).await {
                Ok(r) => r,
                Err(e) => {
                    tracing::warn!(%peer, error = %e, "back-end forwarding failed; answering 502");
                    simple(out, &w.node.node_headers, 502, Persistence::Close, head_only, b"");
                    counters.request_finished(502);
                    *start += head_len;
                    return Ok(false);
                }
            };
        let status = response.head.status;
        let relayed = self.relay_peer_body(&mut response, out).await;
        counters.request_finished(if relayed.is_ok() { status } else { 502 });
        let reusable = relayed?;
        let peer_keeps = response.head.keep_alive && reusable;
        if peer_keeps {
            w.peer_pool.put(peer, response.stream);
        }
        *start += head_len;
        if *start == *end {
            *start = 0;
            *end = 0;
        }
        Ok(keep && peer_keeps)
    }

    /// Queue the peer's response head and relay its body (flushing as it comes); Ok(true)
    /// when the body ended exactly (the peer connection could serve another request).
    async fn relay_peer_body(&mut self, response: &mut PeerResponse, out: &mut OutQueue) -> io::Result<bool> {
        let head_len = response.head.head_len;
        out.extend(&response.buf[..head_len]);
        let mut tracker = BodyTracker::new(response.head.body);
        let (mut from, mut to) = (head_len, response.filled);
        let mut exact = true;
        loop {
            if to > from {
                let progress = tracker.advance(&response.buf[from..to]).map_err(invalid_data)?;
                out.extend(&response.buf[from..from + progress.consumed]);
                if progress.done && from + progress.consumed < to {
                    exact = false;
                }
            }
            if tracker.is_done() {
                break;
            }
            self.flush(out).await?;
            let read = tokio::time::timeout(PEER_IO_TIMEOUT, response.stream.read(&mut response.buf)).await;
            let n = read.map_err(|_| io::Error::from(io::ErrorKind::TimedOut))??;
            if n == 0 {
                tracker.eof().map_err(invalid_data)?;
                exact = false;
                break;
            }
            (from, to) = (0, n);
        }
        Ok(exact && !tracker.is_until_close())
    }
}
