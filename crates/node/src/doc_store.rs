//! `DocStore`: the node's document cache — a byte-bounded `locus_cache::DocCache` of
//! `CachedDoc`s behind one short lock — with revalidation of cached files against the file
//! system at most once per interval, and single flight: concurrent misses for one document
//! share one load (`LoadOutcome`). An optional `CacheObserver` hears of every insert and
//! removal (cooperative caching tells the documents' homes). A reload resizes it in place
//! (`resize`: shrinking evicts down to the new capacity) and changes its revalidation interval.

use std::collections::HashMap;
use std::fs::File;
use std::future::Future;
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Instant, SystemTime};

use bytes::Bytes;
use locus_cache::{CacheStats, DocCache, InsertOutcome, Replacement};
use parking_lot::Mutex;
use tokio::sync::OnceCell;

use crate::response::unix_secs;
use crate::shared_pages::SharedPages;

/// Where a cached document came from, to check that it is still current.
#[derive(Debug)]
pub enum DocSource {
    /// A file: its canonical path and what `stat` said when it was read.
    File { path: PathBuf, len: u64, mtime: SystemTime, ino: u64, dev: u64 },
    /// An origin server: current for one revalidation interval, then fetched again.
    Origin,
}

impl DocSource {
    /// The identity of a file from its metadata.
    pub fn file(path: PathBuf, meta: &std::fs::Metadata) -> DocSource {
        DocSource::File {
            path,
            len: meta.len(),
            mtime: meta.modified().unwrap_or(SystemTime::UNIX_EPOCH),
            ino: meta.ino(),
            dev: meta.dev(),
        }
    }

    /// Whether the file still has the identity recorded (blocking `stat`).
    fn unchanged(&self) -> bool {
        match self {
            DocSource::File { path, len, mtime, ino, dev } => std::fs::metadata(path).is_ok_and(|m| {
                m.len() == *len
                    && m.modified().is_ok_and(|t| t == *mtime)
                    && m.ino() == *ino
                    && m.dev() == *dev
                    && m.is_file()
            }),
            DocSource::Origin => false,
        }
    }
}

/// What a response needs to know about a representation besides its body.
#[derive(Clone, Debug)]
pub struct DocMeta {
    pub content_type: String,
    /// Modification time in seconds since the epoch, if known.
    pub modified_secs: Option<u64>,
    /// `modified_secs` as an HTTP date.
    pub last_modified: Option<String>,
}

impl DocMeta {
    /// Metadata for a file served as `name` (its extension picks the type).
    pub fn for_file(name: &str, mtime: Option<SystemTime>) -> DocMeta {
        let content_type =
            mime_guess::from_path(name).first_raw().unwrap_or("application/octet-stream").to_string();
        DocMeta {
            content_type,
            modified_secs: mtime.map(unix_secs),
            last_modified: mtime.map(httpdate::fmt_http_date),
        }
    }
}

/// A document in the cache, with the static part of its 200 response head pre-rendered.
#[derive(Debug)]
pub struct CachedDoc {
    pub body: Bytes,
    /// The body's pages, for sendfile, when it lives in shared pages.
    pub pages: Option<Arc<SharedPages>>,
    pub meta: DocMeta,
    /// `Server`, `X-Locus-Node`, `Content-Type`, `Last-Modified`, `Accept-Ranges` and
    /// `Content-Length` lines of a full 200 response.
    pub header: Bytes,
    pub source: DocSource,
    /// When the document was last known current, in ms since the store's epoch.
    checked_ms: AtomicU64,
}

impl CachedDoc {
    /// A document whose responses carry `node_headers` (the `Server` and `X-Locus-Node` lines);
    /// `pages`, if any, hold the same bytes as `body`.
    pub fn new(
        node_headers: &[u8],
        (body, pages): (Bytes, Option<Arc<SharedPages>>),
        meta: DocMeta,
        source: DocSource,
        now_ms: u64,
    ) -> CachedDoc {
        let mut header = Vec::with_capacity(160);
        header.extend_from_slice(node_headers);
        header.extend_from_slice(b"Content-Type: ");
        header.extend_from_slice(meta.content_type.as_bytes());
        header.extend_from_slice(b"\r\n");
        if let Some(lm) = &meta.last_modified {
            header.extend_from_slice(b"Last-Modified: ");
            header.extend_from_slice(lm.as_bytes());
            header.extend_from_slice(b"\r\n");
        }
        header.extend_from_slice(b"Accept-Ranges: bytes\r\nContent-Length: ");
        header.extend_from_slice(body.len().to_string().as_bytes());
        header.extend_from_slice(b"\r\n");
        CachedDoc {
            body,
            pages,
            meta,
            header: Bytes::from(header),
            source,
            checked_ms: AtomicU64::new(now_ms),
        }
    }
}

/// A file too large to cache, opened once and streamed by every request waiting for it.
#[derive(Debug)]
pub struct LargeFile {
    pub file: File,
    pub len: u64,
    pub meta: DocMeta,
}

/// A non-200 origin response, buffered and relayed (not cached).
#[derive(Debug)]
pub struct RelayedResponse {
    pub status: u16,
    pub content_type: Option<String>,
    pub body: Bytes,
}

/// The result of loading a document after a miss, shared by every request that waited.
#[derive(Debug)]
pub enum LoadOutcome {
    /// Loaded (and cached if it fit).
    Doc(Arc<CachedDoc>),
    /// Fetched from a peer's memory (cooperative caching), verified, and kept if wanted.
    Remote(Arc<CachedDoc>),
    /// A file over the object limit: stream it.
    LargeFile(Arc<LargeFile>),
    /// An origin response over the object limit: each request fetches and relays its own.
    OriginLarge,
    /// A directory asked for without its trailing slash.
    Redirect,
    NotFound,
    Forbidden,
    /// A non-200 origin response.
    Relay(Arc<RelayedResponse>),
    /// Loading failed; answer with this status (500 for the file system, 502 for an origin).
    Failed(u16, String),
}

/// Whether a cached document may be served as it is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Freshness {
    Fresh,
    /// Changed or gone: it has been removed from the cache.
    Stale,
}

type Flight = Arc<OnceCell<Arc<LoadOutcome>>>;

/// What `DocStore::resize` evicted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Resized {
    pub documents: u64,
    pub bytes: u64,
}

/// Told of the keys that enter and leave the cache (after the cache's lock is released).
pub trait CacheObserver: Send + Sync {
    fn inserted(&self, key: &str);
    fn removed(&self, key: &str);
}

/// The document cache of a node.
pub struct DocStore {
    cache: Option<Mutex<DocCache<String, Arc<CachedDoc>>>>,
    /// Largest object cached (0 without a cache); changed by `resize`.
    max_object: AtomicU64,
    revalidate_ms: AtomicU64,
    epoch: Instant,
    flights: Mutex<HashMap<String, Flight>>,
    observer: OnceLock<Arc<dyn CacheObserver>>,
}

impl DocStore {
    /// A store of `capacity` bytes (0: no cache) holding objects of at most `max_object` bytes.
    pub fn new(capacity: u64, max_object: u64, replacement: Replacement, revalidate_ms: u64) -> DocStore {
        let cache = (capacity > 0)
            .then(|| Mutex::new(DocCache::new(capacity, max_object.min(capacity), replacement)));
        DocStore {
            cache,
            max_object: AtomicU64::new(if capacity == 0 { 0 } else { max_object.min(capacity) }),
            revalidate_ms: AtomicU64::new(revalidate_ms),
            epoch: Instant::now(),
            flights: Mutex::new(HashMap::new()),
            observer: OnceLock::new(),
        }
    }

    /// Tell `observer` of every insert and removal from now on (the first observer set stays).
    pub fn set_observer(&self, observer: Arc<dyn CacheObserver>) {
        let _ = self.observer.set(observer);
    }

    /// Milliseconds since the store was created.
    pub fn now_ms(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }

    /// Largest object cached (0 without a cache).
    pub fn max_object(&self) -> u64 {
        self.max_object.load(Ordering::Relaxed)
    }

    /// Whether an object of `len` bytes would be cached.
    pub fn cacheable(&self, len: u64) -> bool {
        self.cache.is_some() && len <= self.max_object()
    }

    /// Put new limits in force (a reload): `capacity` bytes (ignored without a cache: turning
    /// it on or off takes a restart), objects of at most `max_object`, revalidated every
    /// `revalidate_ms`. Shrinking evicts by the replacement policy down to the new capacity
    /// (the observer hears of each document that left); growing just lets more in.
    pub fn resize(&self, capacity: u64, max_object: u64, revalidate_ms: u64) -> Resized {
        self.revalidate_ms.store(revalidate_ms, Ordering::Relaxed);
        let Some(cache) = &self.cache else { return Resized::default() };
        let max_object = max_object.min(capacity);
        let mut evicted = Vec::new();
        let mut resized = Resized::default();
        {
            let mut cache = cache.lock();
            if (cache.capacity_bytes(), cache.max_object_bytes()) == (capacity, max_object) {
                return resized;
            }
            self.max_object.store(max_object, Ordering::Relaxed);
            cache.resize(capacity, max_object, |key, doc| {
                resized.documents += 1;
                resized.bytes += doc.body.len() as u64;
                evicted.push((key, doc));
            });
        }
        // Told, and the documents dropped, after the lock is released.
        if let Some(o) = self.observer.get() {
            for (key, _) in &evicted {
                o.removed(key);
            }
        }
        resized
    }

    /// The cached document under `key` (counted as a hit or miss by the cache).
    pub fn lookup(&self, key: &str) -> Option<Arc<CachedDoc>> {
        self.cache.as_ref()?.lock().get(key).cloned()
    }

    /// The cached document under `key` for a peer: a use for the replacement policy, but not a
    /// hit or miss of this node's own clients.
    pub fn lookup_for_peer(&self, key: &str) -> Option<Arc<CachedDoc>> {
        self.cache.as_ref()?.lock().touch(key).cloned()
    }

    /// Check a cached document against its source if the revalidation interval has passed
    /// since it was last known current (one request checks; the others serve it meanwhile).
    /// A stale document is removed from the cache.
    pub fn freshness(&self, key: &str, doc: &CachedDoc) -> Freshness {
        let now = self.now_ms();
        let checked = doc.checked_ms.load(Ordering::Relaxed);
        if now.saturating_sub(checked) < self.revalidate_ms.load(Ordering::Relaxed) {
            return Freshness::Fresh;
        }
        if doc.checked_ms.compare_exchange(checked, now, Ordering::Relaxed, Ordering::Relaxed).is_err() {
            return Freshness::Fresh;
        }
        if doc.source.unchanged() {
            return Freshness::Fresh;
        }
        if let Some(cache) = &self.cache {
            let mut cache = cache.lock();
            // Remove only the entry that was checked, not a fresher one loaded meanwhile.
            let removed = cache.peek(key).is_some_and(|d| std::ptr::eq(Arc::as_ptr(d), doc))
                && cache.remove(key).is_some();
            drop(cache);
            if removed && let Some(o) = self.observer.get() {
                o.removed(key);
            }
        }
        Freshness::Stale
    }

    /// Cache `doc` under `key` with miss cost `cost` (for GDS/GDSF); false if it was not stored.
    pub fn insert(&self, key: String, doc: Arc<CachedDoc>, cost: f64) -> bool {
        let Some(cache) = &self.cache else { return false };
        let size = doc.body.len() as u64;
        let observer = self.observer.get();
        let told = observer.map(|_| key.clone());
        // Evicted documents are dropped after the lock is released.
        let outcome = cache.lock().insert(key, doc, size, cost);
        if let (Some(o), Some(key), InsertOutcome::Stored { evicted }) = (observer, told, &outcome) {
            for (gone, _) in evicted {
                o.removed(gone);
            }
            o.inserted(&key);
        }
        outcome.is_stored()
    }

    /// Run `load` for `key` unless a load for it is already running, in which case wait for
    /// that one; every caller gets the same outcome. If the loading caller is cancelled,
    /// a waiting one takes over.
    pub async fn single_flight<F, Fut>(&self, key: &str, load: F) -> Arc<LoadOutcome>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = LoadOutcome>,
    {
        let flight = self.flights.lock().entry(key.to_owned()).or_default().clone();
        let outcome = flight.get_or_init(|| async { Arc::new(load().await) }).await.clone();
        let mut flights = self.flights.lock();
        if flights.get(key).is_some_and(|f| Arc::ptr_eq(f, &flight)) {
            flights.remove(key);
        }
        outcome
    }

    /// Loads running now.
    pub fn flights_in_progress(&self) -> usize {
        self.flights.lock().len()
    }

    /// Cached objects and the bytes they hold.
    pub fn usage(&self) -> (usize, u64) {
        self.cache.as_ref().map_or((0, 0), |c| {
            let c = c.lock();
            (c.len(), c.used_bytes())
        })
    }

    /// The keys cached now (a reload that changed cooperative caching's members announces
    /// them again).
    pub fn keys(&self) -> Vec<String> {
        self.cache.as_ref().map_or_else(Vec::new, |c| c.lock().iter().map(|(k, _, _)| k.clone()).collect())
    }

    /// Capacity in bytes (0 without a cache).
    pub fn capacity(&self) -> u64 {
        self.cache.as_ref().map_or(0, |c| c.lock().capacity_bytes())
    }

    /// The cache's own counters.
    pub fn stats(&self) -> CacheStats {
        self.cache.as_ref().map_or_else(CacheStats::default, |c| *c.lock().stats())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    fn doc(body: &'static [u8]) -> Arc<CachedDoc> {
        Arc::new(CachedDoc::new(
            b"",
            (Bytes::from_static(body), None),
            DocMeta::for_file("/a.txt", None),
            DocSource::Origin,
            0,
        ))
    }

    #[test]
    fn cached_doc_header_is_pre_rendered_with_type_length_and_date() {
        let t = SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(784_111_777);
        let d = CachedDoc::new(
            b"Server: locus\r\n",
            (Bytes::from_static(b"hello"), None),
            DocMeta::for_file("/x.html", Some(t)),
            DocSource::Origin,
            0,
        );
        let h = std::str::from_utf8(&d.header).unwrap();
        assert!(h.starts_with("Server: locus\r\n"));
        assert!(h.contains("Content-Type: text/html\r\n"));
        assert!(h.contains("Last-Modified: Sun, 06 Nov 1994 08:49:37 GMT\r\n"));
        assert!(h.ends_with("Content-Length: 5\r\n"));
    }

    #[test]
    fn store_is_bounded_by_capacity_and_refuses_objects_over_the_limit() {
        let store = DocStore::new(10, 6, Replacement::Lru, 1000);
        assert!(store.insert("/a".into(), doc(b"aaaaa"), 1.0));
        assert!(store.insert("/b".into(), doc(b"bbbbb"), 1.0));
        assert!(store.insert("/c".into(), doc(b"ccccc"), 1.0));
        assert_eq!(store.usage(), (2, 10));
        assert!(store.lookup("/a").is_none());
        assert!(!store.insert("/d".into(), doc(b"ddddddd"), 1.0));
        assert!(!store.cacheable(7) && store.cacheable(6));
        let off = DocStore::new(0, 6, Replacement::Lru, 1000);
        assert!(!off.cacheable(1) && !off.insert("/a".into(), doc(b"a"), 1.0));
    }

    #[test]
    fn resizing_evicts_down_to_the_new_capacity_and_tells_the_observer() {
        struct Removals(Mutex<Vec<String>>);
        impl CacheObserver for Removals {
            fn inserted(&self, _: &str) {}
            fn removed(&self, key: &str) {
                self.0.lock().push(key.to_string());
            }
        }
        let store = DocStore::new(15, 10, Replacement::Lru, 1000);
        let removals = Arc::new(Removals(Mutex::new(Vec::new())));
        store.set_observer(removals.clone());
        for key in ["/a", "/b", "/c"] {
            assert!(store.insert(key.into(), doc(b"aaaaa"), 1.0));
        }
        assert!(store.lookup("/a").is_some());
        assert_eq!(store.resize(20, 10, 5), Resized::default(), "growing evicts nothing");
        assert_eq!(store.resize(10, 10, 5), Resized { documents: 1, bytes: 5 });
        assert_eq!(*removals.0.lock(), vec!["/b".to_string()], "the least recently used left");
        assert_eq!((store.usage(), store.capacity()), ((2, 10), 10));
        assert_eq!(store.resize(10, 4, 5), Resized { documents: 2, bytes: 10 });
        assert!(!store.cacheable(5) && store.cacheable(4) && store.max_object() == 4);
        assert_eq!(store.stats().evictions, 3);
        let off = DocStore::new(0, 6, Replacement::Lru, 1000);
        assert_eq!(off.resize(100, 6, 5), Resized::default());
        assert!(!off.cacheable(1) && off.capacity() == 0);
    }

    #[test]
    fn edited_file_is_stale_after_the_revalidation_interval() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.txt");
        std::fs::write(&path, "one").unwrap();
        let store = DocStore::new(1000, 100, Replacement::Gds, 0);
        let meta = std::fs::metadata(&path).unwrap();
        let d = Arc::new(CachedDoc::new(
            b"",
            (Bytes::from_static(b"one"), None),
            DocMeta::for_file("/f.txt", meta.modified().ok()),
            DocSource::file(path.clone(), &meta),
            0,
        ));
        store.insert("/f.txt".into(), d.clone(), 1.0);
        std::thread::sleep(std::time::Duration::from_millis(2));
        assert_eq!(store.freshness("/f.txt", &d), Freshness::Fresh);
        std::fs::write(&path, "two!").unwrap();
        std::thread::sleep(std::time::Duration::from_millis(2));
        assert_eq!(store.freshness("/f.txt", &d), Freshness::Stale);
        assert!(store.lookup("/f.txt").is_none());
    }

    #[test]
    fn concurrent_loads_of_one_key_share_a_single_flight() {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let store = DocStore::new(1000, 100, Replacement::Gds, 1000);
        let loads = AtomicUsize::new(0);
        rt.block_on(async {
            let load = || async {
                loads.fetch_add(1, Ordering::SeqCst);
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
                LoadOutcome::NotFound
            };
            let (a, b, c) = tokio::join!(
                store.single_flight("/k", load),
                store.single_flight("/k", load),
                store.single_flight("/k", load)
            );
            assert!(Arc::ptr_eq(&a, &b) && Arc::ptr_eq(&b, &c));
        });
        assert_eq!(loads.load(Ordering::SeqCst), 1);
        assert_eq!(store.flights_in_progress(), 0);
    }
}
