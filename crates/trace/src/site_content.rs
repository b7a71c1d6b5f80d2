//! The bytes of a synthetic site's files, each exactly its planned size: HTML5 pages (title,
//! visible text, readable links, padding in a comment), valid GIF images (a solid colour from
//! the seed, padding in a comment extension), valid CSS and JavaScript (padding in a comment),
//! and random bytes for everything else.

use std::fmt::Write as _;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use xxhash_rust::xxh3::Xxh3;

use crate::error::TraceError;
use crate::site::SiteFileKind;
use crate::site_plan::{PlannedFile, relative_url};

/// What closes every page.
const PAGE_TAIL: &str = "</body></html>\n";

/// Words of a page's visible text.
const WORDS: [&str; 24] = [
    "cluster", "server", "request", "cache", "page", "image", "node", "link", "document", "web", "archive",
    "message", "list", "user", "group", "data", "content", "load", "balance", "copy", "home", "reply",
    "thread", "notes",
];

/// The RNG a file's content comes from: its own seed, so files do not depend on write order.
pub(crate) fn content_rng(seed: u64, index: usize) -> SmallRng {
    SmallRng::seed_from_u64(seed ^ (index as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15))
}

/// The page's markup up to its padding (`rng`: the page's content RNG, fresh).
fn page_markup(plan: &[PlannedFile], index: usize, rng: &mut SmallRng) -> String {
    let page = &plan[index];
    let mut html = String::with_capacity(512 + 64 * (page.links.len() + page.embeds.len()));
    let title = &page.title;
    html.push_str("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">");
    let _ = writeln!(html, "<title>{title}</title>");
    for &e in &page.embeds {
        let url = relative_url(&page.dir, &plan[e]);
        match plan[e].kind {
            SiteFileKind::Style => {
                let _ = writeln!(html, "<link rel=\"stylesheet\" href=\"{url}\">");
            }
            SiteFileKind::Script => {
                let _ = writeln!(html, "<script src=\"{url}\"></script>");
            }
            _ => {}
        }
    }
    let _ = writeln!(html, "</head><body>\n<h1>{title}</h1>");
    if page.words > 0 {
        html.push_str("<p>");
        for w in 0..page.words {
            if w > 0 {
                html.push(' ');
            }
            html.push_str(WORDS[rng.random_range(0..WORDS.len())]);
        }
        html.push_str(".</p>\n");
    }
    for &e in &page.embeds {
        if plan[e].kind == SiteFileKind::Image {
            // The GIFs are 8×8 or 64×64 pixels: show them large enough to see.
            let shown = if plan[e].name.ends_with(".gif") { " width=\"32\" height=\"32\"" } else { "" };
            let _ = writeln!(
                html,
                "<p><img src=\"{}\" alt=\"{}\"{shown}></p>",
                relative_url(&page.dir, &plan[e]),
                plan[e].title
            );
        }
    }
    if !page.links.is_empty() {
        html.push_str("<ul>\n");
        for &l in &page.links {
            // `</li>` is optional in HTML5; leaving it out keeps link-heavy pages small.
            let _ =
                writeln!(html, "<li><a href=\"{}\">{}</a>", relative_url(&page.dir, &plan[l]), plan[l].title);
        }
        html.push_str("</ul>\n");
    }
    html
}

/// The smallest size page `index` can have: its markup without padding.
pub(crate) fn page_min_size(plan: &[PlannedFile], index: usize, seed: u64) -> u64 {
    (page_markup(plan, index, &mut content_rng(seed, index)).len() + PAGE_TAIL.len()) as u64
}

/// The page's bytes, padded with a comment to exactly its planned size (which the plan made
/// at least `page_min_size`).
pub(crate) fn page_html(plan: &[PlannedFile], index: usize, seed: u64) -> Vec<u8> {
    let mut rng = content_rng(seed, index);
    let html = page_markup(plan, index, &mut rng);
    let used = (html.len() + PAGE_TAIL.len()) as u64;
    let pad = plan[index].size.saturating_sub(used) as usize;
    let mut bytes = html.into_bytes();
    if pad >= 8 {
        bytes.extend_from_slice(b"<!--");
        let start = bytes.len();
        bytes.resize(start + pad - 8, 0);
        let len = bytes.len();
        text_filler(&mut bytes[start..len], 1, None, &mut rng);
        bytes.extend_from_slice(b"-->\n");
    } else {
        bytes.extend(std::iter::repeat_n(b'\n', pad));
    }
    bytes.extend_from_slice(PAGE_TAIL.as_bytes());
    bytes
}

/// Write file `index` of `plan` to `path`; its size and XXH3-64.
pub(crate) fn write_file(
    path: &Path,
    plan: &[PlannedFile],
    index: usize,
    seed: u64,
) -> Result<(u64, u64), TraceError> {
    let planned = &plan[index];
    let size = planned.size;
    let mut rng = content_rng(seed, index);
    let mut out = HashingFile::create(path)?;
    match planned.kind {
        SiteFileKind::Page => out.write(&page_html(plan, index, seed))?,
        SiteFileKind::Image if planned.name.ends_with(".gif") && size >= gif_min_size() => {
            write_gif(&mut out, size, &mut rng)?
        }
        SiteFileKind::Style => {
            let [r, g, b] = rng.random::<[u8; 3]>();
            let rule = format!("body{{color:#{r:02x}{g:02x}{b:02x};font-family:sans-serif}}\n");
            let prefix = if size >= rule.len() as u64 + 4 { rule.as_bytes() } else { b"" };
            let comment = (size >= 4).then_some((prefix.len() as u64, size));
            out.generate(size, |buf, at| {
                text_filler(buf, at, comment, &mut rng);
                for (i, b) in buf.iter_mut().enumerate() {
                    if let Some(&p) = prefix.get(at as usize + i) {
                        *b = p;
                    }
                }
            })?
        }
        SiteFileKind::Script => {
            let comment = (size >= 4).then_some((0, size));
            out.generate(size, |buf, at| text_filler(buf, at, comment, &mut rng))?
        }
        SiteFileKind::Image | SiteFileKind::Download => out.generate(size, |buf, _| rng.fill(buf))?,
    }
    out.finish()
}

/// Fill `buf` (at byte offset `at` of its file) with lower-case words and newlines; with
/// `comment = Some((start, end))`, bytes `start..start+2` are `/*` and `end-2..end` are `*/`:
/// text safe in HTML comments, CSS and JavaScript.
pub(crate) fn text_filler(buf: &mut [u8], at: u64, comment: Option<(u64, u64)>, rng: &mut SmallRng) {
    const LETTERS: &[u8; 32] = b"abcdefghijklmnopqrstuvwxyz      ";
    let mut random = [0u8; 64];
    for (i, chunk) in buf.chunks_mut(64).enumerate() {
        rng.fill(&mut random[..]);
        for (j, b) in chunk.iter_mut().enumerate() {
            let pos = at + (i * 64 + j) as u64;
            *b = if pos % 72 == 71 { b'\n' } else { LETTERS[(random[j] & 31) as usize] };
        }
    }
    if let Some((start, end)) = comment {
        let buf_end = at + buf.len() as u64;
        for (pos, byte) in [(start, b'/'), (start + 1, b'*'), (end - 2, b'*'), (end - 1, b'/')] {
            if (at..buf_end).contains(&pos) {
                buf[(pos - at) as usize] = byte;
            }
        }
    }
}

/// GIF images from this size on are 64×64 pixels, smaller ones 8×8.
const GIF_LARGE_FROM: u64 = 16 << 10;

/// The smallest `.gif` written as a valid GIF (smaller ones are random bytes).
pub(crate) fn gif_min_size() -> u64 {
    gif_fixed_len(8)
}

/// LZW data of a `side`×`side` image of colour 0, minimum code size 2: a clear code before
/// every two pixels keeps the codes 3 bits wide, so no decoder's code-width rule matters.
fn gif_lzw_data(side: u16) -> Vec<u8> {
    const CLEAR: u32 = 4;
    const END: u32 = 5;
    let pixels = u32::from(side) * u32::from(side);
    let mut codes = Vec::with_capacity(pixels as usize * 3 / 2 + 2);
    for p in 0..pixels {
        if p % 2 == 0 {
            codes.push(CLEAR);
        }
        codes.push(0);
    }
    codes.push(END);
    let mut data = Vec::with_capacity(codes.len() * 3 / 8 + 1);
    let (mut acc, mut bits) = (0u32, 0u32);
    for code in codes {
        acc |= code << bits;
        bits += 3;
        while bits >= 8 {
            data.push(acc as u8);
            acc >>= 8;
            bits -= 8;
        }
    }
    if bits > 0 {
        data.push(acc as u8);
    }
    data
}

/// Header, screen descriptor, 2-colour table, image descriptor and LZW code size.
fn gif_head(side: u16, colour: [u8; 3]) -> Vec<u8> {
    let mut head = b"GIF89a".to_vec();
    head.extend_from_slice(&side.to_le_bytes());
    head.extend_from_slice(&side.to_le_bytes());
    head.extend_from_slice(&[0x80, 0, 0]);
    head.extend_from_slice(&colour);
    head.extend_from_slice(&[0xFF, 0xFF, 0xFF]);
    head.extend_from_slice(&[0x2C, 0, 0, 0, 0]);
    head.extend_from_slice(&side.to_le_bytes());
    head.extend_from_slice(&side.to_le_bytes());
    head.extend_from_slice(&[0, 2]);
    head
}

/// Size of a GIF of `side` with its data in the fewest sub-blocks and no comment.
fn gif_fixed_len(side: u16) -> u64 {
    let data = gif_lzw_data(side).len() as u64;
    gif_head(side, [0; 3]).len() as u64 + data + data.div_ceil(255) + 2
}

/// A valid GIF of exactly `size` (at least `gif_min_size()`) bytes. The spare bytes go into
/// a comment extension before the trailer; 1, 2 or 4 spare bytes (too few for a comment) go
/// into splitting the image data into more sub-blocks.
fn write_gif(out: &mut HashingFile, size: u64, rng: &mut SmallRng) -> Result<(), TraceError> {
    let side = if size >= GIF_LARGE_FROM { 64 } else { 8 };
    let spare = size - gif_fixed_len(side);
    let colour = rng.random::<[u8; 3]>();
    out.write(&gif_head(side, colour))?;
    let data = gif_lzw_data(side);
    let extra_blocks = if matches!(spare, 1 | 2 | 4) { spare as usize } else { 0 };
    let blocks = data.len().div_ceil(255) + extra_blocks;
    let (base, longer) = (data.len() / blocks, data.len() % blocks);
    let mut at = 0;
    for b in 0..blocks {
        let n = base + usize::from(b < longer);
        out.write(&[n as u8])?;
        out.write(&data[at..at + n])?;
        at += n;
    }
    out.write(&[0])?;
    if extra_blocks == 0 && spare > 0 {
        // `spare` = 2 (introducer, label) + sub-blocks + 1 (terminator); no sub-block may
        // leave exactly 1 byte, which no sub-block can fill.
        out.write(&[0x21, 0xFE])?;
        let mut left = spare - 3;
        let mut buf = [0u8; 255];
        let mut pos = 0u64;
        while left > 0 {
            let mut n = (left - 1).min(255);
            if left - 1 - n == 1 {
                n -= 1;
            }
            text_filler(&mut buf[..n as usize], pos, None, rng);
            out.write(&[n as u8])?;
            out.write(&buf[..n as usize])?;
            pos += n;
            left -= n + 1;
        }
        out.write(&[0])?;
    }
    out.write(&[0x3B])
}

/// A file being written, with the XXH3-64 and count of what went in.
struct HashingFile {
    out: BufWriter<File>,
    hasher: Xxh3,
    written: u64,
    path: PathBuf,
}

impl HashingFile {
    fn create(path: &Path) -> Result<HashingFile, TraceError> {
        let file = File::create(path).map_err(|e| TraceError::fs(path, e))?;
        Ok(HashingFile {
            out: BufWriter::new(file),
            hasher: Xxh3::new(),
            written: 0,
            path: path.to_path_buf(),
        })
    }

    fn write(&mut self, bytes: &[u8]) -> Result<(), TraceError> {
        self.hasher.update(bytes);
        self.written += bytes.len() as u64;
        self.out.write_all(bytes).map_err(|e| TraceError::fs(&self.path, e))
    }

    /// Write `size` bytes made by `fill(chunk, offset)` in 64 KiB chunks.
    fn generate(&mut self, size: u64, mut fill: impl FnMut(&mut [u8], u64)) -> Result<(), TraceError> {
        let mut buf = vec![0u8; size.min(1 << 16) as usize];
        let mut done = 0u64;
        while done < size {
            let n = (size - done).min(buf.len() as u64) as usize;
            fill(&mut buf[..n], done);
            self.write(&buf[..n])?;
            done += n as u64;
        }
        Ok(())
    }

    /// Flush; the size and hash.
    fn finish(mut self) -> Result<(u64, u64), TraceError> {
        self.out.flush().map_err(|e| TraceError::fs(&self.path, e))?;
        Ok((self.written, self.hasher.digest()))
    }
}

/// Walk a GIF's blocks: `Ok(image count)` when it is GIF89a with a global colour table,
/// well-formed extensions and images, and ends with the trailer exactly at its last byte.
#[cfg(test)]
pub(crate) fn check_gif(bytes: &[u8]) -> Result<usize, String> {
    let sub_blocks = |mut at: usize| -> Result<usize, String> {
        loop {
            let n = *bytes.get(at).ok_or("sub-blocks run past the end")? as usize;
            at += 1 + n;
            if n == 0 {
                return Ok(at);
            }
        }
    };
    if !bytes.starts_with(b"GIF89a") || bytes.len() < 14 {
        return Err("no GIF89a header".into());
    }
    let packed = bytes[10];
    let mut at = 13 + if packed & 0x80 != 0 { 3 << ((packed & 7) + 1) } else { 0 };
    let mut images = 0;
    loop {
        match bytes.get(at) {
            Some(0x21) => at = sub_blocks(at + 2)?,
            Some(0x2C) => {
                let packed = *bytes.get(at + 9).ok_or("image descriptor cut short")?;
                at += 10 + if packed & 0x80 != 0 { 3 << ((packed & 7) + 1) } else { 0 };
                if !(2..=8).contains(bytes.get(at).ok_or("no LZW code size")?) {
                    return Err(format!("LZW code size {} at {at}", bytes[at]));
                }
                at = sub_blocks(at + 1)?;
                images += 1;
            }
            Some(0x3B) if at == bytes.len() - 1 => return Ok(images),
            Some(b) => return Err(format!("byte {b:#04x} at {at} of {}", bytes.len())),
            None => return Err("no trailer".into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one_file(name: &str, kind: SiteFileKind, size: u64, seed: u64) -> (tempfile::TempDir, Vec<u8>, u64) {
        let dir = tempfile::tempdir().unwrap();
        let mut file = PlannedFile::new("", name, "x", kind);
        file.size = size;
        let path = dir.path().join(name);
        let (written, hash) = write_file(&path, &[file], 0, seed).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(written, bytes.len() as u64);
        assert_eq!(hash, xxhash_rust::xxh3::xxh3_64(&bytes));
        (dir, bytes, written)
    }

    #[test]
    fn gif_images_are_valid_gifs_of_exactly_their_size_at_every_size() {
        let min = gif_min_size();
        let sizes = (min..min + 600).chain([GIF_LARGE_FROM - 1, GIF_LARGE_FROM, GIF_LARGE_FROM + 1, 300_000]);
        for size in sizes {
            let (_dir, bytes, written) = one_file("a.gif", SiteFileKind::Image, size, size);
            assert_eq!(written, size);
            assert!(bytes.starts_with(b"GIF89a") && bytes.last() == Some(&0x3B), "size {size}");
            assert_eq!(check_gif(&bytes), Ok(1), "size {size}");
        }
    }

    #[test]
    fn gif_colour_comes_from_the_seed_and_too_small_gifs_stay_random_bytes() {
        let (_a, a, _) = one_file("a.gif", SiteFileKind::Image, 500, 1);
        let (_b, b, _) = one_file("a.gif", SiteFileKind::Image, 500, 2);
        assert_ne!(a[13..16], b[13..16], "first palette colour");
        let (_c, c, n) = one_file("a.gif", SiteFileKind::Image, gif_min_size() - 1, 1);
        assert_eq!(n, gif_min_size() - 1);
        assert!(!c.starts_with(b"GIF89a"));
    }

    #[test]
    fn gif_lzw_data_decodes_to_exactly_side_squared_pixels() {
        for side in [8u16, 64] {
            let data = gif_lzw_data(side);
            let (mut bit, mut pixels) = (0usize, 0u32);
            loop {
                let code = (0..3).map(|i| ((data[(bit + i) / 8] >> ((bit + i) % 8)) & 1) << i).sum::<u8>();
                bit += 3;
                match code {
                    4 => {}
                    5 => break,
                    0 => pixels += 1,
                    other => panic!("code {other}"),
                }
            }
            assert_eq!(pixels, u32::from(side) * u32::from(side));
            assert_eq!(data.len(), bit.div_ceil(8));
        }
    }

    #[test]
    fn css_is_a_rule_and_a_comment_of_exactly_its_size() {
        for size in [3u64, 4, 40, 60, 1000, 200_000] {
            let (_dir, bytes, written) = one_file("s.css", SiteFileKind::Style, size, 3);
            assert_eq!(written, size);
            let text = String::from_utf8(bytes).unwrap();
            if size >= 60 {
                assert!(text.starts_with("body{color:#"), "{size}");
                let rest = &text[text.find('}').unwrap() + 2..];
                assert!(
                    rest.starts_with("/*") && rest.ends_with("*/") && !rest[2..rest.len() - 2].contains("*/")
                );
            } else if size >= 4 {
                assert!(text.starts_with("/*") && text.ends_with("*/"), "{size}: {text}");
            }
        }
    }
}
