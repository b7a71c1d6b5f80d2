//! One client connection on a worker thread: read and strictly parse each request
//! (keep-alive and pipelined requests in order, an idle connection holding no buffers),
//! refuse what the switch answers itself, and serve the request the configured mode's way,
//! chosen in one place: proxied (`proxy`), tunnelled (`splice_mode`) or handed off to its
//! node (`handoff`, proxied when the handoff is not taken).

use crate::client::{Client, Next};
use crate::dispatch::{Candidates, DetachedAssignment};
use crate::handoff::{HandoffOutcome, HandoffWorker, WorkerLinks};
use crate::mode::Mode;
use crate::state::Shared;
use crate::worker::Worker;
use locus_http::{RequestHead, parse_request};
use locus_io::ConnectionSlot;
use std::io;
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Instant;
use tokio::net::TcpStream;
use tokio::sync::watch;
use tokio::time::{timeout, timeout_at};

/// Serve one accepted client connection, holding its place in `connections`, until it closes.
pub async fn serve(
    worker: Rc<Worker>,
    stream: TcpStream,
    peer: SocketAddr,
    shutdown: watch::Receiver<bool>,
    slot: ConnectionSlot,
) {
    serve_with(worker, stream, peer, shutdown, Restart::Fresh, slot).await
}

/// How a session begins.
enum Restart {
    /// A connection just accepted: handoff mode may hand it off.
    Fresh,
    /// A connection restored on the switch after its handoff was refused: served here to the
    /// end, its first request with the dispatch it already had.
    Restored(Option<DetachedAssignment>),
}

/// Handoff's control tasks reach the worker's sessions through this: a connection restored
/// after a failed re-handoff is served like any other, by the proxy path (never handed off
/// again), in a session the worker's `sessions` tracker waits for at shutdown.
impl HandoffWorker for Worker {
    fn links(&self) -> Option<&Rc<WorkerLinks>> {
        self.links.as_ref()
    }

    fn spawn_restored(
        self: Rc<Self>,
        stream: TcpStream,
        peer: SocketAddr,
        slot: ConnectionSlot,
        dispatch: Option<DetachedAssignment>,
    ) {
        let shutdown = self.shared.shutdown_tx.subscribe();
        let sessions = self.sessions.clone();
        sessions.spawn_local(serve_with(self, stream, peer, shutdown, Restart::Restored(dispatch), slot));
    }
}

/// Serve a connection until it closes; `slot`, its place in `connections`, is given back
/// when the session ends (or its task is dropped at the end of a drain).
async fn serve_with(
    worker: Rc<Worker>,
    stream: TcpStream,
    peer: SocketAddr,
    shutdown: watch::Receiver<bool>,
    restart: Restart,
    slot: ConnectionSlot,
) {
    let _ = stream.set_nodelay(true);
    let (handoff_allowed, restored) = match restart {
        Restart::Fresh => (true, None),
        Restart::Restored(dispatch) => (false, dispatch),
    };
    let mut session = Session {
        client: Client::new(worker, stream, peer),
        shutdown,
        handoff_allowed,
        restored,
        counted: false,
    };
    session.run().await;
    session.end();
    drop(slot);
}

struct Session {
    client: Client,
    shutdown: watch::Receiver<bool>,
    /// Handoff mode: whether this connection may still be handed to a node (not after a
    /// refusal: the switch then serves it to the end).
    handoff_allowed: bool,
    /// The dispatch of the request a refused handoff put back in the socket, for when it is
    /// read again: the policy is asked once per request.
    restored: Option<DetachedAssignment>,
    /// The next request read was counted already (read again after a refused handoff).
    counted: bool,
}

/// Whether the session goes on after waiting for or reading more of a request.
enum Read {
    /// More bytes are in the buffer (or a new request started).
    More,
    End,
}

impl Session {
    /// Give back what the session holds: its buffers, and a restored dispatch whose request
    /// never came again (the client left).
    fn end(&mut self) {
        self.client.release_buffers();
        if let Some(d) = self.restored.take() {
            self.client.worker.shared.dispatcher.release(d);
        }
    }

    async fn run(&mut self) {
        let shared = self.client.worker.shared.clone();
        let limits = shared.limits;
        let mut head = RequestHead::default();
        let mut head_started: Option<Instant> = None;
        loop {
            let parsed = if self.client.buf.is_empty() {
                Ok(false)
            } else {
                parse_request(&self.client.buf, &limits, &mut head)
            };
            let read = match parsed {
                Err(e) => {
                    shared.counters.client_errors.fetch_add(1, Relaxed);
                    tracing::debug!(peer = %self.client.peer, "refused request: {e}");
                    self.client.send_error(e.status(), true).await;
                    return;
                }
                Ok(false) if self.client.buf.is_empty() => {
                    // Idle between requests: hold no buffers while waiting.
                    self.client.release_buffers();
                    head.headers = Vec::new();
                    let read = self.wait_for_request(&shared).await;
                    head_started = Some(Instant::now());
                    read
                }
                Ok(false) => {
                    self.read_more_head(&shared, *head_started.get_or_insert_with(Instant::now)).await
                }
                Ok(true) => {
                    head_started = None;
                    if !std::mem::take(&mut self.counted) {
                        shared.counters.requests.fetch_add(1, Relaxed);
                    }
                    match self.handle(&head).await {
                        Next::Close => return,
                        Next::Continue(consumed) => {
                            self.client.buf.drain(..consumed);
                            if !self.client.buf.is_empty() {
                                head_started = Some(Instant::now());
                            }
                        }
                    }
                    if shared.is_shutting_down() { Read::End } else { Read::More }
                }
            };
            if let Read::End = read {
                return;
            }
        }
    }

    /// Wait for the next request without a buffer; readiness can be spurious, so only a read
    /// that returns bytes ends the wait.
    async fn wait_for_request(&mut self, shared: &Shared) -> Read {
        if *self.shutdown.borrow() || shared.is_shutting_down() {
            return Read::End;
        }
        let keepalive = shared.config.limits.keepalive_timeout();
        loop {
            tokio::select! {
                biased;
                _ = self.shutdown.changed() => return Read::End,
                r = timeout(keepalive, self.client.stream.readable()) => {
                    if !matches!(r, Ok(Ok(()))) {
                        return Read::End;
                    }
                }
            }
            match self.client.try_read() {
                Ok(0) => return Read::End,
                Ok(_) => return Read::More,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => self.client.release_buffers(),
                Err(_) => return Read::End,
            }
        }
    }

    /// Read more of a request head begun at `started`; a head not complete within the header
    /// timeout is answered 408.
    async fn read_more_head(&mut self, shared: &Shared, started: Instant) -> Read {
        let deadline = tokio::time::Instant::from_std(started + shared.config.limits.header_timeout());
        match timeout_at(deadline, self.client.read()).await {
            Ok(Ok(0)) | Ok(Err(_)) => Read::End,
            Ok(Ok(_)) => Read::More,
            Err(_) => {
                if !self.client.buf.is_empty() {
                    shared.counters.client_errors.fetch_add(1, Relaxed);
                    self.client.send_error(408, true).await;
                }
                Read::End
            }
        }
    }

    /// Serve one parsed request: the switch's own refusals first, then its one dispatch,
    /// handed to the mode's way of serving it (by proxy when a handoff is not tried).
    async fn handle(&mut self, head: &RequestHead) -> Next {
        let shared = self.client.worker.shared.clone();
        let restored = self.restored.take().map(|d| shared.dispatcher.reattach(d));
        if let Some(status) =
            crate::target_check::refusal(head, &self.client.buf, &shared, &self.client.stream)
        {
            return self.client.reject(head, status, true).await;
        }
        let mode = shared.config.mode;
        let hand_off = mode == Mode::Handoff && self.handoff_allowed;
        if mode != Mode::Splice
            && !hand_off
            && !crate::proxy::answer_expectation(&mut self.client, head).await
        {
            return Next::Close;
        }
        let candidates = match self.client.candidates(&shared, head, restored).await {
            Ok(c) => c,
            Err(next) => return next,
        };
        match mode {
            Mode::Splice => crate::splice_mode::serve_tunnel(&mut self.client, head, candidates).await,
            Mode::Handoff if hand_off => match self.try_handoff(head, candidates).await {
                Ok(next) => next,
                Err(candidates) => {
                    if !crate::proxy::answer_expectation(&mut self.client, head).await {
                        return Next::Close;
                    }
                    crate::proxy::serve_request(&mut self.client, head, candidates).await
                }
            },
            Mode::Proxy | Mode::Handoff | Mode::L4 => {
                crate::proxy::serve_request(&mut self.client, head, candidates).await
            }
        }
    }

    /// Handoff mode: move the connection itself to the node the request was dispatched to.
    /// `Err` gives the dispatch back when nothing was done: serve the request by proxy. A
    /// node's refusal restores the connection here and it is proxied from then on.
    async fn try_handoff<'d>(
        &mut self,
        head: &RequestHead,
        candidates: Candidates<'d>,
    ) -> Result<Next, Candidates<'d>> {
        let Some(links) = self.client.worker.links.clone() else { return Err(candidates) };
        let Some(addrs) = crate::handoff::ConnectionAddrs::of(&self.client.stream, self.client.peer) else {
            return Err(candidates);
        };
        let req = self.client.request_info(head);
        let rtt = self.client.rtt();
        let client = &self.client;
        match crate::handoff::hand_off(&links, &client.stream, addrs, &client.buf, &req, rtt, candidates)
            .await
        {
            HandoffOutcome::NotTried(candidates) => Err(candidates),
            HandoffOutcome::HandedOff => {
                self.client.log(head, 0, 0);
                // The descriptor is closed when the session ends: in repair mode, silently.
                Ok(Next::Close)
            }
            HandoffOutcome::Restored(stream, dispatch) => {
                // The old descriptor (dumped, disconnected) closes silently here.
                self.client.stream = stream;
                self.client.buf.clear();
                self.handoff_allowed = false;
                self.restored = dispatch;
                self.counted = true;
                Ok(Next::Continue(0))
            }
            HandoffOutcome::Lost => Ok(Next::Close),
        }
    }
}
