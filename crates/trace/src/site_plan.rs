//! Planning a synthetic site before writing it: `PlannedFile` (where a file goes, what it is,
//! how big, what it links and embeds), the random layout of a `SiteSpec`, and what the presets
//! share (links that reach every page, sizes fitted to a total).

use rand::Rng;
use rand::rngs::SmallRng;

use crate::site::{SiteFileKind, SiteSpec};
use crate::site_content::page_min_size;

/// A file being planned: where, what, how big, and for a page what it refers to.
#[derive(Clone, Debug)]
pub(crate) struct PlannedFile {
    /// Directory below the root, `/`-separated, empty for the root.
    pub dir: String,
    /// File name.
    pub name: String,
    /// A page's title; the text of links to the file.
    pub title: String,
    pub kind: SiteFileKind,
    /// Exact size in bytes (for a page, set once its links are known: see `page_min_size`).
    pub size: u64,
    /// Indices of the files a page links to, in document order (repeats allowed).
    pub links: Vec<usize>,
    /// Indices of the files a page embeds.
    pub embeds: Vec<usize>,
    /// Words of visible text on a page.
    pub words: u32,
}

impl PlannedFile {
    pub fn new(
        dir: impl Into<String>,
        name: impl Into<String>,
        title: impl Into<String>,
        kind: SiteFileKind,
    ) -> Self {
        PlannedFile {
            dir: dir.into(),
            name: name.into(),
            title: title.into(),
            kind,
            size: 0,
            links: Vec::new(),
            embeds: Vec::new(),
            words: if kind == SiteFileKind::Page { 24 } else { 0 },
        }
    }

    /// Request target (`/s003/p00017.html`).
    pub fn target(&self) -> String {
        if self.dir.is_empty() { format!("/{}", self.name) } else { format!("/{}/{}", self.dir, self.name) }
    }
}

/// The URL of `to` relative to the directory of a page in `from_dir`.
pub(crate) fn relative_url(from_dir: &str, to: &PlannedFile) -> String {
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

/// The random layout of `spec`: SURGE sizes, pages grown to fit their markup.
pub(crate) fn plan_spec(spec: &SiteSpec, rng: &mut SmallRng) -> Vec<PlannedFile> {
    let sampler = spec.sizes.sampler().expect("checked in SiteGenerator::new");
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
        let (kind, name, title) = if i == 0 {
            (SiteFileKind::Page, "index.html".to_string(), "Home".to_string())
        } else if i < pages {
            (SiteFileKind::Page, format!("p{i:05}.html"), format!("Page {i}"))
        } else {
            let u = rng.random::<f64>();
            match u {
                _ if u < 0.7 => {
                    let ext = ["gif", "jpg", "png"][rng.random_range(0..3)];
                    (SiteFileKind::Image, format!("i{i:05}.{ext}"), format!("Image {i}"))
                }
                _ if u < 0.8 => (SiteFileKind::Style, format!("c{i:05}.css"), format!("Style {i}")),
                _ if u < 0.9 => (SiteFileKind::Script, format!("j{i:05}.js"), format!("Script {i}")),
                _ => {
                    let ext = ["pdf", "zip"][rng.random_range(0..2)];
                    (SiteFileKind::Download, format!("d{i:05}.{ext}"), format!("Download {i} ({ext})"))
                }
            }
        };
        let dir = if i == 0 { String::new() } else { dirs[rng.random_range(0..dirs.len())].clone() };
        let mut file = PlannedFile::new(dir, name, title, kind);
        file.size = sampler.sample(rng);
        plan.push(file);
    }
    link_spec_pages(spec, &mut plan, pages, rng);
    plan
}

/// Links and embeds of the random layout's pages `0..pages`.
fn link_spec_pages(spec: &SiteSpec, plan: &mut [PlannedFile], pages: usize, rng: &mut SmallRng) {
    let n = plan.len();
    let embeddable: Vec<usize> = (pages..n)
        .filter(|&i| matches!(plan[i].kind, SiteFileKind::Image | SiteFileKind::Style | SiteFileKind::Script))
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
}

/// Give the pages among `pages` (`pages[0]` the index) `total` links to one another: each
/// page gets a link from an earlier one (so all are reachable from the index), each page at
/// least one link, and the rest go from random pages to random other pages (a repeat only
/// when a page already links to all others). `total` is a floor: never fewer than these.
pub(crate) fn link_pages(plan: &mut [PlannedFile], pages: &[usize], total: u64, rng: &mut SmallRng) {
    if pages.len() < 2 {
        return;
    }
    let mut made = 0u64;
    for k in 1..pages.len() {
        let from = pages[rng.random_range(0..k)];
        plan[from].links.push(pages[k]);
        made += 1;
    }
    let other = |rng: &mut SmallRng, from: usize| loop {
        let to = pages[rng.random_range(0..pages.len())];
        if to != from {
            return to;
        }
    };
    for &p in pages {
        if plan[p].links.is_empty() {
            let to = other(rng, p);
            plan[p].links.push(to);
            made += 1;
        }
    }
    while made < total {
        let from = pages[rng.random_range(0..pages.len())];
        let mut to = other(rng, from);
        for _ in 0..4 {
            if !plan[from].links.contains(&to) {
                break;
            }
            to = other(rng, from);
        }
        plan[from].links.push(to);
        made += 1;
    }
}

/// Set the sizes of `files` to sum to `total`: each gets its `min` plus a share of what is
/// left in proportion to its `weight` (the first takes the rounding remainder). When the
/// minimums already exceed `total`, each gets its minimum.
pub(crate) fn fit_sizes(
    plan: &mut [PlannedFile],
    files: &[usize],
    mins: &[u64],
    weights: &[f64],
    total: u64,
) {
    let floor: u64 = mins.iter().sum();
    let spare = total.saturating_sub(floor);
    let weight_sum: f64 = weights.iter().sum();
    let mut given = 0u64;
    for (k, &f) in files.iter().enumerate() {
        let share =
            if weight_sum > 0.0 { (spare as f64 * weights[k] / weight_sum).floor() as u64 } else { 0 };
        let share = share.min(spare - given);
        plan[f].size = mins[k] + share;
        given += share;
    }
    if let Some(&first) = files.first() {
        plan[first].size += spare - given;
    }
}

/// Minimum sizes of the pages among `files`, and `fixed` for the others.
pub(crate) fn minimum_sizes(plan: &[PlannedFile], files: &[usize], fixed: u64, seed: u64) -> Vec<u64> {
    files
        .iter()
        .map(|&f| if plan[f].kind == SiteFileKind::Page { page_min_size(plan, f, seed) } else { fixed })
        .collect()
}

/// Make every page at least as large as its markup.
pub(crate) fn grow_pages_to_markup(plan: &mut [PlannedFile], seed: u64) {
    for i in 0..plan.len() {
        if plan[i].kind == SiteFileKind::Page {
            let min = page_min_size(plan, i, seed);
            plan[i].size = plan[i].size.max(min);
        }
    }
}
