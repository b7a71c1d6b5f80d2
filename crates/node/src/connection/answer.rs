//! Answering one parsed request on a connection: a client request (the response chosen and
//! queued, its body sent, the request body read and dropped, the request counted), a peer's
//! cooperative-caching or DC control request (outside the client request counters), and a
//! head that could not be parsed or did not arrive in time.

use std::io;

use locus_core::Method;
use locus_http::{BodyKind, BodyTracker, RequestHead, TargetForm};
use tokio::time::Instant;

use super::buffer_pool::{ConnBuffers, RequestKeys};
use super::{Connection, Wait, invalid_data};
use crate::document_root::decode_request_path;
use crate::dynamic::serve_dynamic;
use crate::miss::serve_miss;
use crate::node_metrics::ActiveRequest;
use crate::out_queue::OutQueue;
use crate::request_view::{BodySource, RequestView, Served, authority_allowed};
use crate::response::{Persistence, simple};
use crate::static_files::serve_cached;

impl Connection<'_> {
    /// Answer a peer's cooperative-caching or DC control request (not a client request: no
    /// request counter moves). False: close after it (a body, or the peer asked to).
    pub(super) async fn answer_peer(&mut self, b: &mut ConnBuffers) -> bool {
        let Ok(peer) = self.stream.peer_addr() else { return false };
        let (ip, buf) = (peer.ip(), &b.read[b.start..b.end]);
        let keep = self.w.peer_requests.answer(self.w, ip, &b.head, buf, &mut b.out).await;
        b.start += b.head.head_len;
        if b.start == b.end {
            b.start = 0;
            b.end = 0;
        }
        keep && b.head.body == BodyKind::Empty
    }

    /// Answer a request head that could not be parsed (or did not arrive in time), then close.
    pub(super) async fn refuse(&mut self, out: &mut OutQueue, status: u16) {
        let counters = self.w.counters();
        counters.request_started();
        simple(out, &self.w.node.node_headers, status, Persistence::Close, false, b"");
        counters.request_finished(status);
        let _ = self.flush(out).await;
    }

    /// Answer the request whose head was just parsed; consume its body. Ok(false): close.
    pub(super) async fn handle(&mut self, b: &mut ConnBuffers) -> io::Result<bool> {
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
        let persistence = Persistence::of(head, unread_body || node.is_shutting_down());
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
            TargetForm::Absolute => authority_allowed(head, buf, &self.settings.server_names),
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
        if crate::dc::serve::is_replica_request(w, raw_path) {
            self.flush(out).await?;
            return Ok(crate::dc::serve::serve_replica(w, raw_path, head_only, persistence, out).await);
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
        if let Some(served) = crate::dc::serve::serve_home(w, &req, out) {
            return Ok(served);
        }
        let classes = self.settings.classes.clone();
        if let Some(class) = classes.classify(target) {
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
            let deadline = Instant::now() + self.settings.keepalive_timeout;
            match self.wait_readable(deadline, false).await {
                Wait::Ready => {}
                _ => return Err(io::ErrorKind::TimedOut.into()),
            }
            match self.stream.try_read(read) {
                Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
                Ok(n) => *end = n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => return Err(e),
            }
        }
    }
}
