//! Response verification: `Expectation` is what one request target must answer (a document's
//! status, length and XXH3-64 checksum, or a 404), `ResponseVerifier` works the expectations
//! out once before the run — from a document root (files hashed in parallel) or a site
//! manifest — and `Mismatch` records a response that differed.

use std::collections::HashMap;
use std::io::Read;
use std::path::{Path, PathBuf};

use locus_trace::SiteManifest;
use serde::Serialize;
use xxhash_rust::xxh3::{Xxh3, xxh3_64};

use crate::error::LoadError;
use crate::response_reader::ResponseSummary;

/// What the response to one request must be.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Expectation {
    /// Not checked (verification off, or a target whose answer cannot be predicted: a
    /// directory, a refused path, a method other than GET and HEAD).
    #[default]
    Unchecked,
    /// Only this status (404 for a target that names no file).
    Status(u16),
    /// A document: status 200, exactly `length` bytes with this XXH3-64.
    Document { length: u64, xxh3: u64 },
}

/// Which check a response failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum MismatchKind {
    Status,
    Length,
    Checksum,
    /// A page served by a DC server that is not the original after undoing the rewrite.
    Rewrite,
}

impl MismatchKind {
    /// All kinds, in report order.
    pub const ALL: [MismatchKind; 4] =
        [MismatchKind::Status, MismatchKind::Length, MismatchKind::Checksum, MismatchKind::Rewrite];

    /// Lower-case name.
    pub fn name(self) -> &'static str {
        match self {
            MismatchKind::Status => "status",
            MismatchKind::Length => "length",
            MismatchKind::Checksum => "checksum",
            MismatchKind::Rewrite => "rewrite",
        }
    }
}

/// A response that did not match its expectation.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Mismatch {
    /// Method and URL of the request.
    pub request: String,
    pub kind: MismatchKind,
    pub expected: String,
    pub actual: String,
}

impl Expectation {
    /// A document whose body is exactly `body`.
    pub fn of_body(body: &[u8]) -> Expectation {
        Expectation::Document { length: body.len() as u64, xxh3: xxh3_64(body) }
    }

    /// Whether checking needs the body's checksum (GET of a document).
    pub fn wants_checksum(&self, head_only: bool) -> bool {
        !head_only && matches!(self, Expectation::Document { .. })
    }

    /// Whether anything is checked.
    pub fn is_checked(&self) -> bool {
        *self != Expectation::Unchecked
    }

    /// The first check `got` fails, as (kind, expected, actual). For HEAD only the status
    /// and the Content-Length header are checked.
    pub fn check(&self, head_only: bool, got: &ResponseSummary) -> Option<(MismatchKind, String, String)> {
        match *self {
            Expectation::Unchecked => None,
            Expectation::Status(status) => (got.status != status)
                .then(|| (MismatchKind::Status, status.to_string(), got.status.to_string())),
            Expectation::Document { length, xxh3 } => {
                if got.status != 200 {
                    return Some((MismatchKind::Status, "200".into(), got.status.to_string()));
                }
                let shown = |n: Option<u64>| n.map_or_else(|| "none".to_string(), |n| n.to_string());
                if got.content_length.is_some_and(|n| n != length)
                    || (head_only && got.content_length.is_none())
                {
                    return Some((
                        MismatchKind::Length,
                        format!("Content-Length {length}"),
                        format!("Content-Length {}", shown(got.content_length)),
                    ));
                }
                if head_only {
                    return None;
                }
                if got.body_len != length {
                    return Some((
                        MismatchKind::Length,
                        format!("{length} bytes"),
                        format!("{} bytes", got.body_len),
                    ));
                }
                match got.xxh3 {
                    Some(h) if h == xxh3 => None,
                    Some(h) => {
                        Some((MismatchKind::Checksum, format!("xxh3 {xxh3:016x}"), format!("xxh3 {h:016x}")))
                    }
                    None => Some((MismatchKind::Checksum, format!("xxh3 {xxh3:016x}"), "no checksum".into())),
                }
            }
        }
    }
}

/// Where expected responses come from.
#[derive(Clone, Debug)]
enum Source {
    Root(PathBuf),
    Manifest(HashMap<String, (u64, u64)>),
    Pinned(Expectation),
}

/// Works out the expected response of every target once, before the run.
#[derive(Clone, Debug)]
pub struct ResponseVerifier {
    source: Source,
}

/// What a target names under a document root.
#[derive(Clone, Debug, PartialEq, Eq)]
enum RootOutcome {
    File(PathBuf),
    Missing,
    Unpredictable,
}

impl ResponseVerifier {
    /// Expectations from the files under `root` (as a Locus node serving it answers).
    pub fn from_root(root: &Path) -> Result<ResponseVerifier, LoadError> {
        let canonical = std::fs::canonicalize(root)
            .map_err(|source| LoadError::Io { path: root.into(), error: source })?;
        if !canonical.is_dir() {
            return Err(LoadError::config(format!("{} is not a directory", root.display())));
        }
        Ok(ResponseVerifier { source: Source::Root(canonical) })
    }

    /// Expectations from a site manifest's sizes and checksums.
    pub fn from_manifest(manifest: &SiteManifest) -> Result<ResponseVerifier, LoadError> {
        let mut files = HashMap::with_capacity(manifest.files.len());
        for f in &manifest.files {
            let hash = u64::from_str_radix(&f.xxh3, 16).map_err(|_| {
                LoadError::config(format!("manifest entry {} has a bad xxh3 `{}`", f.target, f.xxh3))
            })?;
            files.insert(f.target.clone(), (f.size, hash));
        }
        Ok(ResponseVerifier { source: Source::Manifest(files) })
    }

    /// The same expectation for every target (e.g. learnt from a first response).
    pub fn pinned(expectation: Expectation) -> ResponseVerifier {
        ResponseVerifier { source: Source::Pinned(expectation) }
    }

    /// The expectation of each target, in order; files are read and hashed once each, on up
    /// to `threads` threads.
    pub fn expectations(&self, targets: &[&str], threads: usize) -> Result<Vec<Expectation>, LoadError> {
        match &self.source {
            Source::Pinned(e) => Ok(vec![*e; targets.len()]),
            Source::Manifest(files) => Ok(targets.iter().map(|t| manifest_expectation(files, t)).collect()),
            Source::Root(root) => {
                let outcomes: Vec<RootOutcome> = targets.iter().map(|t| resolve_in_root(root, t)).collect();
                let mut paths: Vec<&PathBuf> = outcomes
                    .iter()
                    .filter_map(|o| if let RootOutcome::File(p) = o { Some(p) } else { None })
                    .collect();
                paths.sort();
                paths.dedup();
                let hashed = hash_files(&paths, threads)?;
                let by_path: HashMap<&PathBuf, (u64, u64)> = paths.into_iter().zip(hashed).collect();
                Ok(outcomes
                    .iter()
                    .map(|o| match o {
                        RootOutcome::File(p) => {
                            let (length, xxh3) = by_path[p];
                            Expectation::Document { length, xxh3 }
                        }
                        RootOutcome::Missing => Expectation::Status(404),
                        RootOutcome::Unpredictable => Expectation::Unchecked,
                    })
                    .collect())
            }
        }
    }
}

pub(crate) fn manifest_expectation(files: &HashMap<String, (u64, u64)>, target: &str) -> Expectation {
    let path = target.split_once('?').map_or(target, |(p, _)| p);
    let lookup = if path.ends_with('/') { format!("{path}index.html") } else { path.to_string() };
    if let Some(&(length, xxh3)) = files.get(&lookup) {
        return Expectation::Document { length, xxh3 };
    }
    // A directory (some file lies below it) is answered with a redirect or a refusal.
    let dir = if path.ends_with('/') { path.to_string() } else { format!("{path}/") };
    if files.keys().any(|k| k.starts_with(&dir)) {
        return Expectation::Unchecked;
    }
    Expectation::Status(404)
}

/// What a Locus node serving `root` does with `target`: the same decoding and refusals as
/// the node, reduced to the three cases a load check needs.
fn resolve_in_root(root: &Path, target: &str) -> RootOutcome {
    let path = target.split_once('?').map_or(target, |(p, _)| p);
    let lower = path.to_ascii_lowercase();
    if !path.starts_with('/') || lower.contains("%2f") || lower.contains("%00") || path.contains('\\') {
        return RootOutcome::Unpredictable;
    }
    let Some(decoded) = locus_trace::decode_path(path) else { return RootOutcome::Unpredictable };
    let mut fs_path = root.to_path_buf();
    for seg in decoded.split('/').filter(|s| !s.is_empty() && *s != ".") {
        if seg == ".." {
            return RootOutcome::Unpredictable;
        }
        fs_path.push(seg);
    }
    let meta = match std::fs::metadata(&fs_path) {
        Ok(m) => m,
        Err(e) if matches!(e.kind(), std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory) => {
            return RootOutcome::Missing;
        }
        Err(_) => return RootOutcome::Unpredictable,
    };
    if meta.is_dir() {
        if !decoded.ends_with('/') {
            return RootOutcome::Unpredictable;
        }
        fs_path.push("index.html");
        if !fs_path.is_file() {
            return RootOutcome::Unpredictable;
        }
    } else if decoded.ends_with('/') && decoded.len() > 1 {
        return RootOutcome::Missing;
    } else if !meta.is_file() {
        return RootOutcome::Unpredictable;
    }
    match std::fs::canonicalize(&fs_path) {
        Ok(c) if c.starts_with(root) => RootOutcome::File(c),
        _ => RootOutcome::Unpredictable,
    }
}

/// Size and XXH3-64 of each file, read in 256 KiB pieces on up to `threads` threads.
fn hash_files(paths: &[&PathBuf], threads: usize) -> Result<Vec<(u64, u64)>, LoadError> {
    let hash_one = |path: &Path| -> Result<(u64, u64), LoadError> {
        let io = |source| LoadError::Io { path: path.to_path_buf(), error: source };
        let mut file = std::fs::File::open(path).map_err(io)?;
        let mut hasher = Xxh3::new();
        let mut buf = vec![0u8; 256 * 1024];
        let mut len = 0u64;
        loop {
            let n = file.read(&mut buf).map_err(io)?;
            if n == 0 {
                return Ok((len, hasher.digest()));
            }
            hasher.update(&buf[..n]);
            len += n as u64;
        }
    };
    let threads = threads.clamp(1, 16).min(paths.len().div_ceil(8).max(1));
    if threads <= 1 {
        return paths.iter().map(|p| hash_one(p)).collect();
    }
    let per = paths.len().div_ceil(threads);
    std::thread::scope(|scope| {
        let handles: Vec<_> = paths
            .chunks(per)
            .map(|chunk| {
                scope.spawn(move || chunk.iter().map(|p| hash_one(p)).collect::<Result<Vec<_>, _>>())
            })
            .collect();
        let mut out = Vec::with_capacity(paths.len());
        for h in handles {
            let part = h.join().map_err(|_| LoadError::Worker("a file hashing thread panicked".into()))??;
            out.extend(part);
        }
        Ok(out)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn summary(status: u16, body: &[u8]) -> ResponseSummary {
        ResponseSummary {
            status,
            content_length: Some(body.len() as u64),
            body_len: body.len() as u64,
            xxh3: Some(xxh3_64(body)),
            keep_alive: true,
            wire_bytes: 0,
        }
    }

    #[test]
    fn document_expectation_checks_status_then_length_then_checksum() {
        let e = Expectation::Document { length: 5, xxh3: xxh3_64(b"hello") };
        assert_eq!(e.check(false, &summary(200, b"hello")), None);
        assert_eq!(e.check(false, &summary(500, b"hello")).unwrap().0, MismatchKind::Status);
        assert_eq!(e.check(false, &summary(200, b"hell")).unwrap().0, MismatchKind::Length);
        let (kind, expected, actual) = e.check(false, &summary(200, b"jello")).unwrap();
        assert_eq!(kind, MismatchKind::Checksum);
        assert_ne!(expected, actual);
        let mut chunked = summary(200, b"hello");
        chunked.content_length = None;
        assert_eq!(e.check(false, &chunked), None, "no Content-Length is fine for a GET");
        let mut lying = summary(200, b"hello");
        lying.content_length = Some(6);
        assert_eq!(e.check(false, &lying).unwrap().0, MismatchKind::Length);
        assert_eq!(
            Expectation::Status(404).check(false, &summary(200, b"x")).unwrap().0,
            MismatchKind::Status
        );
        assert_eq!(Expectation::Status(404).check(false, &summary(404, b"whatever")), None);
        assert_eq!(Expectation::Unchecked.check(false, &summary(500, b"")), None);
    }

    #[test]
    fn head_checks_only_status_and_content_length() {
        let e = Expectation::Document { length: 5, xxh3: 1 };
        let head = ResponseSummary { content_length: Some(5), body_len: 0, xxh3: None, ..summary(200, b"") };
        assert_eq!(e.check(true, &head), None);
        let wrong = ResponseSummary { content_length: Some(4), ..head };
        assert_eq!(e.check(true, &wrong).unwrap().0, MismatchKind::Length);
        let none = ResponseSummary { content_length: None, ..head };
        assert_eq!(e.check(true, &none).unwrap().0, MismatchKind::Length);
        assert!(!e.wants_checksum(true) && e.wants_checksum(false));
    }

    #[test]
    fn root_expectations_are_documents_for_files_404_for_missing_and_unchecked_for_the_rest() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a b.txt"), b"hello").unwrap();
        std::fs::create_dir(dir.path().join("d")).unwrap();
        std::fs::write(dir.path().join("d/index.html"), b"<p>").unwrap();
        let big: Vec<u8> = (0..700_000u32).map(|i| i as u8).collect();
        std::fs::write(dir.path().join("big.bin"), &big).unwrap();
        let v = ResponseVerifier::from_root(dir.path()).unwrap();
        let targets = [
            "/a%20b.txt",
            "/a%20b.txt?q=1",
            "/missing",
            "/d/",
            "/d",
            "/../etc/passwd",
            "/big.bin",
            "/a%20b.txt/",
        ];
        let got = v.expectations(&targets, 4).unwrap();
        let hello = Expectation::Document { length: 5, xxh3: xxh3_64(b"hello") };
        assert_eq!(got[0], hello);
        assert_eq!(got[1], hello);
        assert_eq!(got[2], Expectation::Status(404));
        assert_eq!(got[3], Expectation::Document { length: 3, xxh3: xxh3_64(b"<p>") });
        assert_eq!(got[4], Expectation::Unchecked);
        assert_eq!(got[5], Expectation::Unchecked);
        assert_eq!(got[6], Expectation::Document { length: big.len() as u64, xxh3: xxh3_64(&big) });
        assert_eq!(got[7], Expectation::Status(404));
        // Many files hashed on several threads give the same answers as one thread.
        let many: Vec<String> = (0..40).map(|i| format!("/f{i}")).collect();
        for i in 0..40 {
            std::fs::write(dir.path().join(format!("f{i}")), vec![i as u8; i * 100]).unwrap();
        }
        let refs: Vec<&str> = many.iter().map(String::as_str).collect();
        assert_eq!(v.expectations(&refs, 4).unwrap(), v.expectations(&refs, 1).unwrap());
    }

    #[test]
    fn manifest_expectations_use_its_sizes_and_checksums() {
        let dir = tempfile::tempdir().unwrap();
        let spec = locus_trace::SiteSpec { files: 20, ..locus_trace::SiteSpec::default() };
        let manifest =
            locus_trace::SiteGenerator::new(spec).unwrap().write(dir.path(), false, &mut |_, _| {}).unwrap();
        let from_manifest = ResponseVerifier::from_manifest(&manifest).unwrap();
        let from_root = ResponseVerifier::from_root(dir.path()).unwrap();
        let targets: Vec<&str> = manifest.files.iter().map(|f| f.target.as_str()).collect();
        assert_eq!(
            from_manifest.expectations(&targets, 2).unwrap(),
            from_root.expectations(&targets, 2).unwrap()
        );
        let other = from_manifest.expectations(&["/nothing-here", "/"], 1).unwrap();
        assert_eq!(other[0], Expectation::Status(404));
        assert!(matches!(other[1], Expectation::Document { .. }), "/ is index.html");
    }
}
