//! `scan_page`: one html5gum pass over a page that records where its link and embed values are
//! (byte ranges of the attribute *values*, with the decoded value), its first `<base href>`
//! and where a `<base>` could be inserted, so the page can later be rewritten by splicing
//! bytes without parsing it again. The workspace's one HTML link reader: the node, the load
//! generator's live surfer and the trace surfer all read pages with it.

use std::ops::Range;

use html5gum::{DefaultEmitter, Span, Spanned, StartTag, Token, Tokenizer};

/// What following a slot means to a browser.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SlotKind {
    /// A hyperlink the user may follow (`<a href>`, `<area href>`).
    Link,
    /// An object fetched with the page: `src` of `img`, `script`, `frame`, `iframe`, `embed`,
    /// `source`, `audio`, `video` and `<input type=image>`; `<link rel=stylesheet|icon href>`;
    /// `<object data>`; `background` of `body`, `table`, `td` and `th`.
    Embed,
}

/// How an attribute value is delimited in the source.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Quote {
    /// `attr="value"`
    Double,
    /// `attr='value'`
    Single,
    /// `attr=value`
    Unquoted,
}

/// One link or embed attribute value of a page.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LinkSlot {
    /// Byte range of the value in the page (inside the quotes, if any).
    pub range: Range<usize>,
    /// How the value is quoted.
    pub quote: Quote,
    /// The value with character references decoded.
    pub value: String,
    /// Link or embed.
    pub kind: SlotKind,
}

/// The page's first `<base href>`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BaseHref {
    /// Its decoded value.
    pub value: String,
    /// Where its value is and how it is quoted, unless it could not be located exactly.
    pub located: Option<(Range<usize>, Quote)>,
}

/// What `scan_page` found in a page.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PageLinks {
    /// Link and embed values in document order.
    pub slots: Vec<LinkSlot>,
    /// The first `<base href>`, if any.
    pub base: Option<BaseHref>,
    /// Where a `<base>` tag goes: right after the first `<head …>` start tag, else after the
    /// first `<html …>`, else after the doctype, else 0.
    pub head_insert: usize,
    /// Link or embed values whose exact byte range could not be confirmed (served verbatim).
    pub dropped: usize,
}

/// Why a page cannot be scanned (the caller then serves it unmodified).
#[derive(Clone, Debug, thiserror::Error, PartialEq, Eq)]
pub enum HtmlError {
    /// The page is not UTF-8.
    #[error("page is not UTF-8 (invalid byte at offset {valid_up_to})")]
    NotUtf8 {
        /// Length of the valid prefix.
        valid_up_to: usize,
    },
}

/// Scan a page for its link and embed slots, BASE and head insertion point.
pub fn scan_page(html: &[u8]) -> Result<PageLinks, HtmlError> {
    let text = std::str::from_utf8(html).map_err(|e| HtmlError::NotUtf8 { valid_up_to: e.valid_up_to() })?;
    let mut emitter = DefaultEmitter::<usize>::new_with_span();
    emitter.naively_switch_states(true);
    let mut scan = Scan { text, links: PageLinks::default(), head: None, html: None, doctype: None };
    for token in Tokenizer::new_with_emitter(text, emitter) {
        let Ok(token) = token;
        match token {
            Token::StartTag(tag) => scan.start_tag(&tag),
            Token::Doctype(d) if scan.doctype.is_none() => scan.doctype = scan.tag_end(d.span),
            _ => {}
        }
    }
    let mut links = scan.links;
    links.head_insert = scan.head.or(scan.html).or(scan.doctype).unwrap_or(0);
    Ok(links)
}

struct Scan<'a> {
    text: &'a str,
    links: PageLinks,
    head: Option<usize>,
    html: Option<usize>,
    doctype: Option<usize>,
}

impl Scan<'_> {
    fn start_tag(&mut self, tag: &StartTag<usize>) {
        let attr =
            |name: &str| tag.attributes.get(name.as_bytes()).map(|v| String::from_utf8_lossy(&v.value));
        match &tag.name[..] {
            b"a" | b"area" => self.slot(tag, "href", SlotKind::Link),
            b"link" => {
                let rel = attr("rel").unwrap_or_default();
                let wanted = |t: &str| t.eq_ignore_ascii_case("stylesheet") || t.eq_ignore_ascii_case("icon");
                if rel.split_ascii_whitespace().any(wanted) {
                    self.slot(tag, "href", SlotKind::Embed);
                }
            }
            b"img" | b"script" | b"frame" | b"iframe" | b"embed" | b"source" | b"audio" | b"video" => {
                self.slot(tag, "src", SlotKind::Embed)
            }
            b"input" if attr("type").is_some_and(|t| t.trim().eq_ignore_ascii_case("image")) => {
                self.slot(tag, "src", SlotKind::Embed)
            }
            b"object" => self.slot(tag, "data", SlotKind::Embed),
            b"body" | b"table" | b"td" | b"th" => self.slot(tag, "background", SlotKind::Embed),
            b"base" if self.links.base.is_none() => {
                if let Some(value) = tag.attributes.get(&b"href"[..]) {
                    let located = self.locate(tag, "href", value);
                    let value = String::from_utf8_lossy(&value.value).into_owned();
                    self.links.base = Some(BaseHref { value, located });
                }
            }
            b"head" if self.head.is_none() => self.head = self.tag_end(tag.span),
            b"html" if self.html.is_none() => self.html = self.tag_end(tag.span),
            _ => {}
        }
    }

    /// The end of a token, if its span plausibly ends at its `>`.
    fn tag_end(&self, span: Span<usize>) -> Option<usize> {
        let end = span.end;
        (end > 0 && self.text.as_bytes().get(end - 1) == Some(&b'>')).then_some(end)
    }

    fn slot(&mut self, tag: &StartTag<usize>, name: &str, kind: SlotKind) {
        let Some(value) = tag.attributes.get(name.as_bytes()) else { return };
        match (self.locate(tag, name, value), String::from_utf8(value.value.to_vec())) {
            (Some((range, quote)), Ok(decoded)) => {
                self.links.slots.push(LinkSlot { range, quote, value: decoded, kind })
            }
            _ => self.links.dropped += 1,
        }
    }

    /// The byte range of attribute `name`'s value, found by scanning from the attribute's
    /// span start (its name) within the tag, and confirmed against html5gum's decoded value.
    fn locate(
        &self,
        tag: &StartTag<usize>,
        name: &str,
        value: &Spanned<html5gum::HtmlString, usize>,
    ) -> Option<(Range<usize>, Quote)> {
        let bytes = self.text.as_bytes();
        let tag_end = tag.span.end.min(bytes.len());
        let start = value.span.start;
        let mut pos = start.checked_add(name.len())?;
        if pos > tag_end || !bytes.get(start..pos)?.eq_ignore_ascii_case(name.as_bytes()) {
            return None;
        }
        let skip_space = |mut p: usize| {
            while p < tag_end && bytes[p].is_ascii_whitespace() {
                p += 1;
            }
            p
        };
        pos = skip_space(pos);
        if bytes.get(pos) != Some(&b'=') || pos >= tag_end {
            return None;
        }
        pos = skip_space(pos + 1);
        let inside = bytes.get(pos..tag_end)?;
        let (range, quote) = match inside.first() {
            Some(&q @ (b'"' | b'\'')) => {
                let len = inside[1..].iter().position(|&b| b == q)?;
                let quote = if q == b'"' { Quote::Double } else { Quote::Single };
                (pos + 1..pos + 1 + len, quote)
            }
            _ => {
                let len =
                    inside.iter().position(|&b| b.is_ascii_whitespace() || b == b'>').unwrap_or(inside.len());
                (pos..pos + len, Quote::Unquoted)
            }
        };
        let raw = self.text.get(range.clone())?;
        if !raw.contains('&') && raw.as_bytes() != &value.value[..] {
            return None;
        }
        Some((range, quote))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn values(links: &PageLinks) -> Vec<(&str, SlotKind)> {
        links.slots.iter().map(|s| (s.value.as_str(), s.kind)).collect()
    }

    /// Every slot's range, read from the page, is its value as written (decoded = raw when
    /// the raw text holds no `&`).
    fn assert_ranges_hold_values(html: &[u8], links: &PageLinks) {
        for s in &links.slots {
            let raw = std::str::from_utf8(&html[s.range.clone()]).unwrap();
            if !raw.contains('&') {
                assert_eq!(raw, s.value);
            }
        }
    }

    const PAGE: &str = r#"<!DOCTYPE html>
<HTML lang=en><HEAD id=h>
<link rel="stylesheet" href="css/a.css"><link rel=alternate href="feed.xml">
<LINK REL="shortcut icon" HREF='/favicon.ico'>
<script src="js/x.js">var s = "<a href='not-a-link.html'>";</script>
<style>a { background: url(<img src="nope.gif">) }</style>
</head><body background=bg.gif>
<!-- <a href="commented.html"> -->
<a href="p1.html?x=1#top">one</a> <A CLASS=x HREF=p2.html>two</A>
<img alt="x > y" src="i&amp;j.gif"><img src=''><a name="anchor">
<IFRAME SRC="frame.html"></iframe><input type="image" src="btn.png"><input src="no.png">
<object data="movie.swf"></object><a
  href
  =
  "spread.html"
>s</a><area href = 'map.html'><embed src=e.swf><frame src=f.html>
<a href="mailto:x@y">m</a><a href="http://other/x">o</a>
"#;

    #[test]
    fn scan_finds_links_and_embeds_in_tolerant_markup_with_exact_ranges() {
        let links = scan_page(PAGE.as_bytes()).unwrap();
        use SlotKind::*;
        assert_eq!(
            values(&links),
            [
                ("css/a.css", Embed),
                ("/favicon.ico", Embed),
                ("js/x.js", Embed),
                ("bg.gif", Embed),
                ("p1.html?x=1#top", Link),
                ("p2.html", Link),
                ("i&j.gif", Embed),
                ("", Embed),
                ("frame.html", Embed),
                ("btn.png", Embed),
                ("movie.swf", Embed),
                ("spread.html", Link),
                ("map.html", Link),
                ("e.swf", Embed),
                ("f.html", Embed),
                ("mailto:x@y", Link),
                ("http://other/x", Link),
            ]
        );
        assert_ranges_hold_values(PAGE.as_bytes(), &links);
        let amp = &links.slots[6];
        assert_eq!(&PAGE[amp.range.clone()], "i&amp;j.gif");
        assert_eq!(links.slots[1].quote, Quote::Single);
        assert_eq!(links.slots[5].quote, Quote::Unquoted);
        assert_eq!(links.slots[0].quote, Quote::Double);
        assert_eq!(&PAGE[..links.head_insert], &PAGE[..PAGE.find("<HEAD id=h>").unwrap() + 11]);
        assert_eq!(links.base, None);
        assert_eq!(links.dropped, 0);
    }

    #[test]
    fn base_is_the_first_base_href_with_its_value_range() {
        let html = "<html><head><base target=_top><base href=\"/docs/\"><base href='/no/'></head>";
        let links = scan_page(html.as_bytes()).unwrap();
        let base = links.base.unwrap();
        assert_eq!(base.value, "/docs/");
        let (range, quote) = base.located.unwrap();
        assert_eq!((&html[range], quote), ("/docs/", Quote::Double));
        assert_eq!(links.head_insert, "<html><head>".len());
    }

    #[test]
    fn head_insert_falls_back_to_html_then_doctype_then_zero() {
        let at = |html: &str| scan_page(html.as_bytes()).unwrap().head_insert;
        assert_eq!(at("<!doctype html><html><body><a href=x>"), "<!doctype html><html>".len());
        assert_eq!(at("<!doctype html><p><a href=x>"), "<!doctype html>".len());
        assert_eq!(at("<!-- <head> --><p>x"), 0);
        assert_eq!(at("<p><head>"), "<p><head>".len());
        assert_eq!(at("<script>'<head>'</script>"), 0);
    }

    #[test]
    fn unquoted_value_ends_at_space_or_angle_and_self_closing_slash_stays_in_value() {
        let html = "<a href=a/b.html>x</a><img src=s.gif/><a href=t.html class=y>";
        let links = scan_page(html.as_bytes()).unwrap();
        let got: Vec<&str> = links.slots.iter().map(|s| &html[s.range.clone()]).collect();
        assert_eq!(got, ["a/b.html", "s.gif/", "t.html"]);
        assert_ranges_hold_values(html.as_bytes(), &links);
    }

    #[test]
    fn href_spanning_newlines_keeps_its_newlines_in_value_and_range() {
        let html = "<a href=\"long\n/path.html\">x</a>";
        let links = scan_page(html.as_bytes()).unwrap();
        assert_eq!(links.slots[0].value, "long\n/path.html");
        assert_eq!(&html[links.slots[0].range.clone()], "long\n/path.html");
    }

    #[test]
    fn value_that_differs_from_its_raw_text_is_dropped() {
        // A NUL is replaced by U+FFFD when decoded: the raw text no longer matches.
        let html = "<a href=\"a\0b\">x</a><a href=ok>";
        let links = scan_page(html.as_bytes()).unwrap();
        assert_eq!(values(&links), [("ok", SlotKind::Link)]);
        assert_eq!(links.dropped, 1);
    }

    #[test]
    fn duplicate_attribute_keeps_the_first_like_browsers() {
        let html = "<a href=first.html href=second.html>";
        let links = scan_page(html.as_bytes()).unwrap();
        assert_eq!(values(&links), [("first.html", SlotKind::Link)]);
    }

    #[test]
    fn media_sources_and_table_backgrounds_are_embeds() {
        let html = "<video src=v.mp4><source src='s.webm'></video><audio src=a.ogg></audio>\
                    <table background=t.gif><tr><td background=c.gif><th background=h.gif>\
                    <source srcset=no.png><td bgcolor=red>";
        let links = scan_page(html.as_bytes()).unwrap();
        let want = ["v.mp4", "s.webm", "a.ogg", "t.gif", "c.gif", "h.gif"].map(|v| (v, SlotKind::Embed));
        assert_eq!(values(&links), want);
        assert_ranges_hold_values(html.as_bytes(), &links);
    }

    #[test]
    fn base_inside_the_head_of_a_full_page_is_found() {
        let html = "<!DOCTYPE html><HTML><head><link rel=stylesheet href=a.css><BASE HREF=\"/docs/\"></head>\
                    <body><a href=x.html>";
        let links = scan_page(html.as_bytes()).unwrap();
        assert_eq!(links.base.as_ref().map(|b| b.value.as_str()), Some("/docs/"));
        assert_eq!(values(&links), [("a.css", SlotKind::Embed), ("x.html", SlotKind::Link)]);
    }

    #[test]
    fn tag_cut_off_by_the_end_of_the_page_is_no_tag() {
        for html in ["<a href=ok.html>x</a><a href=\"broken\n", "<a href=ok.html><img src=cut.gif"] {
            let links = scan_page(html.as_bytes()).unwrap();
            assert_eq!(values(&links), [("ok.html", SlotKind::Link)], "{html:?}");
        }
    }

    #[test]
    fn scan_never_panics_on_truncated_markup() {
        for html in
            ["<", "<a", "<a href", "<a href=", "<a href='x", "<!--", "<script>", "<!DOCTYPE", "<a =x>"]
        {
            let links = scan_page(html.as_bytes()).unwrap();
            assert!(links.slots.is_empty(), "{html:?}");
        }
    }

    #[test]
    fn page_that_is_not_utf8_is_an_error() {
        assert_eq!(scan_page(b"<a href=x>\xff</a>"), Err(HtmlError::NotUtf8 { valid_up_to: 10 }));
    }

    #[test]
    fn multibyte_text_before_a_tag_keeps_byte_offsets() {
        let html = "<p>héllo — ünïcode</p><a href='x.html'>";
        let links = scan_page(html.as_bytes()).unwrap();
        assert_eq!(&html[links.slots[0].range.clone()], "x.html");
    }

    fn mutate(base: &[u8], edits: &[(usize, u8, u8)]) -> Vec<u8> {
        let mut page = base.to_vec();
        for &(at, op, byte) in edits {
            let at = at % (page.len() + 1);
            match op % 3 {
                0 => page.insert(at, byte),
                1 if at < page.len() => {
                    page.remove(at);
                }
                _ if at < page.len() => page[at] = byte,
                _ => {}
            }
        }
        page
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        #[test]
        fn scan_never_panics_on_arbitrary_bytes_and_ranges_stay_inside(html in proptest::collection::vec(any::<u8>(), 0..400)) {
            if let Ok(links) = scan_page(&html) {
                prop_assert!(links.head_insert <= html.len());
                for s in &links.slots {
                    prop_assert!(s.range.end <= html.len());
                }
            }
        }

        #[test]
        fn scan_of_mutated_real_page_never_panics_and_ranges_hold_values(
            edits in proptest::collection::vec((any::<usize>(), any::<u8>(), prop::sample::select(b"<>'\"= &/ahrefsc!-\nx;".to_vec())), 0..12)
        ) {
            let page = mutate(PAGE.as_bytes(), &edits);
            if let Ok(links) = scan_page(&page) {
                prop_assert!(links.head_insert <= page.len());
                let mut end = 0;
                for s in &links.slots {
                    prop_assert!(s.range.start >= end, "slots in order, disjoint");
                    end = s.range.end;
                    let raw = std::str::from_utf8(&page[s.range.clone()]).unwrap();
                    if !raw.contains('&') {
                        prop_assert_eq!(raw, s.value.as_str());
                    }
                }
            }
        }
    }
}
