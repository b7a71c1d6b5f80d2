//! `Client`: the client side of one session on a worker thread (its socket and peer, the
//! bytes read from it, the reused output buffer and response head) and the answers the switch
//! gives it itself: error responses, refusals, shedding, access-log lines.

use crate::access_log::LogRecord;
use crate::client_stream::ClientStream;
use crate::dispatch::{Assignment, Candidates, DispatchError};
use crate::forward::write_error_response;
use crate::state::Shared;
use crate::worker::Worker;
use locus_core::{NodeId, RequestInfo};
use locus_http::{BodyKind, RequestHead, ResponseHead};
use std::cell::OnceCell;
use std::io;
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::time::timeout;

/// What to do with the client connection after a request.
pub enum Next {
    /// Keep going; this many bytes at the front of the read buffer are done with.
    Continue(usize),
    Close,
}

/// The client side of a session.
pub struct Client {
    pub worker: Rc<Worker>,
    pub stream: ClientStream,
    pub peer: SocketAddr,
    /// Bytes read from the client: the current request head, then body bytes or pipelined
    /// requests.
    pub buf: Vec<u8>,
    /// Bytes on their way out (a rewritten request head, a rewritten response head and body).
    pub out: Vec<u8>,
    /// The node's response head (proxy mode), reused from request to request.
    pub resp: ResponseHead,
    /// The connection's round-trip time, read from TCP_INFO once, at its first request.
    rtt: OnceCell<Duration>,
}

impl Client {
    pub fn new(worker: Rc<Worker>, stream: ClientStream, peer: SocketAddr) -> Client {
        Client {
            worker,
            stream,
            peer,
            buf: Vec::new(),
            out: Vec::new(),
            resp: ResponseHead::default(),
            rtt: OnceCell::new(),
        }
    }

    /// Give the read and output buffers back to the worker's pool (an idle connection holds
    /// none); a read buffer still holding bytes is kept.
    pub fn release_buffers(&mut self) {
        if self.buf.capacity() > 0 && self.buf.is_empty() {
            self.worker.read_buffers.borrow_mut().give(std::mem::take(&mut self.buf));
        }
        if self.out.capacity() > 0 {
            self.worker.read_buffers.borrow_mut().give(std::mem::take(&mut self.out));
        }
        if let ClientStream::Tls(tls) = &mut self.stream {
            tls.release_idle_buffers();
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
    pub async fn read(&mut self) -> io::Result<usize> {
        self.prepare_read();
        self.stream.read_buf(&mut self.buf).await
    }

    /// Read whatever client bytes are ready, without waiting.
    pub fn try_read(&mut self) -> io::Result<usize> {
        self.prepare_read();
        self.stream.try_read_buf(&mut self.buf)
    }

    /// The policy's view of the request in `buf`: its class and, for a policy that reads
    /// forwarded requests (only those look at it), its conditional date.
    pub fn request_info<'b>(&'b self, head: &RequestHead) -> RequestInfo<'b> {
        let sniffed = self.worker.shared.dispatcher.observes_requests();
        let ims = if sniffed { head.header(&self.buf, "if-modified-since") } else { None };
        crate::sniff::request_info(
            &self.worker.shared.classifier(),
            head.method,
            head.path_str(&self.buf),
            ims,
        )
    }

    /// The client connection's round-trip time (TCP_INFO's smoothed `tcpi_rtt`, read once per
    /// connection; zero when the kernel has none).
    pub fn rtt(&self) -> Duration {
        *self.rtt.get_or_init(|| crate::sniff::tcp_rtt(self.stream.tcp()).unwrap_or(Duration::ZERO))
    }

    /// Tell the policy the request in `buf` was forwarded to `node` (the sniffer's view).
    pub fn observe(&self, node: NodeId, head: &RequestHead) {
        if !self.worker.shared.dispatcher.observes_requests() {
            return;
        }
        let rtt = self.rtt();
        self.worker.shared.dispatcher.observe(node, &self.request_info(head), rtt);
    }

    /// The request's one dispatch: the walk over the nodes it may go to, its first candidate
    /// dispatched (or `restored`, the dispatch a refused handoff gave back), for whichever mode
    /// serves it; `Err` is what the session does next when none could be, the 503 answered.
    pub async fn candidates<'d>(
        &mut self,
        shared: &'d Shared,
        head: &RequestHead,
        restored: Option<Assignment<'d>>,
    ) -> Result<Candidates<'d>, Next> {
        let retryable = Candidates::may_retry(head.method, head.body != BodyKind::Empty);
        let queue_timeout = shared.config().limits.queue_timeout();
        if let Some(current) = restored {
            return Ok(Candidates::resumed(&shared.dispatcher, current, queue_timeout, retryable));
        }
        match Candidates::first(&shared.dispatcher, &self.request_info(head), queue_timeout, retryable).await
        {
            Ok(c) => Ok(c),
            Err(e) => Err(self.dispatch_failed(head, e).await),
        }
    }

    pub async fn send_error(&mut self, status: u16, close: bool) {
        let mut out = Vec::with_capacity(256);
        write_error_response(&mut out, status, close);
        self.worker.shared.counters.response(status);
        self.send_own(&out, close).await;
    }

    /// Send a response the switch made itself (whole in `out`); shut down after it when
    /// `close`.
    pub async fn send_own(&mut self, out: &[u8], close: bool) {
        let t = self.worker.shared.config().limits.node_timeout();
        // A TLS stream may keep the last records queued after `write_all`: flushed too.
        let sent = timeout(t, async {
            self.stream.write_all(out).await?;
            self.stream.flush().await
        });
        if matches!(sent.await, Ok(Ok(()))) && close {
            let _ = self.stream.shutdown().await;
        }
    }

    /// Answer a cleartext request with a redirect to the same URL on the HTTPS listener at
    /// `port` (308: the method and body stay the same).
    pub async fn redirect_to_https(&mut self, head: &RequestHead, port: u16) -> Next {
        let host = match (head.authority, head.header(&self.buf, "host")) {
            (Some(a), _) => String::from_utf8_lossy(a.get(&self.buf)).into_owned(),
            (None, Some(h)) => String::from_utf8_lossy(h).into_owned(),
            (None, None) => {
                self.stream.tcp().local_addr().map_or_else(|_| "localhost".into(), |a| a.ip().to_string())
            }
        };
        let out = crate::forward::https_redirect(&host, head.path_str(&self.buf), port);
        self.worker.shared.counters.response(308);
        let close = head.body != BodyKind::Empty || !head.keep_alive;
        self.send_own(&out, close).await;
        self.log(head, 308, 0);
        if close { Next::Close } else { Next::Continue(head.head_len) }
    }

    /// Answer a request with an error from the switch itself.
    pub async fn reject(&mut self, head: &RequestHead, status: u16, close: bool) -> Next {
        let close = close || head.body != BodyKind::Empty || !head.keep_alive;
        self.send_error(status, close).await;
        self.log(head, status, 0);
        if close { Next::Close } else { Next::Continue(head.head_len) }
    }

    /// No node could take the request: count why and answer 503.
    pub async fn dispatch_failed(&mut self, head: &RequestHead, e: DispatchError) -> Next {
        self.worker.shared.counters.dispatch_failed(&e);
        self.reject(head, 503, false).await
    }

    /// The switch is out of descriptors: answer 503 and close the connection (freeing its
    /// descriptor); the node stays in the view.
    pub async fn shed(&mut self, head: &RequestHead, why: &str) -> Next {
        self.worker.shared.counters.shed_no_descriptors.fetch_add(1, Relaxed);
        tracing::debug!(peer = %self.peer, "out of descriptors, answering 503: {why}");
        self.reject(head, 503, true).await
    }

    /// Write the request's access-log line (when there is a log).
    pub fn log(&self, head: &RequestHead, status: u16, body_bytes: u64) {
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
