//! Proxy mode's exchange with a node, for one request: take a pooled node connection (probed
//! when the request must not be sent twice) or connect, send the rewritten request head and
//! stream the body, relay the response back (interim responses, HTTP/1.0 de-chunking, large
//! bodies spliced in the kernel), and walk the request's `Candidates` when a node fails
//! before any response byte.

use crate::client::{Client, Next};
use crate::client_stream::ClientStream;
use crate::dispatch::Candidates;
use crate::forward::{BodyRelay, write_request_head, write_response_head};
use crate::node_connection::{NodeFailure, node_connection, write_node};
use crate::state::Shared;
use locus_core::{Method, NodeId};
use locus_http::{BodyError, BodyKind, BodyTracker, RequestHead, Version, parse_response};
use locus_io::{Pipe, mark_read_drained, splice_exact};
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::timeout;

enum ExchangeError {
    /// Nothing was sent to the client yet and the node gave no response.
    BeforeResponse { failure: NodeFailure, body_sent: bool },
    /// The node's response head was unusable (nothing sent to the client yet).
    BadResponse,
    /// Failed after the response started flowing to the client.
    Midstream,
    /// The client went away.
    ClientGone,
    /// The client's request body broke its framing (nothing sent to the client yet).
    ClientBody(BodyError),
}

struct Exchanged {
    status: u16,
    body_bytes: u64,
    node_reusable: bool,
    client_keep_alive: bool,
    consumed: usize,
}

/// A node failed before any response byte reached the client; the request may go on.
struct NodeFault {
    /// The connection was a reused pooled one the node had closed (worth one more, fresh).
    stale: bool,
    /// Part of the request body was sent: a final 502 closes the connection.
    close: bool,
}

/// A response body on its way to the client.
struct ResponseBody {
    tracker: BodyTracker,
    /// HTTP/1.0 client, chunked response: the body goes out de-chunked, until close.
    dechunk: bool,
    /// The node sent bytes past the response (its connection cannot be reused).
    extra: bool,
    /// Body bytes sent to the client.
    body_bytes: u64,
    /// Bytes read from the node.
    total: u64,
    status: u16,
    node_keep_alive: bool,
    client_keep_alive: bool,
}

/// Answer `Expect: 100-continue` here (the expectation is stripped towards the node);
/// `false` when the client could not be written to.
pub async fn answer_expectation(client: &mut Client, head: &RequestHead) -> bool {
    if !head.expect_continue || head.body == BodyKind::Empty {
        return true;
    }
    let t = client.worker.shared.config().limits.node_timeout();
    write_client(&mut client.stream, b"HTTP/1.1 100 Continue\r\n\r\n", t).await.is_ok()
}

/// Proxy one request already dispatched (`candidates`, its expectation answered): exchange it
/// with its node, and move on along its candidates when a node fails (`Candidates` holds the
/// retry rules).
pub async fn serve_request(client: &mut Client, head: &RequestHead, mut candidates: Candidates<'_>) -> Next {
    let shared = client.worker.shared.clone();
    let mut relay = client.worker.relay_buffers.borrow_mut().take();
    let next = walk(client, &shared, head, &mut candidates, &mut relay).await;
    drop(candidates);
    client.worker.relay_buffers.borrow_mut().give(relay);
    next
}

/// Try the request's candidates in turn until one answers or none may be tried.
async fn walk(
    client: &mut Client,
    shared: &Shared,
    head: &RequestHead,
    candidates: &mut Candidates<'_>,
    relay: &mut Vec<u8>,
) -> Next {
    let mut fresh = false;
    loop {
        let node = candidates.node();
        let fault = match attempt(client, shared, node, head, fresh, relay).await {
            Ok(next) => return next,
            Err(fault) => fault,
        };
        if fault.stale && candidates.reconnect() {
            // A pooled connection the node had already closed: try a fresh one.
            fresh = true;
            continue;
        }
        if !candidates.may_move() {
            return client.reject(head, 502, fault.close).await;
        }
        shared.counters.retries.fetch_add(1, Relaxed);
        if let Err(e) = candidates.next(&client.request_info(head)).await {
            return client.dispatch_failed(head, e).await;
        }
        fresh = false;
    }
}

/// One try of `node` (over a pooled connection unless `fresh`): `Ok` with the answer
/// given (the response, or an error the switch answered), `Err` when the node failed
/// before any response byte and the request may go elsewhere.
async fn attempt(
    client: &mut Client,
    shared: &Shared,
    node: NodeId,
    head: &RequestHead,
    fresh: bool,
    relay: &mut Vec<u8>,
) -> Result<Next, NodeFault> {
    let (mut conn, reused) =
        match node_connection(&client.worker, node, fresh, head.method.is_idempotent()).await {
            Ok(c) => c,
            Err(failure) if failure.is_out_of_descriptors() => {
                return Ok(client.shed(head, &failure.describe()).await);
            }
            Err(failure) => {
                shared.node_failed(node, &failure.describe());
                return Err(NodeFault { stale: false, close: false });
            }
        };
    shared.nodes.get(node).requests.fetch_add(1, Relaxed);
    match exchange(client, &mut conn, node, head, relay).await {
        Ok(done) => {
            if done.node_reusable {
                let generation = shared.nodes.get(node).generation.load(Relaxed);
                client.worker.pool.borrow_mut().put(node.index(), conn, generation, Instant::now());
            }
            shared.counters.response(done.status);
            client.log(head, done.status, done.body_bytes);
            Ok(if done.client_keep_alive { Next::Continue(done.consumed) } else { Next::Close })
        }
        Err(ExchangeError::BeforeResponse { failure, body_sent }) => {
            drop(conn);
            let stale = failure.is_stale(reused);
            if matches!(failure, NodeFailure::Timeout) {
                shared.counters.node_timeouts.fetch_add(1, Relaxed);
                return Ok(client.reject(head, 504, body_sent).await);
            }
            if !reused {
                shared.node_failed(node, &failure.describe());
            }
            Err(NodeFault { stale, close: body_sent })
        }
        Err(ExchangeError::BadResponse) => {
            shared.counters.bad_responses.fetch_add(1, Relaxed);
            tracing::warn!(node = %shared.nodes.get(node).name, "malformed response from node");
            Ok(client.reject(head, 502, true).await)
        }
        Err(ExchangeError::ClientBody(e)) => {
            shared.counters.client_errors.fetch_add(1, Relaxed);
            tracing::debug!(peer = %client.peer, "bad request body: {e}");
            Ok(client.reject(head, 400, true).await)
        }
        Err(ExchangeError::Midstream) | Err(ExchangeError::ClientGone) => Ok(Next::Close),
    }
}

async fn exchange(
    client: &mut Client,
    conn: &mut TcpStream,
    node: NodeId,
    head: &RequestHead,
    relay: &mut Vec<u8>,
) -> Result<Exchanged, ExchangeError> {
    let consumed = send_request(client, conn, node, head).await?;
    client.observe(node, head);
    let mut done = relay_response(client, conn, node, head, relay).await?;
    done.consumed = consumed;
    Ok(done)
}

/// Send the rewritten head and the request body; returns the bytes of `buf` consumed.
async fn send_request(
    client: &mut Client,
    conn: &mut TcpStream,
    node: NodeId,
    head: &RequestHead,
) -> Result<usize, ExchangeError> {
    let shared = client.worker.shared.clone();
    let config = shared.config();
    let t = config.limits.node_timeout();
    if client.out.capacity() == 0 {
        client.out = client.worker.read_buffers.borrow_mut().take();
    }
    client.out.clear();
    let client_ip = config.forwarded_for.then(|| client.peer.ip());
    let proto = config.forwarded_proto.then(|| client.stream.scheme());
    write_request_head(
        &mut client.out,
        head,
        &client.buf,
        client_ip,
        proto,
        &shared.nodes.get(node).host_header,
    );
    let start = head.head_len;
    let mut tracker = BodyTracker::new(head.body);
    let first = tracker.advance(&client.buf[start..]).map_err(ExchangeError::ClientBody)?;
    client.out.extend_from_slice(&client.buf[start..start + first.consumed]);
    let body_sent = first.consumed > 0;
    let sent = client.out.len();
    write_node(conn, &client.out, t)
        .await
        .map_err(|failure| ExchangeError::BeforeResponse { failure, body_sent })?;
    let mut end = start + first.consumed;
    let mut total = sent as u64;
    while !tracker.is_done() {
        client.buf.truncate(start);
        let n = match timeout(t, client.read()).await {
            Ok(Ok(n)) => n,
            _ => return Err(ExchangeError::ClientGone),
        };
        if n == 0 {
            return Err(ExchangeError::ClientGone);
        }
        let p = tracker.advance(&client.buf[start..]).map_err(ExchangeError::ClientBody)?;
        write_node(conn, &client.buf[start..start + p.consumed], t)
            .await
            .map_err(|failure| ExchangeError::BeforeResponse { failure, body_sent: true })?;
        total += p.consumed as u64;
        end = start + p.consumed;
    }
    shared.counters.bytes_to_nodes.fetch_add(total, Relaxed);
    Ok(end)
}

/// Relay the node's response to the client: head, body start, then the rest of the body.
async fn relay_response(
    client: &mut Client,
    conn: &mut TcpStream,
    node: NodeId,
    head: &RequestHead,
    relay: &mut Vec<u8>,
) -> Result<Exchanged, ExchangeError> {
    let shared = client.worker.shared.clone();
    read_response_head(client, conn, head, relay).await?;
    let mut body = relay_response_start(client, &shared, head, relay).await?;
    relay_response_body(client, conn, &mut body, relay).await?;
    shared.nodes.get(node).bytes_from.fetch_add(body.total, Relaxed);
    shared.counters.bytes_to_clients.fetch_add(body.body_bytes, Relaxed);
    Ok(Exchanged {
        status: body.status,
        body_bytes: body.body_bytes,
        node_reusable: body.node_keep_alive && !body.extra && body.tracker.is_done(),
        client_keep_alive: body.client_keep_alive,
        consumed: 0,
    })
}

/// Read into `relay` until a final (non-1xx) response head is complete in `client.resp`,
/// passing interim responses on to an HTTP/1.1 client.
async fn read_response_head(
    client: &mut Client,
    conn: &mut TcpStream,
    head: &RequestHead,
    relay: &mut Vec<u8>,
) -> Result<(), ExchangeError> {
    let limits = &client.worker.shared.config().limits;
    let t = limits.node_timeout();
    let max_head = relay.capacity();
    let is_head = head.method == Method::Head;
    let splice_min = limits.splice_min_bytes;
    // With splicing on, read only the start of the response into user space so that
    // the bulk of a large body can move in the kernel.
    let first_read = if splice_min > 0 { (splice_min as usize).clamp(4096, max_head) } else { max_head };
    let body_sent = head.body != BodyKind::Empty;
    let before_response = |failure| ExchangeError::BeforeResponse { failure, body_sent };
    relay.clear();
    loop {
        let complete = !relay.is_empty()
            && parse_response(relay, max_head, is_head, &mut client.resp)
                .map_err(|_| ExchangeError::BadResponse)?;
        if complete {
            if !client.resp.is_interim() {
                return Ok(());
            }
            let n = client.resp.head_len;
            if head.version == Version::Http11 {
                write_client(&mut client.stream, &relay[..n], t).await?;
            }
            relay.drain(..n);
            continue;
        }
        if relay.len() >= max_head {
            return Err(ExchangeError::BadResponse);
        }
        let room = first_read.saturating_sub(relay.len()).max(4096);
        let mut limited = bytes::BufMut::limit(&mut *relay, room);
        match timeout(t, conn.read_buf(&mut limited)).await {
            Err(_) => return Err(before_response(NodeFailure::Timeout)),
            Ok(Err(e)) => return Err(before_response(NodeFailure::Io(e))),
            Ok(Ok(0)) if relay.is_empty() => return Err(before_response(NodeFailure::Closed)),
            Ok(Ok(0)) => return Err(ExchangeError::BadResponse),
            Ok(Ok(_)) => {}
        }
    }
}

/// Send the response head (as is, or rewritten for the client) and the body bytes read
/// with it; returns the body's state for the rest.
async fn relay_response_start(
    client: &mut Client,
    shared: &Shared,
    head: &RequestHead,
    relay: &[u8],
) -> Result<ResponseBody, ExchangeError> {
    let t = shared.config().limits.node_timeout();
    let resp = &client.resp;
    if resp.status == 101 {
        // The switch never forwards Upgrade, so a node switching protocols is broken.
        return Err(ExchangeError::BadResponse);
    }
    let dechunk = resp.body == BodyKind::Chunked && head.version == Version::Http10;
    let client_keep_alive =
        head.keep_alive && !shared.is_shutting_down() && resp.body != BodyKind::UntilClose && !dechunk;
    let passthrough = client_keep_alive
        && head.version == Version::Http11
        && resp.version == Version::Http11
        && !resp.hop_by_hop;
    let mut body = ResponseBody {
        tracker: BodyTracker::new(resp.body),
        dechunk,
        extra: false,
        body_bytes: 0,
        total: relay.len() as u64,
        status: resp.status,
        node_keep_alive: resp.keep_alive,
        client_keep_alive,
    };
    let body_start = resp.head_len;
    if passthrough {
        let p = body.tracker.advance(&relay[body_start..]).map_err(|_| ExchangeError::BadResponse)?;
        body.extra |= body_start + p.consumed < relay.len();
        body.body_bytes = p.consumed as u64;
        write_client(&mut client.stream, &relay[..body_start + p.consumed], t).await?;
        return Ok(body);
    }
    let mode = if dechunk { BodyRelay::Dechunk } else { BodyRelay::AsIs };
    client.out.clear();
    write_response_head(&mut client.out, resp, relay, head.version, client_keep_alive, mode);
    let out = &mut client.out;
    let head_bytes = out.len();
    let p = body
        .tracker
        .advance_with(&relay[body_start..], |d| {
            if dechunk {
                out.extend_from_slice(d)
            }
        })
        .map_err(|_| ExchangeError::BadResponse)?;
    if !dechunk {
        out.extend_from_slice(&relay[body_start..body_start + p.consumed]);
    }
    body.extra |= body_start + p.consumed < relay.len();
    body.body_bytes = (out.len() - head_bytes) as u64;
    write_client(&mut client.stream, &client.out, t).await?;
    Ok(body)
}

/// Relay the rest of the body: large delimited runs spliced in the kernel when a pipe is
/// at hand, the rest through `relay` (de-chunked for an HTTP/1.0 client).
async fn relay_response_body(
    client: &mut Client,
    conn: &mut TcpStream,
    body: &mut ResponseBody,
    relay: &mut Vec<u8>,
) -> Result<(), ExchangeError> {
    let limits = &client.worker.shared.config().limits;
    let (t, splice_min) = (limits.node_timeout(), limits.splice_min_bytes);
    while !body.tracker.is_done() {
        // Without a pipe (out of descriptors), or to a TLS client (its bytes are encrypted
        // here), the body goes through user space instead.
        if splice_min > 0
            && !body.dechunk
            && let Some(run) = body.tracker.raw_remaining()
            && run >= splice_min
            && client.stream.plain().is_some()
            && let Some(pipe) = take_pipe(client)
        {
            splice_run(client, conn, body, &pipe, run, t).await?;
            client.worker.pipes.borrow_mut().give(pipe);
            continue;
        }
        relay.clear();
        let n = match timeout(t, conn.read_buf(relay)).await {
            Ok(Ok(n)) => n,
            _ => return Err(ExchangeError::Midstream),
        };
        if n == 0 {
            body.tracker.eof().map_err(|_| ExchangeError::Midstream)?;
            break;
        }
        body.total += n as u64;
        if body.dechunk {
            client.out.clear();
            let out = &mut client.out;
            body.tracker
                .advance_with(relay, |d| out.extend_from_slice(d))
                .map_err(|_| ExchangeError::Midstream)?;
            body.body_bytes += client.out.len() as u64;
            write_client(&mut client.stream, &client.out, t).await?;
        } else {
            let p = body.tracker.advance(relay).map_err(|_| ExchangeError::Midstream)?;
            body.extra |= p.consumed < n;
            body.body_bytes += p.consumed as u64;
            write_client(&mut client.stream, &relay[..p.consumed], t).await?;
        }
    }
    Ok(())
}

/// Splice `run` body bytes from the node to the client through `pipe`.
async fn splice_run(
    client: &Client,
    conn: &TcpStream,
    body: &mut ResponseBody,
    pipe: &Pipe,
    run: u64,
    t: Duration,
) -> Result<(), ExchangeError> {
    let Some(socket) = client.stream.plain() else { return Err(ExchangeError::Midstream) };
    if let Err(e) = splice_exact(conn, socket, pipe, run, t).await {
        tracing::debug!(peer = %client.peer, "spliced relay stopped: {e}");
        return Err(ExchangeError::Midstream);
    }
    body.tracker.skip_raw(run);
    body.body_bytes += run;
    body.total += run;
    if body.tracker.is_done() {
        // The body's last byte is spliced, and a node sends nothing more on this
        // connection before the next request (the switch never pipelines to nodes);
        // splice left the read readiness set, which would cost the next response's
        // first read a recv failing with EAGAIN.
        mark_read_drained(conn);
    }
    Ok(())
}

/// A pipe from the worker's pool, or a new one; `None` when none can be made or it would
/// take descriptors the node connections need (the body then goes through user space).
fn take_pipe(client: &Client) -> Option<Pipe> {
    let pipe = client.worker.pipes.borrow_mut().take().ok()?;
    (!pipe.leaves_too_few_descriptors()).then_some(pipe)
}

async fn write_client(stream: &mut ClientStream, bytes: &[u8], t: Duration) -> Result<(), ExchangeError> {
    // A TLS stream may keep the last records queued after `write_all`: flushed here.
    match timeout(t, async {
        stream.write_all(bytes).await?;
        stream.flush().await
    })
    .await
    {
        Ok(Ok(())) => Ok(()),
        _ => Err(ExchangeError::ClientGone),
    }
}
