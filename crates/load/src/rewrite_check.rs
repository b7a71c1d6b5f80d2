//! `OriginalPage::check`: whether a page a DC server sent is its original file after undoing
//! the rewrite. Outside the original's link slots the bytes must be identical, except one
//! `<base href>` inserted at the head (or a relative BASE value made absolute); each changed
//! slot must name the same site path as the original's, as an original URL of the home or as
//! a replica URL. Anything else is a `RewriteMismatch` at a byte offset of the received page.

use std::ops::Range;

use locus_dc::html_links::{PageLinks, Quote, scan_page};
use locus_dc::replica_url::ReplicaTarget;
use locus_dc::site_path::{PageBase, Resolved, names_authority};

/// Where and why a received page differs from its original.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RewriteMismatch {
    /// Byte offset in the received page.
    pub offset: usize,
    /// What was expected there.
    pub what: String,
}

impl std::fmt::Display for RewriteMismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "at byte {}: {}", self.offset, self.what)
    }
}

/// An original page, scanned once, against which received versions are checked.
#[derive(Clone, Debug)]
pub struct OriginalPage {
    bytes: Vec<u8>,
    /// `None`: the page could not be scanned, so it is served unmodified.
    links: Option<PageLinks>,
    page_path: String,
    home_authority: String,
}

/// One place where the received page may differ from the original.
enum Edit {
    /// A link slot's value (its index in `PageLinks::slots`).
    Slot(usize),
    /// The value of the page's own `<base href>`.
    BaseValue(Range<usize>, Quote),
    /// No BASE in the original: a `<base href>` element may be inserted here.
    BaseInsert(usize),
}

impl Edit {
    fn start(&self, links: &PageLinks) -> usize {
        match self {
            Edit::Slot(i) => links.slots[*i].range.start,
            Edit::BaseValue(r, _) => r.start,
            Edit::BaseInsert(at) => *at,
        }
    }
}

impl OriginalPage {
    /// The original `bytes` of the page at site path `page_path` of the home reached at
    /// `home_authority`.
    pub fn new(bytes: Vec<u8>, page_path: &str, home_authority: &str) -> OriginalPage {
        let links = scan_page(&bytes).ok();
        OriginalPage {
            bytes,
            links,
            page_path: page_path.to_string(),
            home_authority: home_authority.to_string(),
        }
    }

    /// The original's length.
    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    /// Whether the original is empty.
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// Check a received version of the page.
    pub fn check(&self, received: &[u8]) -> Result<(), RewriteMismatch> {
        let Some(links) = &self.links else { return same_bytes(&self.bytes, received, 0, 0, true) };
        let mut edits: Vec<Edit> = (0..links.slots.len()).map(Edit::Slot).collect();
        match &links.base {
            Some(b) => {
                if let Some((range, quote)) = &b.located {
                    edits.push(Edit::BaseValue(range.clone(), *quote));
                }
            }
            None => edits.push(Edit::BaseInsert(links.head_insert)),
        }
        // An insertion goes before a slot starting at the same byte.
        edits.sort_by_key(|e| (e.start(links), !matches!(e, Edit::BaseInsert(_))));
        let (mut o, mut r) = (0, 0);
        for edit in &edits {
            let start = edit.start(links);
            same_bytes(&self.bytes[o..start], received, r, o, false)?;
            r += start - o;
            o = start;
            match edit {
                Edit::BaseInsert(_) => r = self.inserted_base(received, r)?,
                Edit::Slot(i) => {
                    let slot = &links.slots[*i];
                    r = self
                        .value(received, r, slot.range.clone(), slot.quote, |v| self.slot_ok(links, *i, v))?;
                    o = slot.range.end;
                }
                Edit::BaseValue(range, quote) => {
                    r = self.value(received, r, range.clone(), *quote, |v| self.base_ok(links, v))?;
                    o = range.end;
                }
            }
        }
        same_bytes(&self.bytes[o..], received, r, o, true)
    }

    /// Read the value at `r` (quoted like `quote`, or double-quoted where the original was
    /// unquoted); identical to the original's raw value, or accepted by `ok` once decoded.
    /// Returns the offset after it.
    fn value(
        &self,
        received: &[u8],
        r: usize,
        original: Range<usize>,
        quote: Quote,
        ok: impl FnOnce(&str) -> Result<(), String>,
    ) -> Result<usize, RewriteMismatch> {
        let raw = &self.bytes[original];
        if received.get(r..r + raw.len()) == Some(raw) && value_ends(received, r + raw.len(), quote) {
            return Ok(r + raw.len());
        }
        let fail = |what: String| RewriteMismatch { offset: r, what };
        let rest = &received[r.min(received.len())..];
        let (inner, after) = match (quote, rest.first()) {
            (Quote::Double, _) => {
                (r..r + find(rest, b'"').ok_or_else(|| fail("an unterminated value".into()))?, 0)
            }
            (Quote::Single, _) => {
                (r..r + find(rest, b'\'').ok_or_else(|| fail("an unterminated value".into()))?, 0)
            }
            (Quote::Unquoted, Some(b'"')) => {
                let len = find(&rest[1..], b'"').ok_or_else(|| fail("an unterminated value".into()))?;
                (r + 1..r + 1 + len, 1)
            }
            (Quote::Unquoted, _) => (
                r..r + rest.iter().position(|b| b.is_ascii_whitespace() || *b == b'>').unwrap_or(rest.len()),
                0,
            ),
        };
        let text = std::str::from_utf8(&received[inner.clone()])
            .map_err(|_| fail("a value that is not UTF-8".into()))?;
        ok(&decode_attribute(text)).map_err(fail)?;
        Ok(inner.end + after)
    }

    /// Whether a changed slot value names the original slot's document.
    fn slot_ok(&self, links: &PageLinks, i: usize, value: &str) -> Result<(), String> {
        let slot = &links.slots[i];
        let base = PageBase::new(
            &self.page_path,
            links.base.as_ref().map(|b| b.value.as_str()),
            &self.home_authority,
        );
        let Resolved::Local { path, suffix } = base.resolve(&slot.value) else {
            return Err(format!("`{}` unchanged (it is no link to the home), got `{value}`", slot.value));
        };
        match self.absolute_target(value) {
            Some((p, s)) if p == path && s == suffix => Ok(()),
            _ => Err(format!("a URL of {path}{suffix} (for `{}`), got `{value}`", slot.value)),
        }
    }

    /// Whether a changed BASE value is the absolute form of a relative local one.
    fn base_ok(&self, links: &PageLinks, value: &str) -> Result<(), String> {
        let original = links.base.as_ref().map_or("", |b| b.value.as_str());
        let top = PageBase::new(&self.page_path, None, &self.home_authority);
        match top.resolve(original) {
            Resolved::Local { path, .. } if !names_authority(original) => {
                let got = top.resolve(value);
                match got {
                    Resolved::Local { path: p, .. } if names_authority(value) && p == path => Ok(()),
                    _ => Err(format!("BASE http://{}{path}, got `{value}`", self.home_authority)),
                }
            }
            _ => Err(format!("BASE `{original}` unchanged, got `{value}`")),
        }
    }

    /// An inserted `<base href=…>` at `r` naming this page at its home, if any; returns the
    /// offset after it.
    fn inserted_base(&self, received: &[u8], r: usize) -> Result<usize, RewriteMismatch> {
        const OPEN: &[u8] = b"<base href=";
        let rest = &received[r.min(received.len())..];
        if rest.len() < OPEN.len() || !rest[..OPEN.len()].eq_ignore_ascii_case(OPEN) {
            return Ok(r);
        }
        let fail = |what: String| RewriteMismatch { offset: r, what };
        let at = r + OPEN.len();
        let quote = match received.get(at) {
            Some(b'"') => Quote::Double,
            Some(b'\'') => Quote::Single,
            _ => return Err(fail("a quoted value in the inserted <base href>".into())),
        };
        let q = received[at];
        let len = find(&received[at + 1..], q).ok_or_else(|| fail("an unterminated <base href>".into()))?;
        let end = at + 1 + len + 1;
        if received.get(end) != Some(&b'>') {
            return Err(fail(format!("`>` closing the inserted <base href> ({quote:?})")));
        }
        let value = std::str::from_utf8(&received[at + 1..at + 1 + len])
            .map(decode_attribute)
            .map_err(|_| fail("a UTF-8 <base href>".into()))?;
        let top = PageBase::new(&self.page_path, None, &self.home_authority);
        match top.resolve(&value) {
            Resolved::Local { path, .. } if names_authority(&value) && path == self.page_path => Ok(end + 1),
            _ => Err(fail(format!(
                "an inserted BASE http://{}{}, got `{value}`",
                self.home_authority, self.page_path
            ))),
        }
    }

    /// The (site path, `?query#fragment`) an absolute URL names: an original URL of the home,
    /// or a replica URL (any co-op) of a document of the home.
    fn absolute_target(&self, value: &str) -> Option<(String, String)> {
        let rest = value.get(..7).filter(|s| s.eq_ignore_ascii_case("http://")).map(|_| &value[7..])?;
        let path_at = rest.find(['/', '?', '#']).unwrap_or(rest.len());
        let after = &rest[path_at..];
        if after.starts_with(locus_dc::replica_url::MIGRATE_PREFIX) {
            let cut = after.find(['?', '#']).unwrap_or(after.len());
            let target = ReplicaTarget::parse(&after[..cut]).ok()??;
            return Some((target.path, after[cut..].to_string()));
        }
        match PageBase::new("/", None, &self.home_authority).resolve(value) {
            Resolved::Local { path, suffix } => Some((path, suffix)),
            _ => None,
        }
    }
}

/// Whether an unchanged raw value really ends at `end` (so `a.html` is not taken for the
/// start of `a.html2`).
fn value_ends(received: &[u8], end: usize, quote: Quote) -> bool {
    match (quote, received.get(end)) {
        (Quote::Double, b) => b == Some(&b'"'),
        (Quote::Single, b) => b == Some(&b'\''),
        (Quote::Unquoted, None) => true,
        (Quote::Unquoted, Some(b)) => b.is_ascii_whitespace() || *b == b'>',
    }
}

/// `expected` must be at `received[r..]` (and be all of the rest when `last`); `o` is its
/// offset in the original, for the message.
fn same_bytes(
    expected: &[u8],
    received: &[u8],
    r: usize,
    o: usize,
    last: bool,
) -> Result<(), RewriteMismatch> {
    let got = &received[r.min(received.len())..];
    if let Some(i) = expected.iter().zip(got).position(|(a, b)| a != b) {
        return Err(RewriteMismatch {
            offset: r + i,
            what: format!(
                "original byte {} ({:?}), got {:?}",
                o + i,
                char::from(expected[i]),
                char::from(got[i])
            ),
        });
    }
    if got.len() < expected.len() {
        return Err(RewriteMismatch {
            offset: received.len(),
            what: format!(
                "{} more bytes of the original (the page is cut short)",
                expected.len() - got.len()
            ),
        });
    }
    if last && got.len() > expected.len() {
        return Err(RewriteMismatch {
            offset: r + expected.len(),
            what: format!("the end of the page, got {} more bytes", got.len() - expected.len()),
        });
    }
    Ok(())
}

fn find(bytes: &[u8], b: u8) -> Option<usize> {
    bytes.iter().position(|&x| x == b)
}

/// The character references a DC server writes into attribute values, decoded.
fn decode_attribute(text: &str) -> String {
    if !text.contains('&') {
        return text.to_string();
    }
    text.replace("&quot;", "\"")
        .replace("&#34;", "\"")
        .replace("&#39;", "'")
        .replace("&apos;", "'")
        .replace("&amp;", "&")
}

#[cfg(test)]
mod tests {
    use super::*;
    use locus_dc::replica_url::{original_url, replica_url};
    use locus_dc::rewrite::{RewritePlan, SlotChoice};

    const HOME: &str = "127.0.0.1:8001";
    const COOP: &str = "127.0.0.1:8002";
    const PAGE: &str = "<!DOCTYPE html>\n<html><head><title>t</title>\
        <link rel=stylesheet href=\"css/a.css\"></head>\n<body><a href='b.html?x=1&amp;y=2#f'>b</a> \
        <img src=img/c.gif> <a href=\"http://else/x\">e</a> <a href=\"/d/e.html\">e</a></body></html>\n";

    fn original() -> OriginalPage {
        OriginalPage::new(PAGE.as_bytes().to_vec(), "/d/p.html", HOME)
    }

    /// The page as a server renders it: slot `k` to the home (1), a replica (2) or verbatim.
    fn rendered(page: &str, picks: &[u8], base: bool) -> Vec<u8> {
        let plan = RewritePlan::for_copy(page.as_bytes(), "/d/p.html", HOME).unwrap();
        let choices: Vec<SlotChoice> = plan
            .slots()
            .iter()
            .zip(picks.iter().cycle())
            .map(|(s, k)| match k {
                1 => SlotChoice::Url(format!("{}{}", original_url(HOME, &s.target_path), s.suffix)),
                2 => SlotChoice::Url(format!("{}{}", replica_url(COOP, 9, "s1", &s.target_path), s.suffix)),
                _ => SlotChoice::Verbatim,
            })
            .collect();
        let base = if base { plan.base_for_copy(HOME) } else { None };
        plan.render_to_vec(page.as_bytes(), &choices, base.as_deref()).unwrap()
    }

    #[test]
    fn correctly_rewritten_pages_are_accepted_whoever_served_them() {
        let page = original();
        assert_eq!(page.check(PAGE.as_bytes()), Ok(()));
        for picks in [[1u8, 2, 0], [2, 2, 2], [0, 1, 1], [2, 0, 1]] {
            for base in [false, true] {
                let got = rendered(PAGE, &picks, base);
                assert_eq!(page.check(&got), Ok(()), "{}", String::from_utf8_lossy(&got));
            }
        }
        let relative_base = "<html><head><base href='/d/'></head><a href=x.html>x</a><img src=\"y.gif\">";
        let page = OriginalPage::new(relative_base.as_bytes().to_vec(), "/d/p.html", HOME);
        let got = rendered(relative_base, &[2, 1], true);
        assert!(String::from_utf8_lossy(&got).contains("<base href='http://127.0.0.1:8001/d/'>"));
        assert_eq!(page.check(&got), Ok(()));
    }

    #[test]
    fn a_changed_byte_outside_the_slots_is_rejected_at_its_offset() {
        let mut got = rendered(PAGE, &[2, 1, 2], true);
        let at = got.iter().rposition(|&b| b == b'b').unwrap();
        got[at] = b'X';
        let err = original().check(&got).unwrap_err();
        assert_eq!(err.offset, at, "{err}");
        let mut got = rendered(PAGE, &[0], false);
        got.insert(5, b' ');
        assert_eq!(original().check(&got).unwrap_err().offset, 5);
    }

    #[test]
    fn a_slot_pointing_at_another_document_is_rejected() {
        let good = String::from_utf8(rendered(PAGE, &[2, 1, 2], false)).unwrap();
        for (from, to) in [
            ("/s1/d/css/a.css", "/s1/d/css/b.css"),
            ("http://127.0.0.1:8001/d/b.html?x=1", "http://127.0.0.1:8001/d/b.html?x=2"),
            ("http://127.0.0.1:8001/d/b.html", "http://127.0.0.1:9999/d/b.html"),
        ] {
            assert!(good.contains(from), "{good}");
            let bad = good.replacen(from, to, 1);
            let err = original().check(bad.as_bytes()).unwrap_err();
            assert!(err.what.contains("URL of"), "{err}");
        }
        // An external link is never rewritten.
        let bad = PAGE.replace("http://else/x", "http://127.0.0.1:8001/x");
        assert!(original().check(bad.as_bytes()).is_err());
    }

    #[test]
    fn a_truncated_or_extended_page_is_rejected() {
        let got = rendered(PAGE, &[1, 2], true);
        let err = original().check(&got[..got.len() - 3]).unwrap_err();
        assert_eq!(err.offset, got.len() - 3);
        assert!(err.what.contains("cut short"), "{err}");
        let mut longer = got.clone();
        longer.extend_from_slice(b"<p>");
        assert_eq!(original().check(&longer).unwrap_err().offset, got.len());
        assert!(original().check(&got[..40]).is_err());
    }

    #[test]
    fn a_base_pointing_elsewhere_is_rejected() {
        let good = String::from_utf8(rendered(PAGE, &[2], true)).unwrap();
        assert!(good.contains("<base href=\"http://127.0.0.1:8001/d/p.html\">"), "{good}");
        for other in ["http://127.0.0.1:8001/d/q.html", "http://127.0.0.1:8002/d/p.html", "/d/p.html"] {
            let bad = good.replace("http://127.0.0.1:8001/d/p.html", other);
            assert!(original().check(bad.as_bytes()).is_err(), "{other}");
        }
        let relative_base = "<html><head><base href='/d/'></head><a href=x.html>x</a>";
        let page = OriginalPage::new(relative_base.as_bytes().to_vec(), "/d/p.html", HOME);
        let bad = relative_base.replace("'/d/'", "'http://127.0.0.1:8001/e/'");
        assert!(page.check(bad.as_bytes()).is_err());
    }

    #[test]
    fn a_page_that_cannot_be_scanned_must_come_back_unchanged() {
        let bytes = b"<a href=x.html>\xff</a>".to_vec();
        let page = OriginalPage::new(bytes.clone(), "/p.html", HOME);
        assert_eq!(page.check(&bytes), Ok(()));
        let mut other = bytes.clone();
        other[3] = b'H';
        assert_eq!(page.check(&other).unwrap_err().offset, 3);
    }
}
