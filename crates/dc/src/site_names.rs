//! Canonical site paths for callers that meet paths outside a page: a request path as sent
//! (`/a%41/./b`) and a file name read from a directory (`a b.gif`), both turned into the
//! canonical form `DocGraph` and replica URLs use (`/aA/b`, `a%20b.gif`).

use crate::site_path::{Unusable, canonical_segment, normalise_path};

/// A request path as sent (percent-encoded, starting with `/`) in canonical form: dot
/// segments removed (refusing to climb above the root), each segment canonically encoded.
pub fn canonical_request_path(raw_path: &str) -> Result<String, Unusable> {
    normalise_path(raw_path)
}

/// A file name as the file system gives it, encoded as one canonical path segment (a `%` in
/// the name is a literal percent sign, not an escape).
pub fn canonical_file_name(name: &str) -> Result<String, Unusable> {
    if name.contains('/') {
        return Err(Unusable::BadByte);
    }
    canonical_segment(&name.replace('%', "%25"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_paths_and_file_names_meet_in_one_canonical_form() {
        assert_eq!(canonical_request_path("/a%41/./b/../c%20d.gif").unwrap(), "/aA/c%20d.gif");
        assert_eq!(canonical_request_path("/../x"), Err(Unusable::EscapesRoot));
        assert_eq!(canonical_file_name("c d.gif").unwrap(), "c%20d.gif");
        assert_eq!(canonical_file_name("100%.txt").unwrap(), "100%25.txt");
        assert_eq!(canonical_file_name("a/b"), Err(Unusable::BadByte));
        assert_eq!(canonical_file_name(".."), Err(Unusable::EscapesRoot));
    }
}
