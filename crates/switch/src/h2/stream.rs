//! One HTTP/2 stream at the switch: its request checked and written as HTTP/1.1
//! (`request::to_http1`), dispatched by the policy on its own as any HTTP/1.1 request is,
//! exchanged with its node over a pooled keep-alive connection (a failed node walked past as
//! `Candidates` allows), and its response streamed back under flow control both ways: request
//! DATA is released to the client's window only once written to the node, and node bytes are
//! read only as the client's window takes them. Trailers pass both ways.

use super::counters::ResetReason;
use super::request::{Refusal, StreamRequest, last_chunk, to_http1};
use crate::access_log::LogRecord;
use crate::dispatch::{Candidates, DispatchError};
use crate::forward::write_request_head;
use crate::node_connection::{NodeFailure, node_connection, write_node};
use crate::state::Shared;
use crate::worker::Worker;
use bytes::{Bytes, BytesMut};
use h2::server::SendResponse;
use h2::{RecvStream, SendStream};
use locus_core::{Method, NodeId};
use locus_http::{BodyKind, BodyTracker, ResponseHead, parse_response};
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};
use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;
use tokio::time::timeout;

/// Node bytes read at once for one stream: one full DATA frame.
const STREAM_READ: usize = 16 * 1024;
/// Largest node response head.
const MAX_RESPONSE_HEAD: usize = 16 * 1024;

/// What every stream of one client connection shares.
pub struct StreamContext {
    pub worker: Rc<Worker>,
    pub peer: SocketAddr,
    pub local: Option<SocketAddr>,
    pub scheme: &'static str,
    pub rtt: Duration,
}

/// How a try at a node went wrong.
enum Fault {
    /// Before any response byte went to the client: the request may go on (`stale`: over a
    /// pooled connection the node had closed while it was idle).
    Node { failure: NodeFailure, stale: bool },
    /// The node's response could not be used (nothing sent yet): 502.
    BadResponse,
    /// The client did not send its body in time (nothing sent yet): 408.
    BodyTimeout,
    /// The client reset the stream or its connection went away.
    ClientGone,
    /// Failed after the response started: the stream is reset.
    Midstream(ResetReason),
}

/// Serve one stream to its end.
pub async fn serve(ctx: Rc<StreamContext>, req: http::Request<RecvStream>, respond: SendResponse<Bytes>) {
    let shared = ctx.worker.shared.clone();
    shared.counters.requests.fetch_add(1, Relaxed);
    shared.h2.streams.fetch_add(1, Relaxed);
    let (parts, body) = req.into_parts();
    let mut stream = Stream { ctx, respond, body, status: 0, body_bytes: 0 };
    match to_http1(&parts, stream.body.is_end_stream(), &shared.limits()) {
        Ok(request) => {
            if let Some(status) =
                crate::target_check::refusal_at(&request.head, &request.buf, &shared, stream.ctx.local)
            {
                stream.answer(status);
            } else {
                stream.route(&shared, &request).await;
            }
            stream.log(&request);
        }
        Err(Refusal::Reset(reason, why)) => {
            shared.counters.client_errors.fetch_add(1, Relaxed);
            shared.h2.reset(ResetReason::Malformed);
            tracing::debug!(peer = %stream.ctx.peer, "HTTP/2 stream reset: {why}");
            stream.respond.send_reset(reason);
        }
        Err(Refusal::Status(status)) => {
            shared.counters.client_errors.fetch_add(1, Relaxed);
            stream.answer(status);
        }
    }
}

struct Stream {
    ctx: Rc<StreamContext>,
    respond: SendResponse<Bytes>,
    body: RecvStream,
    /// The status sent (0: none).
    status: u16,
    body_bytes: u64,
}

impl Stream {
    /// Dispatch the request and walk its candidates until one answers or none may be tried.
    async fn route(&mut self, shared: &Shared, req: &StreamRequest) {
        let head = &req.head;
        let ims = head.header(&req.buf, "if-modified-since");
        let info =
            crate::sniff::request_info(&shared.classifier(), head.method, head.path_str(&req.buf), ims);
        let retryable = Candidates::may_retry(head.method, head.body != BodyKind::Empty);
        let queue_timeout = shared.config().limits.queue_timeout();
        let first = tokio::select! {
            biased;
            c = Candidates::first(&shared.dispatcher, &info, queue_timeout, retryable) => c,
            _ = client_reset(&mut self.respond) => return shared.h2.reset(ResetReason::ByClient),
        };
        let mut candidates = match first {
            Ok(c) => c,
            Err(e) => return self.dispatch_failed(shared, e),
        };
        let mut fresh = false;
        loop {
            let node = candidates.node();
            let fault = match self.attempt(shared, node, req, fresh).await {
                Ok(()) => {
                    if shared.dispatcher.observes_requests() {
                        shared.dispatcher.observe(node, &info, self.ctx.rtt);
                    }
                    return;
                }
                Err(Fault::Node { failure, stale }) => {
                    if stale && candidates.reconnect() {
                        fresh = true;
                        continue;
                    }
                    if !stale {
                        shared.node_failed(node, &failure.describe());
                    }
                    if !candidates.may_move() {
                        return self.answer(502);
                    }
                    shared.counters.retries.fetch_add(1, Relaxed);
                    if let Err(e) = candidates.next(&info).await {
                        return self.dispatch_failed(shared, e);
                    }
                    fresh = false;
                    continue;
                }
                Err(fault) => fault,
            };
            return self.failed(shared, node, fault);
        }
    }

    /// The end of a try that cannot go on to another node.
    fn failed(&mut self, shared: &Shared, node: NodeId, fault: Fault) {
        match fault {
            Fault::Node { .. } => self.answer(502),
            Fault::BadResponse => {
                shared.counters.bad_responses.fetch_add(1, Relaxed);
                tracing::warn!(node = %shared.nodes.get(node).name, "malformed response from node");
                self.answer(502);
            }
            Fault::BodyTimeout => {
                shared.h2.reset(ResetReason::BodyTimeout);
                self.answer(408);
            }
            Fault::ClientGone => shared.h2.reset(ResetReason::ByClient),
            Fault::Midstream(why) => shared.h2.reset(why),
        }
    }

    fn dispatch_failed(&mut self, shared: &Shared, e: DispatchError) {
        shared.counters.dispatch_failed(&e);
        self.answer(503);
    }

    /// One try of `node`: the request sent, the response relayed; the connection pooled after.
    async fn attempt(
        &mut self,
        shared: &Shared,
        node: NodeId,
        req: &StreamRequest,
        fresh: bool,
    ) -> Result<(), Fault> {
        let idempotent = req.head.method.is_idempotent();
        let (mut conn, reused) = match node_connection(&self.ctx.worker, node, fresh, idempotent).await {
            Ok(c) => c,
            Err(failure) if failure.is_out_of_descriptors() => {
                shared.counters.shed_no_descriptors.fetch_add(1, Relaxed);
                self.answer(503);
                return Ok(());
            }
            Err(failure) => return Err(Fault::Node { failure, stale: false }),
        };
        shared.nodes.get(node).requests.fetch_add(1, Relaxed);
        let mut resp = ResponseHead::default();
        let exchanged = tokio::select! {
            r = send_and_read_head(&self.ctx, &mut self.body, node, &mut conn, req, &mut resp) => r,
            _ = client_reset(&mut self.respond) => Err(Fault::ClientGone),
        };
        let leftover = match exchanged {
            Ok(leftover) => leftover,
            Err(Fault::Node { failure: NodeFailure::Timeout, .. }) => {
                shared.counters.node_timeouts.fetch_add(1, Relaxed);
                self.answer(504);
                return Ok(());
            }
            Err(Fault::Node { failure, .. }) if req.head.body != BodyKind::Empty => {
                // Part of the body may have gone: the request cannot be sent again.
                shared.node_failed(node, &failure.describe());
                self.answer(502);
                return Ok(());
            }
            Err(Fault::Node { failure, .. }) => {
                let stale = failure.is_stale(reused);
                return Err(Fault::Node { failure, stale });
            }
            Err(other) => return Err(other),
        };
        let reusable = self.relay_response(shared, &mut conn, &resp, leftover).await?;
        shared.counters.response(self.status);
        if reusable {
            let generation = shared.nodes.get(node).generation.load(Relaxed);
            self.ctx.worker.pool.borrow_mut().put(node.index(), conn, generation, Instant::now());
        }
        Ok(())
    }

    /// Send the response head and relay the body under the client's window; `Ok(true)` when
    /// the node connection may be reused.
    async fn relay_response(
        &mut self,
        shared: &Shared,
        conn: &mut TcpStream,
        resp: &ResponseHead,
        mut inbuf: BytesMut,
    ) -> Result<bool, Fault> {
        let head_bytes = inbuf.split_to(resp.head_len).freeze();
        let Some(response) = super::response::to_h2(resp, &head_bytes) else {
            return Err(Fault::BadResponse);
        };
        let empty = resp.body == BodyKind::Empty || resp.body == BodyKind::Length(0);
        let mut send = match self.respond.send_response(response, empty) {
            Ok(s) => s,
            Err(_) => return Err(Fault::ClientGone),
        };
        self.status = resp.status;
        if empty {
            return Ok(resp.keep_alive && inbuf.is_empty());
        }
        let t = shared.config().limits.node_timeout();
        let mut body = ResponseRelay {
            tracker: BodyTracker::new(resp.body),
            chunked: resp.body == BodyKind::Chunked,
            trailer: Vec::new(),
            bytes: 0,
            extra: false,
        };
        let relayed = body.run(conn, &mut send, inbuf, t).await;
        self.body_bytes = body.bytes;
        shared.counters.bytes_to_clients.fetch_add(body.bytes, Relaxed);
        match relayed {
            Ok(()) => Ok(resp.keep_alive && !body.extra),
            Err(why) => {
                if why != ResetReason::ByClient {
                    send.send_reset(h2::Reason::INTERNAL_ERROR);
                }
                Err(Fault::Midstream(why))
            }
        }
    }

    /// An answer from the switch itself (no node was asked, or none could answer).
    fn answer(&mut self, status: u16) {
        let reason = locus_http::reason_phrase(status);
        let body = Bytes::from(format!("{reason}\n"));
        let mut response = http::Response::new(());
        *response.status_mut() = http::StatusCode::from_u16(status).unwrap_or(http::StatusCode::BAD_GATEWAY);
        let h = response.headers_mut();
        h.insert(http::header::CONTENT_TYPE, http::HeaderValue::from_static("text/plain"));
        h.insert(http::header::CONTENT_LENGTH, http::HeaderValue::from(body.len()));
        h.insert(http::header::SERVER, http::HeaderValue::from_static("locus"));
        self.ctx.worker.shared.counters.response(status);
        self.status = status;
        if let Ok(mut send) = self.respond.send_response(response, false) {
            self.body_bytes = body.len() as u64;
            // The body fits the smallest window a client may give (RFC 9113: 65,535 bytes).
            send.reserve_capacity(body.len());
            let _ = send.send_data(body, true);
        }
    }

    /// The stream's access-log line (when there is a log and a status was sent).
    fn log(&self, req: &StreamRequest) {
        let (Some(log), true) = (&self.ctx.worker.log, self.status != 0) else { return };
        let (head, buf) = (&req.head, &req.buf);
        log.borrow_mut().record(&LogRecord {
            client: self.ctx.peer.ip(),
            method: head.method_span.get(buf),
            target: head.target.get(buf),
            version: "HTTP/2.0",
            status: self.status,
            body_bytes: self.body_bytes,
            referer: head.header(buf, "referer"),
            user_agent: head.header(buf, "user-agent"),
        });
    }
}

/// Send the request and its body to the node, then read its final response head into
/// `resp`; returns the bytes read after the head.
async fn send_and_read_head(
    ctx: &StreamContext,
    body: &mut RecvStream,
    node: NodeId,
    conn: &mut TcpStream,
    req: &StreamRequest,
    resp: &mut ResponseHead,
) -> Result<BytesMut, Fault> {
    let shared = &ctx.worker.shared;
    let config = shared.config();
    let t = config.limits.node_timeout();
    let mut out = Vec::with_capacity(req.buf.len() + 128);
    let client_ip = config.forwarded_for.then(|| ctx.peer.ip());
    let proto = config.forwarded_proto.then_some(ctx.scheme);
    let host = &shared.nodes.get(node).host_header;
    write_request_head(&mut out, &req.head, &req.buf, client_ip, proto, host);
    write_node(conn, &out, t).await.map_err(|failure| Fault::Node { failure, stale: false })?;
    let mut sent = out.len() as u64;
    if req.head.body != BodyKind::Empty {
        sent += send_body(body, conn, req.chunked, t).await?;
    }
    shared.counters.bytes_to_nodes.fetch_add(sent, Relaxed);
    read_final_head(conn, resp, req.head.method == Method::Head, t).await
}

/// Pass the request body from the client's stream to the node (chunked when HTTP/2 gave
/// no length, with the client's trailers), releasing window as it goes; returns the bytes.
async fn send_body(
    body: &mut RecvStream,
    conn: &mut TcpStream,
    chunked: bool,
    t: Duration,
) -> Result<u64, Fault> {
    let node_failed = |failure| Fault::Node { failure, stale: false };
    let mut total = 0u64;
    loop {
        let data = match timeout(t, body.data()).await {
            Err(_) => return Err(Fault::BodyTimeout),
            Ok(None) => break,
            Ok(Some(Err(_))) => return Err(Fault::ClientGone),
            Ok(Some(Ok(data))) => data,
        };
        let n = data.len();
        if chunked && n > 0 {
            write_node(conn, format!("{n:x}\r\n").as_bytes(), t).await.map_err(node_failed)?;
            write_node(conn, &data, t).await.map_err(node_failed)?;
            write_node(conn, b"\r\n", t).await.map_err(node_failed)?;
        } else {
            write_node(conn, &data, t).await.map_err(node_failed)?;
        }
        total += n as u64;
        let _ = body.flow_control().release_capacity(n);
    }
    if chunked {
        let trailers = match timeout(t, body.trailers()).await {
            Err(_) => return Err(Fault::BodyTimeout),
            Ok(Err(_)) => return Err(Fault::ClientGone),
            Ok(Ok(trailers)) => trailers,
        };
        let end = last_chunk(trailers.as_ref());
        write_node(conn, &end, t).await.map_err(node_failed)?;
        total += end.len() as u64;
    }
    Ok(total)
}

/// Resolves when the client resets the stream (never while it stays open).
async fn client_reset(respond: &mut SendResponse<Bytes>) {
    let _ = std::future::poll_fn(|cx| respond.poll_reset(cx)).await;
}

/// Read until a final (non-1xx) response head is complete in `resp`; interim responses are
/// dropped. Returns the bytes read, the head first.
async fn read_final_head(
    conn: &mut TcpStream,
    resp: &mut ResponseHead,
    is_head: bool,
    t: Duration,
) -> Result<BytesMut, Fault> {
    let mut buf = BytesMut::with_capacity(STREAM_READ);
    loop {
        if !buf.is_empty() {
            match parse_response(&buf, MAX_RESPONSE_HEAD, is_head, resp) {
                Err(_) => return Err(Fault::BadResponse),
                Ok(true) if resp.is_interim() => {
                    let _ = buf.split_to(resp.head_len);
                    continue;
                }
                // The switch never forwards Upgrade: a node switching protocols is broken.
                Ok(true) if resp.status == 101 => return Err(Fault::BadResponse),
                Ok(true) => return Ok(buf),
                Ok(false) => {}
            }
        }
        buf.reserve(STREAM_READ);
        match timeout(t, conn.read_buf(&mut buf)).await {
            Err(_) => return Err(Fault::Node { failure: NodeFailure::Timeout, stale: false }),
            Ok(Err(e)) => return Err(Fault::Node { failure: NodeFailure::Io(e), stale: false }),
            Ok(Ok(0)) if buf.is_empty() => {
                return Err(Fault::Node { failure: NodeFailure::Closed, stale: false });
            }
            Ok(Ok(0)) => return Err(Fault::BadResponse),
            Ok(Ok(_)) => {}
        }
    }
}

/// A response body on its way from the node to the client's stream.
struct ResponseRelay {
    tracker: BodyTracker,
    chunked: bool,
    /// The chunked body's trailer section, as it arrives.
    trailer: Vec<u8>,
    /// Body bytes sent to the client.
    bytes: u64,
    /// The node sent bytes past the body (its connection cannot be reused).
    extra: bool,
}

impl ResponseRelay {
    /// Relay the body (`inbuf` holds its first bytes), then end the stream (with trailers
    /// when the node sent some).
    async fn run(
        &mut self,
        conn: &mut TcpStream,
        send: &mut SendStream<Bytes>,
        mut inbuf: BytesMut,
        t: Duration,
    ) -> Result<(), ResetReason> {
        loop {
            if !inbuf.is_empty() {
                let data = self.decode(&mut inbuf)?;
                let end = self.tracker.is_done() && !self.chunked;
                self.extra |= self.tracker.is_done() && !inbuf.is_empty();
                self.bytes += data.len() as u64;
                send_data(send, data, end, t).await?;
                if end {
                    return Ok(());
                }
            }
            if self.tracker.is_done() {
                break;
            }
            inbuf.clear();
            inbuf.reserve(STREAM_READ);
            match timeout(t, conn.read_buf(&mut inbuf)).await {
                Ok(Ok(0)) => {
                    self.tracker.eof().map_err(|_| ResetReason::NodeFailed)?;
                    break;
                }
                Ok(Ok(_)) => {}
                _ => return Err(ResetReason::NodeFailed),
            }
        }
        match super::response::trailers(&self.trailer) {
            Some(trailers) => send.send_trailers(trailers).map_err(|_| ResetReason::ByClient),
            None => send.send_data(Bytes::new(), true).map_err(|_| ResetReason::ByClient),
        }
    }

    /// The body data at the front of `inbuf` (taken from it): as is for a delimited body,
    /// de-chunked (the trailer section kept aside) for a chunked one.
    fn decode(&mut self, inbuf: &mut BytesMut) -> Result<Bytes, ResetReason> {
        if !self.chunked {
            let p = self.tracker.advance(inbuf).map_err(|_| ResetReason::NodeFailed)?;
            return Ok(inbuf.split_to(p.consumed).freeze());
        }
        let mut data = BytesMut::with_capacity(inbuf.len());
        let trailer = &mut self.trailer;
        let p = self
            .tracker
            .advance_parts(inbuf, |d| data.extend_from_slice(d), |t| trailer.extend_from_slice(t))
            .map_err(|_| ResetReason::NodeFailed)?;
        let _ = inbuf.split_to(p.consumed);
        Ok(data.freeze())
    }
}

/// Send `data` as the client's window allows (`end`: the stream's last bytes); a window that
/// stays shut for `t` is a client that does not read. The last bytes (at most one read, so the
/// stream's bound holds) go to h2 at once, to be sent as the window opens: the stream reads
/// nothing more.
async fn send_data(
    send: &mut SendStream<Bytes>,
    mut data: Bytes,
    end: bool,
    t: Duration,
) -> Result<(), ResetReason> {
    if data.is_empty() || (end && data.len() <= STREAM_READ) {
        return if end { send.send_data(data, true).map_err(|_| ResetReason::ByClient) } else { Ok(()) };
    }
    while !data.is_empty() {
        send.reserve_capacity(data.len());
        let mut room = send.capacity();
        while room == 0 {
            room = match timeout(t, std::future::poll_fn(|cx| send.poll_capacity(cx))).await {
                Err(_) => {
                    send.send_reset(h2::Reason::CANCEL);
                    return Err(ResetReason::SlowRead);
                }
                Ok(Some(Ok(n))) => n,
                Ok(_) => return Err(ResetReason::ByClient),
            };
        }
        let piece = data.split_to(room.min(data.len()));
        send.send_data(piece, end && data.is_empty()).map_err(|_| ResetReason::ByClient)?;
    }
    Ok(())
}
