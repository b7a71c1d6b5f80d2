//! `read_page`: the links and embedded objects of one HTML page, read the way the node and the
//! load generator read them (`locus_dc::html_links::scan_page`) and resolved to the site's
//! request targets the way they resolve them (`locus_dc::site_path::PageBase`), for the
//! surfer's site graph and the site generators' checks.

use locus_dc::html_links::{HtmlError, PageLinks, SlotKind, scan_page};
use locus_dc::site_path::{PageBase, Resolved, Unusable};

/// A directory of pages is reached at no host: every reference that names one is foreign.
const NO_AUTHORITY: &str = "";

/// The references of one page, resolved against its target or its `<base href>`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct ResolvedReferences {
    /// Targets of its hyperlinks (`<a href>`, `<area href>`), in document order, repeats kept;
    /// canonical request targets without query or fragment.
    pub(crate) links: Vec<String>,
    /// Targets of the objects fetched with it (images, style sheets, scripts, frames, …).
    pub(crate) embeds: Vec<String>,
    /// References not followed: other schemes or hosts, fragment-only ones, and ones that
    /// cannot name a file of the site (`..` above the root, bad escapes). Empty ones are
    /// not counted.
    pub(crate) foreign: u64,
}

/// Read the page at `page_target` (a canonical request target such as `/dir/a%20b.html`).
pub(crate) fn read_page(page_target: &str, html: &[u8]) -> ResolvedReferences {
    let links = scan(html);
    let base = PageBase::new(page_target, links.base.as_ref().map(|b| b.value.as_str()), NO_AUTHORITY);
    let mut refs = ResolvedReferences::default();
    for slot in &links.slots {
        match base.resolve(&slot.value) {
            Resolved::Local { path, .. } => match slot.kind {
                SlotKind::Link => refs.links.push(path),
                SlotKind::Embed => refs.embeds.push(path),
            },
            Resolved::Unusable(Unusable::Empty) => {}
            Resolved::External | Resolved::Unusable(_) => refs.foreign += 1,
        }
    }
    refs
}

/// The page's slots. A page that is not UTF-8 (Latin-1 is common on old sites, and a page
/// cut at the read limit may end inside a character) is read through its lossy decoding:
/// its markup and ASCII links read the same.
fn scan(html: &[u8]) -> PageLinks {
    match scan_page(html) {
        Ok(links) => links,
        Err(HtmlError::NotUtf8 { .. }) => {
            scan_page(String::from_utf8_lossy(html).as_bytes()).unwrap_or_default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tolerant_page_gives_resolved_links_and_embeds_and_counts_what_is_not_followed() {
        let html = br##"<!DOCTYPE html><HTML><head>
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
            <object data="movie.swf"></object><a href="mailto:x@y">m</a><a href="#top">t</a>
            <a href="../../up.html">u</a><a href="broken
        "##;
        let refs = read_page("/site/page.html", html);
        assert_eq!(refs.links, ["/docs/p1.html", "/docs/p2.html"]);
        let embeds = ["css/a.css", "/favicon.ico", "js/x.js", "bg.gif", "i&j.gif", "frame.html", "btn.png"]
            .map(|e| if e.starts_with('/') { e.to_string() } else { format!("/docs/{e}") });
        assert_eq!(refs.embeds[..7], embeds);
        assert_eq!(refs.embeds[7], "/docs/movie.swf");
        assert_eq!(refs.foreign, 3, "mailto, fragment-only and above the root; the empty src is not counted");
    }

    #[test]
    fn a_page_that_is_not_utf8_is_read_through_its_lossy_decoding() {
        let refs = read_page("/p.html", b"<p>caf\xe9</p><a href=\"next.html\">n\xe4chste</a><img src=i.gif>");
        assert_eq!((refs.links, refs.embeds), (vec!["/next.html".to_string()], vec!["/i.gif".to_string()]));
    }

    #[test]
    fn names_are_made_canonical_like_the_document_tree_targets() {
        let refs =
            read_page("/a%20b/p.html", b"<a href='my file.html'><a href='caf%c3%a9.html'><a href=../x/>");
        assert_eq!(refs.links, ["/a%20b/my%20file.html", "/a%20b/caf%C3%A9.html", "/x/"]);
    }
}
