//! Fuzz `parse_response`, the strict response-head parser the switch and the load generator
//! read responses with: any bytes give a head, "need more" or an error, never a panic; a
//! complete head's spans lie inside it, every shorter prefix is "need more", bytes after it
//! change nothing, and the head rebuilt from its parts parses to the same framing.
#![no_main]

use libfuzzer_sys::fuzz_target;
use locus_http::{ResponseHead, Span, parse_response};

const MAX_HEAD: usize = 16 * 1024;

fuzz_target!(|input: &[u8]| {
    let Some((&flags, data)) = input.split_first() else { return };
    let was_head = flags & 1 == 1;
    let mut head = ResponseHead::default();
    if parse_response(data, MAX_HEAD, was_head, &mut head) != Ok(true) {
        return;
    }
    assert!(head.head_len <= data.len() && (100..=999).contains(&head.status));
    let inside = |s: Span| assert!(s.start <= s.end && s.end as usize <= head.head_len, "{s:?}");
    inside(head.reason);
    head.headers.iter().for_each(|h| (inside(h.name), inside(h.value)).1);

    let mut scratch = ResponseHead::default();
    let step = (head.head_len / 64).max(1);
    for cut in (0..head.head_len).step_by(step).chain([head.head_len - 1]) {
        assert_eq!(parse_response(&data[..cut], MAX_HEAD, was_head, &mut scratch), Ok(false), "cut {cut}");
    }

    let mut longer = data[..head.head_len].to_vec();
    longer.extend_from_slice(b"\n\r\nHTTP/1.1 200 OK\r\n");
    assert_eq!(parse_response(&longer, MAX_HEAD, was_head, &mut scratch), Ok(true));
    assert_eq!(meaning(&head, data), meaning(&scratch, &longer));

    let rebuilt = rebuild(&head, data);
    let reparsed = parse_response(&rebuilt, usize::MAX, was_head, &mut scratch);
    assert_eq!(reparsed, Ok(true), "rebuilt {:?}", String::from_utf8_lossy(&rebuilt));
    assert_eq!(meaning(&head, data), meaning(&scratch, &rebuilt));
});

/// `VERSION status reason`, then `name: value` per header.
fn rebuild(head: &ResponseHead, data: &[u8]) -> Vec<u8> {
    let mut out = format!("{} {:03} ", head.version.as_str(), head.status).into_bytes();
    out.extend_from_slice(head.reason.get(data));
    out.extend_from_slice(b"\r\n");
    for h in &head.headers {
        out.extend_from_slice(h.name.get(data));
        out.extend_from_slice(b": ");
        out.extend_from_slice(h.value.get(data));
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"\r\n");
    out
}

/// What a head says, with its spans read out of its buffer.
fn meaning(head: &ResponseHead, buf: &[u8]) -> String {
    let text = |s: Span| String::from_utf8_lossy(s.get(buf)).into_owned();
    let headers: Vec<(String, String)> = head.headers.iter().map(|h| (text(h.name), text(h.value))).collect();
    format!(
        "{:?} {} {} {:?} keep_alive={} hop={} length={:?} {:?}",
        head.version,
        head.status,
        text(head.reason),
        head.body,
        head.keep_alive,
        head.hop_by_hop,
        head.content_length,
        headers
    )
}
