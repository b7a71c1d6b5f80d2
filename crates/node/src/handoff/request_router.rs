//! `RequestRouter`: the per-connection hook of per-request routing (multiple handoff). A
//! connection that has one asks the switch, through the handoff agent, which node serves each
//! request before serving it; connections without one pay nothing.

use std::sync::Arc;

use locus_handoff::{ConnectionId, TcpRepairState};
use locus_tls::SessionExport;

use crate::handoff::agent::{HandoffAgent, RouteDecision};

/// Routing state of one connection the switch knows by `id`.
pub struct RequestRouter {
    agent: Arc<HandoffAgent>,
    id: ConnectionId,
    /// Requests still to serve without asking (the switch routed a handed-off
    /// connection's first request itself).
    unasked: u32,
    /// The switch knows this connection, so its end is reported with `Closed`.
    known_to_switch: bool,
    /// Target of the last request the switch placed on this node for this connection: the
    /// policy maps a target to its node, so a request for the same target again is served
    /// here without asking (a keep-alive client polling one resource pays no control round
    /// trip per request; the node's load stays counted by the switch for the connection).
    local_target: Option<Box<str>>,
}

impl RequestRouter {
    /// A connection handed over by the switch: its first request was routed already.
    pub fn handed_off(agent: Arc<HandoffAgent>, id: ConnectionId) -> RequestRouter {
        RequestRouter { agent, id, unasked: 1, known_to_switch: true, local_target: None }
    }

    /// A connection accepted by this node's own listener in l4 mode (socket cloning): every
    /// request is asked about, from the first. The switch learns of it with the first
    /// `Route`.
    pub fn cloned(agent: Arc<HandoffAgent>, id: ConnectionId) -> RequestRouter {
        RequestRouter { agent, id, unasked: 0, known_to_switch: false, local_target: None }
    }

    /// The switch's name for the connection.
    pub fn id(&self) -> ConnectionId {
        self.id
    }

    /// Called once per request for `target`: whether to ask the switch about it.
    pub fn should_ask(&mut self, target: &str) -> bool {
        if self.unasked > 0 {
            self.unasked -= 1;
            self.local_target = Some(target.into());
            return false;
        }
        self.local_target.as_deref() != Some(target)
    }

    /// Ask the switch where the request for `target` is served.
    pub async fn route(&mut self, target: &str) -> RouteDecision {
        if self.agent.has_channel() {
            self.known_to_switch = true;
        }
        let decision = self.agent.route(self.id, target).await;
        self.local_target = matches!(decision, RouteDecision::Local).then(|| target.into());
        decision
    }

    /// Hand the dumped connection (and its TLS session, if it has one) back to the switch on
    /// `channel`; false if it could not be sent (the connection is lost).
    pub fn rehandoff(&self, state: TcpRepairState, tls: Option<Box<SessionExport>>, channel: u64) -> bool {
        self.agent.rehandoff(self.id, state, tls, channel)
    }

    /// The connection ended here: tell the switch, if it knows the connection.
    pub fn report_closed(&self) {
        if self.known_to_switch {
            self.agent.connection_closed(self.id);
        }
    }
}
