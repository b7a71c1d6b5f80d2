//! The site a workload serves: generated once per run by locus-trace's `SiteGenerator` (files
//! and a `site.json` manifest with every file's size and checksum, which the load generator
//! draws documents from and verifies responses against), and described for the report.

use std::path::{Path, PathBuf};

use locus_trace::{SiteGenerator, SiteManifest, SitePreset, SiteSpec};
use serde::Serialize;

use crate::error::LabError;
use crate::experiment::WorkloadSpec;

/// A generated site on disk.
#[derive(Clone, Debug, Serialize)]
pub struct LabSite {
    /// The workload it belongs to.
    pub workload: String,
    /// Its document root (holds `site.json`).
    pub root: PathBuf,
    /// The page surfers start at (`/index.html`).
    pub entry: String,
    pub files: usize,
    pub total_bytes: u64,
    pub median_bytes: u64,
    pub largest_bytes: u64,
    /// The workload's dynamic classes as a `[[classes]]` file (beside the site, not in it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub class_file: Option<PathBuf>,
}

impl LabSite {
    /// Generate the site of `workload` under `dir/<workload name>`.
    pub fn generate(workload: &WorkloadSpec, dir: &Path) -> Result<LabSite, LabError> {
        let root = dir.join(&workload.name);
        if root.exists() {
            std::fs::remove_dir_all(&root).map_err(|e| LabError::io(&root, e))?;
        }
        let generator = match &workload.preset {
            Some(preset) => {
                let preset = preset.parse::<SitePreset>()?;
                SiteGenerator::preset(preset, workload.scale.unwrap_or(1.0), workload.seed)?
            }
            None => SiteGenerator::new(SiteSpec {
                seed: workload.seed,
                files: workload.files,
                html_share: workload.html_share,
                sizes: workload.size_model(),
                ..SiteSpec::default()
            })?,
        };
        let manifest = generator.write(&root, false, &mut |_, _| {})?;
        let mut site = LabSite::describe(&workload.name, &root, &manifest);
        if !workload.dynamic.is_empty() {
            let path = dir.join(format!("{}.classes.toml", workload.name));
            std::fs::write(&path, workload.class_file_text()).map_err(|e| LabError::io(&path, e))?;
            site.class_file = Some(path);
        }
        Ok(site)
    }

    fn describe(workload: &str, root: &Path, manifest: &SiteManifest) -> LabSite {
        let mut sizes: Vec<u64> = manifest.files.iter().map(|f| f.size).collect();
        sizes.sort_unstable();
        LabSite {
            workload: workload.to_string(),
            root: root.to_path_buf(),
            entry: manifest.entry.clone(),
            files: sizes.len(),
            total_bytes: manifest.total_bytes,
            median_bytes: sizes.get(sizes.len() / 2).copied().unwrap_or(0),
            largest_bytes: sizes.last().copied().unwrap_or(0),
            class_file: None,
        }
    }

    /// The manifest's path.
    pub fn manifest(&self) -> PathBuf {
        self.root.join(locus_trace::SITE_MANIFEST_FILE)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_generated_site_has_its_files_and_manifest() {
        let dir = tempfile::tempdir().unwrap();
        let w = WorkloadSpec { clients: 4, seed: 3, ..WorkloadSpec::new("w", 50) };
        let site = LabSite::generate(&w, dir.path()).unwrap();
        assert_eq!(site.files, 50);
        assert!(site.manifest().is_file());
        assert!(site.largest_bytes <= 512 * 1024 && site.median_bytes > 0);
        let again = LabSite::generate(&w, dir.path()).unwrap();
        assert_eq!(again.total_bytes, site.total_bytes, "same seed, same site (regenerated in place)");
        assert!(site.class_file.is_none(), "no dynamic classes, no class file");
    }

    #[test]
    fn a_workload_with_dynamic_classes_gets_a_class_file_the_node_reads() {
        let dir = tempfile::tempdir().unwrap();
        let text = "name = \"d\"\nfiles = 20\n[[dynamic]]\nshare = 0.1\n[dynamic.class]\nname = \"search\"\nprefix = \"/cgi/search\"\ncost = { dist = \"uniform\", min_ms = 10, max_ms = 30 }\nsize = \"2KiB\"\n";
        let w: WorkloadSpec = toml::from_str(text).unwrap();
        let site = LabSite::generate(&w, dir.path()).unwrap();
        let path = site.class_file.expect("a class file");
        assert!(!path.starts_with(&site.root), "outside the document root");
        let file: locus_classify::ClassFile =
            toml::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        assert_eq!(file.classes, vec![w.dynamic[0].class.clone()]);
    }
}
