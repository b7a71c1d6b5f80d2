//! A DC-Apache data set for the peer simulator: a `locus_trace` site preset written to a
//! scratch directory, read back as a server would (sizes and mtimes from the files, every HTML
//! page parsed once into `locus_dc`'s `DocGraph`), then the scratch directory is removed.

use std::path::{Path, PathBuf};
use std::time::UNIX_EPOCH;

use locus_dc::doc_graph::{DocGraph, DocGraphBuilder, DocId, SourceDoc};
use locus_dc::html_links::SlotKind;
use locus_trace::{SiteFileKind, SiteGenerator, SitePreset};

use crate::error::SimError;

/// The authority of server `i` in simulated URLs (`s0:80` is the home of every document).
pub fn server_authority(i: u16) -> String {
    format!("s{i}:80")
}

/// One document as the simulator needs it: size, version and, for a page, its link slots.
#[derive(Clone, Debug)]
pub struct SiteDoc {
    pub path: String,
    pub size: u64,
    pub version: u64,
    /// Slots of the page's rewriting plan in document order: (target, link or embed).
    pub slots: Vec<(DocId, SlotKind)>,
    /// An HTML page with a rewriting plan (a surfer holds it and follows its links).
    pub is_page: bool,
}

/// A data set: the home's `DocGraph` and the per-document facts the engine reads often.
#[derive(Clone, Debug)]
pub struct DcSite {
    pub name: String,
    pub graph: DocGraph,
    pub docs: Vec<SiteDoc>,
    pub entry: DocId,
    pub total_bytes: u64,
}

impl DcSite {
    /// Generate `preset` at `scale` (seeded) under `scratch_parent`, read it back and remove it.
    pub fn from_preset(
        preset: SitePreset,
        scale: f64,
        seed: u64,
        scratch_parent: &Path,
    ) -> Result<DcSite, SimError> {
        let scratch = scratch_dir(scratch_parent, preset);
        if scratch.exists() {
            std::fs::remove_dir_all(&scratch).map_err(|e| SimError::io(&scratch, e))?;
        }
        let generator = SiteGenerator::preset(preset, scale, seed)?;
        let written = generator.write(&scratch, false, &mut |_, _| {});
        let site = written.map_err(SimError::from).and_then(|_| DcSite::read(preset.name(), &scratch));
        let removed = std::fs::remove_dir_all(&scratch).map_err(|e| SimError::io(&scratch, e));
        let site = site?;
        removed?;
        Ok(site)
    }

    /// Read a generated site (its `site.json` lists the files) from `root`.
    pub fn read(name: &str, root: &Path) -> Result<DcSite, SimError> {
        let manifest = locus_trace::SiteManifest::load(root)?;
        let mut builder = DocGraphBuilder::new(&server_authority(0));
        for file in &manifest.files {
            let path = root.join(file.target.trim_start_matches('/'));
            let meta = std::fs::metadata(&path).map_err(|e| SimError::io(&path, e))?;
            let mtime_s = (meta.modified().ok())
                .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
                .map_or(0, |d| d.as_secs());
            let html = match file.kind {
                SiteFileKind::Page => Some(std::fs::read(&path).map_err(|e| SimError::io(&path, e))?),
                _ => None,
            };
            let source = SourceDoc { path: &file.target, size: meta.len(), mtime_s, html: html.as_deref() };
            builder.add(source).map_err(|e| SimError::Config(format!("{}: {e}", path.display())))?;
        }
        let graph = builder.finish();
        let entry = graph.id(&manifest.entry).ok_or_else(|| {
            SimError::Config(format!("{}: entry page {} is not in the site", root.display(), manifest.entry))
        })?;
        Ok(DcSite::from_graph(name, graph, entry))
    }

    /// The per-document table of a graph.
    pub fn from_graph(name: &str, graph: DocGraph, entry: DocId) -> DcSite {
        let docs: Vec<SiteDoc> = graph
            .docs()
            .map(|(id, d)| SiteDoc {
                path: d.path.clone(),
                size: d.size,
                version: d.version,
                slots: graph.slots(id).collect(),
                is_page: graph.plan(id).is_some(),
            })
            .collect();
        let total_bytes = docs.iter().map(|d| d.size).sum();
        DcSite { name: name.to_string(), graph, docs, entry, total_bytes }
    }

    /// The document at `id` (ids come from this site's graph).
    pub fn doc(&self, id: DocId) -> &SiteDoc {
        &self.docs[id.0 as usize]
    }

    /// The size of the document at `path`, if it is one.
    pub fn size_of(&self, path: &str) -> Option<u64> {
        self.graph.id(path).map(|id| self.doc(id).size)
    }
}

fn scratch_dir(parent: &Path, preset: SitePreset) -> PathBuf {
    parent.join(format!(".dc-site-{}-{}", preset.name(), std::process::id()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn preset_site_is_read_back_with_every_document_and_the_scratch_directory_is_removed() {
        let dir = tempfile::tempdir().unwrap();
        let site = DcSite::from_preset(SitePreset::Lod, 0.1, 3, dir.path()).unwrap();
        let targets = SitePreset::Lod.targets(0.1);
        assert_eq!(site.docs.len() as u64, targets.documents);
        assert!(site.doc(site.entry).is_page && !site.doc(site.entry).slots.is_empty());
        assert_eq!(site.total_bytes, site.docs.iter().map(|d| d.size).sum::<u64>());
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }
}
