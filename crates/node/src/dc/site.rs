//! `HomeSite`: this DC node's own documents, walked once at start-up — the `DocGraph` (every
//! HTML page parsed once; a page the parser cannot read is served unmodified and counted),
//! each HTML page's bytes kept in memory, each document's current version and size, a
//! request counter per document for the balancer, and `refresh`, which re-reads and re-plans
//! a document whose modification time changed.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::UNIX_EPOCH;

use bytes::Bytes;
use locus_dc::Scheme;
use locus_dc::doc_graph::{DocGraph, DocGraphBuilder, DocId, DocPage, PagePlan, SourceDoc};
use locus_dc::site_names::canonical_file_name;
use parking_lot::RwLock;

/// Directories deeper than this are not walked.
const MAX_DEPTH: usize = 32;

/// What serving one document involves now.
#[derive(Clone, Debug)]
pub struct DocState {
    /// Modification time in whole seconds.
    pub version: u64,
    pub size: u64,
    /// The page's bytes (HTML only).
    pub page: Option<Bytes>,
    /// Its plan (HTML that parsed).
    pub plan: Option<Arc<PagePlan>>,
}

/// One document of the home.
pub struct SiteDoc {
    /// Canonical site path.
    pub path: String,
    pub fs_path: PathBuf,
    pub html: bool,
    state: RwLock<DocState>,
    /// Client requests since the balancer last took them.
    requests: AtomicU64,
}

impl SiteDoc {
    pub fn state(&self) -> DocState {
        self.state.read().clone()
    }

    /// Count a client request for it.
    pub fn requested(&self) {
        self.requests.fetch_add(1, Ordering::Relaxed);
    }

    /// The requests counted since the last call.
    pub fn take_requests(&self) -> u64 {
        self.requests.swap(0, Ordering::Relaxed)
    }
}

/// This node's documents.
pub struct HomeSite {
    graph: DocGraph,
    docs: Vec<SiteDoc>,
    /// Decoded request path (`/dir/a b.html`, `/dir/` for its index) → document.
    by_request_path: HashMap<String, DocId>,
    /// HTML pages that are served unmodified (the parser could not read them), at start.
    pub unmodifiable: u64,
    /// Files left out (names that are not UTF-8 or not usable as site paths, unreadable).
    pub skipped: u64,
}

/// A file found by the walk.
struct Found {
    canonical: String,
    decoded: String,
    fs_path: PathBuf,
    size: u64,
    mtime_s: u64,
    html: Option<Vec<u8>>,
}

fn mtime_s(meta: &std::fs::Metadata) -> u64 {
    meta.modified().ok().and_then(|t| t.duration_since(UNIX_EPOCH).ok()).map_or(0, |d| d.as_secs())
}

fn is_html(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    lower.ends_with(".html") || lower.ends_with(".htm")
}

impl HomeSite {
    /// Walk `root` (blocking) and build the site of the home reached at `home_authority` and
    /// served with `scheme`.
    pub fn load(root: &Path, scheme: Scheme, home_authority: &str) -> std::io::Result<HomeSite> {
        let mut found = Vec::new();
        let mut skipped = 0;
        walk(root, "", "", 0, &mut found, &mut skipped)?;
        found.sort_by(|a, b| a.canonical.cmp(&b.canonical));
        let mut builder = DocGraphBuilder::with_scheme(scheme, home_authority);
        let mut pages = Vec::with_capacity(found.len());
        for f in &found {
            let source =
                SourceDoc { path: &f.canonical, size: f.size, mtime_s: f.mtime_s, html: f.html.as_deref() };
            builder.add(source).map_err(std::io::Error::other)?;
        }
        let graph = builder.finish();
        let mut unmodifiable = 0;
        let mut by_request_path = HashMap::with_capacity(found.len());
        for (i, f) in found.into_iter().enumerate() {
            let id = DocId(i as u32);
            let plan = match graph.doc(id).map(|d| &d.page) {
                Some(DocPage::Plan(p)) => Some(Arc::new(p.clone())),
                Some(DocPage::Unmodifiable(e)) => {
                    tracing::warn!(path = %f.canonical, error = %e, "DC: page served unmodified");
                    unmodifiable += 1;
                    None
                }
                _ => None,
            };
            if let Some(dir) = f.decoded.strip_suffix("index.html")
                && dir.ends_with('/')
            {
                by_request_path.insert(dir.to_string(), id);
            }
            by_request_path.insert(f.decoded, id);
            let state = DocState { version: f.mtime_s, size: f.size, page: f.html.map(Bytes::from), plan };
            pages.push(SiteDoc {
                path: f.canonical,
                fs_path: f.fs_path,
                html: state.page.is_some(),
                state: RwLock::new(state),
                requests: AtomicU64::new(0),
            });
        }
        Ok(HomeSite { graph, docs: pages, by_request_path, unmodifiable, skipped })
    }

    /// The document a decoded request path names.
    pub fn by_request_path(&self, decoded: &str) -> Option<(DocId, &SiteDoc)> {
        let id = *self.by_request_path.get(decoded)?;
        Some((id, &self.docs[id.0 as usize]))
    }

    /// The document at a canonical site path.
    pub fn by_path(&self, path: &str) -> Option<(DocId, &SiteDoc)> {
        let id = self.graph.id(path)?;
        Some((id, &self.docs[id.0 as usize]))
    }

    pub fn docs(&self) -> impl Iterator<Item = &SiteDoc> {
        self.docs.iter()
    }

    pub fn len(&self) -> usize {
        self.docs.len()
    }

    /// Stat `doc` (blocking) and, if its modification time moved, re-read it (HTML: re-plan
    /// it, parsed once) and return its new version.
    pub fn refresh(&self, doc: &SiteDoc) -> Option<u64> {
        let meta = std::fs::metadata(&doc.fs_path).ok()?;
        let version = mtime_s(&meta);
        if version == doc.state.read().version {
            return None;
        }
        let (page, plan) = if doc.html {
            let bytes = std::fs::read(&doc.fs_path).ok()?;
            let plan = match self.graph.plan_for_copy(&bytes, &doc.path) {
                Ok(p) => Some(Arc::new(p)),
                Err(e) => {
                    tracing::warn!(path = %doc.path, error = %e, "DC: changed page served unmodified");
                    None
                }
            };
            (Some(Bytes::from(bytes)), plan)
        } else {
            (None, None)
        };
        let size = page.as_ref().map_or(meta.len(), |p| p.len() as u64);
        *doc.state.write() = DocState { version, size, page, plan };
        Some(version)
    }
}

/// Collect the regular files under `dir` (`canonical`/`decoded`: its site path so far).
fn walk(
    dir: &Path,
    canonical: &str,
    decoded: &str,
    depth: usize,
    found: &mut Vec<Found>,
    skipped: &mut u64,
) -> std::io::Result<()> {
    if depth > MAX_DEPTH {
        return Ok(());
    }
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let Ok(kind) = entry.file_type() else { continue };
        let name = entry.file_name();
        let (Some(name), true) = (name.to_str(), !kind.is_symlink()) else {
            *skipped += 1;
            continue;
        };
        let Ok(segment) = canonical_file_name(name) else {
            *skipped += 1;
            continue;
        };
        let (c, d) = (format!("{canonical}/{segment}"), format!("{decoded}/{name}"));
        if kind.is_dir() {
            walk(&entry.path(), &c, &d, depth + 1, found, skipped)?;
            continue;
        }
        let Ok(meta) = entry.metadata() else { continue };
        if !meta.is_file() {
            continue;
        }
        let html = if is_html(name) {
            match std::fs::read(entry.path()) {
                Ok(bytes) => Some(bytes),
                Err(_) => {
                    *skipped += 1;
                    continue;
                }
            }
        } else {
            None
        };
        let size = html.as_ref().map_or(meta.len(), |h| h.len() as u64);
        found.push(Found {
            canonical: c,
            decoded: d,
            fs_path: entry.path(),
            size,
            mtime_s: mtime_s(&meta),
            html,
        });
    }
    Ok(())
}
