//! File sources: a TOML file of `[[node]]` tables in the configuration's own schema (name, addr,
//! weight, handoff, admin), re-read when its metadata changes. Polled (device, inode, size,
//! modification and change times, every `poll_ms`) rather than watched with inotify: one stat a
//! second costs nothing, needs no crate, and follows what inotify on the file would lose — an
//! editor's or Kubernetes' ConfigMap update that renames a new file (or a symlink) into place.

use super::error::DiscoveryError;
use crate::config::NodeEntry;
use serde::Deserialize;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// The file's schema: `[[node]]` tables and nothing else.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct NodeFile {
    #[serde(default, rename = "node")]
    nodes: Vec<NodeEntry>,
}

/// What tells one version of the file from another.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileStamp {
    dev: u64,
    ino: u64,
    len: u64,
    mtime_ns: i128,
    ctime_ns: i128,
}

/// The stamp of the file at `path` now (following symlinks), or none when it is missing.
pub fn stamp(path: &Path) -> Option<FileStamp> {
    let m = std::fs::metadata(path).ok()?;
    let ns = |s: i64, n: i64| i128::from(s) * 1_000_000_000 + i128::from(n);
    Some(FileStamp {
        dev: m.dev(),
        ino: m.ino(),
        len: m.len(),
        mtime_ns: ns(m.mtime(), m.mtime_nsec()),
        ctime_ns: ns(m.ctime(), m.ctime_nsec()),
    })
}

/// The nodes the file lists, sorted by name: a node without a name is named by its address;
/// names must be unique, weights at least 1, and at most `max_nodes`. A file without `[[node]]`
/// is a valid empty list. `HOST:PORT` addresses are resolved here (blocking).
pub fn read_nodes(path: &Path, max_nodes: usize) -> Result<Vec<NodeEntry>, DiscoveryError> {
    let shown = path.display().to_string();
    let failed = |why: String| DiscoveryError::File { path: shown.clone(), why };
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(DiscoveryError::FileMissing { path: shown });
        }
        Err(e) => return Err(failed(format!("cannot read it: {e}"))),
    };
    let file: NodeFile = toml::from_str(&text).map_err(|e| failed(e.to_string().trim_end().to_string()))?;
    let mut nodes = file.nodes;
    if nodes.len() > max_nodes {
        return Err(DiscoveryError::TooMany { found: nodes.len(), max: max_nodes });
    }
    for node in &mut nodes {
        let name = node.name.get_or_insert_with(|| node.addr.to_string());
        if node.weight == 0 {
            return Err(failed(format!("node `{name}`: weight must be at least 1")));
        }
    }
    nodes.sort_by(|a, b| a.name.cmp(&b.name));
    if let Some(pair) = nodes.windows(2).find(|w| w[0].name == w[1].name) {
        let name = pair[0].name.as_deref().unwrap_or_default();
        return Err(failed(format!("node name `{name}` is used twice")));
    }
    Ok(nodes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(text: &str, max: usize) -> Result<Vec<NodeEntry>, DiscoveryError> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("nodes.toml");
        std::fs::write(&path, text).unwrap();
        read_nodes(&path, max)
    }

    #[test]
    fn nodes_are_read_named_and_sorted() {
        let text = "[[node]]\nname = \"b\"\naddr = \"127.0.0.1:2\"\nweight = 3\n\
                    [[node]]\naddr = \"127.0.0.1:1\"\nadmin = \"127.0.0.1:9\"\n";
        let nodes = read(text, 10).unwrap();
        let names: Vec<_> = nodes.iter().map(|n| n.name.clone().unwrap()).collect();
        assert_eq!(names, ["127.0.0.1:1", "b"]);
        assert_eq!((nodes[1].weight, nodes[0].admin.unwrap().port()), (3, 9));
        assert!(read("", 10).unwrap().is_empty(), "no [[node]] is a valid empty list");
    }

    #[test]
    fn a_bad_file_is_an_error_naming_the_reason() {
        let e = read("[[node]]\naddr = \"127.0.0.1:1\"\nwieght = 2\n", 10).unwrap_err().to_string();
        assert!(e.contains("wieght") && e.contains("line 3"), "{e}");
        let e = read(
            "[[node]]\nname=\"a\"\naddr=\"127.0.0.1:1\"\n[[node]]\nname=\"a\"\naddr=\"127.0.0.1:2\"\n",
            10,
        );
        assert!(e.unwrap_err().to_string().contains("used twice"));
        let e = read("[[node]]\naddr=\"127.0.0.1:1\"\nweight=0\n", 10).unwrap_err().to_string();
        assert!(e.contains("weight must be at least 1"), "{e}");
        let two = "[[node]]\naddr=\"127.0.0.1:1\"\n[[node]]\naddr=\"127.0.0.1:2\"\n";
        assert_eq!(read(two, 1).unwrap_err(), DiscoveryError::TooMany { found: 2, max: 1 });
        let gone = read_nodes(Path::new("/nonexistent/nodes.toml"), 10).unwrap_err();
        assert!(matches!(gone, DiscoveryError::FileMissing { .. }), "{gone}");
    }

    #[test]
    fn the_stamp_changes_with_the_file_and_is_none_when_it_is_gone() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("nodes.toml");
        assert_eq!(stamp(&path), None);
        std::fs::write(&path, "a").unwrap();
        let first = stamp(&path).unwrap();
        std::fs::write(dir.path().join("next"), "ab").unwrap();
        std::fs::rename(dir.path().join("next"), &path).unwrap();
        assert_ne!(stamp(&path), Some(first), "a file renamed into place is a new version");
    }
}
