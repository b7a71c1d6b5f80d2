//! Misses fetched from the origin (an origin node has no document root): a 200 small enough
//! is cached, anything else relayed — buffered, or streamed when too large to buffer.

use std::sync::Arc;

use crate::context::{NodeContext, WorkerContext};
use crate::doc_store::{CachedDoc, DocMeta, DocSource, LoadOutcome, RelayedResponse};
use crate::node_metrics::CacheStatus;
use crate::origin::{OriginPool, OriginReply};
use crate::out_queue::OutQueue;
use crate::request_view::{BodySource, RequestView, Served};
use crate::response::parse_http_date_secs;
use crate::response::{content_length, end_head, start_head};
use crate::shared_pages::cached_body;
use crate::static_files::{error, queue_doc};

/// Fetch a miss from the origin for the cache. A response too large to buffer is kept in
/// `stash` for the request that fetched it (other waiters fetch their own).
async fn fetch_for_cache(
    node: &NodeContext,
    pool: &OriginPool,
    target: &str,
    key: &str,
    stash: &mut Option<OriginReply>,
) -> LoadOutcome {
    let limit = node.store.max_object();
    match pool.fetch(target, limit).await {
        Ok(OriginReply::Buffered { headers, body }) if headers.status == 200 => {
            let modified_secs =
                headers.last_modified.as_deref().and_then(|v| parse_http_date_secs(v.as_bytes()));
            let meta = DocMeta {
                content_type: headers.content_type.unwrap_or_else(|| "application/octet-stream".into()),
                modified_secs,
                last_modified: headers.last_modified,
            };
            let len = body.len() as u64;
            let cacheable = node.store.cacheable(len);
            let body = if cacheable { cached_body(body.to_vec()) } else { (body, None) };
            let doc = Arc::new(CachedDoc::new(
                &node.node_headers,
                body,
                meta,
                DocSource::Origin,
                node.store.now_ms(),
            ));
            if cacheable {
                node.store.insert(key.to_owned(), doc.clone(), node.miss_cost(len));
            }
            LoadOutcome::Doc(doc)
        }
        Ok(OriginReply::Buffered { headers, body }) => LoadOutcome::Relay(Arc::new(RelayedResponse {
            status: headers.status,
            content_type: headers.content_type,
            body,
        })),
        Ok(reply @ OriginReply::Streaming { .. }) => {
            *stash = Some(reply);
            LoadOutcome::OriginLarge
        }
        Err(e) => LoadOutcome::Failed(502, e.to_string()),
    }
}

/// Answer a miss from the origin: fetched once for all concurrent requests and cached, or
/// relayed when it is not a cacheable 200 or too large to buffer.
pub(super) async fn serve_origin_miss(
    w: &WorkerContext,
    pool: &OriginPool,
    req: &RequestView<'_>,
    out: &mut OutQueue,
) -> Served {
    let node = &w.node;
    let mut stash = None;
    let outcome = node
        .store
        .single_flight(req.cache_key, || fetch_for_cache(node, pool, req.target, req.cache_key, &mut stash))
        .await;
    match &*outcome {
        LoadOutcome::Doc(doc) => {
            w.counters().cache(CacheStatus::Miss);
            queue_doc(node, req, doc, CacheStatus::Miss, out)
        }
        LoadOutcome::Relay(r) => {
            w.counters().cache(CacheStatus::Bypass);
            relay(node, req, r.status, r.content_type.as_deref(), None, r.body.len() as u64, out);
            if !req.head_only() {
                out.push_body(r.body.clone());
            }
            Served::queued(r.status)
        }
        LoadOutcome::OriginLarge => {
            w.counters().cache(CacheStatus::Bypass);
            let reply = match stash.take() {
                Some(reply) => reply,
                None => match pool.fetch(req.target, node.store.max_object()).await {
                    Ok(reply) => reply,
                    Err(e) => {
                        tracing::warn!(target = req.target, error = %e, "origin fetch failed");
                        return Served::queued(error(node, req, 502, out));
                    }
                },
            };
            match reply {
                OriginReply::Buffered { headers, body } => {
                    let h = &headers;
                    relay(
                        node,
                        req,
                        h.status,
                        h.content_type.as_deref(),
                        h.last_modified.as_deref(),
                        body.len() as u64,
                        out,
                    );
                    if !req.head_only() {
                        out.push_body(body);
                    }
                    Served::queued(headers.status)
                }
                OriginReply::Streaming { headers, len, body } => {
                    let h = &headers;
                    relay(
                        node,
                        req,
                        h.status,
                        h.content_type.as_deref(),
                        h.last_modified.as_deref(),
                        len,
                        out,
                    );
                    if req.head_only() {
                        Served::queued(headers.status)
                    } else {
                        Served { status: headers.status, body: BodySource::Origin(body) }
                    }
                }
            }
        }
        LoadOutcome::Failed(status, why) => {
            tracing::warn!(target = req.target, error = %why, "origin fetch failed");
            Served::queued(error(node, req, *status, out))
        }
        LoadOutcome::Redirect
        | LoadOutcome::Remote(_)
        | LoadOutcome::NotFound
        | LoadOutcome::Forbidden
        | LoadOutcome::LargeFile(_) => Served::queued(error(node, req, 500, out)),
    }
}

/// Queue the head of a relayed origin response.
fn relay(
    node: &NodeContext,
    req: &RequestView<'_>,
    status: u16,
    content_type: Option<&str>,
    last_modified: Option<&str>,
    len: u64,
    out: &mut OutQueue,
) {
    start_head(out, status, &node.node_headers);
    if let Some(t) = content_type {
        out.extend(b"Content-Type: ");
        out.extend(t.as_bytes());
        out.extend(b"\r\n");
    }
    if let Some(lm) = last_modified {
        out.extend(b"Last-Modified: ");
        out.extend(lm.as_bytes());
        out.extend(b"\r\n");
    }
    content_length(out, len);
    out.extend(CacheStatus::Bypass.header_line());
    end_head(out, req.persistence);
}
