//! `DocumentTree`: the regular files under a document root with their sizes and the request
//! targets that name them (`/dir/file.html`, percent-encoded) and modification times, for
//! `synth` sizes, `surf` and the switch's file table; optionally bounded in files and depth.

use std::path::{Path, PathBuf};
use std::time::UNIX_EPOCH;

use percent_encoding::{AsciiSet, CONTROLS, percent_decode_str, utf8_percent_encode};

use crate::error::SiteError;

/// Characters percent-encoded in one path segment of a target (besides controls and non-ASCII).
const PATH_SEGMENT: &AsciiSet = &CONTROLS
    .add(b' ')
    .add(b'"')
    .add(b'#')
    .add(b'%')
    .add(b'<')
    .add(b'>')
    .add(b'?')
    .add(b'`')
    .add(b'{')
    .add(b'}')
    .add(b'\\')
    .add(b'^')
    .add(b'|')
    .add(b'/');

/// One file of a document tree.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DocumentFile {
    /// The request target naming it: `/` + its path below the root, each segment encoded.
    pub target: String,
    /// Where it is on disk.
    pub path: PathBuf,
    /// Its size in bytes.
    pub size: u64,
    /// Its modification time, seconds since the Unix epoch (0 when unknown).
    pub mtime: u64,
}

/// How much of a tree `scan_bounded` walks before it refuses: a root that holds far more than
/// a site (a home directory, `/`) is an error, not a long wait.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ScanLimits {
    /// Most regular files.
    pub max_files: usize,
    /// Deepest directory nesting below the root.
    pub max_depth: usize,
}

impl Default for ScanLimits {
    /// No limit.
    fn default() -> ScanLimits {
        ScanLimits { max_files: usize::MAX, max_depth: usize::MAX }
    }
}

/// The regular files under a root, sorted by target. Symbolic links and names starting with
/// `.` are left out (a link could lead outside the root), and so are names that are not UTF-8.
#[derive(Clone, Debug)]
pub struct DocumentTree {
    /// The root directory.
    pub root: PathBuf,
    /// The files, sorted by target.
    pub files: Vec<DocumentFile>,
    /// Entries left out: symbolic links, dot-files, names that are not UTF-8, special files.
    pub skipped: u64,
}

impl DocumentTree {
    /// Walk `root`.
    pub fn scan(root: &Path) -> Result<DocumentTree, SiteError> {
        DocumentTree::scan_bounded(root, ScanLimits::default())
    }

    /// Walk `root`, refusing a tree with more files or deeper nesting than `limits`.
    pub fn scan_bounded(root: &Path, limits: ScanLimits) -> Result<DocumentTree, SiteError> {
        let meta = std::fs::metadata(root).map_err(|e| SiteError::fs(root, e))?;
        let refuse = |message: String| SiteError::Directory { path: root.to_path_buf(), message };
        if !meta.is_dir() {
            return Err(refuse("not a directory".into()));
        }
        let mut files = Vec::new();
        let mut skipped = 0;
        let mut stack: Vec<(PathBuf, String, usize)> = vec![(root.to_path_buf(), String::new(), 0)];
        while let Some((dir, prefix, depth)) = stack.pop() {
            let entries = std::fs::read_dir(&dir).map_err(|e| SiteError::fs(&dir, e))?;
            for entry in entries {
                let entry = entry.map_err(|e| SiteError::fs(&dir, e))?;
                let Some(name) = entry.file_name().to_str().map(str::to_string) else {
                    skipped += 1;
                    continue;
                };
                if name.starts_with('.') {
                    skipped += 1;
                    continue;
                }
                let path = entry.path();
                let meta = std::fs::symlink_metadata(&path).map_err(|e| SiteError::fs(&path, e))?;
                let target = format!("{prefix}/{}", utf8_percent_encode(&name, PATH_SEGMENT));
                if meta.is_dir() {
                    if depth >= limits.max_depth {
                        return Err(refuse(format!(
                            "{} is nested deeper than {} directories",
                            path.display(),
                            limits.max_depth
                        )));
                    }
                    stack.push((path, target, depth + 1));
                } else if meta.is_file() {
                    if files.len() >= limits.max_files {
                        return Err(refuse(format!("more than {} files", limits.max_files)));
                    }
                    let mtime = meta.modified().ok().and_then(|t| t.duration_since(UNIX_EPOCH).ok());
                    files.push(DocumentFile {
                        target,
                        path,
                        size: meta.len(),
                        mtime: mtime.map_or(0, |d| d.as_secs()),
                    });
                } else {
                    skipped += 1;
                }
            }
        }
        files.sort_by(|a, b| a.target.cmp(&b.target));
        Ok(DocumentTree { root: root.to_path_buf(), files, skipped })
    }

    /// The index of the file named by `target` (exactly as `target_for` makes targets).
    pub fn find(&self, target: &str) -> Option<usize> {
        self.files.binary_search_by(|f| f.target.as_str().cmp(target)).ok()
    }
}

/// The canonical target for a decoded path (`/a b/c.html` → `/a%20b/c.html`).
pub fn target_for(decoded_path: &str) -> String {
    let mut out = String::with_capacity(decoded_path.len() + 8);
    for segment in decoded_path.split('/').filter(|s| !s.is_empty()) {
        out.push('/');
        out.extend(utf8_percent_encode(segment, PATH_SEGMENT));
    }
    if out.is_empty() || decoded_path.ends_with('/') {
        out.push('/');
    }
    out
}

/// Percent-decode a URL path (`None` if it decodes to bytes that are not UTF-8).
pub fn decode_path(path: &str) -> Option<String> {
    percent_decode_str(path).decode_utf8().ok().map(|c| c.into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scan_lists_files_with_encoded_targets_and_sizes_and_skips_dotfiles() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("sub dir")).unwrap();
        std::fs::write(dir.path().join("index.html"), b"12345").unwrap();
        std::fs::write(dir.path().join("sub dir/a?b.gif"), b"1").unwrap();
        std::fs::write(dir.path().join(".hidden"), b"1").unwrap();
        let tree = DocumentTree::scan(dir.path()).unwrap();
        let got: Vec<(&str, u64)> = tree.files.iter().map(|f| (f.target.as_str(), f.size)).collect();
        assert_eq!(got, [("/index.html", 5), ("/sub%20dir/a%3Fb.gif", 1)]);
        assert_eq!(tree.skipped, 1);
        assert_eq!(tree.find("/sub%20dir/a%3Fb.gif"), Some(1));
        let mtime = std::fs::metadata(dir.path().join("index.html")).unwrap().modified().unwrap();
        assert_eq!(tree.files[0].mtime, mtime.duration_since(UNIX_EPOCH).unwrap().as_secs());
        assert_eq!(target_for(&decode_path("/sub%20dir/a%3fb.gif").unwrap()), "/sub%20dir/a%3Fb.gif");
    }

    #[test]
    fn scan_of_a_missing_directory_names_it() {
        let err = DocumentTree::scan(Path::new("/no/such/dir/for/locus")).unwrap_err();
        assert!(err.to_string().starts_with("/no/such/dir/for/locus:"), "{err}");
    }
}
