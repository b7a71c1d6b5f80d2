//! Random-surfer traces over a directory of real HTML: `SiteGraph` reads the pages' links and
//! embedded objects as the node does (`page_references`, kept inside the directory), and
//! `Surfer` streams sessions — a client enters at `index.html` or a random page, fetches each page with its embedded
//! objects, follows a random link with probability p or ends the session.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::io::Read;
use std::path::Path;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use rand_distr::{Distribution, Exp};

use crate::error::TraceError;
use crate::page_references::read_page;
use crate::record::TraceRecord;
use locus_site::DocumentTree;

/// The most of one page that is scanned for references.
const MAX_PAGE_BYTES: u64 = 8 << 20;

/// The links and embedded objects of one page, as indices into `SiteGraph::tree.files`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PageReferences {
    /// Distinct link targets, in document order (never the page itself).
    pub links: Vec<usize>,
    /// Distinct embedded objects, in document order (never the page itself).
    pub embeds: Vec<usize>,
}

/// The files under a directory and the link graph of its HTML pages.
#[derive(Clone, Debug)]
pub struct SiteGraph {
    /// The files.
    pub tree: DocumentTree,
    /// For each file, its references if it is an HTML page (`.html`/`.htm`).
    pub pages: Vec<Option<PageReferences>>,
    /// Indices of the HTML pages.
    pub page_files: Vec<usize>,
    /// `/index.html` (or `/index.htm`), if there is one.
    pub entry: Option<usize>,
    /// References that resolved inside the site but name no file (broken links).
    pub broken_references: u64,
    /// References to other sites or schemes, fragment-only ones and ones that cannot name a
    /// file of the site, such as `..` above the root (not followed).
    pub foreign_references: u64,
}

impl SiteGraph {
    /// Scan `root`: list its files and read every HTML page's references.
    pub fn scan(root: &Path) -> Result<SiteGraph, TraceError> {
        let tree = DocumentTree::scan(root)?;
        let mut pages = vec![None; tree.files.len()];
        let mut page_files = Vec::new();
        let (mut broken, mut foreign) = (0, 0);
        let mut buf = Vec::new();
        for (index, file) in tree.files.iter().enumerate() {
            if !is_html(&file.target) {
                continue;
            }
            buf.clear();
            let f = std::fs::File::open(&file.path).map_err(|e| TraceError::fs(&file.path, e))?;
            f.take(MAX_PAGE_BYTES).read_to_end(&mut buf).map_err(|e| TraceError::fs(&file.path, e))?;
            let refs = read_page(&file.target, &buf);
            foreign += refs.foreign;
            let mut resolve_all = |targets: &[String]| -> Vec<usize> {
                let mut out: Vec<usize> = Vec::new();
                for target in targets {
                    match find_file(&tree, target) {
                        Some(i) if i != index && !out.contains(&i) => out.push(i),
                        Some(_) => {}
                        None => broken += 1,
                    }
                }
                out
            };
            let links = resolve_all(&refs.links);
            let embeds = resolve_all(&refs.embeds);
            pages[index] = Some(PageReferences { links, embeds });
            page_files.push(index);
        }
        let entry = tree.find("/index.html").or_else(|| tree.find("/index.htm"));
        Ok(SiteGraph {
            tree,
            pages,
            page_files,
            entry,
            broken_references: broken,
            foreign_references: foreign,
        })
    }
}

fn is_html(target: &str) -> bool {
    let lower = target.to_ascii_lowercase();
    lower.ends_with(".html") || lower.ends_with(".htm")
}

/// The file a target names: the file itself, or a directory's `index.html`/`index.htm`.
fn find_file(tree: &DocumentTree, target: &str) -> Option<usize> {
    if !target.ends_with('/')
        && let Some(i) = tree.find(target)
    {
        return Some(i);
    }
    let dir = target.trim_end_matches('/');
    tree.find(&format!("{dir}/index.html")).or_else(|| tree.find(&format!("{dir}/index.htm")))
}

/// A random-surfer workload.
#[derive(Clone, Debug, PartialEq)]
pub struct SurfSpec {
    /// RNG seed: the same site, spec and seed give the same trace.
    pub seed: u64,
    /// Concurrent clients (ids `0..clients`), each surfing one session after another.
    pub clients: u32,
    /// Total requests in the trace (the last page view may be cut short).
    pub requests: u64,
    /// Probability of following a random link after a page view (else the session ends).
    pub follow: f64,
    /// Share of sessions that enter at `index.html` (the rest at a random page).
    pub index_share: f64,
    /// Mean think time in seconds between page views (exponential), or `None` for an
    /// untimed trace in which clients take turns, one page view each.
    pub think_time: Option<f64>,
}

impl Default for SurfSpec {
    fn default() -> Self {
        SurfSpec { seed: 1, clients: 10, requests: 10_000, follow: 0.7, index_share: 0.5, think_time: None }
    }
}

/// Per-client surfing state.
#[derive(Clone, Debug)]
struct SurferClient {
    /// The next page to view, or `None` to start a new session.
    next_page: Option<usize>,
    /// When the next page view happens (timed traces).
    time: f64,
}

/// Streams the records of a `SurfSpec` over a `SiteGraph`.
pub struct Surfer<'g> {
    graph: &'g SiteGraph,
    spec: SurfSpec,
    rng: SmallRng,
    think: Option<Exp<f64>>,
    clients: Vec<SurferClient>,
    /// Timed traces: clients by next page-view time (bits of a non-negative f64 sort as it).
    queue: BinaryHeap<Reverse<(u64, u32)>>,
    turn: u32,
    pending: VecDeque<TraceRecord>,
    emitted: u64,
    sessions: u64,
}

const SPEC: &str = "surf spec";

impl<'g> Surfer<'g> {
    /// Check `spec` against `graph`.
    pub fn new(graph: &'g SiteGraph, spec: SurfSpec) -> Result<Surfer<'g>, TraceError> {
        if graph.page_files.is_empty() {
            return Err(TraceError::Directory {
                path: graph.tree.root.clone(),
                message: "has no HTML pages (.html or .htm) to surf".into(),
            });
        }
        if spec.clients == 0 {
            return Err(TraceError::spec(SPEC, "clients must be at least 1"));
        }
        if !(0.0..=1.0).contains(&spec.follow) || !(0.0..=1.0).contains(&spec.index_share) {
            return Err(TraceError::spec(SPEC, "follow and index share must be within 0..=1"));
        }
        let think = match spec.think_time {
            None => None,
            Some(mean) if mean.is_finite() && mean > 0.0 => {
                Some(Exp::new(1.0 / mean).map_err(|e| TraceError::spec(SPEC, e.to_string()))?)
            }
            Some(mean) => {
                return Err(TraceError::spec(SPEC, format!("think time {mean} must be a positive number")));
            }
        };
        let mut rng = SmallRng::seed_from_u64(spec.seed);
        let mut clients = Vec::with_capacity(spec.clients as usize);
        let mut queue = BinaryHeap::new();
        for c in 0..spec.clients {
            // Stagger the first page views over one think time.
            let time = think.as_ref().map_or(0.0, |t| t.sample(&mut rng));
            clients.push(SurferClient { next_page: None, time });
            queue.push(Reverse((time.to_bits(), c)));
        }
        Ok(Surfer {
            graph,
            spec,
            rng,
            think,
            clients,
            queue,
            turn: 0,
            pending: VecDeque::new(),
            emitted: 0,
            sessions: 0,
        })
    }

    /// Sessions started so far.
    pub fn sessions(&self) -> u64 {
        self.sessions
    }

    fn entry_page(&mut self) -> usize {
        match self.graph.entry {
            Some(entry) if self.rng.random::<f64>() < self.spec.index_share => entry,
            _ => self.graph.page_files[self.rng.random_range(0..self.graph.page_files.len())],
        }
    }

    /// Queue the records of client `c`'s next page view and move it on.
    fn page_view(&mut self, c: u32) {
        let client = &self.clients[c as usize];
        let time = self.think.is_some().then_some(client.time);
        let page = match client.next_page {
            Some(p) => p,
            None => {
                self.sessions += 1;
                self.entry_page()
            }
        };
        let files = &self.graph.tree.files;
        let record = |i: usize| TraceRecord {
            time,
            client: c,
            ..TraceRecord::get(files[i].target.clone(), files[i].size)
        };
        self.pending.push_back(record(page));
        let refs = self.graph.pages[page].as_ref();
        if let Some(refs) = refs {
            for &e in &refs.embeds {
                self.pending.push_back(record(e));
            }
        }
        let next = match refs {
            Some(refs) if !refs.links.is_empty() && self.rng.random::<f64>() < self.spec.follow => {
                Some(refs.links[self.rng.random_range(0..refs.links.len())])
            }
            _ => None,
        };
        let gap = self.think.as_ref().map_or(0.0, |t| t.sample(&mut self.rng));
        let client = &mut self.clients[c as usize];
        client.next_page = next;
        client.time += gap;
    }
}

impl Iterator for Surfer<'_> {
    type Item = TraceRecord;

    fn next(&mut self) -> Option<TraceRecord> {
        if self.emitted >= self.spec.requests {
            return None;
        }
        while self.pending.is_empty() {
            let c = if self.think.is_some() {
                let Reverse((_, c)) = self.queue.pop().expect("every client is queued");
                c
            } else {
                let c = self.turn;
                self.turn = (self.turn + 1) % self.spec.clients;
                c
            };
            self.page_view(c);
            if self.think.is_some() {
                self.queue.push(Reverse((self.clients[c as usize].time.to_bits(), c)));
            }
        }
        self.emitted += 1;
        self.pending.pop_front()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::site::{SiteGenerator, SiteManifest, SiteSpec};
    use crate::size_model::SizeModel;
    use std::collections::HashMap;

    fn site(seed: u64) -> (tempfile::TempDir, SiteManifest) {
        let dir = tempfile::tempdir().unwrap();
        let spec = SiteSpec {
            seed,
            files: 150,
            sizes: SizeModel { max_size: 100_000, ..SizeModel::surge() },
            directories: 5,
            ..SiteSpec::default()
        };
        let manifest = SiteGenerator::new(spec).unwrap().write(dir.path(), false, &mut |_, _| {}).unwrap();
        (dir, manifest)
    }

    /// Split a client's requests into page views: a page (or a followed download) and then
    /// its embedded objects (images, style sheets, scripts).
    fn page_views<'a>(records: &[&'a TraceRecord], manifest: &SiteManifest) -> Vec<Vec<&'a TraceRecord>> {
        use crate::site::SiteFileKind;
        let mut views: Vec<Vec<&TraceRecord>> = Vec::new();
        for r in records {
            let kind = manifest.file(&r.target).unwrap().kind;
            let starts_view = matches!(kind, SiteFileKind::Page | SiteFileKind::Download);
            match views.last_mut() {
                Some(view) if !starts_view => view.push(r),
                _ => views.push(vec![r]),
            }
        }
        views
    }

    #[test]
    fn surf_graph_matches_the_generated_manifest() {
        let (dir, manifest) = site(11);
        let graph = SiteGraph::scan(dir.path()).unwrap();
        assert_eq!(graph.broken_references, 0);
        assert_eq!(graph.page_files.len(), manifest.pages.len());
        for (i, refs) in graph.pages.iter().enumerate() {
            let Some(refs) = refs else { continue };
            let file = manifest.file(&graph.tree.files[i].target).unwrap();
            let links: Vec<&str> = refs.links.iter().map(|&l| graph.tree.files[l].target.as_str()).collect();
            assert_eq!(links, file.links);
            let mut embeds: Vec<&str> =
                refs.embeds.iter().map(|&e| graph.tree.files[e].target.as_str()).collect();
            let mut want: Vec<&str> = file.embeds.iter().map(String::as_str).collect();
            embeds.sort();
            want.sort();
            assert_eq!(embeds, want);
        }
    }

    #[test]
    fn surf_stays_in_the_directory_and_requests_every_embedded_object_of_each_visited_page() {
        let (dir, manifest) = site(12);
        let graph = SiteGraph::scan(dir.path()).unwrap();
        let spec = SurfSpec { clients: 4, requests: 3000, follow: 0.8, ..SurfSpec::default() };
        let records: Vec<TraceRecord> = Surfer::new(&graph, spec).unwrap().collect();
        assert_eq!(records.len(), 3000);
        for r in &records {
            let f =
                manifest.file(&r.target).unwrap_or_else(|| panic!("{} is not a file of the site", r.target));
            assert_eq!(r.size, f.size);
        }
        for c in 0..4 {
            let mine: Vec<&TraceRecord> = records.iter().filter(|r| r.client == c).collect();
            let views = page_views(&mine, &manifest);
            assert!(views.len() > 10);
            let last = views.len() - 1;
            for (k, view) in views.iter().enumerate() {
                let page = manifest.file(&view[0].target).unwrap();
                let mut got: Vec<&str> = view[1..].iter().map(|r| r.target.as_str()).collect();
                let mut want: Vec<&str> = page.embeds.iter().map(String::as_str).collect();
                got.sort();
                want.sort();
                if k == last {
                    // The trace may end in the middle of the last page view.
                    assert!(got.iter().all(|g| want.contains(g)));
                } else {
                    assert_eq!(got, want, "page view of {}", page.target);
                }
                // The next page view follows a link of this page or starts a new session.
                if let Some(next) = views.get(k + 1) {
                    let next = next[0].target.clone();
                    let followed = page.links.contains(&next);
                    let entry = next == "/index.html" || manifest.pages.contains(&next);
                    assert!(followed || entry);
                }
            }
        }
    }

    #[test]
    fn surf_is_deterministic_per_seed_and_timed_traces_are_in_time_order() {
        let (dir, _manifest) = site(13);
        let graph = SiteGraph::scan(dir.path()).unwrap();
        let spec = SurfSpec { clients: 5, requests: 2000, think_time: Some(2.0), ..SurfSpec::default() };
        let a: Vec<TraceRecord> = Surfer::new(&graph, spec.clone()).unwrap().collect();
        let b: Vec<TraceRecord> = Surfer::new(&graph, spec.clone()).unwrap().collect();
        let c: Vec<TraceRecord> = Surfer::new(&graph, SurfSpec { seed: 99, ..spec }).unwrap().collect();
        assert_eq!(a, b);
        assert_ne!(a, c);
        let times: Vec<f64> = a.iter().map(|r| r.time.unwrap()).collect();
        assert!(times.is_sorted());
        let per_client = a.iter().fold(HashMap::new(), |mut m, r| {
            *m.entry(r.client).or_insert(0) += 1;
            m
        });
        assert_eq!(per_client.len(), 5);
    }

    #[test]
    fn follow_probability_zero_gives_one_page_view_sessions_from_entries() {
        let (dir, manifest) = site(14);
        let graph = SiteGraph::scan(dir.path()).unwrap();
        let spec =
            SurfSpec { clients: 1, requests: 500, follow: 0.0, index_share: 1.0, ..SurfSpec::default() };
        let records: Vec<TraceRecord> = Surfer::new(&graph, spec).unwrap().collect();
        let views = page_views(&records.iter().collect::<Vec<_>>(), &manifest);
        assert!(views.iter().all(|v| v[0].target == "/index.html"));
    }

    #[test]
    fn surf_resolves_directory_links_base_tags_and_skips_links_that_leave_the_site() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("docs/sub")).unwrap();
        std::fs::write(
            root.join("index.html"),
            r#"<a href="docs/">docs</a><a href="../outside.html">up</a><a href="http://x/">x</a><img src="missing.gif">"#,
        )
        .unwrap();
        std::fs::write(
            root.join("docs/index.html"),
            r#"<base href="/docs/sub/"><img src="pic.gif"><a href="/">home</a>"#,
        )
        .unwrap();
        std::fs::write(root.join("docs/sub/pic.gif"), b"GIF89a").unwrap();
        std::fs::write(
            root.join("outside.html"),
            b"<p>at the root; `../` above the root is not followed</p>",
        )
        .unwrap();
        let graph = SiteGraph::scan(root).unwrap();
        let target = |i: usize| graph.tree.files[i].target.as_str();
        let index = graph.entry.unwrap();
        let refs = graph.pages[index].as_ref().unwrap();
        let links: Vec<&str> = refs.links.iter().map(|&i| target(i)).collect();
        assert_eq!(links, ["/docs/index.html"]);
        assert_eq!((graph.broken_references, graph.foreign_references), (1, 2));
        let docs = graph.tree.find("/docs/index.html").unwrap();
        let docs_refs = graph.pages[docs].as_ref().unwrap();
        assert_eq!(docs_refs.embeds.iter().map(|&i| target(i)).collect::<Vec<_>>(), ["/docs/sub/pic.gif"]);
        assert_eq!(docs_refs.links.iter().map(|&i| target(i)).collect::<Vec<_>>(), ["/index.html"]);
    }
}
