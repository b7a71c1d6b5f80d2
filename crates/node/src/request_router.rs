//! `RequestRouter`: the per-connection hook of per-request routing (multiple handoff). A
//! connection that has one asks the switch, through the handoff agent, which node serves each
//! request before serving it; connections without one pay nothing.

use std::sync::Arc;

use locus_handoff::{ConnectionId, TcpRepairState};

use crate::handoff_agent::{HandoffAgent, RouteDecision};

/// Routing state of one connection the switch knows by `id`.
pub struct RequestRouter {
    agent: Arc<HandoffAgent>,
    id: ConnectionId,
    /// Requests still to serve without asking (the switch routed a handed-off
    /// connection's first request itself).
    unasked: u32,
    /// The switch knows this connection, so its end is reported with `Closed`.
    known_to_switch: bool,
}

impl RequestRouter {
    /// A connection handed over by the switch: its first request was routed already.
    pub fn handed_off(agent: Arc<HandoffAgent>, id: ConnectionId) -> RequestRouter {
        RequestRouter { agent, id, unasked: 1, known_to_switch: true }
    }

    /// A connection accepted by this node's own listener in l4 mode (socket cloning): every
    /// request is asked about, from the first. The switch learns of it with the first
    /// `Route`.
    pub fn cloned(agent: Arc<HandoffAgent>, id: ConnectionId) -> RequestRouter {
        RequestRouter { agent, id, unasked: 0, known_to_switch: false }
    }

    /// The switch's name for the connection.
    pub fn id(&self) -> ConnectionId {
        self.id
    }

    /// Called once per request: whether to ask the switch about it.
    pub fn should_ask(&mut self) -> bool {
        if self.unasked > 0 {
            self.unasked -= 1;
            return false;
        }
        true
    }

    /// Ask the switch where the request for `target` is served.
    pub async fn route(&mut self, target: &str) -> RouteDecision {
        if self.agent.has_channel() {
            self.known_to_switch = true;
        }
        self.agent.route(self.id, target).await
    }

    /// Hand the dumped connection back to the switch on `channel`; false if it could not be
    /// sent (the connection is lost).
    pub fn rehandoff(&self, state: TcpRepairState, channel: u64) -> bool {
        self.agent.rehandoff(self.id, state, channel)
    }

    /// The connection ended here: tell the switch, if it knows the connection.
    pub fn report_closed(&self) {
        if self.known_to_switch {
            self.agent.connection_closed(self.id);
        }
    }
}
