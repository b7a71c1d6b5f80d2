//! What a connection's requests cost in the node's CPU model: `ConnectionCharge` charges
//! `conn_us` with a connection's first request, `request_us` with every request and `kb_us`
//! per KiB of the response body (queued, or still to stream), and waits for the charge
//! before the response is sent. Without a model it costs nothing.

use crate::context::NodeContext;
use crate::request_view::BodySource;

/// The CPU-model charging of one connection.
#[derive(Debug, Default)]
pub struct ConnectionCharge {
    /// The connection's own cost (`conn_us`) was charged.
    connection_charged: bool,
}

impl ConnectionCharge {
    /// Charge one request whose response has `queued_body` body bytes queued and `body`
    /// still to send, and wait until the model has served it (a shut-down model waives the
    /// charge).
    pub async fn charge(&mut self, node: &NodeContext, body: &BodySource, queued_body: u64) {
        let Some(model) = &node.cpu_model else { return };
        let first = !std::mem::replace(&mut self.connection_charged, true);
        let cost = model.request_cost(first, queued_body + body_to_stream(body));
        let _ = model.run(cost).await;
    }
}

/// Body bytes of a response that the connection streams after its queued head.
fn body_to_stream(body: &BodySource) -> u64 {
    match body {
        BodySource::Queued => 0,
        BodySource::Pages { len, .. } | BodySource::File { len, .. } => *len,
        BodySource::Origin(origin) => origin.leftover.len() as u64 + origin.remaining,
    }
}
