//! Synthetic web sites: `SiteSpec` describes a random one (file count, SURGE sizes, share of
//! HTML pages, links and embedded objects per page, subdirectories), `SitePreset` a paper's
//! data set; `SiteGenerator` writes either to disk — every file exactly its size, content
//! fixed by the seed — with a `SiteManifest` (`site.json`) of files, sizes, hashes and links.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

use rand::SeedableRng;
use rand::rngs::SmallRng;
use serde::{Deserialize, Serialize};

use crate::error::TraceError;
use crate::site_content::write_file;
use crate::site_plan::{PlannedFile, grow_pages_to_markup, plan_spec};
use crate::site_presets::{SitePreset, plan_preset};
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
    /// The preset the site was made from, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preset: Option<SiteManifestPreset>,
    /// Every file, in generation order (`index.html` first).
    pub files: Vec<SiteFile>,
}

/// The preset and scale a site was made from (`SiteManifest::preset`).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct SiteManifestPreset {
    /// Which preset.
    pub name: SitePreset,
    /// Its scale (1 = the paper's counts).
    pub scale: f64,
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

/// Writes a site — a `SiteSpec`'s random layout or a `SitePreset` — to a directory.
pub struct SiteGenerator {
    seed: u64,
    layout: Layout,
}

/// What a `SiteGenerator` makes.
enum Layout {
    Spec(SiteSpec),
    Preset { preset: SitePreset, scale: f64 },
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
        Ok(SiteGenerator { seed: spec.seed, layout: Layout::Spec(spec) })
    }

    /// A site of `preset` shrunk by `scale` (0 < scale <= 1; 1 = the paper's counts, see
    /// `SitePreset::targets`), content fixed by `seed`.
    pub fn preset(preset: SitePreset, scale: f64, seed: u64) -> Result<SiteGenerator, TraceError> {
        if !(scale > 0.0 && scale <= 1.0) {
            return Err(TraceError::spec(
                "site preset",
                format!("scale {scale} is not within 0 < scale <= 1"),
            ));
        }
        Ok(SiteGenerator { seed, layout: Layout::Preset { preset, scale } })
    }

    /// Every file's place, kind, exact size, links and embeds.
    fn plan(&self) -> Vec<PlannedFile> {
        let mut rng = SmallRng::seed_from_u64(self.seed);
        match &self.layout {
            Layout::Spec(spec) => {
                let mut plan = plan_spec(spec, &mut rng);
                grow_pages_to_markup(&mut plan, self.seed);
                plan
            }
            Layout::Preset { preset, scale } => plan_preset(*preset, *scale, self.seed, &mut rng),
        }
    }

    /// The manifest the site will have, without writing it (hashes left empty).
    pub fn plan_manifest(&self) -> SiteManifest {
        let plan = self.plan();
        let targets: Vec<String> = plan.iter().map(PlannedFile::target).collect();
        let files = plan
            .iter()
            .enumerate()
            .map(|(i, p)| SiteFile {
                target: targets[i].clone(),
                size: p.size,
                kind: p.kind,
                xxh3: String::new(),
                links: p.links.iter().map(|&l| targets[l].clone()).collect(),
                embeds: p.embeds.iter().map(|&e| targets[e].clone()).collect(),
            })
            .collect();
        self.manifest(files)
    }

    fn manifest(&self, files: Vec<SiteFile>) -> SiteManifest {
        SiteManifest {
            format: SITE_MANIFEST_FORMAT.into(),
            seed: self.seed,
            entry: "/index.html".into(),
            total_bytes: files.iter().map(|f| f.size).sum(),
            pages: files.iter().filter(|f| f.kind == SiteFileKind::Page).map(|f| f.target.clone()).collect(),
            preset: match self.layout {
                Layout::Spec(_) => None,
                Layout::Preset { preset, scale } => Some(SiteManifestPreset { name: preset, scale }),
            },
            files,
        }
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
        let plan = self.plan();
        let targets: Vec<String> = plan.iter().map(PlannedFile::target).collect();
        let mut files = Vec::with_capacity(plan.len());
        for (index, planned) in plan.iter().enumerate() {
            let dir = root.join(&planned.dir);
            std::fs::create_dir_all(&dir).map_err(|e| TraceError::fs(&dir, e))?;
            let path = dir.join(&planned.name);
            let (size, hash) = write_file(&path, &plan, index, self.seed)?;
            debug_assert_eq!(size, planned.size, "{}", targets[index]);
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
        let manifest = self.manifest(files);
        let manifest_path = root.join(SITE_MANIFEST_FILE);
        let mut out =
            BufWriter::new(File::create(&manifest_path).map_err(|e| TraceError::fs(&manifest_path, e))?);
        serde_json::to_writer_pretty(&mut out, &manifest)
            .map_err(|e| TraceError::fs(&manifest_path, e.into()))?;
        out.write_all(b"\n").and_then(|()| out.flush()).map_err(|e| TraceError::fs(&manifest_path, e))?;
        Ok(manifest)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::page_references::read_page;
    use locus_site::DocumentTree;
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
            let refs = read_page(&page.target, &html);
            let (links, embeds) = (refs.links, refs.embeds);
            assert_eq!(refs.foreign, 0, "{}", page.target);
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
        let seen = reachable_from_index(&manifest);
        assert!(manifest.pages.iter().all(|p| seen.contains(p.as_str())));
    }

    /// The pages a surfer can reach from `/index.html` by following links.
    pub(crate) fn reachable_from_index(manifest: &SiteManifest) -> HashSet<&str> {
        let mut seen: HashSet<&str> = HashSet::from(["/index.html"]);
        let mut todo = vec!["/index.html"];
        while let Some(t) = todo.pop() {
            for l in &manifest.file(t).unwrap().links {
                if seen.insert(l) {
                    todo.push(l);
                }
            }
        }
        seen
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
