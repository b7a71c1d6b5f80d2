//! `SurfPlan`: what the live surfer needs before the run — the servers it may contact (the
//! entry's and `--surf-hosts`, resolved once), the entry page, the session length, and the
//! site's originals (sizes and checksums from `site.json`, pages read and scanned once) —
//! and `PageUrl`, resolving the references of a received page to absolute URLs.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use locus_dc::replica_url::ReplicaTarget;
use locus_dc::site_path::{PageBase, Resolved, names_authority, same_authority};
use locus_trace::{SiteFileKind, SiteManifest};

use crate::config::{LoadConfig, Verification, Workload};
use crate::error::LoadError;
use crate::rewrite_check::OriginalPage;
use crate::verifier::{Expectation, manifest_expectation};

/// Largest page the surfer keeps to parse and check.
pub const MAX_PAGE_BYTES: usize = 16 << 20;

/// A server the surfer may contact.
#[derive(Clone, Debug)]
pub struct SurfHost {
    /// `host[:port]` as in the `Host` header (the report's key).
    pub authority: String,
    pub addr: SocketAddr,
    /// `Host: …\r\n`, `Connection: close\r\n` without keep-alive, and the blank line.
    pub head_tail: Box<[u8]>,
}

/// The originals responses are checked against.
#[derive(Debug)]
pub struct SiteOriginals {
    /// Target → (size, XXH3-64), from the manifest.
    files: HashMap<String, (u64, u64)>,
    /// Target → the page, for every HTML page of the manifest.
    pages: HashMap<String, OriginalPage>,
}

/// What a response to a site path must be.
pub enum SiteCheck<'a> {
    /// A page: checked rewrite-aware (when the answer is a 200).
    Page(&'a OriginalPage),
    /// Anything else: the manifest's expectation.
    Plain(Expectation),
}

impl SiteOriginals {
    /// Read the manifest at `path` (a site directory or its `site.json`) and every page it
    /// lists, scanned as served by the home reached at `home_authority`.
    pub fn load(path: &Path, home_authority: &str) -> Result<SiteOriginals, LoadError> {
        let manifest = SiteManifest::load(path)?;
        let dir: PathBuf = if path.is_dir() {
            path.into()
        } else {
            path.parent().map_or_else(|| ".".into(), Path::to_path_buf)
        };
        let mut files = HashMap::with_capacity(manifest.files.len());
        let mut pages = HashMap::new();
        for f in &manifest.files {
            let hash = u64::from_str_radix(&f.xxh3, 16).map_err(|_| {
                LoadError::config(format!("manifest entry {} has a bad xxh3 `{}`", f.target, f.xxh3))
            })?;
            files.insert(f.target.clone(), (f.size, hash));
            if f.kind == SiteFileKind::Page {
                let decoded = locus_trace::decode_path(&f.target).ok_or_else(|| {
                    LoadError::config(format!("manifest page {} is not a decodable path", f.target))
                })?;
                let file = dir.join(decoded.trim_start_matches('/'));
                let bytes = std::fs::read(&file).map_err(|error| LoadError::Io { path: file, error })?;
                pages.insert(f.target.clone(), OriginalPage::new(bytes, &f.target, home_authority));
            }
        }
        Ok(SiteOriginals { files, pages })
    }

    /// How to check the answer to `site_path`.
    pub fn check_for(&self, site_path: &str) -> SiteCheck<'_> {
        match self.pages.get(site_path) {
            Some(page) => SiteCheck::Page(page),
            None => SiteCheck::Plain(manifest_expectation(&self.files, site_path)),
        }
    }

    /// Whether `site_path` is a page of the site.
    pub fn is_page(&self, site_path: &str) -> bool {
        self.pages.contains_key(site_path)
    }
}

/// Everything the surfer's clients share.
#[derive(Debug)]
pub struct SurfPlan {
    /// The servers it may contact; the entry's first.
    pub hosts: Vec<SurfHost>,
    /// The entry page's request target (on `hosts[0]`).
    pub entry_target: String,
    /// Requests per session (pages, embeds and leaves).
    pub session_requests: u32,
    /// What responses are checked against (`Verification::Manifest`).
    pub site: Option<SiteOriginals>,
}

impl SurfPlan {
    /// The plan of a `Workload::Surf` run.
    pub fn build(config: &LoadConfig) -> Result<SurfPlan, LoadError> {
        let Workload::Surf { entry, hosts, session_requests } = &config.workload else {
            return Err(LoadError::config("a surf plan needs the surf workload"));
        };
        let mut out: Vec<SurfHost> = Vec::new();
        for url in std::iter::once(entry).chain(hosts) {
            let authority = url.host_header();
            if out.iter().any(|h| same_authority(&h.authority, &authority)) {
                continue;
            }
            let close = if config.keepalive { "" } else { "Connection: close\r\n" };
            out.push(SurfHost {
                addr: url.resolve()?,
                head_tail: format!("Host: {authority}\r\n{close}\r\n").into_bytes().into_boxed_slice(),
                authority,
            });
        }
        let site = match &config.verification {
            Verification::Off => None,
            Verification::Manifest(path) => Some(SiteOriginals::load(path, &out[0].authority)?),
            Verification::Root(_) | Verification::Pinned(_) => {
                return Err(LoadError::config(
                    "the surfer verifies against a site manifest only (--manifest)",
                ));
            }
        };
        Ok(SurfPlan {
            hosts: out,
            entry_target: entry.path.clone(),
            session_requests: *session_requests,
            site,
        })
    }

    /// The index of the allowed host with `authority`, if any.
    pub fn host_of(&self, authority: &str) -> Option<usize> {
        self.hosts.iter().position(|h| same_authority(&h.authority, authority))
    }
}

/// The site path a request target names: a replica's path at its home, else the path
/// without its query.
pub fn site_path_of(target: &str) -> String {
    if let Ok(Some(replica)) = ReplicaTarget::parse(target) {
        return replica.path;
    }
    target.split(['?', '#']).next().unwrap_or(target).to_string()
}

/// An absolute `http://authority/path` URL, the base of a received page's references.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PageUrl {
    pub authority: String,
    /// Canonical path (what relative references resolve against).
    pub path: String,
}

/// Where a reference of a received page leads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LinkTarget {
    pub authority: String,
    /// Origin-form request target (path and query, no fragment).
    pub target: String,
}

impl PageUrl {
    /// The base of a page fetched from `authority` at `target`, with its `<base href>`.
    pub fn of_page(authority: &str, target: &str, base_href: Option<&str>) -> PageUrl {
        let path = target.split(['?', '#']).next().unwrap_or(target);
        let page = PageUrl { authority: authority.to_string(), path: path.to_string() };
        match base_href.and_then(|b| page.resolve(b)) {
            Some(t) => PageUrl { authority: t.authority, path: site_path_prefix(&t.target) },
            None => page,
        }
    }

    /// The absolute URL `reference` names, if it is an `http` URL of a usable form.
    pub fn resolve(&self, reference: &str) -> Option<LinkTarget> {
        let r = reference.trim_matches(|c: char| c <= ' ');
        let (authority, resolved) = if names_authority(r) {
            let rest = if let Some(rest) = r.strip_prefix("//") {
                rest
            } else {
                r.get(..7).filter(|s| s.eq_ignore_ascii_case("http://"))?;
                &r[7..]
            };
            let authority = &rest[..rest.find(['/', '?', '#']).unwrap_or(rest.len())];
            if authority.is_empty() {
                return None;
            }
            (authority.to_string(), PageBase::new("/", None, authority).resolve(r))
        } else {
            (self.authority.clone(), PageBase::new(&self.path, None, &self.authority).resolve(r))
        };
        match resolved {
            Resolved::Local { path, suffix } => {
                let query = suffix.split('#').next().unwrap_or_default();
                Some(LinkTarget { authority, target: format!("{path}{query}") })
            }
            Resolved::External | Resolved::Unusable(_) => None,
        }
    }
}

/// The path of a target, without its query.
fn site_path_prefix(target: &str) -> String {
    target.split('?').next().unwrap_or(target).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn link(authority: &str, target: &str) -> Option<LinkTarget> {
        Some(LinkTarget { authority: authority.into(), target: target.into() })
    }

    #[test]
    fn references_resolve_against_the_page_or_its_base() {
        let page = PageUrl::of_page("a:1", "/d/p.html?x=1", None);
        assert_eq!(page.resolve("q.html#f"), link("a:1", "/d/q.html"));
        assert_eq!(page.resolve("../i/c.gif?v=2"), link("a:1", "/i/c.gif?v=2"));
        assert_eq!(page.resolve("http://B:2/~migrate/7/s1/d/x.gif"), link("B:2", "/~migrate/7/s1/d/x.gif"));
        assert_eq!(page.resolve("//c:3/y.html"), link("c:3", "/y.html"));
        assert_eq!(page.resolve("mailto:x@y"), None);
        assert_eq!(page.resolve("#top"), None);
        assert_eq!(page.resolve("https://a:1/x"), None);
        let copy = PageUrl::of_page("b:2", "/~migrate/7/s1/d/p.html", Some("http://a:1/d/p.html"));
        assert_eq!(copy, PageUrl { authority: "a:1".into(), path: "/d/p.html".into() });
        assert_eq!(copy.resolve("q.html"), link("a:1", "/d/q.html"));
    }

    #[test]
    fn site_paths_of_replica_targets_are_their_home_paths() {
        assert_eq!(site_path_of("/~migrate/7/s1/d/x.gif"), "/d/x.gif");
        assert_eq!(site_path_of("/d/x.gif?v=1"), "/d/x.gif");
    }
}
