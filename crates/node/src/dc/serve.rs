//! Serving clients in DC mode. `serve_home`: a request for one of this home's documents is
//! counted for the balancer; an HTML page with a slot whose target is on more than one server
//! is rendered from its plan (the page's bytes in memory and generated URLs, exact
//! Content-Length, `Cache-Control: no-store`, always 200 in full); other documents go the
//! usual way. `serve_replica`: `/~migrate/<v>/<home>/<path>` — served from the replica store,
//! validated or fetched from the home per the consistency method (the home's definite answer,
//! such as a 404, passed on; 502 only when the home cannot be reached or answers garbage); HTML copies get their
//! links chosen and a BASE pointing at the home. Every DC response carries `X-Locus-DC:
//! home|replica|fetched`.

use bytes::Bytes;
use locus_dc::ServerId;
use locus_dc::consistency::CopyDecision;
use locus_dc::replica_map::DocKey;
use locus_dc::replica_url::{MIGRATE_PREFIX, ReplicaTarget, original_url_for};
use locus_dc::rewrite::{Piece, RewritePlan, SlotChoice};
use std::sync::Arc;

use crate::context::WorkerContext;
use crate::dc::fetch::{Copied, DcWorker, Fetched, fetch_from_home, fetch_joined, make_copy, store_copy};
use crate::dc::node::{DcNode, ReplicaCopy};
use crate::dc::stats::add;
use crate::out_queue::OutQueue;
use crate::request_view::{RequestView, Served};
use crate::response::{Persistence, content_length, end_head, simple, start_head};

/// Which DC role answered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DcKind {
    /// This node as the document's home.
    Home,
    /// A copy from this co-op's store.
    Replica,
    /// A copy fetched from its home for this request.
    Fetched,
}

impl DcKind {
    fn header(self) -> &'static [u8] {
        match self {
            DcKind::Home => b"X-Locus-DC: home\r\n",
            DcKind::Replica => b"X-Locus-DC: replica\r\n",
            DcKind::Fetched => b"X-Locus-DC: fetched\r\n",
        }
    }
}

/// The fixed header lines of a DC response of `kind`.
fn dc_headers(dc: &DcNode, kind: DcKind) -> Vec<u8> {
    let mut h = dc.plain_headers.to_vec();
    h.extend_from_slice(kind.header());
    h
}

/// What a response is for.
struct Reply<'a> {
    head_only: bool,
    persistence: Persistence,
    out: &'a mut OutQueue,
}

impl Reply<'_> {
    fn simple(&mut self, dc: &DcNode, kind: DcKind, status: u16, extra: &[u8]) -> Served {
        simple(self.out, &dc_headers(dc, kind), status, self.persistence, self.head_only, extra);
        Served::queued(status)
    }

    /// A 200 with `body` as is.
    fn whole(&mut self, dc: &DcNode, kind: DcKind, content_type: &str, body: &Bytes) -> Served {
        start_head(self.out, 200, &dc.plain_headers);
        self.out.extend(kind.header());
        self.out.extend(format!("Content-Type: {content_type}\r\n").as_bytes());
        content_length(self.out, body.len() as u64);
        end_head(self.out, self.persistence);
        if !self.head_only {
            self.out.push_body(body.clone());
        }
        Served::queued(200)
    }

    /// A 200 with `page` rendered by `plan`; `None` if the plan does not fit the page.
    fn rendered(
        &mut self,
        dc: &DcNode,
        kind: DcKind,
        plan: &RewritePlan,
        page: &Bytes,
        choices: &[SlotChoice],
        base: Option<&str>,
    ) -> Option<Served> {
        if plan.page_len() != page.len() {
            return None;
        }
        let rendering = plan.render(choices, base).ok()?;
        start_head(self.out, 200, &dc.plain_headers);
        self.out.extend(kind.header());
        self.out.extend(b"Content-Type: text/html\r\nCache-Control: no-store\r\n");
        content_length(self.out, rendering.content_length);
        end_head(self.out, self.persistence);
        if !self.head_only {
            for piece in rendering.pieces {
                match piece {
                    Piece::Original(r) => self.out.push_body(page.slice(r)),
                    Piece::Text(t) => self.out.push_body(Bytes::from(t)),
                }
            }
        }
        add(&dc.stats.rewritten_pages, 1);
        Some(Served::queued(200))
    }
}

/// Count a request for one of this home's documents and, if it is a page with a slot to
/// choose, queue the rewritten page; `None`: serve it the usual way.
pub fn serve_home(w: &WorkerContext, req: &RequestView<'_>, out: &mut OutQueue) -> Option<Served> {
    let dc = &w.dc.as_ref()?.dc;
    let (_, doc) = dc.site.by_request_path(req.path)?;
    doc.requested();
    if !doc.html {
        return None;
    }
    let state = doc.state();
    let (page, plan) = (state.page?, state.plan?);
    let (choices, any) = dc.choose_slots(dc.me, plan.plan.slots());
    if !any {
        return None;
    }
    let mut reply = Reply { head_only: req.head_only(), persistence: req.persistence, out };
    reply.rendered(dc, DcKind::Home, &plan.plan, &page, &choices, None)
}

/// Whether the request is for a replica (answered by `serve_replica`).
pub fn is_replica_request(w: &WorkerContext, raw_path: &str) -> bool {
    w.dc.is_some() && raw_path.starts_with(MIGRATE_PREFIX)
}

/// Answer `/~migrate/<v>/<home>/<path>` (`raw_path` as sent).
pub async fn serve_replica(
    w: &WorkerContext,
    raw_path: &str,
    head_only: bool,
    persistence: Persistence,
    out: &mut OutQueue,
) -> Served {
    let mut reply = Reply { head_only, persistence, out };
    let Some(dcw) = w.dc.as_ref() else { return Served::queued(404) };
    let dc = &*dcw.dc;
    let target = match ReplicaTarget::parse(raw_path) {
        Ok(Some(t)) => t,
        Ok(None) => return reply.simple(dc, DcKind::Replica, 404, b""),
        Err(e) => {
            tracing::debug!(error = %e, "DC: bad replica request");
            return reply.simple(dc, DcKind::Replica, 400, b"");
        }
    };
    let Some(home) = dc.membership.by_name(&target.home) else {
        return reply.simple(dc, DcKind::Replica, 404, b"");
    };
    if home == dc.me {
        let location =
            format!("Location: {}\r\n", original_url_for(dc.scheme, dc.authority(home), &target.path));
        return reply.simple(dc, DcKind::Home, 301, location.as_bytes());
    }
    let key = DocKey::new(home, &target.path);
    let now = dc.now_ns();
    let meta = dc.store.lock().meta(&key).copied();
    match dc.tuning().consistency.decide(meta.as_ref(), target.version, now) {
        CopyDecision::Serve => {
            let held = dc.store.lock().get(&key, now).map(|(_, c)| c.clone());
            if let Some(copy) = held {
                add(&dc.stats.replica_hits, 1);
                return queue_copy(dc, home, &copy, DcKind::Replica, &mut reply);
            }
        }
        CopyDecision::Validate => {
            if let Some(meta) = meta {
                return validate(dcw, &key, meta.version, &mut reply).await;
            }
        }
        CopyDecision::Fetch => {}
    }
    let Some(pool) = dcw.pool(home) else { return reply.simple(dc, DcKind::Fetched, 502, b"") };
    match fetch_joined(dc, pool, &dc.flights, &key).await {
        Ok(Copied::Copy(copy)) => {
            add(&dc.stats.replica_fetched, 1);
            queue_copy(dc, home, &copy, DcKind::Fetched, &mut reply)
        }
        Ok(Copied::Answered(status)) => reply.simple(dc, DcKind::Fetched, status, b""),
        Err(_) => reply.simple(dc, DcKind::Fetched, 502, b""),
    }
}

/// Co-op validation: ask the home whether the copy (at `version`) is current.
async fn validate(dcw: &DcWorker, key: &DocKey, version: u64, reply: &mut Reply<'_>) -> Served {
    let dc = &*dcw.dc;
    let Some(pool) = dcw.pool(key.home) else { return reply.simple(dc, DcKind::Fetched, 502, b"") };
    let held = |dc: &DcNode| dc.store.lock().get(key, dc.now_ns()).map(|(_, c)| c.clone());
    match fetch_from_home(dc, pool, key.home, &key.path, Some(version)).await {
        Ok(Fetched::NotModified) => {
            add(&dc.stats.validations_304, 1);
            dc.store.lock().mark_checked(key, dc.now_ns());
            match held(dc) {
                Some(copy) => queue_copy(dc, key.home, &copy, DcKind::Replica, reply),
                None => reply.simple(dc, DcKind::Replica, 503, b"Retry-After: 1\r\n"),
            }
        }
        Ok(Fetched::Fresh { body, version, content_type }) => {
            add(&dc.stats.validations_200, 1);
            add(&dc.stats.fetches_ok, 1);
            let copy = Arc::new(make_copy(dc, key.home, &key.path, body, content_type));
            store_copy(dc, key, version, copy.clone());
            queue_copy(dc, key.home, &copy, DcKind::Fetched, reply)
        }
        Ok(Fetched::Answered(status)) => {
            dc.store.lock().remove(key);
            reply.simple(dc, DcKind::Fetched, status, b"")
        }
        Err(why) => {
            // The home is unreachable or answered garbage: the copy held is the best there is.
            dc.stats.failed(why);
            match held(dc) {
                Some(copy) => queue_copy(dc, key.home, &copy, DcKind::Replica, reply),
                None => reply.simple(dc, DcKind::Fetched, 502, b""),
            }
        }
    }
}

/// Queue a copy of `home`'s document: a planned page rendered (links chosen, BASE to the
/// home), anything else as is.
fn queue_copy(
    dc: &DcNode,
    home: ServerId,
    copy: &ReplicaCopy,
    kind: DcKind,
    reply: &mut Reply<'_>,
) -> Served {
    if let Some(plan) = &copy.plan {
        let (choices, _) = dc.choose_slots(home, plan.slots());
        let base = plan.base_for_copy(dc.authority(home));
        if let Some(served) = reply.rendered(dc, kind, plan, &copy.body, &choices, base.as_deref()) {
            return served;
        }
    }
    if copy.unmodifiable {
        add(&dc.stats.unmodifiable_copies, 1);
    }
    reply.whole(dc, kind, &copy.content_type, &copy.body)
}
