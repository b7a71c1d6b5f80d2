//! Synthetic web sites: `SiteSpec` describes one (file count, SURGE sizes, share of HTML
//! pages, links and embedded objects per page, subdirectories), `SiteGenerator` writes it to
//! disk — every file exactly its size, content fixed by the seed — together with a
//! `SiteManifest` (`site.json`) listing files, sizes, hashes, pages, links and embeds.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};
use xxhash_rust::xxh3::Xxh3;

use crate::error::TraceError;
use crate::size_model::SizeModel;

/// File name of the manifest written beside the site's files.
pub const SITE_MANIFEST_FILE: &str = "site.json";

/// Value of `SiteManifest::format`.
pub const SITE_MANIFEST_FORMAT: &str = "locus-site v1";

/// A synthetic web site.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SiteSpec {
    /// RNG seed: the same spec and seed give the same bytes.
    pub seed: u64,
    /// Number of files, `index.html` included.
    pub files: u32,
    /// Share of the files that are HTML pages (at least `index.html` is one).
    pub html_share: f64,
    /// File sizes (pages are made larger when their markup needs more room).
    pub sizes: SizeModel,
    /// Mean hyperlinks per page (each page gets 1 ..= 2·mean − 1).
    pub links_per_page: u32,
    /// Mean embedded objects per page (each page gets 0 ..= 2·mean).
    pub embeds_per_page: u32,
    /// Subdirectories to spread the files over (about half nested in another).
    pub directories: u32,
}

impl Default for SiteSpec {
    fn default() -> Self {
        SiteSpec {
            seed: 1,
            files: 1000,
            html_share: 0.3,
            sizes: SizeModel::surge(),
            links_per_page: 5,
            embeds_per_page: 4,
            directories: 10,
        }
    }
}

/// What a file of a site is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SiteFileKind {
    /// An HTML page (`.html`).
    Page,
    /// An image (`.gif`, `.jpg`, `.png`), embedded with `<img src>`.
    Image,
    /// A style sheet (`.css`), embedded with `<link rel="stylesheet" href>`.
    Style,
    /// A script (`.js`), embedded with `<script src>`.
    Script,
    /// A download (`.pdf`, `.zip`), linked with `<a href>`.
    Download,
}

/// One file in a `SiteManifest`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SiteFile {
    /// Request target (`/s003/p00017.html`); also its path below the site root.
    pub target: String,
    /// Exact size in bytes.
    pub size: u64,
    /// What it is.
    pub kind: SiteFileKind,
    /// XXH3-64 of its content, 16 lower-case hex digits (for byte-exact response checks).
    pub xxh3: String,
    /// For a page: targets of its hyperlinks, in document order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub links: Vec<String>,
    /// For a page: targets of its embedded objects, in document order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub embeds: Vec<String>,
}

/// The manifest of a generated site (`site.json`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SiteManifest {
    /// `locus-site v1`.
    pub format: String,
    /// The seed the site was made with.
    pub seed: u64,
    /// Where a surfer starts: `/index.html`.
    pub entry: String,
    /// Sum of all file sizes.
    pub total_bytes: u64,
    /// Targets of the pages.
    pub pages: Vec<String>,
    /// Every file, in generation order (`index.html` first).
    pub files: Vec<SiteFile>,
}

impl SiteManifest {
    /// Read `site.json` from a site directory (or the manifest file itself).
    pub fn load(path: &Path) -> Result<SiteManifest, TraceError> {
        let file = if path.is_dir() { path.join(SITE_MANIFEST_FILE) } else { path.to_path_buf() };
        let text = std::fs::read_to_string(&file).map_err(|e| TraceError::fs(&file, e))?;
        let manifest: SiteManifest = serde_json::from_str(&text).map_err(|e| TraceError::Format {
            path: file.display().to_string(),
            message: format!("not a site manifest: {e}"),
        })?;
        if manifest.format != SITE_MANIFEST_FORMAT {
            return Err(TraceError::Format {
                path: file.display().to_string(),
                message: format!("manifest format `{}`, expected `{SITE_MANIFEST_FORMAT}`", manifest.format),
            });
        }
        Ok(manifest)
    }

    /// The file with `target`, if any.
    pub fn file(&self, target: &str) -> Option<&SiteFile> {
        self.files.iter().find(|f| f.target == target)
    }
}

/// Writes a `SiteSpec` to a directory.
pub struct SiteGenerator {
    spec: SiteSpec,
}

/// A file being planned: where, what, how big.
struct PlannedFile {
    dir: String,
    name: String,
    kind: SiteFileKind,
    size: u64,
    links: Vec<usize>,
    embeds: Vec<usize>,
}

impl PlannedFile {
    fn target(&self) -> String {
        if self.dir.is_empty() { format!("/{}", self.name) } else { format!("/{}/{}", self.dir, self.name) }
    }
}

const SPEC: &str = "site spec";

impl SiteGenerator {
    /// Check `spec`.
    pub fn new(spec: SiteSpec) -> Result<SiteGenerator, TraceError> {
        if spec.files == 0 {
            return Err(TraceError::spec(SPEC, "a site needs at least one file (index.html)"));
        }
        if !(0.0..=1.0).contains(&spec.html_share) {
            return Err(TraceError::spec(
                SPEC,
                format!("html share {} is not within 0..=1", spec.html_share),
            ));
        }
        if spec.links_per_page == 0 {
            return Err(TraceError::spec(SPEC, "pages need at least one link on average"));
        }
        spec.sizes.sampler()?;
        Ok(SiteGenerator { spec })
    }

    /// Plan the site and write it under `root` (created if missing). `root` must be empty
    /// unless `overwrite` (then files of the same names are replaced; others are left alone).
    /// `progress(done, total)` is called after each file.
    pub fn write(
        &self,
        root: &Path,
        overwrite: bool,
        progress: &mut dyn FnMut(usize, usize),
    ) -> Result<SiteManifest, TraceError> {
        std::fs::create_dir_all(root).map_err(|e| TraceError::fs(root, e))?;
        let mut entries = std::fs::read_dir(root).map_err(|e| TraceError::fs(root, e))?;
        if !overwrite && entries.next().is_some() {
            return Err(TraceError::Directory {
                path: root.to_path_buf(),
                message: "is not empty (choose an empty directory, or overwrite)".into(),
            });
        }
        let mut rng = SmallRng::seed_from_u64(self.spec.seed);
        let plan = self.plan(&mut rng);
        let targets: Vec<String> = plan.iter().map(PlannedFile::target).collect();
        let mut files = Vec::with_capacity(plan.len());
        for (index, planned) in plan.iter().enumerate() {
            let dir = root.join(&planned.dir);
            std::fs::create_dir_all(&dir).map_err(|e| TraceError::fs(&dir, e))?;
            let path = dir.join(&planned.name);
            // Each file's content has its own seed, so files do not depend on write order.
            let content_seed = self.spec.seed ^ (index as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
            let mut content_rng = SmallRng::seed_from_u64(content_seed);
            let (size, hash) = match planned.kind {
                SiteFileKind::Page => {
                    let html = page_html(planned, &plan, &mut content_rng);
                    write_bytes(&path, &html)?
                }
                SiteFileKind::Style | SiteFileKind::Script => {
                    write_generated(&path, planned.size, |buf, at| {
                        text_filler(buf, at, planned.size, &mut content_rng)
                    })?
                }
                SiteFileKind::Image | SiteFileKind::Download => {
                    write_generated(&path, planned.size, |buf, _| content_rng.fill(buf))?
                }
            };
            files.push(SiteFile {
                target: targets[index].clone(),
                size,
                kind: planned.kind,
                xxh3: format!("{hash:016x}"),
                links: planned.links.iter().map(|&i| targets[i].clone()).collect(),
                embeds: planned.embeds.iter().map(|&i| targets[i].clone()).collect(),
            });
            progress(index + 1, plan.len());
        }
        let manifest = SiteManifest {
            format: SITE_MANIFEST_FORMAT.into(),
            seed: self.spec.seed,
            entry: "/index.html".into(),
            total_bytes: files.iter().map(|f| f.size).sum(),
            pages: files.iter().filter(|f| f.kind == SiteFileKind::Page).map(|f| f.target.clone()).collect(),
            files,
        };
        let manifest_path = root.join(SITE_MANIFEST_FILE);
        let mut out =
            BufWriter::new(File::create(&manifest_path).map_err(|e| TraceError::fs(&manifest_path, e))?);
        serde_json::to_writer_pretty(&mut out, &manifest)
            .map_err(|e| TraceError::fs(&manifest_path, e.into()))?;
        out.write_all(b"\n").and_then(|()| out.flush()).map_err(|e| TraceError::fs(&manifest_path, e))?;
        Ok(manifest)
    }

    /// Decide every file's place, kind, size, links and embeds.
    fn plan(&self, rng: &mut SmallRng) -> Vec<PlannedFile> {
        let spec = &self.spec;
        let sampler = spec.sizes.sampler().expect("checked in new");
        let mut dirs: Vec<String> = vec![String::new()];
        for i in 0..spec.directories {
            let name = format!("s{i:03}");
            let nested = i > 0 && rng.random::<f64>() < 0.5;
            let dir = if nested {
                let parent = &dirs[rng.random_range(1..dirs.len())];
                format!("{parent}/{name}")
            } else {
                name
            };
            dirs.push(dir);
        }
        let n = spec.files as usize;
        let pages = ((n as f64 * spec.html_share).round() as usize).clamp(1, n);
        let mut plan = Vec::with_capacity(n);
        for i in 0..n {
            let (kind, name) = if i == 0 {
                (SiteFileKind::Page, "index.html".to_string())
            } else if i < pages {
                (SiteFileKind::Page, format!("p{i:05}.html"))
            } else {
                let u = rng.random::<f64>();
                match u {
                    _ if u < 0.7 => {
                        let ext = ["gif", "jpg", "png"][rng.random_range(0..3)];
                        (SiteFileKind::Image, format!("i{i:05}.{ext}"))
                    }
                    _ if u < 0.8 => (SiteFileKind::Style, format!("c{i:05}.css")),
                    _ if u < 0.9 => (SiteFileKind::Script, format!("j{i:05}.js")),
                    _ => {
                        let ext = ["pdf", "zip"][rng.random_range(0..2)];
                        (SiteFileKind::Download, format!("d{i:05}.{ext}"))
                    }
                }
            };
            let dir = if i == 0 { String::new() } else { dirs[rng.random_range(0..dirs.len())].clone() };
            let size = sampler.sample(rng);
            plan.push(PlannedFile { dir, name, kind, size, links: Vec::new(), embeds: Vec::new() });
        }
        let embeddable: Vec<usize> = (pages..n)
            .filter(|&i| {
                matches!(plan[i].kind, SiteFileKind::Image | SiteFileKind::Style | SiteFileKind::Script)
            })
            .collect();
        let downloads: Vec<usize> = (pages..n).filter(|&i| plan[i].kind == SiteFileKind::Download).collect();
        // Every page is reachable from index.html: page k gets a link from an earlier page.
        for k in 1..pages {
            let from = rng.random_range(0..k);
            plan[from].links.push(k);
        }
        for (p, page) in plan.iter_mut().enumerate().take(pages) {
            if pages > 1 {
                let want = rng.random_range(1..=2 * spec.links_per_page - 1) as usize;
                let mut tries = 0;
                while page.links.len() < want && tries < 4 * want {
                    tries += 1;
                    let to = if !downloads.is_empty() && rng.random::<f64>() < 0.1 {
                        downloads[rng.random_range(0..downloads.len())]
                    } else {
                        rng.random_range(0..pages)
                    };
                    if to != p && !page.links.contains(&to) {
                        page.links.push(to);
                    }
                }
            }
            if !embeddable.is_empty() {
                let want = rng.random_range(0..=2 * spec.embeds_per_page) as usize;
                let want = want.min(embeddable.len());
                while page.embeds.len() < want {
                    let e = embeddable[rng.random_range(0..embeddable.len())];
                    if !page.embeds.contains(&e) {
                        page.embeds.push(e);
                    }
                }
            }
        }
        plan
    }
}

/// The URL of `to` relative to the directory of a page in `from_dir`.
fn relative_url(from_dir: &str, to: &PlannedFile) -> String {
    let from: Vec<&str> = from_dir.split('/').filter(|s| !s.is_empty()).collect();
    let to_dir: Vec<&str> = to.dir.split('/').filter(|s| !s.is_empty()).collect();
    let common = from.iter().zip(&to_dir).take_while(|(a, b)| a == b).count();
    let mut url = "../".repeat(from.len() - common);
    for seg in &to_dir[common..] {
        url.push_str(seg);
        url.push('/');
    }
    url.push_str(&to.name);
    url
}

/// The page's markup, padded with a comment to exactly its planned size (or left as is
/// when the markup alone is larger).
fn page_html(page: &PlannedFile, plan: &[PlannedFile], rng: &mut SmallRng) -> Vec<u8> {
    let mut html = String::with_capacity(page.size.min(1 << 20) as usize);
    let title = page.name.trim_end_matches(".html");
    html.push_str("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>");
    html.push_str(title);
    html.push_str("</title>\n");
    for &e in &page.embeds {
        let url = relative_url(&page.dir, &plan[e]);
        match plan[e].kind {
            SiteFileKind::Style => html.push_str(&format!("<link rel=\"stylesheet\" href=\"{url}\">\n")),
            SiteFileKind::Script => html.push_str(&format!("<script src=\"{url}\"></script>\n")),
            _ => {}
        }
    }
    html.push_str("</head><body>\n<h1>");
    html.push_str(title);
    html.push_str("</h1>\n");
    for &e in &page.embeds {
        if plan[e].kind == SiteFileKind::Image {
            html.push_str(&format!("<p><img src=\"{}\" alt=\"\"></p>\n", relative_url(&page.dir, &plan[e])));
        }
    }
    html.push_str("<ul>\n");
    for &l in &page.links {
        let url = relative_url(&page.dir, &plan[l]);
        html.push_str(&format!("<li><a href=\"{url}\">{}</a></li>\n", plan[l].name));
    }
    html.push_str("</ul>\n");
    const TAIL: &str = "</body></html>\n";
    let used = (html.len() + TAIL.len()) as u64;
    let pad = page.size.saturating_sub(used) as usize;
    let mut bytes = html.into_bytes();
    if pad >= 8 {
        bytes.extend_from_slice(b"<!--");
        let start = bytes.len();
        bytes.resize(start + pad - 8, 0);
        let len = bytes.len();
        text_filler(&mut bytes[start..len], 1, u64::MAX, rng);
        bytes.extend_from_slice(b"-->\n");
    } else {
        bytes.extend(std::iter::repeat_n(b'\n', pad));
    }
    bytes.extend_from_slice(TAIL.as_bytes());
    bytes
}

/// Fill `buf` (at byte offset `at` of a file of `size` bytes) with lower-case words and
/// newlines, wrapped in `/* */` when the file has room: text safe in HTML comments, CSS
/// and JavaScript.
fn text_filler(buf: &mut [u8], at: u64, size: u64, rng: &mut SmallRng) {
    const LETTERS: &[u8; 32] = b"abcdefghijklmnopqrstuvwxyz      ";
    let mut random = [0u8; 64];
    for (i, chunk) in buf.chunks_mut(64).enumerate() {
        rng.fill(&mut random[..]);
        for (j, b) in chunk.iter_mut().enumerate() {
            let pos = at + (i * 64 + j) as u64;
            *b = if pos % 72 == 71 { b'\n' } else { LETTERS[(random[j] & 31) as usize] };
        }
    }
    if size >= 4 && size != u64::MAX {
        let end = at + buf.len() as u64;
        for (pos, byte) in [(0, b'/'), (1, b'*'), (size - 2, b'*'), (size - 1, b'/')] {
            if (at..end).contains(&pos) {
                buf[(pos - at) as usize] = byte;
            }
        }
    }
}

fn write_bytes(path: &PathBuf, bytes: &[u8]) -> Result<(u64, u64), TraceError> {
    std::fs::write(path, bytes).map_err(|e| TraceError::fs(path, e))?;
    Ok((bytes.len() as u64, xxhash_rust::xxh3::xxh3_64(bytes)))
}

/// Write `size` bytes made by `fill(chunk, offset)` in 64 KiB chunks; the size and hash.
fn write_generated(
    path: &PathBuf,
    size: u64,
    mut fill: impl FnMut(&mut [u8], u64),
) -> Result<(u64, u64), TraceError> {
    let mut out = BufWriter::new(File::create(path).map_err(|e| TraceError::fs(path, e))?);
    let mut hasher = Xxh3::new();
    let mut buf = vec![0u8; 1 << 16];
    let mut written = 0u64;
    while written < size {
        let n = (size - written).min(buf.len() as u64) as usize;
        fill(&mut buf[..n], written);
        hasher.update(&buf[..n]);
        out.write_all(&buf[..n]).map_err(|e| TraceError::fs(path, e))?;
        written += n as u64;
    }
    out.flush().map_err(|e| TraceError::fs(path, e))?;
    Ok((size, hasher.digest()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::document_tree::DocumentTree;
    use crate::html_scan::{HtmlReferences, resolve_reference};
    use std::collections::{BTreeSet, HashSet};

    fn small_spec(seed: u64) -> SiteSpec {
        SiteSpec {
            seed,
            files: 120,
            html_share: 0.3,
            sizes: SizeModel { max_size: 200_000, ..SizeModel::surge() },
            links_per_page: 4,
            embeds_per_page: 3,
            directories: 6,
        }
    }

    fn make(spec: SiteSpec) -> (tempfile::TempDir, SiteManifest) {
        let dir = tempfile::tempdir().unwrap();
        let manifest = SiteGenerator::new(spec).unwrap().write(dir.path(), false, &mut |_, _| {}).unwrap();
        (dir, manifest)
    }

    #[test]
    fn site_files_have_exact_sizes_and_hashes_and_the_manifest_matches_disk() {
        let (dir, manifest) = make(small_spec(7));
        assert_eq!(SiteManifest::load(dir.path()).unwrap(), manifest);
        let tree = DocumentTree::scan(dir.path()).unwrap();
        let on_disk: BTreeSet<&str> =
            tree.files.iter().map(|f| f.target.as_str()).filter(|t| *t != "/site.json").collect();
        let listed: BTreeSet<&str> = manifest.files.iter().map(|f| f.target.as_str()).collect();
        assert_eq!(on_disk, listed);
        for f in &manifest.files {
            let bytes = std::fs::read(dir.path().join(&f.target[1..])).unwrap();
            assert_eq!(bytes.len() as u64, f.size, "{}", f.target);
            assert_eq!(format!("{:016x}", xxhash_rust::xxh3::xxh3_64(&bytes)), f.xxh3, "{}", f.target);
            assert!(
                f.target[1..]
                    .split('/')
                    .all(|seg| seg.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'.'))
            );
        }
        assert_eq!(manifest.total_bytes, manifest.files.iter().map(|f| f.size).sum::<u64>());
        assert_eq!(manifest.pages.len(), 36);
        assert!(manifest.files.iter().any(|f| f.target.matches('/').count() >= 3), "no nested subdirectory");
    }

    #[test]
    fn pages_link_and_embed_only_existing_files_exactly_as_the_manifest_says() {
        let (dir, manifest) = make(small_spec(8));
        let existing: HashSet<&str> = manifest.files.iter().map(|f| f.target.as_str()).collect();
        for page in manifest.files.iter().filter(|f| f.kind == SiteFileKind::Page) {
            let html = std::fs::read(dir.path().join(&page.target[1..])).unwrap();
            let refs = HtmlReferences::scan(&html);
            let links: Vec<String> =
                refs.links.iter().filter_map(|l| resolve_reference(&page.target, l)).collect();
            let embeds: Vec<String> =
                refs.embeds.iter().filter_map(|e| resolve_reference(&page.target, e)).collect();
            assert_eq!(links, page.links, "{}", page.target);
            let mut want = page.embeds.clone();
            want.sort();
            let mut got = embeds.clone();
            got.sort();
            assert_eq!(got, want, "{}", page.target);
            assert!(links.iter().chain(&embeds).all(|t| existing.contains(t.as_str())));
        }
    }

    #[test]
    fn every_page_is_reachable_from_the_index() {
        let (_dir, manifest) = make(small_spec(9));
        let mut seen: HashSet<&str> = HashSet::from(["/index.html"]);
        let mut todo = vec!["/index.html"];
        while let Some(t) = todo.pop() {
            for l in &manifest.file(t).unwrap().links {
                if seen.insert(l) {
                    todo.push(l);
                }
            }
        }
        assert!(manifest.pages.iter().all(|p| seen.contains(p.as_str())));
    }

    #[test]
    fn same_seed_gives_the_same_site_and_another_seed_another() {
        let (_a, ma) = make(small_spec(3));
        let (_b, mb) = make(small_spec(3));
        let (_c, mc) = make(small_spec(4));
        assert_eq!(ma, mb);
        assert_ne!(ma, mc);
    }

    #[test]
    fn a_non_empty_directory_is_refused_unless_overwriting() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("keep.txt"), b"x").unwrap();
        let generator = SiteGenerator::new(SiteSpec { files: 3, ..small_spec(1) }).unwrap();
        assert!(matches!(
            generator.write(dir.path(), false, &mut |_, _| {}),
            Err(TraceError::Directory { .. })
        ));
        assert!(generator.write(dir.path(), true, &mut |_, _| {}).is_ok());
    }

    #[test]
    fn tiny_pages_grow_to_fit_their_markup_and_large_ones_are_padded_exactly() {
        let spec = SiteSpec {
            files: 10,
            html_share: 1.0,
            sizes: SizeModel { min_size: 5, max_size: 5, ..SizeModel::surge() },
            ..small_spec(1)
        };
        let (dir, manifest) = make(spec);
        for f in &manifest.files {
            assert!(f.size > 5);
            assert_eq!(std::fs::metadata(dir.path().join(&f.target[1..])).unwrap().len(), f.size);
        }
        let spec = SiteSpec {
            files: 5,
            html_share: 1.0,
            sizes: SizeModel { min_size: 5000, max_size: 5000, ..SizeModel::surge() },
            ..small_spec(1)
        };
        let (_dir, manifest) = make(spec);
        assert!(manifest.files.iter().all(|f| f.size == 5000));
    }
}
