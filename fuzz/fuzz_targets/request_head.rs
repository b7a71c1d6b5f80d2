//! Fuzz `parse_request`: any bytes give a complete head, "need more" or a refusal with a
//! 4xx/5xx status, never a panic; a complete head's spans lie inside it, every shorter
//! prefix is "need more", bytes after it change nothing, and the head rebuilt from its
//! parts (method, target, version, headers) parses to the same meaning.
#![no_main]

use libfuzzer_sys::fuzz_target;
use locus_http::{Limits, RequestHead, Span, parse_request};

fuzz_target!(|input: &[u8]| {
    let Some((&flags, data)) = input.split_first() else { return };
    let limits = limits(flags);
    let mut head = RequestHead::default();
    let result = parse_request(data, &limits, &mut head);
    let Ok(complete) = result else {
        let status = result.unwrap_err().status();
        assert!(matches!(status, 400 | 417 | 431 | 505), "status {status}");
        return;
    };
    if !complete {
        return;
    }
    assert!(head.head_start < head.head_len && head.head_len <= data.len());
    check_spans(&head, data);
    check_prefixes_need_more(data, &limits, head.head_len);
    check_trailing_bytes_ignored(data, &limits, &head);
    check_rebuilt_head_means_the_same(data, &head);
});

/// The default limits, or (top bit set) small ones the fuzzer can reach.
fn limits(flags: u8) -> Limits {
    if flags & 0x80 == 0 {
        return Limits::default();
    }
    Limits { max_head_bytes: 16 + (flags & 0x3f) as usize * 4, max_headers: 1 + (flags & 0x7) as usize }
}

/// Every span of the head lies within the head's bytes.
fn check_spans(head: &RequestHead, data: &[u8]) {
    let inside = |s: Span| {
        assert!(s.start <= s.end, "{s:?}");
        assert!(s.start as usize >= head.head_start && s.end as usize <= head.head_len, "{s:?}");
    };
    inside(head.method_span);
    inside(head.target);
    inside(head.path);
    head.authority.into_iter().for_each(inside);
    head.host.into_iter().for_each(inside);
    for h in &head.headers {
        inside(h.name);
        inside(h.value);
    }
    // Text accessors are total on a parsed head.
    let _ = (head.method_str(data), head.target_str(data), head.path_str(data), head.host_str(data));
}

/// A complete head read in two parts: the first part alone is always "need more".
fn check_prefixes_need_more(data: &[u8], limits: &Limits, head_len: usize) {
    let mut scratch = RequestHead::default();
    let step = (head_len / 64).max(1);
    for cut in (0..head_len).step_by(step).chain([head_len - 1]) {
        assert_eq!(parse_request(&data[..cut], limits, &mut scratch), Ok(false), "cut at {cut}");
    }
}

/// The head does not look past its end: other bytes after it give the same head.
fn check_trailing_bytes_ignored(data: &[u8], limits: &Limits, head: &RequestHead) {
    let mut other = data[..head.head_len].to_vec();
    other.extend_from_slice(b"\r\n\n\rGET / HTTP/1.1\r\n");
    let mut again = RequestHead::default();
    assert_eq!(parse_request(&other, limits, &mut again), Ok(true));
    assert_eq!(meaning(head, data), meaning(&again, &other));
    assert_eq!(again.head_len, head.head_len);
    let mut alone = RequestHead::default();
    assert_eq!(parse_request(&data[..head.head_len], limits, &mut alone), Ok(true));
    assert_eq!(meaning(head, data), meaning(&alone, data));
}

/// `METHOD target VERSION`, then `name: value` per header: the same request.
fn check_rebuilt_head_means_the_same(data: &[u8], head: &RequestHead) {
    let mut rebuilt = Vec::new();
    for part in
        [head.method_span.get(data), b" ", head.target.get(data), b" ", head.version.as_str().as_bytes()]
    {
        rebuilt.extend_from_slice(part);
    }
    rebuilt.extend_from_slice(b"\r\n");
    for (name, value) in head.header_pairs(data) {
        rebuilt.extend_from_slice(name);
        rebuilt.extend_from_slice(b": ");
        rebuilt.extend_from_slice(value);
        rebuilt.extend_from_slice(b"\r\n");
    }
    rebuilt.extend_from_slice(b"\r\n");
    // The rebuilt head may be a little longer (one space per header): no size limit here.
    let roomy = Limits { max_head_bytes: usize::MAX, max_headers: head.headers.len().max(1) };
    let mut again = RequestHead::default();
    let reparsed = parse_request(&rebuilt, &roomy, &mut again);
    assert_eq!(reparsed, Ok(true), "rebuilt {:?}", String::from_utf8_lossy(&rebuilt));
    assert_eq!(meaning(head, data), meaning(&again, &rebuilt));
}

/// What a head says, with its spans read out of its buffer.
fn meaning(head: &RequestHead, buf: &[u8]) -> String {
    let text = |s: Span| String::from_utf8_lossy(s.get(buf)).into_owned();
    let headers: Vec<(String, String)> = head.headers.iter().map(|h| (text(h.name), text(h.value))).collect();
    format!(
        "{:?} {} {} {:?} {:?} {:?} {:?} {:?} keep_alive={} continue={} upgrade={} host={:?} {:?}",
        head.method,
        text(head.method_span),
        text(head.target),
        head.form,
        text(head.path),
        head.authority.map(text),
        head.version,
        head.body,
        head.keep_alive,
        head.expect_continue,
        head.upgrade,
        head.host.map(text),
        headers,
    )
}
