//! One client connection on a worker thread, in proxy mode: read and strictly parse each
//! request (keep-alive and pipelined requests in order), dispatch it through the policy,
//! send it over a pooled node connection, and relay the response back, streaming bodies of
//! any size both ways. Failures before any response byte are retried once elsewhere when the
//! request is idempotent; an idle connection holds no buffers.

use crate::access_log::{AccessLog, LogRecord};
use crate::config::Mode;
use crate::dispatch::{Assignment, DispatchError};
use crate::forward::{BodyRelay, write_error_response, write_request_head, write_response_head};
use crate::pool::{BufferPool, NodePool};
use crate::splice::{PipePool, splice_exact, tunnel};
use crate::state::Shared;
use locus_core::{Method, NodeId, RequestInfo};
use locus_http::{
    BodyError, BodyKind, BodyTracker, RequestHead, ResponseHead, Version, parse_request, parse_response,
};
use locus_io::{mark_read_drained, try_read_buf_drained};
use std::cell::{Cell, RefCell};
use std::io;
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Instant;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::watch;
use tokio::time::{timeout, timeout_at};

/// Per-worker-thread state shared by the worker's client sessions.
pub struct Worker {
    pub shared: Arc<Shared>,
    pub pool: RefCell<NodePool>,
    pub relay_buffers: RefCell<BufferPool>,
    pub read_buffers: RefCell<BufferPool>,
    pub pipes: RefCell<PipePool>,
    pub log: Option<RefCell<AccessLog>>,
    /// Client sessions open on this worker.
    pub active: Cell<usize>,
    /// Handoff mode: this worker's control channels to the node agents, by node index.
    pub links: Option<crate::handoff::WorkerLinks>,
}

const READ_BUFFER: usize = 8 * 1024;

impl Worker {
    pub fn new(shared: Arc<Shared>, log: Option<AccessLog>) -> Worker {
        let l = &shared.config.limits;
        let pool = NodePool::new(shared.nodes.len(), l.pool_per_node, l.pool_idle());
        let relay = BufferPool::new(l.buffer_bytes, 256);
        Worker {
            pool: RefCell::new(pool),
            relay_buffers: RefCell::new(relay),
            read_buffers: RefCell::new(BufferPool::new(READ_BUFFER, 1024)),
            pipes: RefCell::new(PipePool::new(crate::open_files::PIPES_KEPT)),
            log: log.map(RefCell::new),
            active: Cell::new(0),
            links: crate::handoff::make_links(&shared),
            shared,
        }
    }
}

/// What to do with the client connection after a request.
enum Next {
    /// Keep going; this many bytes at the front of the read buffer are done with.
    Continue(usize),
    Close,
}

/// How talking to a node failed.
#[derive(Debug)]
enum NodeFailure {
    Connect(io::Error),
    Io(io::Error),
    Closed,
    Timeout,
}

impl NodeFailure {
    fn describe(&self) -> String {
        match self {
            NodeFailure::Connect(e) => format!("connect failed: {e}"),
            NodeFailure::Io(e) => format!("connection failed: {e}"),
            NodeFailure::Closed => "connection closed before a response".to_string(),
            NodeFailure::Timeout => "timed out".to_string(),
        }
    }

    /// The switch had no descriptor for the connection: its own limit, not the node's fault.
    fn is_out_of_descriptors(&self) -> bool {
        matches!(self, NodeFailure::Connect(e) if locus_io::is_out_of_descriptors(e))
    }
}

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

/// Serve one accepted client connection until it closes.
pub async fn serve(worker: Rc<Worker>, stream: TcpStream, peer: SocketAddr, shutdown: watch::Receiver<bool>) {
    serve_with(worker, stream, peer, shutdown, true).await
}

/// Serve a connection the switch restored after a node refused it (or a re-handoff failed):
/// by the proxy path, never handed off again. The caller counted it in `connections`.
pub async fn serve_restored(
    worker: Rc<Worker>,
    stream: TcpStream,
    peer: SocketAddr,
    shutdown: watch::Receiver<bool>,
) {
    serve_with(worker, stream, peer, shutdown, false).await
}

async fn serve_with(
    worker: Rc<Worker>,
    stream: TcpStream,
    peer: SocketAddr,
    shutdown: watch::Receiver<bool>,
    handoff_allowed: bool,
) {
    let _ = stream.set_nodelay(true);
    worker.active.set(worker.active.get() + 1);
    let mut session = Session {
        worker: worker.clone(),
        stream,
        peer,
        buf: Vec::new(),
        resp: ResponseHead::default(),
        out: Vec::new(),
        shutdown,
        handoff_allowed,
    };
    session.run().await;
    session.release_buffers();
    worker.active.set(worker.active.get() - 1);
    worker.shared.connections.fetch_sub(1, Relaxed);
}

struct Session {
    worker: Rc<Worker>,
    stream: TcpStream,
    peer: SocketAddr,
    /// Bytes read from the client: the current request head, then body bytes or pipelined
    /// requests.
    buf: Vec<u8>,
    resp: ResponseHead,
    out: Vec<u8>,
    shutdown: watch::Receiver<bool>,
    /// Handoff mode: whether this connection may still be handed to a node (not after a
    /// refusal: the switch then serves it to the end).
    handoff_allowed: bool,
}

impl Session {
    async fn run(&mut self) {
        let shared = self.worker.shared.clone();
        let limits = shared.limits;
        let header_timeout = shared.config.limits.header_timeout();
        let keepalive = shared.config.limits.keepalive_timeout();
        let mut head = RequestHead::default();
        let mut head_started: Option<Instant> = None;
        loop {
            let parsed =
                if self.buf.is_empty() { Ok(false) } else { parse_request(&self.buf, &limits, &mut head) };
            match parsed {
                Err(e) => {
                    shared.counters.client_errors.fetch_add(1, Relaxed);
                    tracing::debug!(peer = %self.peer, "refused request: {e}");
                    self.send_error(e.status(), true).await;
                    return;
                }
                Ok(false) => {
                    if self.buf.is_empty() {
                        // Idle between requests: hold no buffers while waiting.
                        self.release_buffers();
                        head.headers = Vec::new();
                        if *self.shutdown.borrow() || shared.is_shutting_down() {
                            return;
                        }
                        // Wait for the next request without a buffer; readiness can be
                        // spurious, so only a read that returns bytes ends the wait.
                        loop {
                            tokio::select! {
                                biased;
                                _ = self.shutdown.changed() => return,
                                r = timeout(keepalive, self.stream.readable()) => {
                                    if !matches!(r, Ok(Ok(()))) {
                                        return;
                                    }
                                }
                            }
                            match self.try_read_client() {
                                Ok(0) => return,
                                Ok(_) => break,
                                Err(e) if e.kind() == io::ErrorKind::WouldBlock => self.release_buffers(),
                                Err(_) => return,
                            }
                        }
                        head_started = Some(Instant::now());
                        continue;
                    }
                    let started = *head_started.get_or_insert_with(Instant::now);
                    let deadline = tokio::time::Instant::from_std(started + header_timeout);
                    match timeout_at(deadline, self.read_client()).await {
                        Ok(Ok(0)) | Ok(Err(_)) => return,
                        Ok(Ok(_)) => {}
                        Err(_) => {
                            if !self.buf.is_empty() {
                                shared.counters.client_errors.fetch_add(1, Relaxed);
                                self.send_error(408, true).await;
                            }
                            return;
                        }
                    }
                    continue;
                }
                Ok(true) => {}
            }
            head_started = None;
            shared.counters.requests.fetch_add(1, Relaxed);
            match self.handle(&head).await {
                Next::Close => return,
                Next::Continue(consumed) => {
                    self.buf.drain(..consumed);
                    if !self.buf.is_empty() {
                        head_started = Some(Instant::now());
                    }
                }
            }
            if shared.is_shutting_down() {
                return;
            }
        }
    }

    fn release_buffers(&mut self) {
        if self.buf.capacity() > 0 && self.buf.is_empty() {
            self.worker.read_buffers.borrow_mut().give(std::mem::take(&mut self.buf));
        }
        if self.out.capacity() > 0 {
            self.worker.read_buffers.borrow_mut().give(std::mem::take(&mut self.out));
        }
    }

    fn prepare_read(&mut self) {
        if self.buf.capacity() == 0 {
            self.buf = self.worker.read_buffers.borrow_mut().take();
        }
        if self.buf.capacity() - self.buf.len() < 1024 {
            let grow = self.buf.capacity().max(4096);
            self.buf.reserve(grow);
        }
    }

    /// Read more client bytes into `buf`; returns the count (0 at EOF).
    async fn read_client(&mut self) -> io::Result<usize> {
        self.prepare_read();
        self.stream.read_buf(&mut self.buf).await
    }

    /// Read whatever client bytes are ready, without waiting.
    fn try_read_client(&mut self) -> io::Result<usize> {
        self.prepare_read();
        try_read_buf_drained(&self.stream, &mut self.buf)
    }

    async fn send_error(&mut self, status: u16, close: bool) {
        let mut out = Vec::with_capacity(256);
        write_error_response(&mut out, status, close);
        self.worker.shared.counters.response(status);
        let t = self.worker.shared.config.limits.node_timeout();
        if timeout(t, self.stream.write_all(&out)).await.is_ok() && close {
            let _ = self.stream.shutdown().await;
        }
    }

    /// Answer a request with an error from the switch itself.
    async fn reject(&mut self, head: &RequestHead, status: u16, close: bool) -> Next {
        let close = close || head.body != BodyKind::Empty || !head.keep_alive;
        self.send_error(status, close).await;
        self.log(head, status, 0);
        if close { Next::Close } else { Next::Continue(head.head_len) }
    }

    async fn dispatch<'d>(
        &self,
        shared: &'d Shared,
        head: &RequestHead,
    ) -> Result<Assignment<'d>, DispatchError> {
        let info = RequestInfo::new(head.method, head.path_str(&self.buf));
        shared.dispatcher.acquire(&info, shared.config.limits.queue_timeout()).await
    }

    async fn handle(&mut self, head: &RequestHead) -> Next {
        let shared = self.worker.shared.clone();
        if let Some(status) = crate::target_check::refusal(head, &self.buf, &shared, &self.stream) {
            return self.reject(head, status, true).await;
        }
        if shared.config.mode == Mode::Splice {
            return self.handle_tunnel(&shared, head).await;
        }
        if shared.config.mode == Mode::Handoff
            && self.handoff_allowed
            && let Some(next) = self.try_handoff(&shared, head).await
        {
            return next;
        }
        if head.expect_continue && head.body != BodyKind::Empty && shared.config.mode != Mode::Splice {
            // The switch answers the expectation itself and strips it towards the node.
            let t = shared.config.limits.node_timeout();
            if !matches!(
                timeout(t, self.stream.write_all(b"HTTP/1.1 100 Continue\r\n\r\n")).await,
                Ok(Ok(()))
            ) {
                return Next::Close;
            }
        }
        let mut asg = match self.dispatch(&shared, head).await {
            Ok(a) => Some(a),
            Err(e) => return self.dispatch_failed(head, e).await,
        };
        let retryable = head.method.is_idempotent() && head.body == BodyKind::Empty;
        let mut moved = false;
        let mut stale_retries = 0;
        let mut fresh = false;
        let mut relay = self.worker.relay_buffers.borrow_mut().take();
        let next = loop {
            let Some(node) = asg.as_ref().map(|a| a.node) else { break Next::Close };
            let conn = self.node_connection(node, fresh, head.method.is_idempotent()).await;
            let (mut conn, reused) = match conn {
                Ok(c) => c,
                Err(failure) if failure.is_out_of_descriptors() => {
                    break self.shed(head, &failure.describe()).await;
                }
                Err(failure) => {
                    shared.node_failed(node, &failure.describe());
                    if retryable && !moved {
                        moved = true;
                        fresh = false;
                        if let Err(next) = self.redispatch(&shared, head, &mut asg).await {
                            break next;
                        }
                        continue;
                    }
                    break self.reject(head, 502, false).await;
                }
            };
            shared.nodes[node.index()].requests.fetch_add(1, Relaxed);
            match self.exchange(&mut conn, node, head, &mut relay).await {
                Ok(done) => {
                    if done.node_reusable {
                        let generation = shared.nodes[node.index()].generation.load(Relaxed);
                        self.worker.pool.borrow_mut().put(node.index(), conn, generation, Instant::now());
                    }
                    shared.counters.response(done.status);
                    self.log(head, done.status, done.body_bytes);
                    break if done.client_keep_alive { Next::Continue(done.consumed) } else { Next::Close };
                }
                Err(ExchangeError::BeforeResponse { failure, body_sent }) => {
                    drop(conn);
                    let stale = reused && matches!(failure, NodeFailure::Closed | NodeFailure::Io(_));
                    if stale && retryable && stale_retries < 2 {
                        // A pooled connection the node had already closed: try a fresh one.
                        stale_retries += 1;
                        fresh = true;
                        continue;
                    }
                    if matches!(failure, NodeFailure::Timeout) {
                        shared.counters.node_timeouts.fetch_add(1, Relaxed);
                        break self.reject(head, 504, body_sent).await;
                    }
                    if !reused {
                        shared.node_failed(node, &failure.describe());
                    }
                    if retryable && !moved {
                        moved = true;
                        fresh = false;
                        if let Err(next) = self.redispatch(&shared, head, &mut asg).await {
                            break next;
                        }
                        continue;
                    }
                    break self.reject(head, 502, body_sent).await;
                }
                Err(ExchangeError::BadResponse) => {
                    shared.counters.bad_responses.fetch_add(1, Relaxed);
                    tracing::warn!(node = %shared.nodes[node.index()].name, "malformed response from node");
                    break self.reject(head, 502, true).await;
                }
                Err(ExchangeError::ClientBody(e)) => {
                    shared.counters.client_errors.fetch_add(1, Relaxed);
                    tracing::debug!(peer = %self.peer, "bad request body: {e}");
                    break self.reject(head, 400, true).await;
                }
                Err(ExchangeError::Midstream) | Err(ExchangeError::ClientGone) => break Next::Close,
            }
        };
        drop(asg);
        self.worker.relay_buffers.borrow_mut().give(relay);
        next
    }

    /// Handoff mode: route the request, then move the connection itself to the node (hold its
    /// packets, dump it with what was read put back, HandOver, Ready, forward, Go). `None`:
    /// nothing was done (no channel to the node, no MAC, dump refused), serve by proxy. A
    /// node's refusal restores the connection here and it is proxied from then on.
    async fn try_handoff(&mut self, shared: &Arc<Shared>, head: &RequestHead) -> Option<Next> {
        use locus_handoff::{ConnectionId, HandoffHint, disconnect_dumped, dump_connection_in_place};
        use std::os::fd::AsFd;
        let plane = shared.handoff.as_ref()?;
        let (SocketAddr::V4(client), Ok(SocketAddr::V4(local))) = (self.peer, self.stream.local_addr())
        else {
            return None;
        };
        let asg = match self.dispatch(shared, head).await {
            Ok(a) => a,
            Err(e) => return Some(self.dispatch_failed(head, e).await),
        };
        let node = asg.node;
        let link_up = self.worker.links.as_ref().and_then(|l| l.get(node.index())).is_some_and(|l| l.is_up());
        if !link_up || !plane.can_steer_to(node) {
            return None;
        }
        let key = locus_bpf::ConnKey::new(client, local);
        let id = ConnectionId::from_tuple(client, local.port());
        let target = head.path_str(&self.buf).to_string();
        let hint = HandoffHint { target: target.clone(), request_len: self.buf.len() as u32 };
        // Hold before the dump: from here the client's packets wait (it retransmits).
        if let Err(e) = plane.hold(key, node) {
            tracing::debug!(peer = %self.peer, "handoff: cannot hold, proxying: {e}");
            return None;
        }
        let state = match dump_connection_in_place(self.stream.as_fd(), &self.buf) {
            Ok(state) => state,
            Err(e) => {
                plane.unforward(key);
                plane.counters.failed.fetch_add(1, Relaxed);
                tracing::warn!(peer = %self.peer, "handoff: dump failed, proxying: {e}");
                return None;
            }
        };
        if let Err(e) = disconnect_dumped(self.stream.as_fd()) {
            let _ = locus_handoff::resume_connection(self.stream.as_fd());
            plane.unforward(key);
            plane.counters.failed.fetch_add(1, Relaxed);
            tracing::warn!(peer = %self.peer, "handoff: disconnect failed, proxying: {e}");
            return None;
        }
        crate::handoff::register(plane, id, key, node, asg.detach(), target);
        let handed = || {
            plane.counters.handoffs.fetch_add(1, Relaxed);
            shared.nodes[node.index()].requests.fetch_add(1, Relaxed);
        };
        match crate::handoff::hand_over(&self.worker, node, id, key, state, hint, handed).await {
            Ok(()) => {
                self.log(head, 0, 0);
                // The descriptor is closed when the session ends: in repair mode, silently.
                Some(Next::Close)
            }
            Err((state, why)) => {
                crate::handoff::unregister(shared, id);
                tracing::info!(peer = %self.peer, node = %shared.nodes[node.index()].name, "handoff not taken, the switch serves the connection: {why}");
                match crate::handoff::restore_here(plane, &state, key).await {
                    Ok(stream) => {
                        // The old descriptor (dumped, disconnected) closes silently here.
                        self.stream = stream;
                        self.buf.clear();
                        self.handoff_allowed = false;
                        Some(Next::Continue(0))
                    }
                    Err(e) => {
                        tracing::warn!(peer = %self.peer, "handoff: cannot restore the connection here: {e}");
                        Some(Next::Close)
                    }
                }
            }
        }
    }

    /// Splice mode: route the first request, send it to the node as received, then join the
    /// two sockets in the kernel until the connection ends. The node sees the client's own
    /// bytes (version, Connection, Expect), so HTTP/1.0, keep-alive and 100-continue are
    /// end to end; the assignment (the node's load) lasts as long as the tunnel.
    async fn handle_tunnel(&mut self, shared: &Shared, head: &RequestHead) -> Next {
        let retryable = head.method.is_idempotent() && head.body == BodyKind::Empty;
        let mut asg = match self.dispatch(shared, head).await {
            Ok(a) => Some(a),
            Err(e) => return self.dispatch_failed(head, e).await,
        };
        let mut moved = false;
        let t = shared.config.limits.node_timeout();
        if !self.has_tunnel_pipes() {
            return self.shed(head, "no pipes for the tunnel").await;
        }
        let conn = loop {
            let Some(node) = asg.as_ref().map(|a| a.node) else { return Next::Close };
            let attempt = match self.node_connection(node, true, false).await {
                Ok((conn, _)) => {
                    let mut conn = conn;
                    match write_node(&mut conn, &self.buf[head.head_start..], t).await {
                        Ok(()) => Ok(conn),
                        Err(f) => Err(f),
                    }
                }
                Err(f) => Err(f),
            };
            match attempt {
                Ok(conn) => {
                    shared.nodes[node.index()].requests.fetch_add(1, Relaxed);
                    break conn;
                }
                Err(failure) if failure.is_out_of_descriptors() => {
                    return self.shed(head, &failure.describe()).await;
                }
                Err(failure) => {
                    shared.node_failed(node, &failure.describe());
                    if retryable && !moved {
                        moved = true;
                        if let Err(next) = self.redispatch(shared, head, &mut asg).await {
                            return next;
                        }
                        continue;
                    }
                    return self.reject(head, 502, true).await;
                }
            }
        };
        let sent = (self.buf.len() - head.head_start) as u64;
        let idle = shared.config.limits.keepalive_timeout().max(t);
        let result = tunnel(&self.stream, &conn, &self.worker.pipes, idle).await;
        let (up, down) = match &result {
            Ok(b) => (b.client_to_node, b.node_to_client),
            Err(e) => {
                tracing::debug!(peer = %self.peer, "tunnel ended: {e}");
                (0, 0)
            }
        };
        shared.counters.bytes_to_nodes.fetch_add(sent + up, Relaxed);
        shared.counters.bytes_to_clients.fetch_add(down, Relaxed);
        if let Some(a) = &asg {
            shared.nodes[a.node.index()].bytes_from.fetch_add(down, Relaxed);
        }
        self.log(head, 0, down);
        drop(asg);
        Next::Close
    }

    /// Complete the current assignment and dispatch the request again (the failed node is
    /// out of the view by now if passive checks are on). `Err` carries the answer already
    /// sent when no node can take it.
    async fn redispatch<'d>(
        &mut self,
        shared: &'d Shared,
        head: &RequestHead,
        asg: &mut Option<Assignment<'d>>,
    ) -> Result<(), Next> {
        shared.counters.retries.fetch_add(1, Relaxed);
        drop(asg.take());
        match self.dispatch(shared, head).await {
            Ok(a) => {
                *asg = Some(a);
                Ok(())
            }
            Err(e) => Err(self.dispatch_failed(head, e).await),
        }
    }

    /// The switch is out of descriptors: answer 503 and close the connection (freeing its
    /// descriptor); the node stays in the view.
    async fn shed(&mut self, head: &RequestHead, why: &str) -> Next {
        self.worker.shared.counters.shed_no_descriptors.fetch_add(1, Relaxed);
        tracing::debug!(peer = %self.peer, "out of descriptors, answering 503: {why}");
        self.reject(head, 503, true).await
    }

    /// Splice mode: whether the worker's pool has the tunnel's two pipes, made now if need be,
    /// so that running out of descriptors is a 503 before the node is involved.
    fn has_tunnel_pipes(&self) -> bool {
        let mut pipes = self.worker.pipes.borrow_mut();
        let (Ok(a), Ok(b)) = (pipes.take(), pipes.take()) else { return false };
        pipes.give(a);
        pipes.give(b);
        true
    }

    /// A pipe from the worker's pool, or a new one; `None` when none can be made or it would
    /// take descriptors the node connections need (the body then goes through user space).
    fn take_pipe(&self) -> Option<crate::splice::Pipe> {
        let pipe = self.worker.pipes.borrow_mut().take().ok()?;
        (!pipe.leaves_too_few_descriptors()).then_some(pipe)
    }

    async fn dispatch_failed(&mut self, head: &RequestHead, e: DispatchError) -> Next {
        let c = &self.worker.shared.counters;
        match e {
            DispatchError::NoNodeUp => c.no_node.fetch_add(1, Relaxed),
            DispatchError::QueueTimeout => c.queue_timeouts.fetch_add(1, Relaxed),
        };
        self.reject(head, 503, false).await
    }

    /// A connection to `node`: a pooled one unless `fresh`; pooled ones are probed first
    /// when the request must not be sent twice.
    async fn node_connection(
        &self,
        node: NodeId,
        fresh: bool,
        idempotent: bool,
    ) -> Result<(TcpStream, bool), NodeFailure> {
        let shared = &self.worker.shared;
        let info = &shared.nodes[node.index()];
        if !fresh {
            let generation = info.generation.load(Relaxed);
            let pooled = self.worker.pool.borrow_mut().take(node.index(), generation, Instant::now());
            if let Some(s) = pooled
                && (idempotent || probe_alive(&s))
            {
                return Ok((s, true));
            }
        }
        match timeout(shared.config.limits.connect_timeout(), TcpStream::connect(info.addr)).await {
            Ok(Ok(s)) => {
                let _ = s.set_nodelay(true);
                Ok((s, false))
            }
            Ok(Err(e)) => Err(NodeFailure::Connect(e)),
            Err(_) => Err(NodeFailure::Connect(io::Error::new(io::ErrorKind::TimedOut, "connect timed out"))),
        }
    }

    async fn exchange(
        &mut self,
        conn: &mut TcpStream,
        node: NodeId,
        head: &RequestHead,
        relay: &mut Vec<u8>,
    ) -> Result<Exchanged, ExchangeError> {
        let consumed = self.send_request(conn, node, head).await?;
        let mut done = self.relay_response(conn, node, head, relay).await?;
        done.consumed = consumed;
        Ok(done)
    }

    /// Send the rewritten head and the request body; returns the bytes of `buf` consumed.
    async fn send_request(
        &mut self,
        conn: &mut TcpStream,
        node: NodeId,
        head: &RequestHead,
    ) -> Result<usize, ExchangeError> {
        let shared = self.worker.shared.clone();
        let t = shared.config.limits.node_timeout();
        if self.out.capacity() == 0 {
            self.out = self.worker.read_buffers.borrow_mut().take();
        }
        self.out.clear();
        let client_ip = shared.config.forwarded_for.then(|| self.peer.ip());
        write_request_head(
            &mut self.out,
            head,
            &self.buf,
            client_ip,
            &shared.nodes[node.index()].host_header,
        );
        let start = head.head_len;
        let mut tracker = BodyTracker::new(head.body);
        let first = tracker.advance(&self.buf[start..]).map_err(ExchangeError::ClientBody)?;
        self.out.extend_from_slice(&self.buf[start..start + first.consumed]);
        let body_sent = first.consumed > 0;
        let sent = self.out.len();
        write_node(conn, &self.out, t)
            .await
            .map_err(|failure| ExchangeError::BeforeResponse { failure, body_sent })?;
        let mut end = start + first.consumed;
        let mut total = sent as u64;
        while !tracker.is_done() {
            self.buf.truncate(start);
            let n = match timeout(t, self.read_client()).await {
                Ok(Ok(n)) => n,
                _ => return Err(ExchangeError::ClientGone),
            };
            if n == 0 {
                return Err(ExchangeError::ClientGone);
            }
            let p = tracker.advance(&self.buf[start..]).map_err(ExchangeError::ClientBody)?;
            write_node(conn, &self.buf[start..start + p.consumed], t)
                .await
                .map_err(|failure| ExchangeError::BeforeResponse { failure, body_sent: true })?;
            total += p.consumed as u64;
            end = start + p.consumed;
        }
        shared.counters.bytes_to_nodes.fetch_add(total, Relaxed);
        Ok(end)
    }

    async fn relay_response(
        &mut self,
        conn: &mut TcpStream,
        node: NodeId,
        head: &RequestHead,
        relay: &mut Vec<u8>,
    ) -> Result<Exchanged, ExchangeError> {
        let shared = self.worker.shared.clone();
        let t = shared.config.limits.node_timeout();
        let max_head = relay.capacity();
        let is_head = head.method == Method::Head;
        let splice_min = shared.config.limits.splice_min_bytes;
        // With splicing on, read only the start of the response into user space so that
        // the bulk of a large body can move in the kernel.
        let first_read = if splice_min > 0 { (splice_min as usize).clamp(4096, max_head) } else { max_head };
        let body_sent = head.body != BodyKind::Empty;
        relay.clear();
        // Read until a final (non-1xx) response head is complete.
        loop {
            let complete = if relay.is_empty() {
                false
            } else {
                parse_response(relay, max_head, is_head, &mut self.resp)
                    .map_err(|_| ExchangeError::BadResponse)?
            };
            if complete {
                if self.resp.is_interim() {
                    let n = self.resp.head_len;
                    if head.version == Version::Http11 {
                        write_client(&mut self.stream, &relay[..n], t).await?;
                    }
                    relay.drain(..n);
                    continue;
                }
                break;
            }
            if relay.len() >= max_head {
                return Err(ExchangeError::BadResponse);
            }
            let room = first_read.saturating_sub(relay.len()).max(4096);
            let mut limited = bytes::BufMut::limit(&mut *relay, room);
            match timeout(t, conn.read_buf(&mut limited)).await {
                Err(_) => {
                    return Err(ExchangeError::BeforeResponse { failure: NodeFailure::Timeout, body_sent });
                }
                Ok(Err(e)) => {
                    return Err(ExchangeError::BeforeResponse { failure: NodeFailure::Io(e), body_sent });
                }
                Ok(Ok(0)) if relay.is_empty() => {
                    return Err(ExchangeError::BeforeResponse { failure: NodeFailure::Closed, body_sent });
                }
                Ok(Ok(0)) => return Err(ExchangeError::BadResponse),
                Ok(Ok(_)) => {}
            }
        }
        let resp = &self.resp;
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
        let mode = if dechunk { BodyRelay::Dechunk } else { BodyRelay::AsIs };
        let status = resp.status;
        let node_keep_alive = resp.keep_alive;
        let mut tracker = BodyTracker::new(resp.body);
        let body_start = resp.head_len;
        let mut extra = false;
        let mut body_bytes;
        if passthrough {
            let p = tracker.advance(&relay[body_start..]).map_err(|_| ExchangeError::BadResponse)?;
            extra |= body_start + p.consumed < relay.len();
            body_bytes = p.consumed as u64;
            write_client(&mut self.stream, &relay[..body_start + p.consumed], t).await?;
        } else {
            self.out.clear();
            write_response_head(&mut self.out, resp, relay, head.version, client_keep_alive, mode);
            let out = &mut self.out;
            let head_bytes = out.len();
            let p = tracker
                .advance_with(&relay[body_start..], |d| {
                    if dechunk {
                        out.extend_from_slice(d)
                    }
                })
                .map_err(|_| ExchangeError::BadResponse)?;
            if !dechunk {
                out.extend_from_slice(&relay[body_start..body_start + p.consumed]);
            }
            extra |= body_start + p.consumed < relay.len();
            body_bytes = (out.len() - head_bytes) as u64;
            write_client(&mut self.stream, &self.out, t).await?;
        }
        let mut total = relay.len() as u64;
        while !tracker.is_done() {
            // Without a pipe (out of descriptors) the body goes through user space instead.
            if splice_min > 0
                && !dechunk
                && let Some(run) = tracker.raw_remaining()
                && run >= splice_min
                && let Some(pipe) = self.take_pipe()
            {
                if let Err(e) = splice_exact(conn, &self.stream, &pipe, run, t).await {
                    tracing::debug!(peer = %self.peer, "spliced relay stopped: {e}");
                    return Err(ExchangeError::Midstream);
                }
                self.worker.pipes.borrow_mut().give(pipe);
                tracker.skip_raw(run);
                body_bytes += run;
                total += run;
                if tracker.is_done() {
                    // The body's last byte is spliced, and a node sends nothing more on this
                    // connection before the next request (the switch never pipelines to
                    // nodes); splice left the read readiness set, which would cost the next
                    // response's first read a recv failing with EAGAIN.
                    mark_read_drained(conn);
                }
                continue;
            }
            relay.clear();
            let n = match timeout(t, conn.read_buf(relay)).await {
                Ok(Ok(n)) => n,
                _ => return Err(ExchangeError::Midstream),
            };
            if n == 0 {
                tracker.eof().map_err(|_| ExchangeError::Midstream)?;
                break;
            }
            total += n as u64;
            if dechunk {
                self.out.clear();
                let out = &mut self.out;
                tracker
                    .advance_with(relay, |d| out.extend_from_slice(d))
                    .map_err(|_| ExchangeError::Midstream)?;
                body_bytes += self.out.len() as u64;
                write_client(&mut self.stream, &self.out, t).await?;
            } else {
                let p = tracker.advance(relay).map_err(|_| ExchangeError::Midstream)?;
                extra |= p.consumed < n;
                body_bytes += p.consumed as u64;
                write_client(&mut self.stream, &relay[..p.consumed], t).await?;
            }
        }
        shared.nodes[node.index()].bytes_from.fetch_add(total, Relaxed);
        shared.counters.bytes_to_clients.fetch_add(body_bytes, Relaxed);
        Ok(Exchanged {
            status,
            body_bytes,
            node_reusable: node_keep_alive && !extra && tracker.is_done(),
            client_keep_alive,
            consumed: 0,
        })
    }

    fn log(&self, head: &RequestHead, status: u16, body_bytes: u64) {
        let Some(log) = &self.worker.log else { return };
        let buf = &self.buf;
        log.borrow_mut().record(&LogRecord {
            client: self.peer.ip(),
            method: head.method_span.get(buf),
            target: head.target.get(buf),
            version: head.version.as_str(),
            status,
            body_bytes,
            referer: head.header(buf, "referer"),
            user_agent: head.header(buf, "user-agent"),
        });
    }
}

async fn write_node(conn: &mut TcpStream, bytes: &[u8], t: std::time::Duration) -> Result<(), NodeFailure> {
    match timeout(t, conn.write_all(bytes)).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => Err(NodeFailure::Io(e)),
        Err(_) => Err(NodeFailure::Timeout),
    }
}

async fn write_client(
    stream: &mut TcpStream,
    bytes: &[u8],
    t: std::time::Duration,
) -> Result<(), ExchangeError> {
    match timeout(t, stream.write_all(bytes)).await {
        Ok(Ok(())) => Ok(()),
        _ => Err(ExchangeError::ClientGone),
    }
}

/// Whether a pooled connection still looks open: no EOF, error or stray bytes waiting. Asks
/// the socket itself (a non-blocking peek), not tokio's readiness, which a spliced response
/// leaves marked drained.
fn probe_alive(stream: &TcpStream) -> bool {
    use std::os::fd::AsRawFd;
    let mut byte = [0u8; 1];
    // SAFETY: `byte` is a live, writable buffer of one byte.
    let n = unsafe {
        libc::recv(stream.as_raw_fd(), byte.as_mut_ptr().cast(), 1, libc::MSG_PEEK | libc::MSG_DONTWAIT)
    };
    n < 0 && io::Error::last_os_error().kind() == io::ErrorKind::WouldBlock
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::splice::tests::pair;

    #[tokio::test(flavor = "current_thread")]
    async fn probe_sees_stray_bytes_and_end_of_stream_even_on_a_socket_marked_drained() {
        let (mut node, pooled) = pair().await;
        assert!(probe_alive(&pooled), "a quiet open connection is alive");
        node.write_all(b"JUNK").await.unwrap();
        pooled.readable().await.unwrap();
        // As after a spliced body: the reactor is told the socket is drained.
        mark_read_drained(&pooled);
        assert!(!probe_alive(&pooled), "stray bytes make a pooled connection unusable");
        let (node, pooled) = pair().await;
        drop(node);
        pooled.readable().await.unwrap();
        mark_read_drained(&pooled);
        assert!(!probe_alive(&pooled), "a connection the node closed is not alive");
    }
}
