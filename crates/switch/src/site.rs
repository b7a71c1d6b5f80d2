//! What the switch knows of the site a priori, for content-aware policies: the class table
//! (inline `[[classes]]` plus `class_file`, the nodes' schema) as a `RequestClassifier`, and
//! the file table (`site_root`: every document's size and mtime, by request-target hash),
//! scanned with a bound on the number of files and the depth.

use crate::config::{ConfigError, SwitchConfig};
use locus_classify::{ClassFile, RequestClassifier};
use locus_policy::{FileInfo, FileTable, PolicyConfig, PolicyInputs};
use locus_site::{DocumentTree, ScanLimits};
use std::path::Path;
use std::sync::Arc;

/// Deepest directory nesting `site_root` may have below the root.
const MAX_DEPTH: usize = 64;

/// The class table and, when loaded, the file table.
pub struct SiteInputs {
    pub classifier: RequestClassifier,
    pub inputs: PolicyInputs,
}

impl SiteInputs {
    /// The classes only (reads `class_file`, scans nothing): what validation needs.
    pub fn classes_of(config: &SwitchConfig) -> Result<SiteInputs, ConfigError> {
        let mut classes = config.classes.clone();
        if let Some(path) = &config.class_file {
            let text = std::fs::read_to_string(path)
                .map_err(|error| ConfigError::Io { path: path.clone(), error })?;
            let file: ClassFile = toml::from_str(&text).map_err(|e| ConfigError::Parse {
                origin: path.display().to_string(),
                message: e.to_string().trim_end().to_string(),
            })?;
            classes.extend(file.classes);
        }
        let classifier = RequestClassifier::new(&classes).map_err(|e| {
            let from =
                config.class_file.as_ref().map(|p| format!(" (with {})", p.display())).unwrap_or_default();
            ConfigError::Invalid(format!("{e}{from}"))
        })?;
        let inputs = PolicyInputs { classes: classifier.mean_costs().into(), files: None };
        Ok(SiteInputs { classifier, inputs })
    }

    /// The classes and, with `site_root`, the file table.
    pub fn load(config: &SwitchConfig) -> Result<SiteInputs, ConfigError> {
        let mut site = SiteInputs::classes_of(config)?;
        if let Some(root) = &config.site_root {
            let files = scan_site(root, config.site_max_files)?;
            tracing::info!(root = %root.display(), documents = files.len(), "file table loaded");
            site.inputs.files = Some(Arc::new(files));
        }
        Ok(site)
    }
}

/// What the configured policy reads that the configuration must supply: `wrr-metrics` polls
/// every node's admin listener; `cap` splits by the class table's resources.
pub fn check_policy_needs(
    config: &SwitchConfig,
    names: &[String],
    classes: usize,
) -> Result<(), ConfigError> {
    match config.policy {
        PolicyConfig::WrrMetrics { .. } => {
            if let Some(i) = config.nodes.iter().position(|n| n.admin.is_none()) {
                return Err(ConfigError::Invalid(format!(
                    "node `{}`: policy wrr-metrics polls each node's /locus/status and needs its admin \
                     address (admin = \"ip:port\")",
                    names[i]
                )));
            }
        }
        PolicyConfig::Cap if classes == 0 => {
            return Err(ConfigError::Invalid(
                "policy cap splits requests by their class's resource and needs a class table \
                 ([[classes]] or class_file)"
                    .into(),
            ));
        }
        _ => {}
    }
    Ok(())
}

/// Walk `root` and list every regular file by the hash of the request target naming it
/// (`/dir/name`, segments percent-encoded; a directory's `index.html` also as `/dir/`).
/// Dot-files and symbolic links are left out. More than `max_files` files, or nesting deeper
/// than `MAX_DEPTH`, is refused: point `site_root` at the document root.
pub fn scan_site(root: &Path, max_files: usize) -> Result<FileTable, ConfigError> {
    let limits = ScanLimits { max_files, max_depth: MAX_DEPTH };
    let tree = DocumentTree::scan_bounded(root, limits).map_err(|e| {
        ConfigError::Invalid(format!(
            "site_root: {e} (site_max_files is {max_files}; point it at the document root)"
        ))
    })?;
    let mut files = FileTable::new();
    for f in &tree.files {
        let info = FileInfo { size: f.size, mtime: f.mtime };
        if let Some(dir) = f.target.strip_suffix("index.html")
            && dir.ends_with('/')
        {
            files.insert(locus_core::target_hash(dir), info);
        }
        files.insert(locus_core::target_hash(&f.target), info);
    }
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;
    use locus_core::target_hash;
    use std::time::UNIX_EPOCH;

    #[test]
    fn site_scan_keys_documents_by_encoded_target_with_size_and_mtime() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("d")).unwrap();
        std::fs::write(dir.path().join("d/a b.html"), "12345").unwrap();
        std::fs::write(dir.path().join("d/index.html"), "xy").unwrap();
        std::fs::write(dir.path().join(".hidden"), "x").unwrap();
        let files = scan_site(dir.path(), 10).unwrap();
        assert_eq!(files.len(), 3, "a b.html, index.html and /d/");
        let a = files.get(target_hash("/d/a%20b.html")).unwrap();
        assert_eq!(a.size, 5);
        let mtime = std::fs::metadata(dir.path().join("d/a b.html")).unwrap().modified().unwrap();
        assert_eq!(a.mtime, mtime.duration_since(UNIX_EPOCH).unwrap().as_secs());
        assert_eq!(files.get(target_hash("/d/")).unwrap().size, 2);
        assert!(files.get(target_hash("/.hidden")).is_none());
    }

    const NODES: &str = "[[node]]\nname = \"a\"\naddr = \"127.0.0.1:1\"\nadmin = \"127.0.0.1:2\"\n\
                         [[node]]\nname = \"b\"\naddr = \"127.0.0.1:3\"\n";
    const CLASS: &str = "[[classes]]\nname = \"cgi\"\nprefix = \"/cgi\"\n\
                         cost = { dist = \"const\", ms = 5 }\nsize = 100\n";

    #[test]
    fn class_with_unknown_resource_is_refused_naming_the_key_and_line() {
        let text = format!("{NODES}{CLASS}resource = \"gpu\"\n");
        let e = SwitchConfig::from_toml_str(&text, "s.toml").unwrap_err().to_string();
        assert!(
            e.starts_with("s.toml") && e.contains("gpu") && e.contains("line 13") && e.contains("resource"),
            "{e}"
        );
    }

    #[test]
    fn wrr_metrics_without_a_nodes_admin_address_is_refused_naming_the_node() {
        let text = format!("{NODES}[policy]\nname = \"wrr-metrics\"\n");
        let c = SwitchConfig::from_toml_str(&text, "x").unwrap();
        let e = c.validate().unwrap_err().to_string();
        assert!(e.contains("node `b`") && e.contains("admin"), "{e}");
        let both = text.replace("addr = \"127.0.0.1:3\"", "addr = \"127.0.0.1:3\"\nadmin = \"127.0.0.1:4\"");
        SwitchConfig::from_toml_str(&both, "x").unwrap().validate().unwrap();
    }

    #[test]
    fn cap_without_classes_is_refused_and_with_them_classifies() {
        let cap = format!("{NODES}[policy]\nname = \"cap\"\n");
        let e = SwitchConfig::from_toml_str(&cap, "x").unwrap().validate().unwrap_err().to_string();
        assert!(e.contains("cap") && e.contains("class table"), "{e}");
        let c = SwitchConfig::from_toml_str(&format!("{cap}{CLASS}"), "x").unwrap();
        c.validate().unwrap();
        let site = SiteInputs::classes_of(&c).unwrap();
        assert_eq!(site.classifier.classify("/cgi/x?q=1"), Some(0));
        assert_eq!(site.inputs.classes[0].cpu_ns, 5_000_000);
    }

    #[test]
    fn class_file_and_site_root_are_relative_to_the_config_file_and_load() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("www")).unwrap();
        std::fs::write(dir.path().join("www/a.html"), "abc").unwrap();
        std::fs::write(dir.path().join("classes.toml"), CLASS).unwrap();
        let text =
            format!("class_file = \"classes.toml\"\nsite_root = \"www\"\n{NODES}[policy]\nname = \"csld\"\n");
        let path = dir.path().join("switch.toml");
        std::fs::write(&path, text).unwrap();
        let c = SwitchConfig::from_file(&path).unwrap();
        assert_eq!(c.class_file, Some(dir.path().join("classes.toml")));
        c.validate().unwrap();
        let site = SiteInputs::load(&c).unwrap();
        assert_eq!(site.inputs.classes.len(), 1);
        assert_eq!(site.inputs.files.unwrap().get(target_hash("/a.html")).unwrap().size, 3);
        std::fs::write(dir.path().join("classes.toml"), format!("{CLASS}{CLASS}")).unwrap();
        let e = c.validate().unwrap_err().to_string();
        assert!(e.contains("used by two classes") && e.contains("classes.toml"), "{e}");
    }

    #[test]
    fn site_scan_refuses_a_tree_over_the_file_limit_naming_the_key() {
        let dir = tempfile::tempdir().unwrap();
        for i in 0..4 {
            std::fs::write(dir.path().join(format!("f{i}")), "x").unwrap();
        }
        let e = scan_site(dir.path(), 3).unwrap_err().to_string();
        assert!(e.contains("more than 3 files") && e.contains("site_max_files"), "{e}");
        assert!(scan_site(&dir.path().join("f0"), 3).unwrap_err().to_string().contains("not a directory"));
    }
}
