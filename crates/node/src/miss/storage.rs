//! Misses read from the document root (blocking reads on tokio's blocking pool), charged to
//! the storage model if there is one, and cached; with cooperative caching a peer's memory
//! is tried first, once the file's identity is known (`peers`). Answers directory redirects
//! (301) and streams files too large to cache.

use std::fs::{File, Metadata};
use std::io::Read;
use std::path::PathBuf;
use std::sync::Arc;

use bytes::Bytes;

use super::peers::fetch_or_read;
use crate::context::{NodeContext, WorkerContext};
use crate::coop::fetch::CoopWorker;
use crate::coop::stats::add;
use crate::doc_store::{CachedDoc, DocMeta, DocSource, LargeFile, LoadOutcome};
use crate::document_root::Resolved;
use crate::node_metrics::CacheStatus;
use crate::out_queue::OutQueue;
use crate::request_view::{BodySource, RequestView, Served};
use crate::response::simple;
use crate::shared_pages::{SharedPages, cached_body};
use crate::static_files::{error, queue_doc, queue_head};

/// Answer a miss from the document root, with `coop` from a peer's memory first: load the
/// document (once for all concurrent requests for it) and queue or stream the response.
pub(super) async fn serve_file_miss(
    w: &WorkerContext,
    req: &RequestView<'_>,
    coop: Option<&CoopWorker>,
    out: &mut OutQueue,
) -> Served {
    let node = &w.node;
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

/// What a blocking read of the document root found.
pub(super) enum ReadResult {
    Small { body: (Bytes, Option<Arc<SharedPages>>), source: DocSource, meta: DocMeta },
    Large(LargeFile),
    Other(LoadOutcome),
}

/// A file found for a key: open, with what `stat` said, and the name its type comes from.
pub(super) struct OpenedFile {
    file: File,
    pub(super) path: PathBuf,
    pub(super) meta: Metadata,
    pub(super) name: String,
}

/// Resolve `key` in the document root and open it (blocking); otherwise the outcome.
pub(super) fn resolve_document(node: &NodeContext, key: &str) -> Result<OpenedFile, LoadOutcome> {
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
pub(super) fn read_opened(node: &NodeContext, opened: OpenedFile) -> ReadResult {
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
