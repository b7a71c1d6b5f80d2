//! One client connection: reads requests into pooled buffers (`buffer_pool`), parses them in
//! place and answers pipelined ones in order (`answer`; large bodies streamed by `body_stream`),
//! under the header, keep-alive and send timeouts kept with one lazily reset timer. With a
//! `RequestRouter` (handed-off connections) the switch routes each request first (`routing`);
//! peers' cooperative-caching and DC control requests are answered apart.

mod answer;
mod body_stream;
mod buffer_pool;
mod routing;
mod transport;

pub use self::transport::Transport;

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use locus_http::parse_request;
use tokio::sync::watch;
use tokio::time::{Instant, Sleep};

use self::buffer_pool::{BufferSlot, ConnBuffers, give_back, take_buffers};
use self::routing::hand_back;
use crate::context::WorkerContext;
use crate::cpu::charge::ConnectionCharge;
use crate::handoff::request_router::RequestRouter;
use crate::live_settings::LiveSettings;
use crate::out_queue::OutQueue;

/// After a close decided by the server, read and drop what the client still sends for at
/// most this long (so a response is not destroyed by a reset), up to `LINGER_BYTES`.
const LINGER: Duration = Duration::from_secs(1);
const LINGER_BYTES: usize = 1 << 20;

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
    stream: Transport,
    w: &'w WorkerContext,
    /// The node's settings as the request being read or answered found them (taken again
    /// before each read and each request, so a reload reaches open connections).
    settings: Arc<LiveSettings>,
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
pub async fn serve(stream: Transport, w: &WorkerContext, router: Option<RequestRouter>) -> ConnectionEnd {
    let settings = w.node.settings();
    let first_deadline = Instant::now() + settings.header_timeout;
    let mut conn = Connection {
        stream,
        w,
        settings,
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

/// What answering the input buffered so far led to.
enum Step {
    /// A request was answered; the connection goes on.
    Answered,
    /// No whole request head is buffered: read more.
    NeedInput,
    /// The connection ends.
    End(Close),
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
        loop {
            self.settings = node.settings();
            if let Some(b) = bufs.as_deref_mut()
                && b.end > b.start
            {
                match self.answer_buffered(b).await {
                    Step::Answered => {
                        last_active = Instant::now();
                        head_started = (b.end > b.start).then_some(last_active);
                        continue;
                    }
                    Step::NeedInput => {}
                    Step::End(close) => return close,
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
                self.stream.release_idle_buffers();
                if node.is_shutting_down() {
                    return Close::Now;
                }
            }
            let deadline = match head_started {
                Some(t) => t + self.settings.header_timeout,
                None => last_active + self.settings.keepalive_timeout,
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
            if !b.make_room(self.settings.parse_limits.max_head_bytes + 1024) {
                // Unreachable: the parser refuses heads over the limit before this.
                return Close::Now;
            }
            match self.stream.try_read(&mut b.read[b.end..]) {
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

    /// Parse the request at the front of `b` and answer it: a peer's cooperative-caching or
    /// DC control request apart, a client request where the switch routes it.
    async fn answer_buffered(&mut self, b: &mut ConnBuffers) -> Step {
        match parse_request(&b.read[b.start..b.end], &self.settings.parse_limits, &mut b.head) {
            Ok(true) if self.w.peer_requests.claims(b.head.path_str(&b.read[b.start..b.end])) => {
                if self.answer_peer(b).await {
                    Step::Answered
                } else {
                    Step::End(self.close_after_flush(&mut b.out).await)
                }
            }
            Ok(true) => self.answer_client(b).await,
            Ok(false) => Step::NeedInput,
            Err(e) => {
                tracing::debug!(error = %e, "refusing request head");
                self.refuse(&mut b.out, e.status()).await;
                Step::End(Close::Linger)
            }
        }
    }

    /// How the connection ends after its last response: lingering once that is sent, at
    /// once if it cannot be.
    async fn close_after_flush(&mut self, out: &mut OutQueue) -> Close {
        if self.flush(out).await.is_ok() { Close::Linger } else { Close::Now }
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
            match out.try_write(|iov| self.stream.try_write_vectored(iov, more)) {
                Ok(n) => counters.sent(n as u64),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => self.wait_for_room(&mut deadline).await?,
                Err(e) => return Err(e),
            }
        }
        self.drain_transport(&mut deadline).await
    }

    /// Send what the transport itself still holds (TLS records), waiting as a flush does.
    async fn drain_transport(&mut self, deadline: &mut Option<Instant>) -> io::Result<()> {
        while self.stream.has_queued_output() {
            match self.stream.try_flush() {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => self.wait_for_room(deadline).await?,
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// The socket's send buffer is full: wait until it takes more. `deadline` is set at the
    /// first wait of a write (the keep-alive timeout from then); a client that takes nothing
    /// until it passes gets `TimedOut`.
    async fn wait_for_room(&mut self, deadline: &mut Option<Instant>) -> io::Result<()> {
        let d = *deadline.get_or_insert_with(|| Instant::now() + self.settings.keepalive_timeout);
        if self.wait_writable(d).await { Ok(()) } else { Err(io::ErrorKind::TimedOut.into()) }
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
