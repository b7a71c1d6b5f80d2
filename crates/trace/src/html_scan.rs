//! `HtmlReferences::scan`: a small, tolerant scanner that finds the links (`<a href>`) and
//! embedded objects (`<img src>`, `<link rel=stylesheet href>`, `<script src>`, frames, …) of
//! an HTML page, and `resolve_reference`, which turns one into a site path.

// Hand-written on purpose: the workspace has no HTML parser, and a full HTML5 tree builder
// would be a large dependency for what surfing needs — the `href`/`src` attributes of a
// handful of tags. The scanner skips comments, `<!...>`/`<?...>` declarations and the bodies
// of `<script>` and `<style>`, reads quoted, single-quoted and bare attribute values, decodes
// the common character references, and never fails: malformed markup just yields fewer URLs.

/// The URLs a page refers to, in document order, as written (not yet resolved).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HtmlReferences {
    /// Hyperlinks a surfer can follow (`<a href>`, `<area href>`).
    pub links: Vec<String>,
    /// Objects a browser fetches with the page (images, style sheets, scripts, frames, …).
    pub embeds: Vec<String>,
    /// The first `<base href>`, if any.
    pub base: Option<String>,
}

impl HtmlReferences {
    /// Scan a page.
    pub fn scan(html: &[u8]) -> HtmlReferences {
        let mut refs = HtmlReferences::default();
        let mut i = 0;
        while let Some(off) = html[i..].iter().position(|&b| b == b'<') {
            let start = i + off + 1;
            let rest = &html[start..];
            if rest.starts_with(b"!--") {
                i = match find(html, start + 3, b"-->") {
                    Some(end) => end + 3,
                    None => break,
                };
                continue;
            }
            if matches!(rest.first(), Some(b'!' | b'?' | b'/')) {
                i = match html[start..].iter().position(|&b| b == b'>') {
                    Some(end) => start + end + 1,
                    None => break,
                };
                continue;
            }
            let name_len = rest.iter().take_while(|b| b.is_ascii_alphanumeric()).count();
            if name_len == 0 {
                i = start;
                continue;
            }
            let name = rest[..name_len].to_ascii_lowercase();
            let (attributes, end, closed) = parse_attributes(html, start + name_len);
            if !closed {
                // A tag cut off by the end of the page is no tag.
                break;
            }
            refs.note_tag(&name, &attributes);
            i = end;
            if name == b"script" || name == b"style" {
                let closing: &[u8] = if name == b"script" { b"</script" } else { b"</style" };
                i = match find_ascii_case_insensitive(html, i, closing) {
                    Some(pos) => pos,
                    None => break,
                };
            }
        }
        refs
    }

    fn note_tag(&mut self, name: &[u8], attributes: &[(Vec<u8>, String)]) {
        let attr = |wanted: &[u8]| attributes.iter().find(|(n, _)| n == wanted).map(|(_, v)| v.clone());
        let mut embed = |v: Option<String>| {
            if let Some(v) = v.filter(|v| !v.trim().is_empty()) {
                self.embeds.push(v);
            }
        };
        match name {
            b"a" | b"area" => {
                if let Some(v) = attr(b"href").filter(|v| !v.trim().is_empty()) {
                    self.links.push(v);
                }
            }
            b"link" => {
                let rel = attr(b"rel").unwrap_or_default().to_ascii_lowercase();
                if rel.split_ascii_whitespace().any(|t| t == "stylesheet" || t == "icon") {
                    embed(attr(b"href"));
                }
            }
            b"img" | b"script" | b"embed" | b"iframe" | b"frame" | b"source" | b"audio" | b"video" => {
                embed(attr(b"src"))
            }
            b"input" if attr(b"type").is_some_and(|t| t.eq_ignore_ascii_case("image")) => embed(attr(b"src")),
            b"object" => embed(attr(b"data")),
            b"body" | b"table" | b"td" | b"th" => embed(attr(b"background")),
            b"base" if self.base.is_none() => self.base = attr(b"href"),
            _ => {}
        }
    }
}

fn find(hay: &[u8], from: usize, needle: &[u8]) -> Option<usize> {
    hay.get(from..)?.windows(needle.len()).position(|w| w == needle).map(|p| p + from)
}

fn find_ascii_case_insensitive(hay: &[u8], from: usize, needle: &[u8]) -> Option<usize> {
    hay.get(from..)?.windows(needle.len()).position(|w| w.eq_ignore_ascii_case(needle)).map(|p| p + from)
}

/// Attributes of a tag from `pos` (just after its name) to its `>`; also where scanning goes
/// on, and whether the `>` was found.
fn parse_attributes(html: &[u8], mut pos: usize) -> (Vec<(Vec<u8>, String)>, usize, bool) {
    let mut attributes = Vec::new();
    let n = html.len();
    loop {
        while pos < n && (html[pos].is_ascii_whitespace() || html[pos] == b'/') {
            pos += 1;
        }
        if pos >= n {
            return (attributes, n, false);
        }
        if html[pos] == b'>' {
            return (attributes, pos + 1, true);
        }
        let name_start = pos;
        while pos < n && !html[pos].is_ascii_whitespace() && !matches!(html[pos], b'=' | b'>' | b'/') {
            pos += 1;
        }
        let name = html[name_start..pos].to_ascii_lowercase();
        while pos < n && html[pos].is_ascii_whitespace() {
            pos += 1;
        }
        let mut value = Vec::new();
        if pos < n && html[pos] == b'=' {
            pos += 1;
            while pos < n && html[pos].is_ascii_whitespace() {
                pos += 1;
            }
            if pos < n && (html[pos] == b'"' || html[pos] == b'\'') {
                let quote = html[pos];
                let end = html[pos + 1..].iter().position(|&b| b == quote).map_or(n, |e| pos + 1 + e);
                value.extend_from_slice(&html[pos + 1..end]);
                pos = (end + 1).min(n);
            } else {
                let start = pos;
                while pos < n && !html[pos].is_ascii_whitespace() && html[pos] != b'>' {
                    pos += 1;
                }
                value.extend_from_slice(&html[start..pos]);
            }
        }
        if name.is_empty() {
            // A stray `=` or similar: step over it so the loop always advances.
            pos += 1;
            continue;
        }
        attributes.push((name, decode_character_references(&String::from_utf8_lossy(&value))));
    }
}

/// Decode `&amp;`, `&quot;`, `&apos;`, `&lt;`, `&gt;` and numeric references; leave others.
fn decode_character_references(s: &str) -> String {
    if !s.contains('&') {
        return s.to_string();
    }
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(amp) = rest.find('&') {
        out.push_str(&rest[..amp]);
        rest = &rest[amp..];
        let end = rest.find(';').filter(|&e| e <= 10);
        let decoded = end.and_then(|e| {
            let entity = &rest[1..e];
            let c = match entity {
                "amp" => Some('&'),
                "quot" => Some('"'),
                "apos" => Some('\''),
                "lt" => Some('<'),
                "gt" => Some('>'),
                _ if entity.starts_with("#x") || entity.starts_with("#X") => {
                    u32::from_str_radix(&entity[2..], 16).ok().and_then(char::from_u32)
                }
                _ if entity.starts_with('#') => entity[1..].parse().ok().and_then(char::from_u32),
                _ => None,
            };
            c.map(|c| (c, e + 1))
        });
        match decoded {
            Some((c, len)) => {
                out.push(c);
                rest = &rest[len..];
            }
            None => {
                out.push('&');
                rest = &rest[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// Resolve `reference` (as written in a page) against the target of the page (or its base),
/// giving a decoded absolute path (`/dir/a b.html`), or `None` for references that cannot
/// name a file of the site: other schemes (`http:`, `mailto:`, `javascript:`, …),
/// network-path references (`//host/…`), or fragment-only references. Query and fragment
/// are dropped; `..` above the root stops at the root (RFC 3986 §5.2.4).
pub fn resolve_reference(base_target: &str, reference: &str) -> Option<String> {
    let reference: String = reference.trim().chars().filter(|c| !matches!(c, '\t' | '\n' | '\r')).collect();
    let path = reference.split(['#', '?']).next().unwrap_or_default();
    if path.is_empty() || path.starts_with("//") || has_scheme(path) {
        return None;
    }
    let merged = if path.starts_with('/') {
        path.to_string()
    } else {
        let base = base_target.split(['#', '?']).next().unwrap_or("/");
        let dir = &base[..base.rfind('/').map_or(0, |i| i + 1)];
        let dir = if dir.is_empty() { "/" } else { dir };
        format!("{dir}{path}")
    };
    let normal = remove_dot_segments(&merged);
    crate::document_tree::decode_path(&normal)
}

fn has_scheme(s: &str) -> bool {
    match s.find(':') {
        Some(colon) => {
            let scheme = &s[..colon];
            !scheme.is_empty()
                && scheme.starts_with(|c: char| c.is_ascii_alphabetic())
                && scheme.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
                && !scheme.contains('/')
        }
        None => false,
    }
}

/// RFC 3986 §5.2.4 on an absolute path.
fn remove_dot_segments(path: &str) -> String {
    let mut out: Vec<&str> = Vec::new();
    let segments: Vec<&str> = path.split('/').skip(1).collect();
    let last = segments.len().saturating_sub(1);
    let mut trailing_slash = false;
    for (i, seg) in segments.iter().enumerate() {
        match *seg {
            "." => trailing_slash = i == last,
            ".." => {
                out.pop();
                trailing_slash = i == last;
            }
            s => {
                out.push(s);
                trailing_slash = false;
            }
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
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scan_finds_links_and_embeds_in_tolerant_markup() {
        let html = br#"<!DOCTYPE html><HTML><head>
            <link rel="stylesheet" href="css/a.css"><link rel=alternate href="feed.xml">
            <LINK REL="shortcut icon" HREF='/favicon.ico'>
            <script src="js/x.js">var s = "<a href='not-a-link.html'>";</script>
            <style>a { background: url(<img src="nope.gif">) }</style>
            <base href="/docs/">
            </head><body background=bg.gif>
            <!-- <a href="commented.html"> -->
            <a href="p1.html?x=1#top">one</a> <a class=x href=p2.html>two</a>
            <img alt="x > y" src="i&amp;j.gif"><img src=''><a name="anchor">
            <IFRAME SRC="frame.html"></iframe><input type="image" src="btn.png"><input src="no.png">
            <object data="movie.swf"></object><a href="broken
        "#;
        let refs = HtmlReferences::scan(html);
        assert_eq!(refs.links, ["p1.html?x=1#top", "p2.html"]);
        assert_eq!(
            refs.embeds,
            [
                "css/a.css",
                "/favicon.ico",
                "js/x.js",
                "bg.gif",
                "i&j.gif",
                "frame.html",
                "btn.png",
                "movie.swf"
            ]
        );
        assert_eq!(refs.base.as_deref(), Some("/docs/"));
    }

    #[test]
    fn scan_never_panics_on_truncated_markup() {
        for html in [
            &b"<"[..],
            b"<a",
            b"<a href",
            b"<a href=",
            b"<a href='x",
            b"<!--",
            b"<script>",
            b"<!DOCTYPE",
            b"<a =x>",
        ] {
            let _ = HtmlReferences::scan(html);
        }
    }

    #[test]
    fn resolve_handles_relative_absolute_dot_segments_and_foreign_schemes() {
        assert_eq!(resolve_reference("/a/b/page.html", "c.html").as_deref(), Some("/a/b/c.html"));
        assert_eq!(resolve_reference("/a/b/page.html", "../x/y.gif?q#f").as_deref(), Some("/a/x/y.gif"));
        assert_eq!(
            resolve_reference("/a/page.html", "../../../../etc/passwd").as_deref(),
            Some("/etc/passwd")
        );
        assert_eq!(resolve_reference("/a/page.html", "/top.html").as_deref(), Some("/top.html"));
        assert_eq!(resolve_reference("/a/page.html", "./").as_deref(), Some("/a/"));
        assert_eq!(resolve_reference("/a/page.html", "sub/..").as_deref(), Some("/a/"));
        assert_eq!(resolve_reference("/a/page.html", "my%20file.html").as_deref(), Some("/a/my file.html"));
        assert_eq!(resolve_reference("/page.html", "http://example.com/x.html"), None);
        assert_eq!(resolve_reference("/page.html", "mailto:x@y"), None);
        assert_eq!(resolve_reference("/page.html", "//cdn.example/x.js"), None);
        assert_eq!(resolve_reference("/page.html", "#top"), None);
        assert_eq!(resolve_reference("/page.html", "javascript:void(0)"), None);
    }
}
