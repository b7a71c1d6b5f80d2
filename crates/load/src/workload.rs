//! The workload of a run, prepared before it starts: `WorkloadPlan` holds every distinct
//! request pre-rendered as bytes (`RequestTemplate`, with its expected response) and the
//! order or distribution in which they are sent (`JobPlan`); `JobFeed` is one connection's
//! reader of it — the next request, or the next session (a page then its embedded objects,
//! or one trace client's requests in order). A synthetic plan's hot spot and dynamic targets
//! are drawn by its `RequestMix` (mix.rs).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use locus_core::Method;
use locus_trace::{
    DocumentFile, DocumentSizes, DocumentTree, ReadOptions, SiteGraph, SiteManifest, TraceReader,
    TraceRecord, ZipfTraceGenerator, ZipfTraceSpec, wire_target,
};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use rand_distr::{Distribution, Zipf};

use crate::config::{DocumentSet, LoadConfig, Popularity, TraceSource, Verification, Workload};
use crate::error::LoadError;
use crate::h2_stream::sendable_path;
use crate::mix::{HotSet, RequestMix};
use crate::surf_plan::SurfPlan;
use crate::verifier::{Expectation, ResponseVerifier};

/// One distinct request, rendered once.
#[derive(Clone, Debug)]
pub struct RequestTemplate {
    pub method: Method,
    /// Request target (origin-form).
    pub target: Box<str>,
    /// `METHOD target HTTP/1.1\r\n` (and `Content-Length: 0` for methods with bodies); the
    /// connection appends its `Host` line and the blank line.
    pub line: Box<[u8]>,
    pub head_only: bool,
    pub expect: Expectation,
    /// A dynamic target of the mix (counted apart in the report).
    pub dynamic: bool,
}

/// In what order or proportion requests are sent; numbers index `WorkloadPlan::templates`.
#[derive(Clone, Debug)]
pub enum JobPlan {
    /// One request, over and over.
    Single(u32),
    /// A trace's requests in order, dealt one at a time to whichever connection asks.
    Sequence { order: Box<[u32]>, repeat: bool },
    /// A trace's clients, each one's requests in order, dealt whole to one connection.
    Sessions { sessions: Box<[Box<[u32]>]>, repeat: bool },
    /// Documents drawn at random (`docs` in popularity order for Zipf), with a hot spot and
    /// dynamic targets mixed in when `mix` is given.
    Sampled { docs: Box<[u32]>, popularity: Popularity, mix: Option<Box<RequestMix>> },
    /// A page drawn at random, then its embedded objects.
    SiteSessions { pages: Box<[u32]>, embeds: Box<[Box<[u32]>]>, popularity: Popularity },
    /// The live surfer: its clients choose their own requests (no templates).
    Surf(Arc<SurfPlan>),
}

/// Everything a run sends, prepared once and shared by every worker thread.
#[derive(Debug)]
pub struct WorkloadPlan {
    pub templates: Vec<RequestTemplate>,
    pub jobs: JobPlan,
    /// Next position in a `Sequence` or `Sessions` plan (shared by all connections).
    cursor: AtomicU64,
    /// Trace records left out (a method that cannot be replayed, an empty target, a target
    /// HTTP/2 cannot carry).
    pub skipped_records: u64,
}

/// Builds the template table, one distinct (method, target) at a time.
#[derive(Default)]
pub(crate) struct TemplateTable {
    pub(crate) templates: Vec<RequestTemplate>,
    index: HashMap<(Method, String), u32>,
}

impl TemplateTable {
    /// The template of (`method`, `target`), rendered on first use.
    pub(crate) fn intern(&mut self, method: Method, target: &str) -> u32 {
        if let Some(&i) = self.index.get(&(method, target.to_string())) {
            return i;
        }
        let mut line = format!("{method} {target} HTTP/1.1\r\n");
        if matches!(method, Method::Post | Method::Put | Method::Patch) {
            line.push_str("Content-Length: 0\r\n");
        }
        let i = self.templates.len() as u32;
        self.templates.push(RequestTemplate {
            method,
            target: target.into(),
            line: line.into_bytes().into_boxed_slice(),
            head_only: method == Method::Head,
            expect: Expectation::Unchecked,
            dynamic: false,
        });
        self.index.insert((method, target.to_string()), i);
        i
    }
}

/// Whether a trace record can be replayed, and its target as sent (over HTTP/2 when `h2`:
/// only a target HTTP/2 carries unchanged as its `:path`).
fn replayable(record: &TraceRecord, h2: bool) -> Option<String> {
    if matches!(record.method, Method::Connect | Method::Other) {
        return None;
    }
    let target = wire_target(&record.target);
    (!target.is_empty() && (!h2 || sendable_path(&target))).then(|| target.into_owned())
}

/// Over HTTP/2, every template's target must go out unchanged as its `:path` (a trace's
/// records that cannot are left out before this; a URL's path or a site's file is refused).
fn check_h2_targets(templates: &[RequestTemplate]) -> Result<(), LoadError> {
    match templates.iter().find(|t| !sendable_path(&t.target)) {
        Some(t) => Err(LoadError::config(format!(
            "request target `{}` cannot be sent over HTTP/2 unchanged (not a valid :path)",
            t.target
        ))),
        None => Ok(()),
    }
}

/// Targets of `files` in popularity order (rank 0 first), as locus-trace's Zipf generator
/// ranks them for `seed`.
fn popularity_order(files: Vec<DocumentFile>, seed: u64) -> Result<Vec<String>, LoadError> {
    let n = files.len() as u64;
    let spec = ZipfTraceSpec {
        seed,
        requests: 0,
        documents: 0,
        sizes: DocumentSizes::Files(files),
        ..ZipfTraceSpec::default()
    };
    let generator = ZipfTraceGenerator::new(spec)?;
    Ok((0..n).map(|r| generator.document_at_rank(r).0).collect())
}

impl WorkloadPlan {
    /// Prepare the workload of `config`, reading its trace, manifest or document root, and
    /// the expected responses (files hashed on up to `threads` threads).
    pub fn build(config: &LoadConfig, threads: usize) -> Result<WorkloadPlan, LoadError> {
        config.validate_mix()?;
        if let Workload::Surf { .. } = &config.workload {
            let jobs = JobPlan::Surf(Arc::new(SurfPlan::build(config)?));
            return Ok(WorkloadPlan {
                templates: Vec::new(),
                jobs,
                cursor: AtomicU64::new(0),
                skipped_records: 0,
            });
        }
        let mut table = TemplateTable::default();
        let mut skipped = 0;
        let jobs = match &config.workload {
            Workload::SingleUrl => {
                let path = config.targets.first().map_or("/", |t| t.path.as_str());
                JobPlan::Single(table.intern(Method::Get, path))
            }
            Workload::Trace { source, repeat } => {
                let records: Box<dyn Iterator<Item = Result<TraceRecord, locus_trace::TraceError>>> =
                    match source {
                        TraceSource::File { path, format } => {
                            let options = ReadOptions { format: *format, ..ReadOptions::default() };
                            Box::new(TraceReader::open(path, &options)?)
                        }
                        TraceSource::Records(records) => Box::new(records.iter().cloned().map(Ok)),
                    };
                let mut order = Vec::new();
                let mut by_client: Vec<Vec<u32>> = Vec::new();
                let mut client_index: HashMap<u32, usize> = HashMap::new();
                for record in records {
                    let record = record?;
                    let Some(target) = replayable(&record, config.h2) else {
                        skipped += 1;
                        continue;
                    };
                    let t = table.intern(record.method, &target);
                    if config.sessions {
                        let next = by_client.len();
                        let i = *client_index.entry(record.client).or_insert(next);
                        if i == next {
                            by_client.push(Vec::new());
                        }
                        by_client[i].push(t);
                    } else {
                        order.push(t);
                    }
                }
                if order.is_empty() && by_client.is_empty() {
                    return Err(LoadError::config("the trace has no request that can be replayed"));
                }
                if config.sessions {
                    let sessions = by_client.into_iter().map(Vec::into_boxed_slice).collect();
                    JobPlan::Sessions { sessions, repeat: *repeat }
                } else {
                    JobPlan::Sequence { order: order.into_boxed_slice(), repeat: *repeat }
                }
            }
            Workload::Surf { .. } => return Err(LoadError::config("the surf workload has no templates")),
            Workload::Synthetic { popularity, documents } => {
                let mut jobs =
                    synthetic_jobs(&mut table, *popularity, documents, config.sessions, config.seed)?;
                if let JobPlan::Sampled { docs, mix, .. } = &mut jobs {
                    *mix = RequestMix::build(&mut table, config, docs.len())?.map(Box::new);
                }
                jobs
            }
        };
        let verifier = match &config.verification {
            Verification::Off => None,
            Verification::Root(root) => Some(ResponseVerifier::from_root(root)?),
            Verification::Manifest(path) => {
                Some(ResponseVerifier::from_manifest(&SiteManifest::load(path)?)?)
            }
            Verification::Pinned(e) => Some(ResponseVerifier::pinned(*e)),
        };
        let mut templates = table.templates;
        if config.h2 {
            check_h2_targets(&templates)?;
        }
        if let Some(verifier) = verifier {
            let checked: Vec<usize> = (0..templates.len())
                .filter(|&i| {
                    matches!(templates[i].method, Method::Get | Method::Head) && !templates[i].dynamic
                })
                .collect();
            let targets: Vec<&str> = checked.iter().map(|&i| &*templates[i].target).collect();
            let expectations = verifier.expectations(&targets, threads)?;
            for (i, e) in checked.into_iter().zip(expectations) {
                templates[i].expect = e;
            }
            if let JobPlan::Sampled { mix: Some(mix), .. } = &jobs {
                mix.expect_dynamic_bodies(&mut templates);
            }
        }
        Ok(WorkloadPlan { templates, jobs, cursor: AtomicU64::new(0), skipped_records: skipped })
    }

    /// Take the next position of a shared sequence of `len` items.
    fn take_position(&self, len: usize, repeat: bool) -> Option<usize> {
        let i = self.cursor.fetch_add(1, Ordering::Relaxed) as usize;
        if i < len {
            Some(i)
        } else if repeat && len > 0 {
            Some(i % len)
        } else {
            None
        }
    }
}

fn synthetic_jobs(
    table: &mut TemplateTable,
    popularity: Popularity,
    documents: &DocumentSet,
    sessions: bool,
    seed: u64,
) -> Result<JobPlan, LoadError> {
    // (all documents, pages with their embeds) as targets.
    let (docs, pages): (Vec<DocumentFile>, Vec<(DocumentFile, Vec<String>)>) = match documents {
        DocumentSet::Model { documents } => {
            let spec = ZipfTraceSpec { seed, requests: 0, documents: *documents, ..ZipfTraceSpec::default() };
            let generator = ZipfTraceGenerator::new(spec)?;
            let docs: Vec<u32> = (0..*documents)
                .map(|r| table.intern(Method::Get, &generator.document_at_rank(r).0))
                .collect();
            return Ok(JobPlan::Sampled { docs: docs.into_boxed_slice(), popularity, mix: None });
        }
        DocumentSet::Docroot(root) => {
            if sessions {
                let graph = SiteGraph::scan(root)?;
                let pages = graph
                    .page_files
                    .iter()
                    .map(|&p| {
                        let embeds = graph.pages[p]
                            .as_ref()
                            .map(|r| r.embeds.iter().map(|&e| graph.tree.files[e].target.clone()).collect())
                            .unwrap_or_default();
                        (graph.tree.files[p].clone(), embeds)
                    })
                    .collect();
                (graph.tree.files, pages)
            } else {
                (DocumentTree::scan(root).map_err(locus_trace::TraceError::from)?.files, Vec::new())
            }
        }
        DocumentSet::Manifest(path) => {
            let manifest = SiteManifest::load(path)?;
            let as_doc = |target: &str, size: u64| DocumentFile {
                target: target.into(),
                path: PathBuf::from(target),
                size,
                mtime: 0,
            };
            let docs: Vec<DocumentFile> = manifest.files.iter().map(|f| as_doc(&f.target, f.size)).collect();
            let by_target: HashMap<&str, &locus_trace::SiteFile> =
                manifest.files.iter().map(|f| (f.target.as_str(), f)).collect();
            let pages = manifest
                .pages
                .iter()
                .filter_map(|p| by_target.get(p.as_str()))
                .map(|f| (as_doc(&f.target, f.size), f.embeds.clone()))
                .collect();
            (docs, pages)
        }
    };
    if sessions {
        if pages.is_empty() {
            return Err(LoadError::config("sessions need HTML pages, and the site has none"));
        }
        let embeds_of: HashMap<String, Vec<String>> =
            pages.iter().map(|(f, e)| (f.target.clone(), e.clone())).collect();
        let order = popularity_order(pages.into_iter().map(|(f, _)| f).collect(), seed)?;
        let mut page_ids = Vec::with_capacity(order.len());
        let mut embed_ids = Vec::with_capacity(order.len());
        for target in &order {
            page_ids.push(table.intern(Method::Get, target));
            let embeds: Vec<u32> =
                embeds_of.get(target).into_iter().flatten().map(|e| table.intern(Method::Get, e)).collect();
            embed_ids.push(embeds.into_boxed_slice());
        }
        return Ok(JobPlan::SiteSessions {
            pages: page_ids.into_boxed_slice(),
            embeds: embed_ids.into_boxed_slice(),
            popularity,
        });
    }
    if docs.is_empty() {
        return Err(LoadError::config("the document set is empty"));
    }
    let order = popularity_order(docs, seed)?;
    let ids: Vec<u32> = order.iter().map(|t| table.intern(Method::Get, t)).collect();
    Ok(JobPlan::Sampled { docs: ids.into_boxed_slice(), popularity, mix: None })
}

/// One connection's reader of the plan.
pub struct JobFeed {
    plan: Arc<WorkloadPlan>,
    rng: SmallRng,
    zipf: Option<Zipf<f64>>,
    /// The current phase's hot documents.
    hot: HotSet,
    /// The run's start, shared by every feed: hot-spot phases count from it.
    run_start: Instant,
}

impl JobFeed {
    /// A feed for one connection; `seed` makes its random draws repeatable, and `run_start`
    /// (the same for every connection of the run) is when the hot spot's phases start.
    pub fn new(plan: Arc<WorkloadPlan>, seed: u64, run_start: Instant) -> JobFeed {
        let n = match &plan.jobs {
            JobPlan::Sampled { docs, popularity: Popularity::Zipf { .. }, .. } => docs.len(),
            JobPlan::SiteSessions { pages, popularity: Popularity::Zipf { .. }, .. } => pages.len(),
            _ => 0,
        };
        let alpha = match &plan.jobs {
            JobPlan::Sampled { popularity: Popularity::Zipf { alpha }, .. }
            | JobPlan::SiteSessions { popularity: Popularity::Zipf { alpha }, .. } => *alpha,
            _ => 0.0,
        };
        let zipf = (n > 0).then(|| Zipf::new(n as f64, alpha).ok()).flatten();
        JobFeed { plan, rng: SmallRng::seed_from_u64(seed), zipf, hot: HotSet::default(), run_start }
    }

    /// The plan this feed reads.
    #[cfg(test)]
    pub fn plan(&self) -> &Arc<WorkloadPlan> {
        &self.plan
    }

    /// The next single request; `None` when the workload is used up. Session plans yield
    /// their first requests one by one here.
    pub fn next_request(&mut self) -> Option<u32> {
        let JobFeed { plan, rng, zipf, hot, run_start } = self;
        match &plan.jobs {
            JobPlan::Single(t) => Some(*t),
            JobPlan::Sequence { order, repeat } => plan.take_position(order.len(), *repeat).map(|i| order[i]),
            JobPlan::Sampled { docs, mix: None, .. } => Some(docs[draw(rng, zipf.as_ref(), docs.len())]),
            JobPlan::Sampled { docs, mix: Some(mix), .. } => {
                let phase = if mix.is_clocked() { mix.phase(run_start.elapsed()) } else { 0 };
                Some(mix.draw(rng, hot, phase, docs, |rng| draw(rng, zipf.as_ref(), docs.len())))
            }
            JobPlan::Sessions { sessions, repeat } => {
                plan.take_position(sessions.len(), *repeat).and_then(|i| sessions[i].first().copied())
            }
            JobPlan::SiteSessions { pages, .. } => Some(pages[draw(rng, zipf.as_ref(), pages.len())]),
            JobPlan::Surf(_) => None,
        }
    }

    /// The next session's requests into `out` (cleared first). `Some(true)` when the first
    /// request (a page) must complete before the rest (its embeds) are sent; `None` when the
    /// workload is used up. Plans without sessions give one request.
    pub fn next_session(&mut self, out: &mut Vec<u32>) -> Option<bool> {
        out.clear();
        let JobFeed { plan, rng, zipf, .. } = self;
        match &plan.jobs {
            JobPlan::Sessions { sessions, repeat } => {
                let i = plan.take_position(sessions.len(), *repeat)?;
                out.extend_from_slice(&sessions[i]);
                return Some(false);
            }
            JobPlan::SiteSessions { pages, embeds, .. } => {
                let i = draw(rng, zipf.as_ref(), pages.len());
                out.push(pages[i]);
                out.extend_from_slice(&embeds[i]);
                return Some(true);
            }
            _ => {}
        }
        out.push(self.next_request()?);
        Some(false)
    }
}

/// A position in `0..n`: Zipf-distributed (rank order) when `zipf` is given, else uniform.
fn draw(rng: &mut SmallRng, zipf: Option<&Zipf<f64>>, n: usize) -> usize {
    match zipf {
        // Samples are integers 1..=n as floats.
        Some(z) => (z.sample(rng) as usize).clamp(1, n) - 1,
        None => rng.random_range(0..n),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::target_url::TargetUrl;

    fn config(workload: Workload) -> LoadConfig {
        let url: TargetUrl = "http://127.0.0.1:1/x".parse().unwrap();
        LoadConfig { workload, ..LoadConfig::new(vec![url]) }
    }

    fn records(clients_targets: &[(u32, &str)]) -> Arc<Vec<TraceRecord>> {
        Arc::new(
            clients_targets
                .iter()
                .map(|&(client, target)| TraceRecord { client, ..TraceRecord::get(target, 0) })
                .collect(),
        )
    }

    fn targets(plan: &WorkloadPlan, ids: &[u32]) -> Vec<String> {
        ids.iter().map(|&i| plan.templates[i as usize].target.to_string()).collect()
    }

    #[test]
    fn templates_are_rendered_once_per_distinct_request() {
        let recs = records(&[(0, "/a"), (1, "/b"), (0, "/a"), (2, "/a b")]);
        let workload = Workload::Trace { source: TraceSource::Records(recs), repeat: false };
        let plan = WorkloadPlan::build(&config(workload), 1).unwrap();
        assert_eq!(plan.templates.len(), 3);
        assert_eq!(&*plan.templates[0].line, b"GET /a HTTP/1.1\r\n");
        assert_eq!(&*plan.templates[2].target, "/a%20b");
        let mut feed = JobFeed::new(Arc::new(plan), 1, Instant::now());
        let order: Vec<u32> = std::iter::from_fn(|| feed.next_request()).collect();
        assert_eq!(targets(feed.plan(), &order), ["/a", "/b", "/a", "/a%20b"]);
    }

    #[test]
    fn over_http2_records_it_cannot_carry_are_skipped_and_other_targets_refused() {
        let recs = records(&[(0, "/a"), (1, "/b#part"), (0, "/a b"), (2, "/c")]);
        let workload = Workload::Trace { source: TraceSource::Records(recs), repeat: false };
        let h1 = WorkloadPlan::build(&config(workload.clone()), 1).unwrap();
        assert_eq!((h1.templates.len(), h1.skipped_records), (4, 0));
        let h2 = WorkloadPlan::build(&LoadConfig { h2: true, ..config(workload) }, 1).unwrap();
        assert_eq!(h2.skipped_records, 1, "the fragment would be cut off");
        assert_eq!(targets(&h2, &[0, 1, 2]), ["/a", "/a%20b", "/c"]);
        let url = TargetUrl { host: "127.0.0.1".into(), port: 1, tls: false, path: "/x#y".into() };
        let single = LoadConfig { h2: true, ..LoadConfig::new(vec![url]) };
        let e = WorkloadPlan::build(&single, 1).unwrap_err().to_string();
        assert!(e.contains("/x#y") && e.contains("HTTP/2"), "{e}");
    }

    #[test]
    fn trace_sessions_keep_each_clients_requests_in_order() {
        let recs = records(&[(7, "/1"), (3, "/x"), (7, "/2"), (3, "/y"), (7, "/3"), (9, "/solo")]);
        let workload = Workload::Trace { source: TraceSource::Records(recs), repeat: false };
        let plan =
            Arc::new(WorkloadPlan::build(&LoadConfig { sessions: true, ..config(workload) }, 1).unwrap());
        let mut feed = JobFeed::new(plan.clone(), 1, Instant::now());
        let mut out = Vec::new();
        let mut got = Vec::new();
        while let Some(barrier) = feed.next_session(&mut out) {
            assert!(!barrier);
            got.push(targets(&plan, &out));
        }
        assert_eq!(got, [vec!["/1", "/2", "/3"], vec!["/x", "/y"], vec!["/solo"]]);
    }

    #[test]
    fn repeated_traces_start_again_and_single_urls_never_end() {
        let workload =
            Workload::Trace { source: TraceSource::Records(records(&[(0, "/a"), (0, "/b")])), repeat: true };
        let plan = Arc::new(WorkloadPlan::build(&config(workload), 1).unwrap());
        let mut feed = JobFeed::new(plan.clone(), 1, Instant::now());
        let got: Vec<u32> = (0..5).filter_map(|_| feed.next_request()).collect();
        assert_eq!(targets(&plan, &got), ["/a", "/b", "/a", "/b", "/a"]);
        let plan = Arc::new(WorkloadPlan::build(&config(Workload::SingleUrl), 1).unwrap());
        let mut feed = JobFeed::new(plan.clone(), 1, Instant::now());
        assert!((0..100).all(|_| feed.next_request() == Some(0)));
        assert_eq!(&*plan.templates[0].target, "/x");
    }

    #[test]
    fn zipf_draws_favour_the_top_ranked_document_and_uniform_does_not() {
        let synthetic =
            |popularity| Workload::Synthetic { popularity, documents: DocumentSet::Model { documents: 100 } };
        let plan =
            Arc::new(WorkloadPlan::build(&config(synthetic(Popularity::Zipf { alpha: 1.0 })), 1).unwrap());
        let JobPlan::Sampled { docs, .. } = &plan.jobs else { panic!("sampled plan") };
        let top = docs[0];
        let mut feed = JobFeed::new(plan.clone(), 3, Instant::now());
        let n = 50_000;
        let hits = (0..n).filter(|_| feed.next_request() == Some(top)).count() as f64 / n as f64;
        let harmonic: f64 = (1..=100).map(|k| 1.0 / k as f64).sum();
        assert!((hits - 1.0 / harmonic).abs() < 0.01, "top document share {hits}");
        let plan = Arc::new(WorkloadPlan::build(&config(synthetic(Popularity::Uniform)), 1).unwrap());
        let mut feed = JobFeed::new(plan, 3, Instant::now());
        let hits = (0..n).filter(|_| feed.next_request() == Some(top)).count() as f64 / n as f64;
        assert!((hits - 0.01).abs() < 0.003, "uniform share {hits}");
    }

    #[test]
    fn site_sessions_put_a_pages_embeds_right_after_it() {
        let dir = tempfile::tempdir().unwrap();
        let spec = locus_trace::SiteSpec { files: 60, ..locus_trace::SiteSpec::default() };
        let manifest =
            locus_trace::SiteGenerator::new(spec).unwrap().write(dir.path(), false, &mut |_, _| {}).unwrap();
        for (documents, exact_order) in [
            (DocumentSet::Manifest(dir.path().into()), true),
            (DocumentSet::Docroot(dir.path().into()), false),
        ] {
            let workload = Workload::Synthetic { popularity: Popularity::Uniform, documents };
            let plan =
                Arc::new(WorkloadPlan::build(&LoadConfig { sessions: true, ..config(workload) }, 1).unwrap());
            let mut feed = JobFeed::new(plan.clone(), 5, Instant::now());
            let mut out = Vec::new();
            for _ in 0..50 {
                assert_eq!(feed.next_session(&mut out), Some(true));
                let got = targets(&plan, &out);
                let page = manifest.file(&got[0]).unwrap();
                assert_eq!(page.kind, locus_trace::SiteFileKind::Page);
                let mut embeds = got[1..].to_vec();
                let mut expected = page.embeds.clone();
                if !exact_order {
                    // Read from the HTML: document order (styles and scripts in the head first).
                    embeds.sort();
                    expected.sort();
                }
                assert_eq!(embeds, expected);
            }
        }
    }
}
