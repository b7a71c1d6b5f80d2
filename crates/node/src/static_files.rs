//! Static responses from memory: cache hits answered without leaving the event loop
//! (pre-rendered head plus shared body), and the heads every static answer shares —
//! `If-Modified-Since` (304), single byte ranges (206/416) — and error answers. Misses are
//! loaded by the `miss` room.

use std::io::Write;

use crate::context::{NodeContext, WorkerContext};
use crate::doc_store::{CachedDoc, DocMeta, Freshness};
use crate::node_metrics::CacheStatus;
use crate::out_queue::OutQueue;
use crate::request_view::{BodySource, RequestView, Served};
use crate::response::{RangeOutcome, evaluate_range};
use crate::response::{content_length, end_head, simple, start_head};
use crate::response::{if_range_allows, not_modified};
use crate::shared_pages::SharedPages;

/// Queue the head of a response for a representation of `len` bytes, after evaluating
/// `If-Modified-Since`, `If-Range` and `Range`. `full_header` is a pre-rendered header for
/// the 200 case (node lines, type, date, length). Returns the status and the byte range
/// (offset, length) of the body to send, if any.
pub(crate) fn queue_head(
    node_headers: &[u8],
    req: &RequestView<'_>,
    meta: &DocMeta,
    len: u64,
    cache: CacheStatus,
    full_header: Option<&[u8]>,
    out: &mut OutQueue,
) -> (u16, Option<(u64, u64)>) {
    let type_and_date = |out: &mut OutQueue| {
        out.extend(b"Content-Type: ");
        out.extend(meta.content_type.as_bytes());
        out.extend(b"\r\n");
        if let Some(lm) = &meta.last_modified {
            out.extend(b"Last-Modified: ");
            out.extend(lm.as_bytes());
            out.extend(b"\r\n");
        }
    };
    if not_modified(req.if_modified_since, req.if_none_match, meta.modified_secs) {
        start_head(out, 304, node_headers);
        if let Some(lm) = &meta.last_modified {
            out.extend(b"Last-Modified: ");
            out.extend(lm.as_bytes());
            out.extend(b"\r\n");
        }
        content_length(out, len);
        out.extend(cache.header_line());
        end_head(out, req.persistence);
        return (304, None);
    }
    let range = if if_range_allows(req.if_range, meta.modified_secs) {
        evaluate_range(req.range, len)
    } else {
        RangeOutcome::Full
    };
    let (status, body) = match range {
        RangeOutcome::Full => {
            match full_header {
                Some(h) => {
                    start_head(out, 200, b"");
                    out.extend(h);
                }
                None => {
                    start_head(out, 200, node_headers);
                    type_and_date(out);
                    out.extend(b"Accept-Ranges: bytes\r\n");
                    content_length(out, len);
                }
            }
            (200, (0, len))
        }
        RangeOutcome::Partial { start, end } => {
            start_head(out, 206, node_headers);
            type_and_date(out);
            let _ = write!(out.buf(), "Content-Range: bytes {start}-{end}/{len}\r\n");
            content_length(out, end - start + 1);
            (206, (start, end - start + 1))
        }
        RangeOutcome::Unsatisfiable => {
            start_head(out, 416, node_headers);
            let _ = write!(out.buf(), "Content-Range: bytes */{len}\r\n");
            content_length(out, 0);
            out.extend(cache.header_line());
            end_head(out, req.persistence);
            return (416, None);
        }
    };
    out.extend(cache.header_line());
    end_head(out, req.persistence);
    (status, (!req.head_only() && body.1 > 0).then_some(body))
}

/// Queue a response for a document held in memory; a large body in shared pages is left
/// for the connection to send with sendfile.
pub(crate) fn queue_doc(
    node: &NodeContext,
    req: &RequestView<'_>,
    doc: &CachedDoc,
    cache: CacheStatus,
    out: &mut OutQueue,
) -> Served {
    let (status, body) =
        queue_head(&node.node_headers, req, &doc.meta, doc.body.len() as u64, cache, Some(&doc.header), out);
    if let Some((offset, len)) = body {
        if let Some(pages) = &doc.pages
            && len >= SharedPages::MIN_LEN as u64
        {
            return Served { status, body: BodySource::Pages { pages: pages.clone(), offset, len } };
        }
        out.push_body(doc.body.slice(offset as usize..(offset + len) as usize));
    }
    Served::queued(status)
}

/// Answer from the cache if the document is there and current; `None` on a miss.
pub fn serve_cached(w: &WorkerContext, req: &RequestView<'_>, out: &mut OutQueue) -> Option<Served> {
    let node = &w.node;
    let doc = node.store.lookup(req.cache_key)?;
    if node.store.freshness(req.cache_key, &doc) == Freshness::Stale {
        return None;
    }
    w.counters().cache(CacheStatus::Hit);
    Some(queue_doc(node, req, &doc, CacheStatus::Hit, out))
}

/// Queue an error answer with no body; returns its status.
pub(crate) fn error(node: &NodeContext, req: &RequestView<'_>, status: u16, out: &mut OutQueue) -> u16 {
    simple(out, &node.node_headers, status, req.persistence, req.head_only(), b"");
    status
}
