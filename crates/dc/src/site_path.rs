//! Resolving a reference written in a page (an `href`/`src` value, already HTML-decoded) against
//! the page's site path and its BASE: `Resolved::Local` (a canonical site path such as
//! `/a%20b/c.gif` plus the `?query#fragment` kept verbatim), `External` (never rewritten) or
//! `Unusable` (cannot name a document of the site safely). The site's `Scheme` says which
//! absolute links name the home (see `PageBase`).

use crate::scheme::Scheme;

/// What a reference names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Resolved {
    /// A document of the page's own home: `path` is absolute, dot-free and canonically
    /// percent-encoded (as the document tree names files); `suffix` is `?query#fragment` as
    /// written (possibly empty).
    Local { path: String, suffix: String },
    /// Another scheme (`mailto:`, `javascript:`, `https:` on an `http` site …) or another
    /// host: left alone.
    External,
    /// Cannot be resolved safely; left alone.
    Unusable(Unusable),
}

/// Why a reference is `Unusable`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unusable {
    /// Empty (after trimming).
    Empty,
    /// Only a `#fragment`.
    FragmentOnly,
    /// `..` climbs above the site root, or a segment is an encoded `.`/`..`.
    EscapesRoot,
    /// A NUL, backslash, control byte, encoded `/` or `\`, or an empty segment (`//`).
    BadByte,
    /// A `%` not followed by two hex digits, or an escape that is not UTF-8.
    BadEscape,
    /// `http:` without `//authority`, or an empty authority.
    BadAuthority,
    /// Relative, but the page's BASE is itself unusable.
    BadBase,
}

/// Where relative references of one page resolve: its site path, or its BASE.
///
/// An absolute reference names the home when it is scheme-relative (`//<home>/…`) or written
/// in the site's scheme (`http` or `https`, any case) with the home's authority. On an `https`
/// site `http://<home>/…` names the home too: the same documents, and a rewrite of it only
/// upgrades it to `https`. On an `http` site `https://<home>/…` stays `External`: the node
/// serves no TLS there, and a rewrite would downgrade a link its author made secure. An
/// authority without a port means the site scheme's default port (80 or 443) whichever of the
/// two schemes is written, so on an `https` site at `example.org`, `http://example.org/x` is
/// local and `http://example.org:80/x` is not.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PageBase {
    base: EffectiveBase,
    scheme: Scheme,
    home_authority: String,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum EffectiveBase {
    Local(String),
    External,
    Unusable,
}

impl PageBase {
    /// The base of the page at `page_path` (a canonical site path) of the `http` home reached
    /// at `home_authority`, with its first `<base href>` value if it has one.
    pub fn new(page_path: &str, base_href: Option<&str>, home_authority: &str) -> PageBase {
        PageBase::with_scheme(Scheme::Http, page_path, base_href, home_authority)
    }

    /// `PageBase::new` for a home served with `scheme`.
    pub fn with_scheme(
        scheme: Scheme,
        page_path: &str,
        base_href: Option<&str>,
        home_authority: &str,
    ) -> PageBase {
        let page = PageBase {
            base: EffectiveBase::Local(page_path.to_string()),
            scheme,
            home_authority: home_authority.to_string(),
        };
        let Some(href) = base_href else { return page };
        let base = match page.resolve(href) {
            Resolved::Local { path, .. } => EffectiveBase::Local(path),
            Resolved::External => EffectiveBase::External,
            // An empty or fragment-only BASE names the page itself.
            Resolved::Unusable(Unusable::Empty | Unusable::FragmentOnly) => return page,
            Resolved::Unusable(_) => EffectiveBase::Unusable,
        };
        PageBase { base, ..page }
    }

    /// Resolve one reference as written in the page (HTML character references decoded).
    pub fn resolve(&self, reference: &str) -> Resolved {
        let cleaned: String = reference
            .trim_matches(|c: char| c <= ' ')
            .chars()
            .filter(|c| !matches!(c, '\t' | '\n' | '\r'))
            .collect();
        if cleaned.is_empty() {
            return Resolved::Unusable(Unusable::Empty);
        }
        if cleaned.starts_with('#') {
            return Resolved::Unusable(Unusable::FragmentOnly);
        }
        let cut = cleaned.find(['?', '#']).unwrap_or(cleaned.len());
        let (rest, suffix) = cleaned.split_at(cut);
        if let Some(scheme) = scheme_of(rest) {
            if !Scheme::parse(scheme).is_some_and(|written| self.may_name_home(written)) {
                return Resolved::External;
            }
            return match rest[scheme.len() + 1..].strip_prefix("//") {
                Some(after) => self.resolve_with_authority(after, suffix),
                None => Resolved::Unusable(Unusable::BadAuthority),
            };
        }
        if let Some(after) = rest.strip_prefix("//") {
            return self.resolve_with_authority(after, suffix);
        }
        let base = match &self.base {
            EffectiveBase::Local(path) => path,
            EffectiveBase::External => return Resolved::External,
            EffectiveBase::Unusable => return Resolved::Unusable(Unusable::BadBase),
        };
        let merged = if rest.starts_with('/') {
            rest.to_string()
        } else if rest.is_empty() {
            base.clone()
        } else {
            let dir = &base[..base.rfind('/').map_or(0, |i| i + 1)];
            if dir.is_empty() { format!("/{rest}") } else { format!("{dir}{rest}") }
        };
        local(&merged, suffix)
    }

    fn resolve_with_authority(&self, after: &str, suffix: &str) -> Resolved {
        let (authority, path) = match after.find('/') {
            Some(i) => after.split_at(i),
            None => (after, "/"),
        };
        if authority.is_empty() || authority.contains(['\\', '\0']) {
            return Resolved::Unusable(Unusable::BadAuthority);
        }
        if !same_server(authority, &self.home_authority, self.scheme.default_port()) {
            return Resolved::External;
        }
        local(path, suffix)
    }

    /// Whether a reference written with `written` may name the home (see the type's doc).
    fn may_name_home(&self, written: Scheme) -> bool {
        written == self.scheme || (written, self.scheme) == (Scheme::Http, Scheme::Https)
    }
}

/// Resolve `reference` written in the page at `page_path` with BASE `base_href`, for the home
/// reached at `home_authority` (one-off form of `PageBase::resolve`).
pub fn resolve_reference(
    reference: &str,
    page_path: &str,
    base_href: Option<&str>,
    home_authority: &str,
) -> Resolved {
    PageBase::new(page_path, base_href, home_authority).resolve(reference)
}

/// Whether a reference names its authority (`http://host/…`, `//host/…`, or any other scheme):
/// such a reference means the same thing whichever server serves the page.
pub fn names_authority(reference: &str) -> bool {
    let r = reference.trim_matches(|c: char| c <= ' ');
    r.starts_with("//") || scheme_of(r.split(['?', '#']).next().unwrap_or("")).is_some()
}

/// Whether two `host[:port]` authorities are the same server: hosts compared ASCII
/// case-insensitively, a missing or empty port meaning 80. Userinfo never matches.
pub fn same_authority(a: &str, b: &str) -> bool {
    same_server(a, b, Scheme::Http.default_port())
}

/// `same_authority` with a missing or empty port meaning `default_port`.
fn same_server(a: &str, b: &str, default_port: u16) -> bool {
    match (split_authority(a, default_port), split_authority(b, default_port)) {
        (Some((ha, pa)), Some((hb, pb))) => pa == pb && ha.eq_ignore_ascii_case(hb),
        _ => false,
    }
}

fn split_authority(a: &str, default_port: u16) -> Option<(&str, u16)> {
    if a.contains('@') || a.is_empty() {
        return None;
    }
    let (host, port) = if a.starts_with('[') {
        let close = a.find(']')?;
        let (host, rest) = a.split_at(close + 1);
        match rest {
            "" => (host, None),
            _ => (host, Some(rest.strip_prefix(':')?)),
        }
    } else {
        match a.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (a, None),
        }
    };
    let port = match port {
        None | Some("") => default_port,
        Some(p) if p.bytes().all(|b| b.is_ascii_digit()) => p.parse().ok()?,
        Some(_) => return None,
    };
    Some((host, port))
}

/// The scheme of `s` (`mailto` in `mailto:x`), if it starts with one.
fn scheme_of(s: &str) -> Option<&str> {
    let colon = s.find(':')?;
    let scheme = &s[..colon];
    let ok = scheme.starts_with(|c: char| c.is_ascii_alphabetic())
        && scheme.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'-' | b'.'));
    ok.then_some(scheme)
}

/// Normalise an absolute (merged) path into a canonical site path.
fn local(path: &str, suffix: &str) -> Resolved {
    match normalise_path(path) {
        Ok(path) => Resolved::Local { path, suffix: suffix.to_string() },
        Err(why) => Resolved::Unusable(why),
    }
}

/// `/a/./b/../c%41` → `/a/cA`: dot segments removed (refusing to climb above the root),
/// each segment canonically encoded; an empty segment is allowed only at the end (`/dir/`).
pub(crate) fn normalise_path(path: &str) -> Result<String, Unusable> {
    let Some(body) = path.strip_prefix('/') else { return Err(Unusable::BadByte) };
    let segments: Vec<&str> = body.split('/').collect();
    let last = segments.len() - 1;
    let mut out: Vec<String> = Vec::new();
    let mut trailing_slash = false;
    for (i, seg) in segments.iter().enumerate() {
        trailing_slash = false;
        match *seg {
            "." => trailing_slash = i == last,
            ".." => {
                out.pop().ok_or(Unusable::EscapesRoot)?;
                trailing_slash = i == last;
            }
            "" if i == last => trailing_slash = true,
            "" => return Err(Unusable::BadByte),
            s => out.push(canonical_segment(s)?),
        }
    }
    let mut result = String::with_capacity(path.len());
    for s in &out {
        result.push('/');
        result.push_str(s);
    }
    if trailing_slash || result.is_empty() {
        result.push('/');
    }
    Ok(result)
}

/// One path segment, percent-decoded and re-encoded the way the document tree names files
/// (controls, non-ASCII and `` "#%<>?`{}\^|/`` and space encoded, upper-case hex).
pub(crate) fn canonical_segment(raw: &str) -> Result<String, Unusable> {
    let bytes = raw.as_bytes();
    let mut decoded = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if b < 0x20 || b == 0x7f || b == b'\\' {
            return Err(Unusable::BadByte);
        }
        if b == b'%' {
            let hex = bytes.get(i + 1..i + 3).ok_or(Unusable::BadEscape)?;
            // Two hex digits, checked first: `from_str_radix` alone also takes a sign (`%+f`).
            if !hex.iter().all(u8::is_ascii_hexdigit) {
                return Err(Unusable::BadEscape);
            }
            let hex = std::str::from_utf8(hex).map_err(|_| Unusable::BadEscape)?;
            let v = u8::from_str_radix(hex, 16).map_err(|_| Unusable::BadEscape)?;
            if v == 0 || v == b'/' || v == b'\\' {
                return Err(Unusable::BadByte);
            }
            decoded.push(v);
            i += 3;
        } else {
            decoded.push(b);
            i += 1;
        }
    }
    if decoded == b"." || decoded == b".." {
        return Err(Unusable::EscapesRoot);
    }
    if std::str::from_utf8(&decoded).is_err() {
        return Err(Unusable::BadEscape);
    }
    let mut out = String::with_capacity(decoded.len() + 8);
    for b in decoded {
        if !(0x20..0x7f).contains(&b) || b" \"#%<>?`{}\\^|/".contains(&b) {
            out.push_str(&format!("%{b:02X}"));
        } else {
            out.push(char::from(b));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOME: &str = "10.0.0.2:8080";

    fn local(path: &str, suffix: &str) -> Resolved {
        Resolved::Local { path: path.into(), suffix: suffix.into() }
    }

    fn r(reference: &str) -> Resolved {
        resolve_reference(reference, "/a/b/page.html", None, HOME)
    }

    #[test]
    fn relative_and_absolute_paths_resolve_against_the_page_directory() {
        assert_eq!(r("c.gif"), local("/a/b/c.gif", ""));
        assert_eq!(r("../x/y.gif?q=1#f"), local("/a/x/y.gif", "?q=1#f"));
        assert_eq!(r("/top.html"), local("/top.html", ""));
        assert_eq!(r("./"), local("/a/b/", ""));
        assert_eq!(r("sub/.."), local("/a/b/", ""));
        assert_eq!(r("?only=query"), local("/a/b/page.html", "?only=query"));
        assert_eq!(r("  c.gif\n"), local("/a/b/c.gif", ""));
        assert_eq!(r("c\n.gif"), local("/a/b/c.gif", ""));
        assert_eq!(r("d#x?y"), local("/a/b/d", "#x?y"));
        assert_eq!(resolve_reference("x.html", "/index.html", None, HOME), local("/x.html", ""));
    }

    #[test]
    fn encodings_are_made_canonical_like_document_tree_targets() {
        assert_eq!(r("my%20file.html"), local("/a/b/my%20file.html", ""));
        assert_eq!(r("my file.html"), local("/a/b/my%20file.html", ""));
        assert_eq!(r("caf%c3%a9.html"), local("/a/b/caf%C3%A9.html", ""));
        assert_eq!(r("café.html"), local("/a/b/caf%C3%A9.html", ""));
        assert_eq!(r("%41.html"), local("/a/b/A.html", ""));
        assert_eq!(r("a%3fb.gif"), local("/a/b/a%3Fb.gif", ""));
        assert_eq!(r("x&y.gif"), local("/a/b/x&y.gif", ""));
    }

    #[test]
    fn foreign_schemes_and_hosts_are_external() {
        for e in ["mailto:x@y", "javascript:void(0)", "data:image/gif;base64,AA", "https://10.0.0.2:8080/x"] {
            assert_eq!(r(e), Resolved::External, "{e}");
        }
        assert_eq!(r("http://example.com/x.html"), Resolved::External);
        assert_eq!(r("//cdn.example/x.js"), Resolved::External);
        assert_eq!(r("http://10.0.0.2/x.html"), Resolved::External, "port 80 is not 8080");
        assert_eq!(r("http://user@10.0.0.2:8080/x"), Resolved::External);
    }

    #[test]
    fn own_authority_is_local_case_insensitively_with_default_port_80() {
        assert_eq!(r("HTTP://10.0.0.2:8080/x/../y.html?q"), local("/y.html", "?q"));
        assert_eq!(r("//10.0.0.2:8080/z"), local("/z", ""));
        assert_eq!(r("http://10.0.0.2:8080"), local("/", ""));
        let home80 = |reference| resolve_reference(reference, "/p.html", None, "WWW.Example.org");
        assert_eq!(home80("http://www.example.ORG:80/a"), local("/a", ""));
        assert_eq!(home80("http://www.example.org:/a"), local("/a", ""));
        assert_eq!(home80("http://www.example.org:81/a"), Resolved::External);
        assert!(same_authority("[::1]:80", "[::1]"));
        assert!(!same_authority("[::1]:x", "[::1]"));
    }

    #[test]
    fn escapes_and_bad_bytes_are_unusable() {
        assert_eq!(r("../../../etc/passwd"), Resolved::Unusable(Unusable::EscapesRoot));
        assert_eq!(r("%2e%2e/x"), Resolved::Unusable(Unusable::EscapesRoot));
        assert_eq!(r("a%2Fb"), Resolved::Unusable(Unusable::BadByte));
        assert_eq!(r("a\\b"), Resolved::Unusable(Unusable::BadByte));
        assert_eq!(r("a\0b"), Resolved::Unusable(Unusable::BadByte));
        assert_eq!(r("a//b"), Resolved::Unusable(Unusable::BadByte));
        assert_eq!(r("a%zz"), Resolved::Unusable(Unusable::BadEscape));
        assert_eq!(r("a%ff"), Resolved::Unusable(Unusable::BadEscape));
        assert_eq!(r(""), Resolved::Unusable(Unusable::Empty));
        assert_eq!(r("  "), Resolved::Unusable(Unusable::Empty));
        assert_eq!(r("#top"), Resolved::Unusable(Unusable::FragmentOnly));
        assert_eq!(r("http:x.html"), Resolved::Unusable(Unusable::BadAuthority));
        assert_eq!(r("http:///x.html"), Resolved::Unusable(Unusable::BadAuthority));
    }

    #[test]
    fn base_href_replaces_the_page_as_base() {
        let with = |base, reference| resolve_reference(reference, "/a/page.html", Some(base), HOME);
        assert_eq!(with("/docs/", "x.gif"), local("/docs/x.gif", ""));
        assert_eq!(with("/docs/index.html", "x.gif"), local("/docs/x.gif", ""));
        assert_eq!(with("sub/", "x.gif"), local("/a/sub/x.gif", ""));
        assert_eq!(with("http://10.0.0.2:8080/d/", "x.gif"), local("/d/x.gif", ""));
        assert_eq!(with("http://other/d/", "x.gif"), Resolved::External);
        assert_eq!(with("http://other/d/", "/x.gif"), Resolved::External);
        assert_eq!(with("http://other/d/", "http://10.0.0.2:8080/x.gif"), local("/x.gif", ""));
        assert_eq!(with("../../..", "x.gif"), Resolved::Unusable(Unusable::BadBase));
        assert_eq!(with("", "x.gif"), local("/a/x.gif", ""));
    }

    /// The cases the trace surfer's own resolver used to answer (it clamped `..` at the root,
    /// as RFC 3986 does; the node and the live surfer refuse such a reference, so now all do).
    #[test]
    fn surfer_references_resolve_or_are_left_alone() {
        let at = |page, reference| resolve_reference(reference, page, None, HOME);
        assert_eq!(at("/a/b/page.html", "c.html"), local("/a/b/c.html", ""));
        assert_eq!(at("/a/b/page.html", "../x/y.gif?q#f"), local("/a/x/y.gif", "?q#f"));
        assert_eq!(at("/a/page.html", "../../../../etc/passwd"), Resolved::Unusable(Unusable::EscapesRoot));
        assert_eq!(at("/a/page.html", "/top.html"), local("/top.html", ""));
        assert_eq!(at("/a/page.html", "./"), local("/a/", ""));
        assert_eq!(at("/a/page.html", "sub/.."), local("/a/", ""));
        assert_eq!(at("/a/page.html", "my%20file.html"), local("/a/my%20file.html", ""));
        assert_eq!(at("/page.html", "http://example.com/x.html"), Resolved::External);
        assert_eq!(at("/page.html", "mailto:x@y"), Resolved::External);
        assert_eq!(at("/page.html", "//cdn.example/x.js"), Resolved::External);
        assert_eq!(at("/page.html", "#top"), Resolved::Unusable(Unusable::FragmentOnly));
        assert_eq!(at("/page.html", "javascript:void(0)"), Resolved::External);
    }

    fn on_https(reference: &str, home: &str) -> Resolved {
        PageBase::with_scheme(Scheme::Https, "/a/page.html", None, home).resolve(reference)
    }

    #[test]
    fn an_https_link_to_the_home_is_local_on_an_https_site() {
        assert_eq!(on_https("https://10.0.0.2:8080/x/../y.html?q", HOME), local("/y.html", "?q"));
        assert_eq!(on_https("HTTPS://10.0.0.2:8080/z", HOME), local("/z", ""));
        assert_eq!(on_https("//10.0.0.2:8080/z", HOME), local("/z", ""));
        assert_eq!(on_https("b.gif", HOME), local("/a/b.gif", ""));
        assert_eq!(on_https("https://example.org/x", "EXAMPLE.org:443"), local("/x", ""));
        assert_eq!(on_https("https://example.org:443/x", "example.org"), local("/x", ""));
    }

    #[test]
    fn an_http_link_to_the_home_is_local_on_an_https_site_and_not_the_reverse() {
        assert_eq!(on_https("http://10.0.0.2:8080/x", HOME), local("/x", ""));
        assert_eq!(on_https("Http://example.org/x", "example.org"), local("/x", ""));
        assert_eq!(r("https://10.0.0.2:8080/x"), Resolved::External);
        assert_eq!(r("HTTPS://10.0.0.2:8080/x"), Resolved::External);
    }

    #[test]
    fn an_authority_without_a_port_means_the_sites_default_port() {
        assert_eq!(on_https("https://example.org:80/x", "example.org"), Resolved::External);
        assert_eq!(on_https("http://example.org:80/x", "example.org"), Resolved::External);
        assert_eq!(on_https("https://example.org/x", "example.org:80"), Resolved::External);
        assert_eq!(on_https("https://10.0.0.2/x", HOME), Resolved::External);
        assert_eq!(on_https("https://other:8080/x", HOME), Resolved::External);
        assert!(same_authority("h", "h:80") && !same_authority("h", "h:443"));
    }

    #[test]
    fn other_schemes_stay_external_on_an_https_site() {
        for e in ["mailto:x@y", "ftp://10.0.0.2:8080/x", "javascript:void(0)", "httpx://10.0.0.2:8080/"] {
            assert_eq!(on_https(e, HOME), Resolved::External, "{e}");
        }
        assert_eq!(on_https("https:x.html", HOME), Resolved::Unusable(Unusable::BadAuthority));
    }

    #[test]
    fn an_https_base_to_the_home_is_local_on_an_https_site() {
        let with =
            |scheme, base| PageBase::with_scheme(scheme, "/a/page.html", Some(base), HOME).resolve("x.gif");
        assert_eq!(with(Scheme::Https, "https://10.0.0.2:8080/d/"), local("/d/x.gif", ""));
        assert_eq!(with(Scheme::Https, "http://10.0.0.2:8080/d/"), local("/d/x.gif", ""));
        assert_eq!(with(Scheme::Http, "https://10.0.0.2:8080/d/"), Resolved::External);
    }

    #[test]
    fn names_authority_tells_absolute_from_relative() {
        assert!(names_authority("http://h/x"));
        assert!(names_authority(" //h/x"));
        assert!(names_authority("mailto:x"));
        assert!(!names_authority("/x"));
        assert!(!names_authority("x?a=b:c"));
    }
}
