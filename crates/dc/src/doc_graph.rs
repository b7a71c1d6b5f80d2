//! `DocGraph`: one home's documents (id, path, size, version) and, for each HTML page, its
//! rewriting plan whose slots point at other documents of the graph — built once from
//! `SourceDoc`s the caller read (no I/O here), streaming: each page is parsed as it is added.
//! Links are read in the site's `Scheme` (`http` unless the builder is told otherwise).

use std::collections::HashMap;

use crate::html_links::{SlotKind, scan_page};
use crate::rewrite::{PlanError, RewritePlan};
use crate::scheme::Scheme;

/// A document's index in its `DocGraph`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct DocId(pub u32);

/// One document as the caller read it.
#[derive(Clone, Copy, Debug)]
pub struct SourceDoc<'a> {
    /// Canonical site path (`/dir/a%20b.html`, as the document tree names files).
    pub path: &'a str,
    /// Size in bytes.
    pub size: u64,
    /// Modification time in whole seconds: the document's version.
    pub mtime_s: u64,
    /// The contents, for HTML pages only.
    pub html: Option<&'a [u8]>,
}

/// A page's plan with the graph's ids of its slots' targets (slots whose target is not a
/// document of the graph are left out: they stay verbatim).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PagePlan {
    /// The plan; `plan.slots()[i]` points at `targets[i]`.
    pub plan: RewritePlan,
    /// One target per slot.
    pub targets: Vec<DocId>,
}

/// What serving a document involves.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DocPage {
    /// Not HTML: served as is.
    NotHtml,
    /// HTML with a plan.
    Plan(PagePlan),
    /// HTML that is always served unmodified, and why.
    Unmodifiable(PlanError),
}

/// One document of the graph.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Doc {
    /// Canonical site path.
    pub path: String,
    /// Size in bytes.
    pub size: u64,
    /// Version: modification time in whole seconds.
    pub version: u64,
    /// Its rewriting.
    pub page: DocPage,
}

/// Why a graph is refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum DocGraphError {
    /// Two documents with one path.
    #[error("document `{0}` is listed twice")]
    DuplicatePath(String),
    /// More documents than ids.
    #[error("more than {} documents", u32::MAX)]
    TooMany,
}

/// Builds a `DocGraph` one document at a time (each page is parsed when added, so the caller
/// need not hold every page in memory).
#[derive(Debug)]
pub struct DocGraphBuilder {
    scheme: Scheme,
    home_authority: String,
    docs: Vec<(Doc, Option<Result<RewritePlan, PlanError>>)>,
    ids: HashMap<String, DocId>,
}

impl DocGraphBuilder {
    /// A builder for the `http` home reached at `home_authority` (`host:port`).
    pub fn new(home_authority: &str) -> DocGraphBuilder {
        DocGraphBuilder::with_scheme(Scheme::Http, home_authority)
    }

    /// A builder for the home reached at `home_authority` and served with `scheme`.
    pub fn with_scheme(scheme: Scheme, home_authority: &str) -> DocGraphBuilder {
        DocGraphBuilder {
            scheme,
            home_authority: home_authority.to_string(),
            docs: Vec::new(),
            ids: HashMap::new(),
        }
    }

    /// Add one document; its id is the number of documents added before it.
    pub fn add(&mut self, source: SourceDoc<'_>) -> Result<DocId, DocGraphError> {
        if self.ids.contains_key(source.path) {
            return Err(DocGraphError::DuplicatePath(source.path.to_string()));
        }
        let id = DocId(u32::try_from(self.docs.len()).map_err(|_| DocGraphError::TooMany)?);
        let plan = source.html.map(|html| {
            let links = scan_page(html)?;
            RewritePlan::new(&links, html.len(), source.path, self.scheme, &self.home_authority)
        });
        let doc = Doc {
            path: source.path.to_string(),
            size: source.size,
            version: source.mtime_s,
            page: DocPage::NotHtml,
        };
        self.ids.insert(doc.path.clone(), id);
        self.docs.push((doc, plan));
        Ok(id)
    }

    /// Link every page's slots to the documents they name.
    pub fn finish(self) -> DocGraph {
        let mut graph = DocGraph {
            scheme: self.scheme,
            home_authority: self.home_authority,
            docs: Vec::new(),
            ids: self.ids,
        };
        for (mut doc, plan) in self.docs {
            doc.page = match plan {
                None => DocPage::NotHtml,
                Some(Err(e)) => DocPage::Unmodifiable(e),
                Some(Ok(plan)) => DocPage::Plan(graph.link(plan)),
            };
            graph.docs.push(doc);
        }
        graph
    }
}

/// One home's documents and their links.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DocGraph {
    scheme: Scheme,
    home_authority: String,
    docs: Vec<Doc>,
    ids: HashMap<String, DocId>,
}

impl DocGraph {
    /// Build from all documents at once (an `http` home).
    pub fn build<'a>(
        home_authority: &str,
        sources: impl IntoIterator<Item = SourceDoc<'a>>,
    ) -> Result<DocGraph, DocGraphError> {
        let mut builder = DocGraphBuilder::new(home_authority);
        for source in sources {
            builder.add(source)?;
        }
        Ok(builder.finish())
    }

    /// The home's authority.
    pub fn home_authority(&self) -> &str {
        &self.home_authority
    }

    /// Number of documents.
    pub fn len(&self) -> usize {
        self.docs.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.docs.is_empty()
    }

    /// The id of the document at `path` (canonical site path).
    pub fn id(&self, path: &str) -> Option<DocId> {
        self.ids.get(path).copied()
    }

    /// The document with `id`.
    pub fn doc(&self, id: DocId) -> Option<&Doc> {
        self.docs.get(id.0 as usize)
    }

    /// All documents with their ids, in id order.
    pub fn docs(&self) -> impl Iterator<Item = (DocId, &Doc)> {
        self.docs.iter().enumerate().map(|(i, d)| (DocId(i as u32), d))
    }

    /// The page plan of `id`, if it is HTML with one.
    pub fn plan(&self, id: DocId) -> Option<&PagePlan> {
        match &self.doc(id)?.page {
            DocPage::Plan(p) => Some(p),
            DocPage::NotHtml | DocPage::Unmodifiable(_) => None,
        }
    }

    /// A page's rewritable slots as (target, kind), in document order; empty for other docs.
    pub fn slots(&self, id: DocId) -> impl Iterator<Item = (DocId, SlotKind)> + '_ {
        self.plan(id)
            .into_iter()
            .flat_map(|p| p.targets.iter().zip(p.plan.slots()).map(|(t, s)| (*t, s.kind)))
    }

    /// Plan a copy of one of this home's pages as a co-op received it (parsed once per copy),
    /// with its slots linked to this graph.
    pub fn plan_for_copy(&self, bytes: &[u8], path: &str) -> Result<PagePlan, PlanError> {
        Ok(self.link(RewritePlan::for_copy_with_scheme(self.scheme, bytes, path, &self.home_authority)?))
    }

    fn link(&self, mut plan: RewritePlan) -> PagePlan {
        plan.retain_slots(|s| self.ids.contains_key(&s.target_path));
        let targets = plan.slots().iter().filter_map(|s| self.id(&s.target_path)).collect();
        PagePlan { plan, targets }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::html_links::HtmlError;

    const HOME: &str = "h1:80";

    fn doc<'a>(path: &'a str, html: Option<&'a str>) -> SourceDoc<'a> {
        SourceDoc {
            path,
            size: html.map_or(100, str::len) as u64,
            mtime_s: 1_700_000_000,
            html: html.map(str::as_bytes),
        }
    }

    fn site() -> DocGraph {
        DocGraph::build(
            HOME,
            [
                doc("/index.html", Some("<a href=d/p.html>p</a><img src=logo.gif><a href=gone.html>x</a><a href=http://else/>e</a><img src=/logo.gif?v=2>")),
                doc("/logo.gif", None),
                doc("/d/p.html", Some("<a href=../index.html>up</a><img src='../logo.gif'><a href=\"#top\">t</a>")),
                SourceDoc { path: "/bad.html", size: 3, mtime_s: 5, html: Some(b"\xff\xfe<") },
            ],
        )
        .unwrap()
    }

    #[test]
    fn slots_point_at_graph_documents_and_unknown_targets_stay_verbatim() {
        let g = site();
        let (index, logo, page) =
            (g.id("/index.html").unwrap(), g.id("/logo.gif").unwrap(), g.id("/d/p.html").unwrap());
        let slots: Vec<_> = g.slots(index).collect();
        assert_eq!(slots, [(page, SlotKind::Link), (logo, SlotKind::Embed), (logo, SlotKind::Embed)]);
        assert_eq!(g.plan(index).unwrap().plan.slots()[2].suffix, "?v=2");
        assert_eq!(g.slots(page).collect::<Vec<_>>(), [(index, SlotKind::Link), (logo, SlotKind::Embed)]);
        assert_eq!(g.slots(logo).count(), 0);
        assert_eq!(g.doc(logo).unwrap().page, DocPage::NotHtml);
        assert_eq!(g.doc(logo).unwrap().version, 1_700_000_000);
        assert_eq!(g.len(), 4);
    }

    #[test]
    fn a_page_that_is_not_utf8_is_unmodifiable_with_its_reason() {
        let g = site();
        let bad = g.doc(g.id("/bad.html").unwrap()).unwrap();
        assert_eq!(bad.page, DocPage::Unmodifiable(PlanError::Html(HtmlError::NotUtf8 { valid_up_to: 0 })));
    }

    #[test]
    fn duplicate_paths_are_refused() {
        let err = DocGraph::build(HOME, [doc("/a", None), doc("/a", None)]).unwrap_err();
        assert_eq!(err, DocGraphError::DuplicatePath("/a".into()));
    }

    #[test]
    fn an_https_graph_links_https_references_to_its_documents() {
        let html = "<a href=https://h1/d/p.html>p</a><img src=HTTPS://H1:443/logo.gif>";
        let mut builder = DocGraphBuilder::with_scheme(Scheme::Https, "h1");
        for source in [doc("/index.html", Some(html)), doc("/logo.gif", None), doc("/d/p.html", None)] {
            builder.add(source).unwrap();
        }
        let g = builder.finish();
        let (index, logo, page) =
            (g.id("/index.html").unwrap(), g.id("/logo.gif").unwrap(), g.id("/d/p.html").unwrap());
        assert_eq!(g.slots(index).collect::<Vec<_>>(), [(page, SlotKind::Link), (logo, SlotKind::Embed)]);
        let copy = g.plan_for_copy(html.as_bytes(), "/index.html").unwrap();
        assert_eq!(&copy, g.plan(index).unwrap());
        assert_eq!(copy.plan.base_for_copy("h1").as_deref(), Some("https://h1/index.html"));
        assert_eq!(site().slots(site().id("/index.html").unwrap()).count(), 3, "http: as before");
    }

    #[test]
    fn plan_for_copy_matches_the_homes_plan_of_the_same_bytes() {
        let g = site();
        let html = "<a href=d/p.html>p</a><img src=logo.gif><a href=gone.html>x</a><a href=http://else/>e</a><img src=/logo.gif?v=2>";
        let copy = g.plan_for_copy(html.as_bytes(), "/index.html").unwrap();
        assert_eq!(&copy, g.plan(g.id("/index.html").unwrap()).unwrap());
    }
}
