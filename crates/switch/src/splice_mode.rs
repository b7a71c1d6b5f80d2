//! Splice mode's tunnel: route a connection's first request, send it to the node as received,
//! then join the client and node sockets in the kernel (`locus_io::tunnel`) until the
//! connection ends. It reaches nodes as the proxy exchange does (`node_connection`).

use crate::client::{Client, Next};
use crate::dispatch::Candidates;
use crate::node_connection::{node_connection, write_node};
use locus_http::RequestHead;
use locus_io::tunnel;
use std::sync::atomic::Ordering::Relaxed;
use tokio::net::TcpStream;

/// Serve the rest of the connection through a tunnel to the node `head` was dispatched to. The
/// node sees the client's own bytes (version, Connection, Expect), so HTTP/1.0, keep-alive
/// and 100-continue are end to end; the assignment (the node's load) lasts as long as the
/// tunnel. The connection always closes after.
pub async fn serve_tunnel(client: &mut Client, head: &RequestHead, mut candidates: Candidates<'_>) -> Next {
    let shared = client.worker.shared.clone();
    if client.stream.plain().is_none() {
        // The session proxies TLS clients in splice mode; this is never reached with one.
        return client.shed(head, "a tunnel carries cleartext only").await;
    }
    if !has_tunnel_pipes(client) {
        return client.shed(head, "no pipes for the tunnel").await;
    }
    let conn = match connect_and_send(client, head, &mut candidates).await {
        Ok(conn) => conn,
        Err(next) => return next,
    };
    let limits = &shared.config().limits;
    let t = limits.node_timeout();
    let sent = (client.buf.len() - head.head_start) as u64;
    let idle = limits.keepalive_timeout().max(t);
    let Some(socket) = client.stream.plain() else { return Next::Close };
    let result = tunnel(socket, &conn, &client.worker.pipes, idle).await;
    let (up, down) = match &result {
        Ok(b) => (b.client_to_node, b.node_to_client),
        Err(e) => {
            tracing::debug!(peer = %client.peer, "tunnel ended: {e}");
            (0, 0)
        }
    };
    shared.counters.bytes_to_nodes.fetch_add(sent + up, Relaxed);
    shared.counters.bytes_to_clients.fetch_add(down, Relaxed);
    shared.nodes.get(candidates.node()).bytes_from.fetch_add(down, Relaxed);
    client.log(head, 0, down);
    drop(candidates);
    Next::Close
}

/// Connect afresh to the request's candidates in turn and send them what the client sent;
/// `Err` carries the answer given when none took it.
async fn connect_and_send(
    client: &mut Client,
    head: &RequestHead,
    candidates: &mut Candidates<'_>,
) -> Result<TcpStream, Next> {
    let shared = client.worker.shared.clone();
    let t = shared.config().limits.node_timeout();
    loop {
        let node = candidates.node();
        let attempt = match node_connection(&client.worker, node, true, false).await {
            Ok((mut conn, _)) => {
                write_node(&mut conn, &client.buf[head.head_start..], t).await.map(|()| conn)
            }
            Err(f) => Err(f),
        };
        let failure = match attempt {
            Ok(conn) => {
                shared.nodes.get(node).requests.fetch_add(1, Relaxed);
                client.observe(node, head);
                return Ok(conn);
            }
            Err(failure) if failure.is_out_of_descriptors() => {
                return Err(client.shed(head, &failure.describe()).await);
            }
            Err(failure) => failure,
        };
        shared.node_failed(node, &failure.describe());
        if !candidates.may_move() {
            return Err(client.reject(head, 502, true).await);
        }
        shared.counters.retries.fetch_add(1, Relaxed);
        if let Err(e) = candidates.next(&client.request_info(head)).await {
            return Err(client.dispatch_failed(head, e).await);
        }
    }
}

/// Whether the worker's pool has the tunnel's two pipes, made now if need be, so that
/// running out of descriptors is a 503 before the node is involved.
fn has_tunnel_pipes(client: &Client) -> bool {
    let mut pipes = client.worker.pipes.borrow_mut();
    let (Ok(a), Ok(b)) = (pipes.take(), pipes.take()) else { return false };
    pipes.give(a);
    pipes.give(b);
    true
}
