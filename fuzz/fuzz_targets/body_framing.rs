//! Fuzz `BodyTracker` (Content-Length, chunked, until close): fed in any split of reads it
//! never claims more bytes than it was given and ends, fails or decodes exactly as when fed
//! in one read, its trailer section too; a Content-Length body is its first n bytes; bytes
//! moved by `skip_raw` count as if they had been fed; a finished body's bytes alone finish it
//! again; a finished chunked body's trailer section is the end of its bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use locus_http::{BodyError, BodyKind, BodyTracker};

/// How a run over one stream ended: bytes consumed, whether the body ended, decoded data, the
/// trailer section handed over.
type Outcome = Result<(usize, bool, Vec<u8>, Vec<u8>), BodyError>;

fuzz_target!(|input: &[u8]| {
    let Some((&selector, rest)) = input.split_first() else { return };
    let (kind, rest) = body_kind(selector, rest);
    let Some((&cut_seed, wire)) = rest.split_first() else { return };
    let whole = feed(kind, wire, &[wire.len().max(1)], false);
    let cuts: Vec<usize> = (0..8).map(|i| 1 + (cut_seed.rotate_left(i) as usize % 7)).collect();
    assert_eq!(whole, feed(kind, wire, &cuts, false), "split reads differ");
    assert_eq!(whole, feed(kind, wire, &[1], false), "byte-by-byte reads differ");
    assert_eq!(whole, feed(kind, wire, &cuts, true), "skip_raw differs");
    if let Ok((consumed, done, data, trailer)) = &whole {
        if kind != BodyKind::Chunked {
            assert!(trailer.is_empty(), "only a chunked body has a trailer section");
        } else if *done {
            assert!(wire[..*consumed].ends_with(trailer) && trailer.ends_with(b"\r\n"), "the trailer is the end");
        }
        if let BodyKind::Length(n) = kind {
            assert_eq!(*consumed as u64, n.min(wire.len() as u64));
            assert_eq!(&data[..], &wire[..*consumed]);
        }
        if kind == BodyKind::UntilClose {
            assert_eq!((*consumed, *done, &data[..]), (wire.len(), false, wire));
        }
        if *done {
            let again = feed(kind, &wire[..*consumed], &[wire.len().max(1)], false);
            assert_eq!(again, whole, "the body's own bytes end it again");
        } else {
            assert_eq!(*consumed, wire.len(), "an unfinished body takes every byte it is given");
        }
        assert!(data.len() <= *consumed);
    }
});

/// The body kind named by `selector` (a length read from the next bytes for Content-Length).
fn body_kind(selector: u8, rest: &[u8]) -> (BodyKind, &[u8]) {
    match selector % 4 {
        0 => (BodyKind::Chunked, rest),
        1 => (BodyKind::UntilClose, rest),
        2 => (BodyKind::Empty, rest),
        _ => {
            let (len, rest) = rest.split_at(rest.len().min(2));
            let n = len.iter().fold(0u64, |n, &b| n << 8 | b as u64);
            (BodyKind::Length(n), rest)
        }
    }
}

/// Feed `wire` to a tracker in reads of the sizes in `cuts` (cycled), handing it the rest of
/// its input each time as a relay would; with `skip`, certain data is moved by `skip_raw`.
fn feed(kind: BodyKind, wire: &[u8], cuts: &[usize], skip: bool) -> Outcome {
    let mut tracker = BodyTracker::new(kind);
    let mut data = Vec::new();
    let mut trailer = Vec::new();
    let mut pos = 0;
    let mut end = 0;
    let mut sizes = cuts.iter().cycle();
    while !tracker.is_done() && pos < wire.len() {
        end = (end.max(pos) + sizes.next().unwrap()).min(wire.len());
        if skip && let Some(raw) = tracker.raw_remaining() {
            let n = (raw.min((end - pos) as u64)) as usize;
            data.extend_from_slice(&wire[pos..pos + n]);
            tracker.skip_raw(n as u64);
            pos += n;
        }
        let offered = &wire[pos..end];
        let progress =
            tracker.advance_parts(offered, |d| data.extend_from_slice(d), |t| trailer.extend_from_slice(t))?;
        assert!(progress.consumed <= offered.len(), "consumed past the buffer");
        assert_eq!(progress.done, tracker.is_done());
        if !progress.done {
            assert_eq!(progress.consumed, offered.len(), "stopped early without ending");
        }
        pos += progress.consumed;
    }
    Ok((pos, tracker.is_done(), data, trailer))
}
