//! `DocumentRoot`: turns a request path into a file under the root, or refuses it. Paths are
//! percent-decoded and normalised without ever leaving the root: `..` segments, encoded `/`
//! and NUL are refused before the file system is touched, and a file whose canonical path
//! (after symlinks) is outside the root is refused after it.

use std::fs::{File, Metadata};
use std::io;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// Why a request path was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PathError {
    /// Malformed: not starting with `/`, a bad percent escape, an encoded `/` or NUL, or
    /// not UTF-8 once decoded. Answered 400.
    #[error("bad request path: {0}")]
    Bad(&'static str),
    /// A `..` segment: an attempt to leave the root. Answered 403.
    #[error("forbidden request path: {0}")]
    Forbidden(&'static str),
}

impl PathError {
    /// The status that answers the error.
    pub fn status(self) -> u16 {
        match self {
            PathError::Bad(_) => 400,
            PathError::Forbidden(_) => 403,
        }
    }
}

fn hex(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

/// Decode the path part of a request target (no query) into `out` as a normalised absolute
/// path: percent escapes decoded, empty and `.` segments dropped, a trailing `/` kept.
/// `out` is cleared first and its allocation reused, so a connection decodes without
/// allocating. Encoded `/` is refused, so splitting the raw path on `/` splits the decoded one.
pub fn decode_request_path(raw: &str, out: &mut String) -> Result<(), PathError> {
    let mut bytes = std::mem::take(out).into_bytes();
    bytes.clear();
    let result = decode_into(raw.as_bytes(), &mut bytes);
    match String::from_utf8(bytes) {
        Ok(s) => {
            *out = s;
            result
        }
        Err(e) => {
            let mut bytes = e.into_bytes();
            bytes.clear();
            *out = String::from_utf8(bytes).unwrap_or_default();
            result.and(Err(PathError::Bad("path is not UTF-8")))
        }
    }
}

fn decode_into(raw: &[u8], out: &mut Vec<u8>) -> Result<(), PathError> {
    if raw.first() != Some(&b'/') {
        return Err(PathError::Bad("path does not start with '/'"));
    }
    for seg in raw[1..].split(|&b| b == b'/') {
        let start = out.len();
        out.push(b'/');
        let mut i = 0;
        while i < seg.len() {
            if seg[i] == b'%' {
                let (Some(h), Some(l)) =
                    (seg.get(i + 1).and_then(|&c| hex(c)), seg.get(i + 2).and_then(|&c| hex(c)))
                else {
                    return Err(PathError::Bad("invalid percent escape"));
                };
                let v = (h << 4) | l;
                if v == b'/' || v == 0 {
                    return Err(PathError::Bad("encoded '/' or NUL in path"));
                }
                out.push(v);
                i += 3;
            } else {
                out.push(seg[i]);
                i += 1;
            }
        }
        match &out[start + 1..] {
            b"" | b"." => out.truncate(start),
            b".." => return Err(PathError::Forbidden("'..' segment in path")),
            s if s.contains(&b'\\') && s.windows(2).any(|w| w == b"..") => {
                // Harmless on Unix, but never a legitimate document name.
                return Err(PathError::Forbidden("'..' with backslash in path"));
            }
            _ => {}
        }
    }
    if out.is_empty() || raw.ends_with(b"/") {
        out.push(b'/');
    }
    Ok(())
}

/// What a normalised request path names under the root.
#[derive(Debug)]
pub enum Resolved {
    /// A regular file, opened; `path` is its canonical path.
    File {
        file: File,
        path: PathBuf,
        meta: Metadata,
    },
    /// A directory asked for without the trailing slash: redirect to the slash form.
    Redirect,
    NotFound,
    /// Outside the root (through a symlink), not a regular file, a directory without
    /// `index.html`, or not readable.
    Forbidden,
    /// Any other I/O error.
    Error(io::Error),
}

/// The directory documents are served from.
#[derive(Clone, Debug)]
pub struct DocumentRoot {
    root: PathBuf,
}

impl DocumentRoot {
    /// The root at `path`, which must be a directory; it is canonicalised once here.
    pub fn new(path: &Path) -> io::Result<DocumentRoot> {
        let root = std::fs::canonicalize(path)?;
        if !std::fs::metadata(&root)?.is_dir() {
            return Err(io::Error::new(io::ErrorKind::NotADirectory, "document root is not a directory"));
        }
        Ok(DocumentRoot { root })
    }

    /// The canonical root directory.
    pub fn path(&self) -> &Path {
        &self.root
    }

    /// Map a path normalised by `decode_request_path` to a file (blocking: call it off the
    /// event loop).
    pub fn resolve(&self, normalised: &str) -> Resolved {
        let mut fs_path = self.root.clone();
        for seg in normalised.split('/').filter(|s| !s.is_empty()) {
            debug_assert!(seg != ".." && seg != ".");
            fs_path.push(seg);
        }
        let meta = match std::fs::metadata(&fs_path) {
            Ok(m) => m,
            Err(e) => return io_outcome(e),
        };
        if !self.inside(&fs_path) {
            return Resolved::Forbidden;
        }
        if meta.is_dir() {
            if !normalised.ends_with('/') {
                return Resolved::Redirect;
            }
            fs_path.push("index.html");
            match std::fs::metadata(&fs_path) {
                Ok(_) if !self.inside(&fs_path) => return Resolved::Forbidden,
                Ok(m) if m.is_file() => {}
                Ok(_) => return Resolved::Forbidden,
                Err(e) if e.kind() == io::ErrorKind::NotFound => return Resolved::Forbidden,
                Err(e) => return io_outcome(e),
            }
        } else if normalised.ends_with('/') && normalised.len() > 1 {
            // `/file.txt/`: a file named like a directory.
            return Resolved::NotFound;
        }
        let canonical = match std::fs::canonicalize(&fs_path) {
            Ok(c) => c,
            Err(e) => return io_outcome(e),
        };
        if !canonical.starts_with(&self.root) {
            return Resolved::Forbidden;
        }
        let file =
            match std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NOFOLLOW).open(&canonical) {
                Ok(f) => f,
                Err(e) => return io_outcome(e),
            };
        match file.metadata() {
            Ok(meta) if meta.is_file() => Resolved::File { file, path: canonical, meta },
            Ok(_) => Resolved::Forbidden,
            Err(e) => Resolved::Error(e),
        }
    }

    /// Whether `path` (which exists) resolves, through any symlinks, inside the root.
    fn inside(&self, path: &Path) -> bool {
        std::fs::canonicalize(path).is_ok_and(|c| c.starts_with(&self.root))
    }
}

fn io_outcome(e: io::Error) -> Resolved {
    match e.kind() {
        io::ErrorKind::NotFound | io::ErrorKind::NotADirectory => Resolved::NotFound,
        io::ErrorKind::PermissionDenied => Resolved::Forbidden,
        _ if e.raw_os_error() == Some(libc::ELOOP) || e.raw_os_error() == Some(libc::ENAMETOOLONG) => {
            Resolved::Forbidden
        }
        _ => Resolved::Error(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode(raw: &str) -> Result<String, PathError> {
        let mut out = String::new();
        decode_request_path(raw, &mut out).map(|()| out)
    }

    #[test]
    fn paths_are_percent_decoded_and_normalised() {
        assert_eq!(decode("/").unwrap(), "/");
        assert_eq!(decode("/a/b.html").unwrap(), "/a/b.html");
        assert_eq!(decode("/a%20b/c%2Ed").unwrap(), "/a b/c.d");
        assert_eq!(decode("/dir/").unwrap(), "/dir/");
        assert_eq!(decode("//a///b/./c").unwrap(), "/a/b/c");
        assert_eq!(decode("/./").unwrap(), "/");
        assert_eq!(decode("/caf%C3%A9").unwrap(), "/caf\u{e9}");
        assert_eq!(decode("/a..b/..c").unwrap(), "/a..b/..c");
    }

    #[test]
    fn traversal_segments_are_forbidden_even_when_encoded() {
        for raw in
            ["/../etc/passwd", "/%2e%2e/", "/%2E%2E/etc", "/a/../b", "/a/..", "/.%2e/x", "/..", "/a\\..\\b"]
        {
            assert!(matches!(decode(raw), Err(PathError::Forbidden(_))), "{raw}");
        }
    }

    #[test]
    fn encoded_slash_nul_bad_escapes_and_non_utf8_are_bad_requests() {
        for raw in ["/a/%2F..", "/a%2fb", "/a%00", "/a%zz", "/a%2", "/a%", "/%ff%fe", "a/b", ""] {
            let err = decode(raw).unwrap_err();
            assert_eq!(err.status(), 400, "{raw}");
        }
    }

    #[test]
    fn decode_buffer_is_reused_across_calls() {
        let mut out = String::new();
        decode_request_path("/some/fairly/long/path/name.html", &mut out).unwrap();
        decode_request_path("/x", &mut out).unwrap();
        assert_eq!(out, "/x");
        assert!(out.capacity() >= "/some/fairly/long/path/name.html".len());
    }

    #[test]
    fn resolve_finds_files_index_redirects_and_refuses_symlinks_out_of_the_root() {
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret"), "s").unwrap();
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::write(root.join("a.txt"), "hello").unwrap();
        std::fs::create_dir(root.join("d")).unwrap();
        std::fs::write(root.join("d/index.html"), "<p>").unwrap();
        std::fs::create_dir(root.join("empty")).unwrap();
        std::os::unix::fs::symlink(outside.path().join("secret"), root.join("link")).unwrap();
        std::os::unix::fs::symlink(outside.path(), root.join("outdir")).unwrap();
        std::os::unix::fs::symlink(root.join("a.txt"), root.join("inlink")).unwrap();
        let docs = DocumentRoot::new(root).unwrap();

        assert!(matches!(docs.resolve("/a.txt"), Resolved::File { meta, .. } if meta.len() == 5));
        assert!(matches!(docs.resolve("/d/"), Resolved::File { path, .. } if path.ends_with("d/index.html")));
        assert!(matches!(docs.resolve("/d"), Resolved::Redirect));
        assert!(matches!(docs.resolve("/empty/"), Resolved::Forbidden));
        assert!(matches!(docs.resolve("/missing"), Resolved::NotFound));
        assert!(matches!(docs.resolve("/a.txt/x"), Resolved::NotFound));
        assert!(matches!(docs.resolve("/a.txt/"), Resolved::NotFound));
        assert!(matches!(docs.resolve("/link"), Resolved::Forbidden));
        assert!(matches!(docs.resolve("/outdir/secret"), Resolved::Forbidden));
        assert!(matches!(docs.resolve("/outdir"), Resolved::Forbidden));
        assert!(matches!(docs.resolve("/inlink"), Resolved::File { .. }));
    }
}
