//! One client connection on a worker thread: read and strictly parse each request
//! (keep-alive and pipelined requests in order, an idle connection holding no buffers),
//! refuse what the switch answers itself, and serve the request the configured mode's way,
//! chosen in one place: proxied (`proxy`), tunnelled (`splice_mode`) or handed off to its
//! node (`handoff`, proxied when the handoff is not taken). A connection that opens with the
//! HTTP/2 preface, or agreed on `h2` by ALPN, is served by `h2` instead.

use crate::client::{Client, Next};
use crate::client_stream::ClientStream;
use crate::dispatch::{Candidates, DetachedAssignment};
use crate::handoff::{HandoffOutcome, HandoffWorker, Payload, WorkerLinks};
use crate::mode::Mode;
use crate::state::Shared;
use crate::worker::Worker;
use locus_http::{RequestHead, parse_request};
use locus_io::ConnectionSlot;
use std::io;
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};
use tokio::net::TcpStream;
use tokio::sync::watch;
use tokio::time::timeout_at;

/// Serve one accepted client connection, holding its place in `connections`, until it closes.
pub async fn serve(
    worker: Rc<Worker>,
    stream: TcpStream,
    peer: SocketAddr,
    shutdown: watch::Receiver<bool>,
    slot: ConnectionSlot,
) {
    serve_with(worker, ClientStream::Plain(stream), peer, shutdown, Restart::Fresh, slot).await
}

/// Serve a connection accepted on a TLS listener: the handshake (under the header timeout,
/// counted by `tls`), then HTTP as on any other connection. Cleartext HTTP is answered 400.
pub async fn serve_tls(
    worker: Rc<Worker>,
    stream: TcpStream,
    peer: SocketAddr,
    shutdown: watch::Receiver<bool>,
    slot: ConnectionSlot,
    tls: Arc<locus_tls::TlsService>,
) {
    let _ = stream.set_nodelay(true);
    let config = worker.shared.config();
    let deadline = tokio::time::Instant::now() + config.limits.header_timeout();
    let accepted = if config.mode == Mode::Handoff {
        // The session may move to a node with its connection (one-way HTTPS).
        tls.accept_exportable(stream, deadline).await
    } else {
        tls.accept(stream, deadline).await
    };
    match accepted {
        Ok(session) if session.alpn() == Some(locus_tls::ALPN_H2) => {
            let stream = ClientStream::Tls(Box::new(session));
            crate::h2::serve(worker, stream, peer, shutdown, Vec::new()).await;
            drop(slot);
        }
        Ok(session) => {
            let stream = ClientStream::Tls(Box::new(session));
            serve_with(worker, stream, peer, shutdown, Restart::Fresh, slot).await
        }
        Err(locus_tls::HandshakeFailure::Cleartext(tcp)) => {
            locus_tls::answer_cleartext(tcp, b"Server: locus\r\n").await;
        }
        Err(e) => tracing::debug!(%peer, "TLS handshake failed: {e}"),
    }
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
        stream: ClientStream,
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
    stream: ClientStream,
    peer: SocketAddr,
    shutdown: watch::Receiver<bool>,
    restart: Restart,
    slot: ConnectionSlot,
) {
    let _ = stream.tcp().set_nodelay(true);
    let (handoff_allowed, restored) = match restart {
        Restart::Fresh => (true, None),
        Restart::Restored(dispatch) => (false, dispatch),
    };
    // h2c with prior knowledge: a fresh cleartext connection whose first bytes are the preface.
    let config = worker.shared.config();
    let may_be_h2c =
        matches!(restart, Restart::Fresh) && stream.plain().is_some() && config.http2.enabled_in(config.mode);
    let mut session = Session {
        client: Client::new(worker, stream, peer),
        shutdown,
        handoff_allowed,
        restored,
        counted: false,
        may_be_h2c,
        fresh: true,
    };
    let ended = session.run().await;
    session.end();
    if let Ended::Http2 = ended {
        let Session { client, shutdown, .. } = session;
        crate::h2::serve(client.worker, client.stream, peer, shutdown, client.buf).await;
    }
    drop(slot);
}

/// How a session's HTTP/1.1 loop ended.
enum Ended {
    Closed,
    /// The connection opened with the HTTP/2 preface (in the read buffer).
    Http2,
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
    /// No request was read yet and HTTP/2 may be spoken: the preface is looked for.
    may_be_h2c: bool,
    /// No request was read yet: the first is waited for even when shutting down.
    fresh: bool,
}

/// How long an idle keep-alive connection is still waited for once the switch is shutting
/// down (at most the keep-alive timeout).
const SHUTDOWN_GRACE: Duration = Duration::from_secs(1);

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

    async fn run(&mut self) -> Ended {
        let shared = self.client.worker.shared.clone();
        let limits = shared.limits();
        let mut head = RequestHead::default();
        let mut head_started: Option<Instant> = None;
        loop {
            let preface = match self.may_be_h2c && !self.client.buf.is_empty() {
                true => crate::h2::starts_with_preface(&self.client.buf),
                false => Some(false),
            };
            let parsed = match preface {
                Some(true) => return Ended::Http2,
                _ if self.client.buf.is_empty() => Ok(false),
                // Part of the preface: more bytes tell.
                None => Ok(false),
                Some(false) => parse_request(&self.client.buf, &limits, &mut head),
            };
            let read = match parsed {
                Err(e) => {
                    shared.counters.client_errors.fetch_add(1, Relaxed);
                    tracing::debug!(peer = %self.client.peer, "refused request: {e}");
                    self.client.send_error(e.status(), true).await;
                    return Ended::Closed;
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
                    self.may_be_h2c = false;
                    self.fresh = false;
                    if !std::mem::take(&mut self.counted) {
                        shared.counters.requests.fetch_add(1, Relaxed);
                    }
                    match self.handle(&head).await {
                        Next::Close => return Ended::Closed,
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
                return Ended::Closed;
            }
        }
    }

    /// Wait for the next request without a buffer; readiness can be spurious, so only a read
    /// that returns bytes ends the wait.
    /// Wait for the next request (the keep-alive timeout). Once the switch is shutting down,
    /// an idle keep-alive connection is still waited for, for at most `SHUTDOWN_GRACE`: a
    /// request that comes is served with `Connection: close`, so a busy client leaves for the
    /// next switch (an upgrade) between two requests, never with one in flight; one idle
    /// longer is closed. A connection that has not sent its first request yet was accepted,
    /// so it gets the whole keep-alive timeout (the drain timeout bounds both).
    async fn wait_for_request(&mut self, shared: &Shared) -> Read {
        let keepalive = shared.config().limits.keepalive_timeout();
        let grace = keepalive.min(SHUTDOWN_GRACE);
        let mut draining = *self.shutdown.borrow() || shared.is_shutting_down();
        let first_wait = if draining && !self.fresh { grace } else { keepalive };
        let mut deadline = tokio::time::Instant::now() + first_wait;
        loop {
            tokio::select! {
                biased;
                _ = self.shutdown.changed(), if !draining => {
                    draining = true;
                    if !self.fresh {
                        deadline = deadline.min(tokio::time::Instant::now() + grace);
                    }
                    continue;
                }
                r = timeout_at(deadline, self.client.stream.readable()) => {
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
        let deadline = tokio::time::Instant::from_std(started + shared.config().limits.header_timeout());
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
            crate::target_check::refusal(head, &self.client.buf, &shared, self.client.stream.tcp())
        {
            return self.client.reject(head, status, true).await;
        }
        if shared.config().redirect_to_https
            && self.client.stream.plain().is_some()
            && let Some(&port) = shared.https_port.get()
        {
            return self.client.redirect_to_https(head, port).await;
        }
        let mode = match shared.config().mode {
            // A tunnel relays the bytes as they are: TLS clients are proxied instead.
            Mode::Splice if self.client.stream.plain().is_none() => Mode::Proxy,
            mode => mode,
        };
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
    /// node's refusal restores the connection here and it is proxied from then on. A TLS
    /// session moves with it (taken over from rustls first); one that cannot is served here.
    async fn try_handoff<'d>(
        &mut self,
        head: &RequestHead,
        candidates: Candidates<'d>,
    ) -> Result<Next, Candidates<'d>> {
        let Some(links) = self.client.worker.links.clone() else { return Err(candidates) };
        let Some(addrs) = crate::handoff::ConnectionAddrs::of(self.client.stream.tcp(), self.client.peer)
        else {
            return Err(candidates);
        };
        let client = &mut self.client;
        let session = match &mut client.stream {
            ClientStream::Plain(_) => None,
            ClientStream::Tls(tls) => match tls.take_over().and_then(|()| tls.session_state(&client.buf)) {
                Ok(session) => Some(Box::new(session)),
                Err(e) => {
                    self.handoff_allowed = false;
                    if let Some(plane) = client.worker.shared.handoff.as_ref() {
                        plane.counters.count_two_way(e.reason());
                    }
                    tracing::debug!(peer = %client.peer, "TLS session served by the switch: {e}");
                    return Err(candidates);
                }
            },
        };
        let client = &self.client;
        let (req, rtt) = (client.request_info(head), client.rtt());
        let payload = match session {
            Some(session) => Payload::Tls(session),
            None => Payload::Read(&client.buf),
        };
        let socket = client.stream.tcp();
        match crate::handoff::hand_off(&links, socket, addrs, payload, &req, rtt, candidates).await {
            HandoffOutcome::NotTried(candidates) => Err(candidates),
            HandoffOutcome::HandedOff => {
                self.client.log(head, 0, 0);
                // The descriptor is closed when the session ends: in repair mode, silently.
                Ok(Next::Close)
            }
            HandoffOutcome::Restored(stream, dispatch) => {
                // The old descriptor (dumped, disconnected) closes silently here.
                match &mut self.client.stream {
                    // The request went back into the socket: read it again.
                    ClientStream::Plain(_) => {
                        self.client.stream = ClientStream::Plain(stream);
                        self.client.buf.clear();
                    }
                    // The session goes on here on the restored socket; the request is in `buf`.
                    ClientStream::Tls(tls) => drop(tls.replace_tcp(stream)),
                }
                self.handoff_allowed = false;
                self.restored = dispatch;
                self.counted = true;
                Ok(Next::Continue(0))
            }
            HandoffOutcome::Lost => Ok(Next::Close),
        }
    }
}
