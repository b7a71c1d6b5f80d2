//! Cooperative caching's misses: the file is found in the document root first (its length
//! and mtime are the version asked of peers), then a peer's memory is tried, and storage is
//! read only if that gives nothing.

use std::sync::Arc;
use std::time::UNIX_EPOCH;

use super::storage::{ReadResult, read_opened, resolve_document};
use crate::context::NodeContext;
use crate::coop::fetch::CoopWorker;
use crate::coop::stats::add;
use crate::coop::wire::Validator;
use crate::doc_store::{CachedDoc, DocMeta, DocSource, LoadOutcome};
use crate::shared_pages::cached_body;

/// With cooperative caching: find the file (its length and mtime are the version asked of
/// peers), try the peers' memory, and read storage only if that gives nothing.
pub(super) async fn fetch_or_read(
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
        let keep = coop.coop.view().keep_copy && node.store.cacheable(len);
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
