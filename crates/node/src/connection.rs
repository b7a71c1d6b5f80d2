//! One client connection: reads requests into a pooled buffer (held only while a request is
//! being read or answered, so idle keep-alive connections cost no buffer), parses them in
//! place, answers pipelined requests in order with their responses coalesced into one write,
//! streams large bodies, discards request bodies to keep framing, and enforces the header,
//! keep-alive and send timeouts with one lazily reset timer. With a `RequestRouter` (handed-
//! off connections), each request is first routed by the switch: served here, fetched from
//! another node, or the connection is dumped and handed back. Cooperative-caching requests
//! from peers are answered apart (`coop_serve`), as are DC control requests (`dc_control`),
//! outside the client request counters; DC replicas and rewritten pages come from `dc_serve`.

use std::cell::RefCell;
use std::io;
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use locus_core::Method;
use locus_handoff::dump_connection;
use locus_http::{BodyKind, BodyTracker, RequestHead, TargetForm, Version, parse_request};
use locus_io::try_read_drained;
use tokio::io::{AsyncReadExt, AsyncWriteExt, Interest};
use tokio::net::TcpStream;
use tokio::sync::watch;
use tokio::time::{Instant, Sleep};

use crate::backend_forward::PEER_IO_TIMEOUT;
use crate::context::{WorkerContext, count};
use crate::coop_serve::is_coop_request;
use crate::cpu_charge::ConnectionCharge;
use crate::dc_control::is_dc_control;
use crate::doc_store::LargeFile;
use crate::document_root::decode_request_path;
use crate::dynamic::serve_dynamic;
use crate::handoff_agent::RouteDecision;
use crate::node_metrics::ActiveRequest;
use crate::origin::OriginBody;
use crate::out_queue::OutQueue;
use crate::request_router::RequestRouter;
use crate::request_view::{BodySource, RequestView, Served, authority_allowed};
use crate::response::{Persistence, simple};
use crate::shared_pages::SharedPages;
use crate::static_files::{serve_cached, serve_miss};

/// After a close decided by the server, read and drop what the client still sends for at
/// most this long (so a response is not destroyed by a reset), up to `LINGER_BYTES`.
const LINGER: Duration = Duration::from_secs(1);
const LINGER_BYTES: usize = 1 << 20;
/// First size of a connection's read buffer; it grows up to the head limit when needed.
const READ_BUFFER: usize = 4096;
/// Buffers kept per worker thread for reuse.
const POOL_MAX: usize = 256;
/// Bytes read from disk per step when streaming a large file.
const FILE_CHUNK: u64 = 256 * 1024;
const ORIGIN_CHUNK: usize = 64 * 1024;
const ORIGIN_READ_TIMEOUT: Duration = Duration::from_secs(30);

/// The buffers of a connection that is reading or answering a request.
#[derive(Default)]
struct ConnBuffers {
    read: Vec<u8>,
    /// Unconsumed input is `read[start..end]`.
    start: usize,
    end: usize,
    head: RequestHead,
    out: OutQueue,
    keys: RequestKeys,
}

/// Scratch strings a request's path and cache key are decoded into.
#[derive(Default)]
struct RequestKeys {
    /// Decoded request path.
    path: String,
    /// Cache key when it differs from `path` (origin mode with a query).
    cache_key: String,
}

impl RequestKeys {
    /// The decoded path and the cache key: the path, followed by `?query` if one is given.
    fn path_and_key(&mut self, query: Option<&str>) -> (&str, &str) {
        match query {
            Some(q) => {
                self.cache_key.clear();
                self.cache_key.push_str(&self.path);
                self.cache_key.push('?');
                self.cache_key.push_str(q);
                (&self.path, &self.cache_key)
            }
            None => (&self.path, &self.path),
        }
    }
}

thread_local! {
    // Boxed so that a connection holds one pointer (none while idle), not the whole set.
    #[allow(clippy::vec_box)]
    static BUFFER_POOL: RefCell<Vec<Box<ConnBuffers>>> = const { RefCell::new(Vec::new()) };
}

fn take_buffers() -> Box<ConnBuffers> {
    let mut b = BUFFER_POOL.with(|p| p.borrow_mut().pop()).unwrap_or_default();
    if b.read.is_empty() {
        b.read = vec![0; READ_BUFFER];
    }
    b
}

fn give_back(mut b: Box<ConnBuffers>) {
    b.start = 0;
    b.end = 0;
    b.out.clear();
    if b.read.len() > READ_BUFFER {
        b.read = vec![0; READ_BUFFER];
    }
    // `try_with`: a connection dropped while its thread shuts down just frees its buffers.
    let _ = BUFFER_POOL.try_with(|p| {
        let mut p = p.borrow_mut();
        if p.len() < POOL_MAX {
            p.push(b);
        }
    });
}

/// A connection's buffers, given back to the pool however the connection ends.
struct BufferSlot(Option<Box<ConnBuffers>>);

impl Drop for BufferSlot {
    fn drop(&mut self) {
        if let Some(b) = self.0.take() {
            give_back(b);
        }
    }
}

/// How a connection ends.
enum Close {
    /// Just close (nothing was promised, or the peer is gone).
    Now,
    /// Shut down our side, then drain what the client still sends before closing.
    Linger,
    /// The switch routed the next request elsewhere: dump the connection with `pending` (the
    /// bytes read and not answered) put back in front, and hand it back on `channel`.
    Rehandoff { channel: u64, pending: Vec<u8> },
}

/// How a served connection ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConnectionEnd {
    /// It closed here.
    Closed,
    /// It was handed back to the switch and lives on elsewhere.
    HandedBack,
}

enum Wait {
    Ready,
    Timeout,
    Shutdown,
    Failed,
}

struct Connection<'w> {
    stream: TcpStream,
    w: &'w WorkerContext,
    /// One timer for every deadline of the connection, moved only when a deadline comes
    /// earlier than it or it fires early; so a request costs no timer work.
    sleep: Pin<Box<Sleep>>,
    shutdown: watch::Receiver<bool>,
    /// Per-request routing by the switch, if the connection has it.
    router: Option<RequestRouter>,
    charge: ConnectionCharge,
}

/// Serve one connection until it closes or (with a `router`) is handed back to the switch.
/// A routed connection that ends here is reported `Closed` to the switch.
pub async fn serve(stream: TcpStream, w: &WorkerContext, router: Option<RequestRouter>) -> ConnectionEnd {
    let first_deadline = Instant::now() + w.node.header_timeout;
    let mut conn = Connection {
        stream,
        w,
        sleep: Box::pin(tokio::time::sleep_until(first_deadline)),
        shutdown: w.shutdown.clone(),
        router,
        charge: ConnectionCharge::default(),
    };
    let (end, router) = match conn.run().await {
        Close::Now => (ConnectionEnd::Closed, conn.router),
        Close::Linger => {
            conn.linger().await;
            (ConnectionEnd::Closed, conn.router)
        }
        Close::Rehandoff { channel, pending } => {
            let Connection { stream, router, .. } = conn;
            (hand_back(stream, router.as_ref(), channel, &pending), router)
        }
    };
    if end == ConnectionEnd::Closed
        && let Some(router) = &router
    {
        router.report_closed();
    }
    end
}

/// Dump the connection with `pending` in front of its receive queue and hand it back to the
/// switch. If that fails the connection is closed here.
fn hand_back(
    stream: TcpStream,
    router: Option<&RequestRouter>,
    channel: u64,
    pending: &[u8],
) -> ConnectionEnd {
    let Some(router) = router else { return ConnectionEnd::Closed };
    let id = router.id();
    let socket = match stream.into_std() {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!(%id, error = %e, "rehandoff: cannot take the socket off the event loop");
            return ConnectionEnd::Closed;
        }
    };
    match dump_connection(socket, pending) {
        Ok(state) => {
            if router.rehandoff(state, channel) {
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

fn invalid_data(e: impl std::fmt::Display) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, e.to_string())
}

impl Connection<'_> {
    async fn run(&mut self) -> Close {
        let node = &*self.w.node;
        let mut slot = BufferSlot(None);
        let bufs = &mut slot.0;
        // The header timeout runs from the connection's start, then from each request's
        // first byte; between requests the keep-alive timeout runs from the last one.
        let mut head_started = Some(Instant::now());
        let mut last_active = Instant::now();
        let max_read = node.parse_limits.max_head_bytes + 1024;
        loop {
            if let Some(b) = bufs.as_deref_mut()
                && b.end > b.start
            {
                match parse_request(&b.read[b.start..b.end], &node.parse_limits, &mut b.head) {
                    Ok(true)
                        if is_coop_request(self.w, &b.head, &b.read[b.start..b.end])
                            || is_dc_control(self.w, &b.head, &b.read[b.start..b.end]) =>
                    {
                        if !self.answer_coop(b).await {
                            return if self.flush(&mut b.out).await.is_ok() {
                                Close::Linger
                            } else {
                                Close::Now
                            };
                        }
                        last_active = Instant::now();
                        head_started = (b.end > b.start).then_some(last_active);
                        continue;
                    }
                    Ok(true) => {
                        let decision = match self.route(b).await {
                            Ok(decision) => decision,
                            Err(_) => return Close::Now,
                        };
                        let served = match decision {
                            RouteDecision::Local => self.handle(b).await,
                            RouteDecision::Forward(peer) if forwardable(&b.head) => {
                                self.forward(b, peer).await
                            }
                            RouteDecision::Forward(_) => self.handle(b).await,
                            RouteDecision::Rehandoff { channel } => {
                                return Close::Rehandoff {
                                    channel,
                                    pending: b.read[b.start..b.end].to_vec(),
                                };
                            }
                        };
                        match served {
                            Ok(true) => {}
                            Ok(false) => {
                                return if self.flush(&mut b.out).await.is_ok() {
                                    Close::Linger
                                } else {
                                    Close::Now
                                };
                            }
                            Err(_) => return Close::Now,
                        }
                        last_active = Instant::now();
                        head_started = (b.end > b.start).then_some(last_active);
                        continue;
                    }
                    Ok(false) => {}
                    Err(e) => {
                        tracing::debug!(error = %e, "refusing request head");
                        self.refuse(&mut b.out, e.status()).await;
                        return Close::Linger;
                    }
                }
            }
            // More input is needed: send what is queued first.
            if let Some(b) = bufs.as_deref_mut()
                && !b.out.is_empty()
                && self.flush(&mut b.out).await.is_err()
            {
                return Close::Now;
            }
            let idle = bufs.as_ref().is_none_or(|b| b.start == b.end);
            if idle {
                if let Some(b) = bufs.take() {
                    give_back(b);
                }
                if node.is_shutting_down() {
                    return Close::Now;
                }
            }
            let deadline = match head_started {
                Some(t) => t + node.header_timeout,
                None => last_active + node.keepalive_timeout,
            };
            match self.wait_readable(deadline, idle).await {
                Wait::Ready => {}
                Wait::Timeout if !idle => {
                    if let Some(b) = bufs.as_deref_mut() {
                        self.refuse(&mut b.out, 408).await;
                    }
                    return Close::Linger;
                }
                Wait::Timeout | Wait::Shutdown | Wait::Failed => return Close::Now,
            }
            let b = bufs.get_or_insert_with(take_buffers);
            if b.start == b.end {
                b.start = 0;
                b.end = 0;
            }
            if b.end == b.read.len() {
                if b.start > 0 {
                    b.read.copy_within(b.start..b.end, 0);
                    b.end -= b.start;
                    b.start = 0;
                } else if b.read.len() < max_read {
                    let len = (b.read.len() * 2).min(max_read);
                    b.read.resize(len, 0);
                } else {
                    // Unreachable: the parser refuses heads over the limit before this.
                    return Close::Now;
                }
            }
            match try_read_drained(&self.stream, &mut b.read[b.end..]) {
                Ok(0) => return Close::Now,
                Ok(n) => {
                    if b.start == b.end && head_started.is_none() {
                        head_started = Some(Instant::now());
                    }
                    b.end += n;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(_) => return Close::Now,
            }
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
    async fn relay_peer_body(
        &mut self,
        response: &mut crate::backend_forward::PeerResponse,
        out: &mut OutQueue,
    ) -> io::Result<bool> {
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

    /// Answer a cooperative-caching request from a peer (not a client request: no request
    /// counter moves). False: close after it (a body, or the peer asked to).
    async fn answer_coop(&mut self, b: &mut ConnBuffers) -> bool {
        let Ok(peer) = self.stream.peer_addr() else { return false };
        let (ip, buf) = (peer.ip(), &b.read[b.start..b.end]);
        let keep = if is_dc_control(self.w, &b.head, buf) {
            crate::dc_control::answer(self.w, ip, &b.head, buf, &mut b.out).await
        } else {
            crate::coop_serve::answer(self.w, ip, &b.head, buf, &mut b.out)
        };
        b.start += b.head.head_len;
        if b.start == b.end {
            b.start = 0;
            b.end = 0;
        }
        keep && b.head.body == BodyKind::Empty
    }

    /// Answer a request head that could not be parsed (or did not arrive in time), then close.
    async fn refuse(&mut self, out: &mut OutQueue, status: u16) {
        let counters = self.w.counters();
        counters.request_started();
        simple(out, &self.w.node.node_headers, status, Persistence::Close, false, b"");
        counters.request_finished(status);
        let _ = self.flush(out).await;
    }

    /// Answer the request whose head was just parsed; consume its body. Ok(false): close.
    async fn handle(&mut self, b: &mut ConnBuffers) -> io::Result<bool> {
        let w = self.w;
        let node = &*w.node;
        let counters = w.counters();
        counters.request_started();
        let mut active = counters.active_request();
        let ConnBuffers { read, start, end, head, out, keys } = b;
        let head_len = head.head_len;
        let body = head.body;
        // A client waiting for 100-continue has not sent its body: answer and close.
        let unread_body = head.expect_continue && body != BodyKind::Empty;
        let persistence = if !head.keep_alive || unread_body || node.is_shutting_down() {
            Persistence::Close
        } else if head.version == Version::Http10 {
            Persistence::KeepAlive10
        } else {
            Persistence::KeepAlive
        };
        let bodies_before = out.bodies_queued();
        let served = self.respond(&read[*start..*end], head, persistence, out, keys, &mut active).await;
        let (status, sent) = match served {
            Ok(Served { status, body }) => {
                self.charge.charge(node, &body, out.bodies_queued().wrapping_sub(bodies_before)).await;
                let sent = match body {
                    BodySource::Queued => Ok(()),
                    BodySource::Pages { pages, offset, len } => {
                        self.send_pages(out, &pages, offset, len).await
                    }
                    BodySource::File { file, offset, len } => self.send_file(out, file, offset, len).await,
                    BodySource::Origin(origin) => self.send_origin(out, origin).await,
                };
                (status, sent)
            }
            Err(e) => (500, Err(e)),
        };
        if let Err(e) = sent {
            counters.request_finished(status);
            return Err(e);
        }
        *start += head_len;
        if body != BodyKind::Empty
            && !unread_body
            && let Err(e) = self.discard_body(read, start, end, out, body).await
        {
            // The connection closes now; a response still queued (the body broke before
            // anything was flushed) is never sent, so it is not counted as its status.
            if out.is_empty() {
                counters.request_finished(status)
            } else {
                counters.request_unanswered()
            }
            return Err(e);
        }
        counters.request_finished(status);
        if *start == *end {
            *start = 0;
            *end = 0;
        }
        Ok(persistence.keeps_open())
    }

    /// Choose and queue the response to one request.
    async fn respond(
        &mut self,
        buf: &[u8],
        head: &RequestHead,
        persistence: Persistence,
        out: &mut OutQueue,
        keys: &mut RequestKeys,
        active: &mut ActiveRequest<'_>,
    ) -> io::Result<Served> {
        let w = self.w;
        let node = &*w.node;
        let nh = &node.node_headers[..];
        if !matches!(head.method, Method::Get | Method::Head) {
            simple(out, nh, 405, persistence, false, b"Allow: GET, HEAD\r\n");
            return Ok(Served::queued(405));
        }
        let head_only = head.method == Method::Head;
        let form_ok = match head.form {
            TargetForm::Origin => true,
            TargetForm::Absolute => authority_allowed(head, buf, &node.server_names),
            TargetForm::Asterisk | TargetForm::Authority => false,
        };
        if !form_ok {
            simple(out, nh, 400, persistence, head_only, b"");
            return Ok(Served::queued(400));
        }
        let target = head.path_str(buf);
        let (raw_path, query) = match target.split_once('?') {
            Some((p, q)) => (p, Some(q)),
            None => (target, None),
        };
        if crate::dc_serve::is_replica_request(w, raw_path) {
            self.flush(out).await?;
            return Ok(crate::dc_serve::serve_replica(w, raw_path, head_only, persistence, out).await);
        }
        if let Err(e) = decode_request_path(raw_path, &mut keys.path) {
            simple(out, nh, e.status(), persistence, head_only, b"");
            return Ok(Served::queued(e.status()));
        }
        let (path, key) = keys.path_and_key(query.filter(|_| node.origin.is_some()));
        let mut req = RequestView {
            method: head.method,
            target,
            raw_path,
            query,
            path,
            cache_key: key,
            persistence,
            if_modified_since: None,
            if_none_match: false,
            range: None,
            if_range: None,
        };
        for h in &head.headers {
            let name = h.name.get(buf);
            let is = |n: &str| name.eq_ignore_ascii_case(n.as_bytes());
            match name.len() {
                5 if is("range") => req.range = Some(h.value.get(buf)),
                8 if is("if-range") => req.if_range = Some(h.value.get(buf)),
                13 if is("if-none-match") => req.if_none_match = true,
                17 if is("if-modified-since") => req.if_modified_since = Some(h.value.get(buf)),
                _ => {}
            }
        }
        if let Some(served) = crate::dc_serve::serve_home(w, &req, out) {
            return Ok(served);
        }
        if let Some(class) = node.classes.classify(target) {
            active.make_dynamic();
            self.flush(out).await?;
            return Ok(serve_dynamic(w, &req, class, out).await);
        }
        if let Some(served) = serve_cached(w, &req, out) {
            return Ok(served);
        }
        // A miss may take a while: let earlier pipelined responses go first.
        self.flush(out).await?;
        Ok(serve_miss(w, &req, out).await)
    }

    /// Read and drop a request body so the next request starts where it should.
    async fn discard_body(
        &mut self,
        read: &mut [u8],
        start: &mut usize,
        end: &mut usize,
        out: &mut OutQueue,
        kind: BodyKind,
    ) -> io::Result<()> {
        let mut tracker = BodyTracker::new(kind);
        loop {
            let progress = tracker.advance(&read[*start..*end]).map_err(invalid_data)?;
            *start += progress.consumed;
            if progress.done {
                return Ok(());
            }
            *start = 0;
            *end = 0;
            self.flush(out).await?;
            let deadline = Instant::now() + self.w.node.keepalive_timeout;
            match self.wait_readable(deadline, false).await {
                Wait::Ready => {}
                _ => return Err(io::ErrorKind::TimedOut.into()),
            }
            match try_read_drained(&self.stream, read) {
                Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
                Ok(n) => *end = n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => return Err(e),
            }
        }
    }

    /// Send what is queued marked as "more to come", then `len` bytes of `pages` from
    /// `offset` with sendfile, so head and body leave together and the body is not copied.
    async fn send_pages(
        &mut self,
        out: &mut OutQueue,
        pages: &SharedPages,
        offset: u64,
        len: u64,
    ) -> io::Result<()> {
        self.flush_with(out, true).await?;
        let counters = self.w.counters();
        let socket = self.stream.as_raw_fd();
        let end = (offset + len) as libc::off_t;
        let mut pos = offset as libc::off_t;
        let mut deadline = None;
        while pos < end {
            let count = (end - pos) as usize;
            let sent = self.stream.try_io(Interest::WRITABLE, || {
                // SAFETY: both descriptors are open for the duration of the call and `pos`
                // is a valid offset variable that sendfile advances.
                let n = unsafe { libc::sendfile(socket, pages.fd(), &mut pos, count) };
                if n < 0 { Err(io::Error::last_os_error()) } else { Ok(n as usize) }
            });
            match sent {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => counters.sent(n as u64),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    let d = *deadline.get_or_insert_with(|| Instant::now() + self.w.node.keepalive_timeout);
                    if !self.wait_writable(d).await {
                        return Err(io::ErrorKind::TimedOut.into());
                    }
                }
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Stream `len` bytes of a large file from `offset`, reading the next chunk from disk
    /// while the current one is being sent.
    async fn send_file(
        &mut self,
        out: &mut OutQueue,
        file: Arc<LargeFile>,
        offset: u64,
        len: u64,
    ) -> io::Result<()> {
        let read_chunk = |file: Arc<LargeFile>, at: u64, n: u64| {
            tokio::task::spawn_blocking(move || -> io::Result<Bytes> {
                let mut chunk = vec![0u8; n as usize];
                file.file.read_exact_at(&mut chunk, at)?;
                Ok(Bytes::from(chunk))
            })
        };
        let end = offset + len;
        let mut pos = offset;
        let mut next = Some(read_chunk(file.clone(), pos, FILE_CHUNK.min(len)));
        while let Some(task) = next.take() {
            let chunk = task.await.map_err(io::Error::other)??;
            pos += chunk.len() as u64;
            if pos < end {
                next = Some(read_chunk(file.clone(), pos, FILE_CHUNK.min(end - pos)));
            }
            out.push_body(chunk);
            self.flush(out).await?;
        }
        Ok(())
    }

    /// Relay the rest of an origin response body.
    async fn send_origin(&mut self, out: &mut OutQueue, mut body: OriginBody) -> io::Result<()> {
        if !body.leftover.is_empty() {
            out.push_body(Bytes::from(std::mem::take(&mut body.leftover)));
        }
        self.flush(out).await?;
        let mut chunk = vec![0u8; ORIGIN_CHUNK];
        while body.remaining > 0 {
            let want = body.remaining.min(chunk.len() as u64) as usize;
            let n =
                match tokio::time::timeout(ORIGIN_READ_TIMEOUT, body.stream.read(&mut chunk[..want])).await {
                    Ok(Ok(0)) => return Err(io::ErrorKind::UnexpectedEof.into()),
                    Ok(Ok(n)) => n,
                    Ok(Err(e)) => return Err(e),
                    Err(_) => return Err(io::ErrorKind::TimedOut.into()),
                };
            body.remaining -= n as u64;
            out.extend(&chunk[..n]);
            self.flush(out).await?;
        }
        if body.reusable
            && let Some(pool) = &self.w.origin_pool
        {
            pool.put(body.stream);
        }
        Ok(())
    }

    /// Write everything queued; a client that takes nothing for the keep-alive timeout is
    /// given up on.
    async fn flush(&mut self, out: &mut OutQueue) -> io::Result<()> {
        self.flush_with(out, false).await
    }

    /// `flush`; with `more`, the data is marked as followed by more (MSG_MORE).
    async fn flush_with(&mut self, out: &mut OutQueue, more: bool) -> io::Result<()> {
        let counters = self.w.counters();
        let mut deadline = None;
        while !out.is_empty() {
            match out.try_write(&self.stream, more) {
                Ok(n) => counters.sent(n as u64),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    let d = *deadline.get_or_insert_with(|| Instant::now() + self.w.node.keepalive_timeout);
                    if !self.wait_writable(d).await {
                        return Err(io::ErrorKind::TimedOut.into());
                    }
                }
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    fn arm(&mut self, deadline: Instant) {
        if self.sleep.deadline() > deadline {
            self.sleep.as_mut().reset(deadline);
        }
    }

    /// Wait until the socket is readable, `deadline` passes, or (when `idle`) the node
    /// shuts down.
    async fn wait_readable(&mut self, deadline: Instant, idle: bool) -> Wait {
        self.arm(deadline);
        loop {
            tokio::select! {
                biased;
                r = self.stream.readable() => return if r.is_ok() { Wait::Ready } else { Wait::Failed },
                () = &mut self.sleep => {
                    if Instant::now() >= deadline {
                        return Wait::Timeout;
                    }
                    self.sleep.as_mut().reset(deadline);
                }
                _ = self.shutdown.changed(), if idle => return Wait::Shutdown,
            }
        }
    }

    /// Wait until the socket is writable; false when `deadline` passed first.
    async fn wait_writable(&mut self, deadline: Instant) -> bool {
        self.arm(deadline);
        loop {
            tokio::select! {
                biased;
                r = self.stream.writable() => return r.is_ok(),
                () = &mut self.sleep => {
                    if Instant::now() >= deadline {
                        return false;
                    }
                    self.sleep.as_mut().reset(deadline);
                }
            }
        }
    }

    /// Close our side and drain the client's for a moment, so that data it sent after the
    /// last request does not turn our close into a reset that destroys the response.
    async fn linger(&mut self) {
        if self.stream.shutdown().await.is_err() {
            return;
        }
        let deadline = Instant::now() + LINGER;
        let mut scratch = vec![0u8; 4096];
        let mut drained = 0;
        while drained < LINGER_BYTES {
            match tokio::time::timeout_at(deadline, self.stream.read(&mut scratch)).await {
                Ok(Ok(n)) if n > 0 => drained += n,
                _ => break,
            }
        }
    }
}
