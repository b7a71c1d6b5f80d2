//! Site presets modelled on the data sets of the DC-Apache paper — MAPUG, LOD, SPECweb99 and
//! Sequoia — with their document, image and link counts and total sizes, and a `scale` that
//! shrinks the counts for tests (1 = the paper's counts).

use std::fmt;
use std::str::FromStr;

use rand::Rng;
use rand::rngs::SmallRng;
use rand::seq::{IndexedRandom, SliceRandom};
use rand_distr::{Distribution, LogNormal};
use serde::{Deserialize, Serialize};

use crate::error::TraceError;
use crate::site::SiteFileKind;
use crate::site_content::gif_min_size;
use crate::site_plan::{PlannedFile, fit_sizes, link_pages, minimum_sizes};

/// A data set of the DC-Apache paper, as a site.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SitePreset {
    /// A mailing-list archive: 1,534 documents (text pages and 10 small images that every
    /// page embeds 4–6 of: hot spots), 28,998 links between pages, 5,918 KB.
    Mapug,
    /// On-line documentation: 349 documents of which 240 images, 1,433 links, 750 KB.
    Lod,
    /// The SPECweb99 file set: 2 directories of classes 0–2 (9 files each) and one index page
    /// whose links repeat per SPECweb99's request frequencies; 1,027,897 bytes.
    Specweb99,
    /// One front page linking 130 satellite images of 1–2.8 MB (uniform), about 247 MB.
    Sequoia,
}

impl SitePreset {
    /// All presets.
    pub const ALL: [SitePreset; 4] =
        [SitePreset::Mapug, SitePreset::Lod, SitePreset::Specweb99, SitePreset::Sequoia];

    /// Its name on the command line and in `site.json`.
    pub fn name(self) -> &'static str {
        match self {
            SitePreset::Mapug => "mapug",
            SitePreset::Lod => "lod",
            SitePreset::Specweb99 => "specweb99",
            SitePreset::Sequoia => "sequoia",
        }
    }

    /// What a site of this preset at `scale` has: documents, images and links exactly, total
    /// bytes as planned (exact for MAPUG, LOD and SPECweb99; within 0.5% for Sequoia, whose
    /// image sizes are drawn). At scale 1 these are the paper's figures (1 KB = 1,024 bytes).
    pub fn targets(self, scale: f64) -> SitePresetTargets {
        let scaled = |n: u64| (n as f64 * scale).round() as u64;
        match self {
            SitePreset::Mapug => {
                let documents = scaled(1534).max(MAPUG_IMAGES + 2);
                let pages = documents - MAPUG_IMAGES;
                SitePresetTargets {
                    documents,
                    images: MAPUG_IMAGES,
                    links: scaled(28_998).max(2 * pages - 1),
                    total_bytes: scaled(5918 << 10),
                }
            }
            SitePreset::Lod => {
                let documents = scaled(349).max(3);
                let images = scaled(240).clamp(1, documents - 2);
                let pages = documents - images;
                SitePresetTargets {
                    documents,
                    images,
                    links: scaled(1433).max(2 * pages - 1),
                    total_bytes: scaled(750 << 10),
                }
            }
            SitePreset::Specweb99 => {
                let dirs = specweb_dirs(scale);
                SitePresetTargets {
                    documents: dirs * 27 + 1,
                    images: 0,
                    links: SPECWEB_INDEX_LINKS,
                    total_bytes: dirs * SPECWEB_DIR_BYTES + SPECWEB_INDEX_BYTES,
                }
            }
            SitePreset::Sequoia => {
                let images = scaled(130).max(1);
                SitePresetTargets {
                    documents: images + 1,
                    images,
                    links: images,
                    total_bytes: images * (SEQUOIA_MIN + SEQUOIA_MAX) / 2,
                }
            }
        }
    }
}

/// The counts and total size of a preset's site (see `SitePreset::targets`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct SitePresetTargets {
    /// Files (pages, images, other files).
    pub documents: u64,
    /// Of which images (`.gif`).
    pub images: u64,
    /// Hyperlinks (`<a href>`) of all pages, repeats counted; embedded images are not links.
    pub links: u64,
    /// Sum of all file sizes.
    pub total_bytes: u64,
}

impl fmt::Display for SitePreset {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for SitePreset {
    type Err = TraceError;

    fn from_str(s: &str) -> Result<SitePreset, TraceError> {
        SitePreset::ALL.into_iter().find(|p| p.name().eq_ignore_ascii_case(s)).ok_or_else(|| {
            TraceError::spec(
                "site preset",
                format!("unknown preset `{s}` (expected mapug, lod, specweb99 or sequoia)"),
            )
        })
    }
}

const MAPUG_IMAGES: u64 = 10;
/// Bytes of one SPECweb99 directory of classes 0–2.
const SPECWEB_DIR_BYTES: u64 = 511_488;
/// The paper's 1,027,897 bytes less two directories: the index page.
const SPECWEB_INDEX_BYTES: u64 = 1_027_897 - 2 * SPECWEB_DIR_BYTES;
/// Links of the SPECweb99 index: 35, 50 and 14 to classes 0, 1 and 2 (class 3 is absent).
const SPECWEB_INDEX_LINKS: u64 = 99;
const SPECWEB_CLASS_LINKS: [u64; 3] = [35, 50, 14];
const SEQUOIA_MIN: u64 = 1 << 20;
const SEQUOIA_MAX: u64 = 2_936_013; // 2.8 MiB

fn specweb_dirs(scale: f64) -> u64 {
    (2.0 * scale).round().max(1.0) as u64
}

/// Plan the files of `preset` at `scale` (checked: 0 < scale <= 1).
pub(crate) fn plan_preset(preset: SitePreset, scale: f64, seed: u64, rng: &mut SmallRng) -> Vec<PlannedFile> {
    let targets = preset.targets(scale);
    match preset {
        SitePreset::Mapug => plan_mapug(&targets, seed, rng),
        SitePreset::Lod => plan_lod(&targets, seed, rng),
        SitePreset::Specweb99 => plan_specweb(specweb_dirs(scale), seed, rng),
        SitePreset::Sequoia => plan_sequoia(&targets, seed, rng),
    }
}

/// Log-normal weights (median 1) for `n` files.
fn weights(n: usize, sigma: f64, rng: &mut SmallRng) -> Vec<f64> {
    let dist = LogNormal::new(0.0, sigma).expect("valid log-normal");
    (0..n).map(|_| dist.sample(rng)).collect()
}

/// `index.html` and pages 1.. (`{noun}00001.html`, titled `{title} 1`) in directories of
/// 100 under `top`.
fn archive_pages(count: u64, top: &str, noun: &str, title: &str) -> Vec<PlannedFile> {
    let mut plan = vec![PlannedFile::new("", "index.html", "Home", SiteFileKind::Page)];
    for i in 1..count {
        let dir = format!("{top}/{:02}", (i - 1) / 100);
        plan.push(PlannedFile::new(
            dir,
            format!("{noun}{i:05}.html"),
            format!("{title} {i}"),
            SiteFileKind::Page,
        ));
    }
    plan
}

fn plan_mapug(t: &SitePresetTargets, seed: u64, rng: &mut SmallRng) -> Vec<PlannedFile> {
    let pages = (t.documents - t.images) as usize;
    let mut plan = archive_pages(pages as u64, "archive", "message", "Message");
    let images: Vec<usize> = (pages..pages + t.images as usize).collect();
    for k in 0..t.images {
        let mut icon =
            PlannedFile::new("images", format!("icon{k:02}.gif"), format!("Icon {k}"), SiteFileKind::Image);
        icon.size = rng.random_range(gif_min_size().max(400)..=3000);
        plan.push(icon);
    }
    let page_ids: Vec<usize> = (0..pages).collect();
    link_pages(&mut plan, &page_ids, t.links, rng);
    for page in plan.iter_mut().take(pages) {
        let want = rng.random_range(4..=6).min(images.len());
        page.embeds = images.choose_multiple(rng, want).copied().collect();
    }
    let image_bytes: u64 = images.iter().map(|&i| plan[i].size).sum();
    let mins = minimum_sizes(&plan, &page_ids, 0, seed);
    let w = weights(pages, 0.6, rng);
    fit_sizes(&mut plan, &page_ids, &mins, &w, t.total_bytes.saturating_sub(image_bytes));
    plan
}

fn plan_lod(t: &SitePresetTargets, seed: u64, rng: &mut SmallRng) -> Vec<PlannedFile> {
    let pages = (t.documents - t.images) as usize;
    let mut plan = archive_pages(pages as u64, "doc", "section", "Section");
    for k in 0..t.images as usize {
        let figure =
            PlannedFile::new("figures", format!("fig{k:03}.gif"), format!("Figure {k}"), SiteFileKind::Image);
        plan.push(figure);
        let page = rng.random_range(0..pages);
        plan[page].embeds.push(pages + k);
    }
    let page_ids: Vec<usize> = (0..pages).collect();
    link_pages(&mut plan, &page_ids, t.links, rng);
    let all: Vec<usize> = (0..plan.len()).collect();
    let mins = minimum_sizes(&plan, &all, gif_min_size(), seed);
    let mut w = weights(plan.len(), 0.7, rng);
    for weight in w.iter_mut().take(pages) {
        *weight *= 1.5;
    }
    fit_sizes(&mut plan, &all, &mins, &w, t.total_bytes);
    plan
}

/// SPECweb99's classes 0–2: file `k` (0..9) of class `c` has `(k+1)·1024·10^c / 10` bytes.
fn plan_specweb(dirs: u64, seed: u64, rng: &mut SmallRng) -> Vec<PlannedFile> {
    let mut plan = vec![PlannedFile::new("", "index.html", "SPECweb99 file set", SiteFileKind::Page)];
    plan[0].words = 8;
    // by_class[c]: (file index, Zipf weight) of every file of class c.
    let mut by_class: [Vec<(usize, f64)>; 3] = Default::default();
    for d in 0..dirs {
        for (c, files) in by_class.iter_mut().enumerate() {
            for k in 0..9u64 {
                let name = format!("class{c}_{k}");
                let size = ((k + 1) as f64 * 102.4 * 10f64.powi(c as i32)).round() as u64;
                let mut file =
                    PlannedFile::new(format!("dir{d:05}"), name.clone(), name, SiteFileKind::Download);
                file.size = size;
                files.push((plan.len(), 1.0 / ((d + 1) * (k + 1)) as f64));
                plan.push(file);
            }
        }
    }
    let mut links = Vec::with_capacity(SPECWEB_INDEX_LINKS as usize);
    for (files, &count) in by_class.iter().zip(&SPECWEB_CLASS_LINKS) {
        links.extend(apportion(files, count));
    }
    links.shuffle(rng);
    plan[0].links = links;
    plan[0].size = crate::site_content::page_min_size(&plan, 0, seed).max(SPECWEB_INDEX_BYTES);
    plan
}

/// `count` picks of the files, each about `count · weight / Σ weight` times (largest
/// remainders round up).
fn apportion(files: &[(usize, f64)], count: u64) -> Vec<usize> {
    let sum: f64 = files.iter().map(|f| f.1).sum();
    let exact: Vec<f64> = files.iter().map(|f| count as f64 * f.1 / sum).collect();
    let mut times: Vec<u64> = exact.iter().map(|e| e.floor() as u64).collect();
    let mut order: Vec<usize> = (0..files.len()).collect();
    order.sort_by(|&a, &b| (exact[b] - exact[b].floor()).total_cmp(&(exact[a] - exact[a].floor())));
    let short = count - times.iter().sum::<u64>();
    for &i in order.iter().take(short as usize) {
        times[i] += 1;
    }
    files.iter().zip(times).flat_map(|(f, t)| std::iter::repeat_n(f.0, t as usize)).collect()
}

/// Image sizes uniform over 1–2.8 MiB, one per stratum of that range (in random order), so
/// the total stays within a fraction of a percent of `count` times the mean.
fn plan_sequoia(t: &SitePresetTargets, seed: u64, rng: &mut SmallRng) -> Vec<PlannedFile> {
    let mut plan = vec![PlannedFile::new("", "index.html", "AVHRR image archive", SiteFileKind::Page)];
    let n = t.images;
    let mut strata: Vec<u64> = (0..n).collect();
    strata.shuffle(rng);
    for (k, stratum) in strata.into_iter().enumerate() {
        let u = (stratum as f64 + rng.random::<f64>()) / n as f64;
        let mut image = PlannedFile::new(
            "avhrr",
            format!("avhrr{k:03}.gif"),
            format!("AVHRR image {k}"),
            SiteFileKind::Image,
        );
        image.size = SEQUOIA_MIN + (u * (SEQUOIA_MAX - SEQUOIA_MIN) as f64) as u64;
        plan.push(image);
    }
    plan[0].links = (1..plan.len()).collect();
    plan[0].size = crate::site_content::page_min_size(&plan, 0, seed);
    plan
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::page_references::read_page;
    use crate::site::tests::reachable_from_index;
    use crate::site::{SiteGenerator, SiteManifest};
    use crate::site_content::check_gif;
    use std::collections::{HashMap, HashSet};

    fn counts(m: &SiteManifest) -> SitePresetTargets {
        SitePresetTargets {
            documents: m.files.len() as u64,
            images: m.files.iter().filter(|f| f.kind == SiteFileKind::Image).count() as u64,
            links: m.files.iter().map(|f| f.links.len() as u64).sum(),
            total_bytes: m.total_bytes,
        }
    }

    fn planned(preset: SitePreset, scale: f64) -> SiteManifest {
        SiteGenerator::preset(preset, scale, 5).unwrap().plan_manifest()
    }

    fn assert_close(got: u64, want: u64, tolerance: f64, what: &str) {
        let err = (got as f64 - want as f64).abs() / want as f64;
        assert!(err <= tolerance, "{what}: {got} vs {want} ({:.2}% off)", 100.0 * err);
    }

    #[test]
    fn preset_names_parse_case_insensitively_print_back_and_unknown_ones_are_refused() {
        for p in SitePreset::ALL {
            assert_eq!(p.to_string().parse::<SitePreset>().unwrap(), p);
            assert_eq!(p.name().to_uppercase().parse::<SitePreset>().unwrap(), p);
        }
        assert!(matches!("specweb".parse::<SitePreset>(), Err(TraceError::InvalidSpec { .. })));
    }

    #[test]
    fn scales_outside_zero_to_one_are_refused() {
        for scale in [0.0, -0.5, 1.01, f64::NAN, f64::INFINITY] {
            assert!(SiteGenerator::preset(SitePreset::Lod, scale, 1).is_err(), "{scale}");
        }
    }

    #[test]
    fn at_scale_one_each_preset_has_the_papers_counts_and_sizes() {
        // (documents, images, links, bytes, tolerance on bytes); 1 KB = 1,024 bytes.
        let paper = [
            (SitePreset::Mapug, 1534, 10, 28_998, 5918 * 1024, 0.0),
            (SitePreset::Lod, 349, 240, 1433, 750 * 1024, 0.0),
            (SitePreset::Specweb99, 55, 0, 99, 1_027_897, 0.0),
            (SitePreset::Sequoia, 131, 130, 130, 247 << 20, 0.005),
        ];
        for (preset, documents, images, links, bytes, tolerance) in paper {
            let got = counts(&planned(preset, 1.0));
            assert_eq!((got.documents, got.images, got.links), (documents, images, links), "{preset}");
            assert_close(got.total_bytes, bytes, tolerance, preset.name());
            let targets = preset.targets(1.0);
            assert_eq!((targets.documents, targets.images, targets.links), (documents, images, links));
        }
    }

    #[test]
    fn scaled_presets_shrink_in_proportion_and_meet_their_targets() {
        for preset in SitePreset::ALL {
            for scale in [0.5, 0.1, 0.02] {
                let got = counts(&planned(preset, scale));
                let want = preset.targets(scale);
                assert_eq!((got.documents, got.images, got.links), (want.documents, want.images, want.links));
                let tolerance = if preset == SitePreset::Sequoia { 0.5 / want.images as f64 } else { 0.0 };
                assert_close(got.total_bytes, want.total_bytes, tolerance, preset.name());
                if preset != SitePreset::Specweb99 {
                    let paper = preset.targets(1.0);
                    assert_close(got.total_bytes, (paper.total_bytes as f64 * scale) as u64, 0.3, "bytes");
                }
            }
        }
    }

    #[test]
    fn mapug_pages_each_embed_four_to_six_of_ten_shared_images_and_all_are_reachable() {
        let m = planned(SitePreset::Mapug, 0.2);
        let mut embedded: HashMap<&str, usize> = HashMap::new();
        for page in m.files.iter().filter(|f| f.kind == SiteFileKind::Page) {
            let distinct: HashSet<&String> = page.embeds.iter().collect();
            assert!((4..=6).contains(&page.embeds.len()) && distinct.len() == page.embeds.len());
            for e in &page.embeds {
                *embedded.entry(e.as_str()).or_default() += 1;
            }
        }
        assert_eq!(embedded.len(), 10);
        assert!(embedded.values().all(|&n| n * 4 > m.pages.len()), "every image is a hot spot");
        assert_eq!(reachable_from_index(&m).len(), m.pages.len());
    }

    #[test]
    fn specweb_index_links_follow_the_specweb99_class_mix_and_zipf_within_a_class() {
        let m = planned(SitePreset::Specweb99, 1.0);
        assert_eq!(m.pages, ["/index.html"]);
        let index = m.file("/index.html").unwrap();
        let mut per_file: HashMap<&str, u64> = HashMap::new();
        for l in &index.links {
            *per_file.entry(l.as_str()).or_default() += 1;
        }
        for (class, want) in SPECWEB_CLASS_LINKS.iter().enumerate() {
            let n: u64 =
                per_file.iter().filter(|(t, _)| t.contains(&format!("class{class}_"))).map(|p| p.1).sum();
            assert_eq!(n, *want, "class {class}");
            let first =
                |k: u64| per_file.get(format!("/dir00000/class{class}_{k}").as_str()).copied().unwrap_or(0);
            assert!((1..9).all(|k| first(k) <= first(k - 1)), "class {class}: Zipf over files");
        }
        let class0: Vec<u64> =
            (0..9).map(|k| m.file(&format!("/dir00001/class0_{k}")).unwrap().size).collect();
        assert_eq!(class0, [102, 205, 307, 410, 512, 614, 717, 819, 922]);
    }

    /// Write `preset` at `scale`; check every file against the manifest and every page's
    /// references against the manifest's.
    fn write_and_check(preset: SitePreset, scale: f64) {
        let dir = tempfile::tempdir().unwrap();
        let generator = SiteGenerator::preset(preset, scale, 11).unwrap();
        let m = generator.write(dir.path(), false, &mut |_, _| {}).unwrap();
        assert_eq!(SiteManifest::load(dir.path()).unwrap(), m);
        assert_eq!(m.preset.map(|p| (p.name, p.scale)), Some((preset, scale)));
        assert_eq!(counts(&m), counts(&generator.plan_manifest()), "written as planned");
        let existing: HashSet<&str> = m.files.iter().map(|f| f.target.as_str()).collect();
        for f in &m.files {
            let bytes = std::fs::read(dir.path().join(&f.target[1..])).unwrap();
            assert_eq!(bytes.len() as u64, f.size, "{}", f.target);
            assert_eq!(format!("{:016x}", xxhash_rust::xxh3::xxh3_64(&bytes)), f.xxh3, "{}", f.target);
            if f.target.ends_with(".gif") {
                assert_eq!(check_gif(&bytes), Ok(1), "{}", f.target);
            }
            if f.kind == SiteFileKind::Page {
                let text = std::str::from_utf8(&bytes).unwrap();
                assert!(
                    text.starts_with("<!DOCTYPE html>\n")
                        && text.contains("<title>")
                        && text.contains("<h1>")
                );
                let refs = read_page(&f.target, &bytes);
                let (links, mut embeds) = (refs.links, refs.embeds);
                assert_eq!(refs.foreign, 0, "{}", f.target);
                assert_eq!(links, f.links, "{}", f.target);
                let mut want = f.embeds.clone();
                want.sort();
                embeds.sort();
                assert_eq!(embeds, want, "{}", f.target);
                assert!(links.iter().chain(&embeds).all(|t| existing.contains(t.as_str())), "{}", f.target);
            }
        }
    }

    #[test]
    fn written_presets_match_their_manifest_and_every_link_and_embed_resolves() {
        write_and_check(SitePreset::Mapug, 0.1);
        write_and_check(SitePreset::Lod, 1.0);
        write_and_check(SitePreset::Specweb99, 1.0);
        write_and_check(SitePreset::Sequoia, 0.02);
    }

    #[test]
    fn mapug_at_full_scale_writes_its_planned_sizes() {
        write_and_check(SitePreset::Mapug, 1.0);
    }
}
