//! Static responses: cache hits answered without leaving the event loop (pre-rendered head
//! plus shared body), and misses loaded once per document (single flight) from the document
//! root — charged to the storage model if there is one — or from the origin; with cooperative
//! caching a peer's memory is tried first (`CoopWorker`), once the file's identity is known. Handles
//! `If-Modified-Since` (304), single byte ranges (206/416), directory redirects (301) and
//! files too large to cache (streamed).

use std::fs::{File, Metadata};
use std::io::{Read, Write};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::UNIX_EPOCH;

use bytes::Bytes;

use crate::byte_range::{RangeOutcome, evaluate_range};
use crate::conditional::{if_range_allows, not_modified, parse_http_date_secs};
use crate::context::{NodeContext, WorkerContext};
use crate::coop::fetch::CoopWorker;
use crate::coop::stats::add;
use crate::coop::wire::Validator;
use crate::doc_store::{CachedDoc, DocMeta, DocSource, Freshness, LargeFile, LoadOutcome, RelayedResponse};
use crate::document_root::Resolved;
use crate::node_metrics::CacheStatus;
use crate::origin::{OriginPool, OriginReply};
use crate::out_queue::OutQueue;
use crate::request_view::{BodySource, RequestView, Served};
use crate::response::{content_length, end_head, simple, start_head};
use crate::shared_pages::{SharedPages, cached_body};

/// Queue the head of a response for a representation of `len` bytes, after evaluating
/// `If-Modified-Since`, `If-Range` and `Range`. `full_header` is a pre-rendered header for
/// the 200 case (node lines, type, date, length). Returns the status and the byte range
/// (offset, length) of the body to send, if any.
fn queue_head(
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
fn queue_doc(
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

/// Answer a miss: load the document (once for all concurrent requests for it) and queue or
/// stream the response.
pub async fn serve_miss(w: &WorkerContext, req: &RequestView<'_>, out: &mut OutQueue) -> Served {
    let node = &w.node;
    if let Some(pool) = &w.origin_pool {
        return serve_origin_miss(w, pool, req, out).await;
    }
    let coop = w.coop.as_ref();
    let outcome = node.store.single_flight(req.cache_key, || load_file(node, req.cache_key, coop)).await;
    let status = match &*outcome {
        LoadOutcome::Doc(doc) => {
            w.counters().cache(CacheStatus::Miss);
            return queue_doc(node, req, doc, CacheStatus::Miss, out);
        }
        LoadOutcome::Remote(doc) => {
            w.counters().cache(CacheStatus::Remote);
            if let Some(c) = coop {
                add(&c.coop.stats.remote_hits, 1);
            }
            return queue_doc(node, req, doc, CacheStatus::Remote, out);
        }
        LoadOutcome::LargeFile(file) => {
            w.counters().cache(CacheStatus::Bypass);
            let (status, body) =
                queue_head(&node.node_headers, req, &file.meta, file.len, CacheStatus::Bypass, None, out);
            if let Some((offset, len)) = body {
                if let Some(storage) = &node.storage {
                    storage.read(req.cache_key, len).await;
                }
                return Served { status, body: BodySource::File { file: file.clone(), offset, len } };
            }
            status
        }
        LoadOutcome::Redirect => {
            let mut location = Vec::with_capacity(req.target.len() + 12);
            location.extend_from_slice(b"Location: ");
            location.extend_from_slice(req.raw_path.as_bytes());
            location.push(b'/');
            if let Some(q) = req.query {
                location.push(b'?');
                location.extend_from_slice(q.as_bytes());
            }
            location.extend_from_slice(b"\r\n");
            simple(out, &node.node_headers, 301, req.persistence, req.head_only(), &location);
            301
        }
        LoadOutcome::NotFound => error(node, req, 404, out),
        LoadOutcome::Forbidden => error(node, req, 403, out),
        LoadOutcome::Failed(status, why) => {
            tracing::warn!(path = req.path, error = %why, "loading a document failed");
            error(node, req, *status, out)
        }
        LoadOutcome::Relay(_) | LoadOutcome::OriginLarge => error(node, req, 500, out),
    };
    Served::queued(status)
}

fn error(node: &NodeContext, req: &RequestView<'_>, status: u16, out: &mut OutQueue) -> u16 {
    simple(out, &node.node_headers, status, req.persistence, req.head_only(), b"");
    status
}

/// What a blocking read of the document root found.
enum ReadResult {
    Small { body: (Bytes, Option<Arc<SharedPages>>), source: DocSource, meta: DocMeta },
    Large(LargeFile),
    Other(LoadOutcome),
}

/// A file found for a key: open, with what `stat` said, and the name its type comes from.
struct OpenedFile {
    file: File,
    path: PathBuf,
    meta: Metadata,
    name: String,
}

/// Resolve `key` in the document root and open it (blocking); otherwise the outcome.
fn resolve_document(node: &NodeContext, key: &str) -> Result<OpenedFile, LoadOutcome> {
    let Some(root) = &node.root else {
        return Err(LoadOutcome::Failed(500, "no document root".into()));
    };
    let (file, path, meta) = match root.resolve(key) {
        Resolved::File { file, path, meta } => (file, path, meta),
        Resolved::Redirect => return Err(LoadOutcome::Redirect),
        Resolved::NotFound => return Err(LoadOutcome::NotFound),
        Resolved::Forbidden => return Err(LoadOutcome::Forbidden),
        Resolved::Error(e) => {
            // Out of descriptors is this node's passing shortage, not a broken document.
            let status = if locus_io::is_out_of_descriptors(&e) { 503 } else { 500 };
            return Err(LoadOutcome::Failed(status, e.to_string()));
        }
    };
    let name = if key.ends_with('/') { "index.html" } else { key }.to_string();
    Ok(OpenedFile { file, path, meta, name })
}

/// Resolve and read `key` from the document root (blocking).
fn read_document(node: &NodeContext, key: &str) -> ReadResult {
    match resolve_document(node, key) {
        Ok(opened) => read_opened(node, opened),
        Err(outcome) => ReadResult::Other(outcome),
    }
}

/// Read a file just opened (blocking).
fn read_opened(node: &NodeContext, opened: OpenedFile) -> ReadResult {
    let OpenedFile { file, path, meta, name } = opened;
    let name = name.as_str();
    let doc_meta = DocMeta::for_file(name, meta.modified().ok());
    if !node.store.cacheable(meta.len()) {
        return ReadResult::Large(LargeFile { file, len: meta.len(), meta: doc_meta });
    }
    let limit = meta.len() + 1;
    let mut body = Vec::with_capacity(meta.len() as usize);
    if let Err(e) = (&file).take(limit).read_to_end(&mut body) {
        return ReadResult::Other(LoadOutcome::Failed(500, e.to_string()));
    }
    if body.len() as u64 != meta.len() {
        // The file changed while being read: serve what the file is now, uncached.
        return match file.metadata() {
            Ok(m) => ReadResult::Large(LargeFile {
                file,
                len: m.len(),
                meta: DocMeta::for_file(name, m.modified().ok()),
            }),
            Err(e) => ReadResult::Other(LoadOutcome::Failed(500, e.to_string())),
        };
    }
    ReadResult::Small { body: cached_body(body), source: DocSource::file(path, &meta), meta: doc_meta }
}

/// Load a document after a miss — from a peer's memory with `coop`, otherwise (or if no
/// peer has it) from the document root, charging the storage model — and cache it.
async fn load_file(node: &Arc<NodeContext>, key: &str, coop: Option<&CoopWorker>) -> LoadOutcome {
    let read = match coop {
        None => {
            let (task_node, task_key) = (node.clone(), key.to_owned());
            match tokio::task::spawn_blocking(move || read_document(&task_node, &task_key)).await {
                Ok(r) => r,
                Err(e) => return LoadOutcome::Failed(500, e.to_string()),
            }
        }
        Some(coop) => match fetch_or_read(node, key, coop).await {
            Ok(doc) => return LoadOutcome::Remote(doc),
            Err(read) => read,
        },
    };
    match read {
        ReadResult::Small { body, source, meta } => {
            let len = body.0.len() as u64;
            if let Some(storage) = &node.storage {
                storage.read(key, len).await;
            }
            let doc = Arc::new(CachedDoc::new(&node.node_headers, body, meta, source, node.store.now_ms()));
            node.store.insert(key.to_owned(), doc.clone(), node.miss_cost(len));
            LoadOutcome::Doc(doc)
        }
        ReadResult::Large(file) => LoadOutcome::LargeFile(Arc::new(file)),
        ReadResult::Other(outcome) => outcome,
    }
}

/// With cooperative caching: find the file (its length and mtime are the version asked of
/// peers), try the peers' memory, and read storage only if that gives nothing.
async fn fetch_or_read(
    node: &Arc<NodeContext>,
    key: &str,
    coop: &CoopWorker,
) -> Result<Arc<CachedDoc>, ReadResult> {
    let (task_node, task_key) = (node.clone(), key.to_owned());
    let opened = match tokio::task::spawn_blocking(move || resolve_document(&task_node, &task_key)).await {
        Ok(Ok(opened)) => opened,
        Ok(Err(outcome)) => return Err(ReadResult::Other(outcome)),
        Err(e) => return Err(ReadResult::Other(LoadOutcome::Failed(500, e.to_string()))),
    };
    let v = Validator::new(opened.meta.len(), opened.meta.modified().unwrap_or(UNIX_EPOCH));
    if let Some(body) = coop.fetch_remote(key, v).await {
        let len = body.len() as u64;
        let keep = coop.coop.keep_copy && node.store.cacheable(len);
        let body = if keep { cached_body(body.to_vec()) } else { (body, None) };
        let meta = DocMeta::for_file(&opened.name, opened.meta.modified().ok());
        let source = DocSource::file(opened.path, &opened.meta);
        let doc = Arc::new(CachedDoc::new(&node.node_headers, body, meta, source, node.store.now_ms()));
        if keep {
            node.store.insert(key.to_owned(), doc.clone(), node.miss_cost(len));
        }
        return Ok(doc);
    }
    add(&coop.coop.stats.storage_reads, 1);
    let task_node = node.clone();
    match tokio::task::spawn_blocking(move || read_opened(&task_node, opened)).await {
        Ok(read) => Err(read),
        Err(e) => Err(ReadResult::Other(LoadOutcome::Failed(500, e.to_string()))),
    }
}

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

async fn serve_origin_miss(
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
