//! Split reads: a request head arriving in pieces parses to exactly what it parses to in one
//! read. Every request — the parser's example requests and valid and broken ones generated
//! here, under the default and small limits — is fed as a growing buffer at every split point
//! and in random reads, the way the switch and the node read; the first answer that is not
//! "need more" must equal the one-shot answer (a refusal may be 431 instead when the reads
//! pass the size limit before reaching the fault that one read sees first).

use locus_http::{Limits, RequestHead, parse_request};
use proptest::prelude::*;

/// The example requests of the parser's unit tests, valid and refused.
const EXAMPLES: &[&str] = &[
    "GET /a/b.html?x=1 HTTP/1.1\r\nHost: example.com\r\nUser-Agent: t\r\n\r\nNEXT",
    "GET / HTTP/1.1\r\nHost: a\r\nX-Long: abcdefghij\r\n\r\n",
    "GET / HTTP/1.0\r\n\r\n",
    "GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n",
    "GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n",
    "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 10\r\n\r\n",
    "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n",
    "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
    "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n",
    "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n",
    "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n",
    "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\n",
    "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nContent-length: 6\r\n\r\n",
    "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5, 5\r\n\r\n",
    "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: +5\r\n\r\n",
    "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked, gzip\r\n\r\n",
    "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n",
    "POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n",
    "GET / HTTP/1.1\r\nHost: a\r\nX-A: b\r\n c\r\n\r\n",
    "GET / HTTP/1.1\r\nHost: a\r\nX-A: b\r\n\tc\r\n\r\n",
    "GET / HTTP/1.1\r\n Host: a\r\n\r\n",
    "GET / HTTP/1.1\nHost: a\r\n\r\n",
    "GET / HTTP/1.1\r\nHost: a\n\r\n",
    "GET / HTTP/1.1\r\nHost: a\r\n\n",
    "GET / HTTP/1.1\r\nHost: a\rX: b\r\n\r\n",
    "GET / HTTP/1.1\r\nX: a\rb\r\nHost: a\r\n\r\n",
    "GET / HTTP/1.1\r\nHost: a\r\nBad Name: x\r\n\r\n",
    "GET / HTTP/1.1\r\nHost: a\r\nContent-Length : 5\r\n\r\n",
    "GET / HTTP/1.1\r\nHost: a\r\nX-A: a\x00b\r\n\r\n",
    "GET a/b HTTP/1.1\r\nHost: a\r\n\r\n",
    "GET /a#frag HTTP/1.1\r\nHost: a\r\n\r\n",
    "GET * HTTP/1.1\r\nHost: a\r\n\r\n",
    "GET http://u@h/ HTTP/1.1\r\nHost: a\r\n\r\n",
    "GET /caf\u{e9} HTTP/1.1\r\nHost: a\r\n\r\n",
    "OPTIONS * HTTP/1.1\r\nHost: a\r\n\r\n",
    "GET http://Example.com:8080/x?y HTTP/1.1\r\nHost: other\r\n\r\n",
    "GET http://h HTTP/1.1\r\nHost: h\r\n\r\n",
    "GET / HTTP/1.1\r\n\r\n",
    "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
    "GET / HTTP/1.1\r\nHost: a/b\r\n\r\n",
    "GET / HTTP/2.0\r\nHost: a\r\n\r\n",
    "GET / HTTP/1.2\r\nHost: a\r\n\r\n",
    "GET / HTTX/1.1\r\nHost: a\r\n\r\n",
    "GET  / HTTP/1.1\r\nHost: a\r\n\r\n",
    "\u{1}GET / HTTP/1.1\r\nHost: a\r\n\r\n",
    "PUT / HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\nContent-Length: 3\r\n\r\n",
    "PUT / HTTP/1.1\r\nHost: a\r\nExpect: fancy\r\n\r\n",
    "\r\n\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n",
];

/// The one-shot answer, or the first answer of split reads that is not "need more", as text
/// (a head is compared field by field through its `Debug` form; spans index the same bytes).
fn answer(result: Result<bool, locus_http::RequestError>, head: &RequestHead) -> String {
    match result {
        Ok(true) => format!("complete {head:?}"),
        Ok(false) => "need more".to_string(),
        Err(e) => format!("refused {e:?}"),
    }
}

fn one_shot(raw: &[u8], limits: &Limits) -> String {
    let mut head = RequestHead::default();
    let result = parse_request(raw, limits, &mut head);
    answer(result, &head)
}

/// Feed `raw` as a buffer growing to each of `ends` in turn (then to all of it), reusing one
/// head as the servers do; the first answer that is not "need more".
fn split(raw: &[u8], limits: &Limits, ends: impl IntoIterator<Item = usize>) -> String {
    let mut head = RequestHead::default();
    for end in ends.into_iter().filter(|&e| e < raw.len()).chain([raw.len()]) {
        let result = parse_request(&raw[..end], limits, &mut head);
        if result != Ok(false) {
            return answer(result, &head);
        }
    }
    "need more".to_string()
}

/// Whether split reads answered `got` where one read answered `whole`: the same answer, or
/// 431 where one read refused for a fault past the size limit.
fn agrees(got: &str, whole: &str) -> bool {
    got == whole || (got.starts_with("refused HeadTooLarge") && whole.starts_with("refused"))
}

/// Every two-part split and the given random reads agree with the one-shot parse.
fn check(raw: &[u8], limits: &Limits, reads: &[usize]) -> Result<(), TestCaseError> {
    let whole = one_shot(raw, limits);
    let text = String::from_utf8_lossy(raw);
    for cut in 0..raw.len() {
        let got = split(raw, limits, [cut]);
        prop_assert!(agrees(&got, &whole), "cut at {cut} of {text:?}: {got} != {whole}");
    }
    let ends = reads.iter().scan(0, |end, read| {
        *end += read;
        Some(*end)
    });
    let got = split(raw, limits, ends);
    prop_assert!(agrees(&got, &whole), "reads {reads:?} of {text:?}: {got} != {whole}");
    let got = split(raw, limits, 0..raw.len());
    prop_assert!(agrees(&got, &whole), "byte by byte {text:?}: {got} != {whole}");
    Ok(())
}

/// The default limits, or small ones the generated heads run into.
fn limits() -> impl Strategy<Value = Limits> {
    prop_oneof![
        Just(Limits::default()),
        (8usize..160, 1usize..6)
            .prop_map(|(max_head_bytes, max_headers)| Limits { max_head_bytes, max_headers }),
    ]
}

/// Requests built from parts, mostly well formed, some broken by a swapped, dropped or
/// inserted byte.
fn request() -> impl Strategy<Value = Vec<u8>> {
    let blank = prop::sample::select(vec!["", "", "\r\n", "\r\n\r\n", "\n", "\r\n\r\n\r\n\r\n\r\n\r\n"]);
    let method = prop::sample::select(vec!["GET", "POST", "PUT", "HEAD", "OPTIONS", "CONNECT", "G(T", ""]);
    let target = prop::sample::select(vec![
        "/",
        "/a/b.html?x=1",
        "*",
        "http://h:80/x",
        "HTTPS://h",
        "h:443",
        "/a#f",
        "/%2e%2e/",
        "a/b",
        "http://u@h/",
    ]);
    let version =
        prop::sample::select(vec!["HTTP/1.1", "HTTP/1.1", "HTTP/1.0", "HTTP/2.0", "HTTX/1.1", "HTTP/1"]);
    let eol = prop::sample::select(vec!["\r\n", "\r\n", "\r\n", "\r\n", "\n", "\r", "\r\r\n"]);
    let name = prop::sample::select(vec![
        "Host",
        "host",
        "Content-Length",
        "Transfer-Encoding",
        "Connection",
        "Expect",
        "Upgrade",
        "X-A",
        "Bad Name",
        " Host",
        "",
    ]);
    let value = prop::sample::select(vec![
        "a",
        "h:80",
        "[::1]",
        "5",
        "0",
        "5, 5",
        "chunked",
        "gzip, chunked",
        "chunked, gzip",
        "close",
        "keep-alive",
        "100-continue",
        "a\x01b",
        " spaced ",
        "",
    ]);
    let sep = prop::sample::select(vec![": ", ":", " : ", ":\t"]);
    let headers = prop::collection::vec((name, sep, value, eol.clone()), 0..6);
    let tail = prop::sample::select(vec!["", "hello", "GET / HTTP/1.1\r\n"]);
    let mutation = prop::option::weighted(0.3, (any::<prop::sample::Index>(), 0u8..3, any::<u8>()));
    (blank, method, target, version, eol.clone(), headers, eol, tail, mutation).prop_map(
        |(blank, method, target, version, eol, headers, end, tail, mutation)| {
            let mut raw = format!("{blank}{method} {target} {version}{eol}");
            for (name, sep, value, eol) in headers {
                raw.push_str(&format!("{name}{sep}{value}{eol}"));
            }
            raw.push_str(end);
            raw.push_str(tail);
            let mut raw = raw.into_bytes();
            if let Some((at, how, byte)) = mutation {
                let at = at.index(raw.len());
                match how {
                    0 => raw[at] = byte,
                    1 => drop(raw.remove(at)),
                    _ => raw.insert(at, byte),
                }
            }
            raw
        },
    )
}

fn reads() -> impl Strategy<Value = Vec<usize>> {
    prop::collection::vec(1usize..24, 1..40)
}

proptest! {
    // The examples are split at every point each case; only the limits and reads vary.
    #![proptest_config(ProptestConfig { cases: ProptestConfig::default().cases / 8, ..ProptestConfig::default() })]

    #[test]
    fn example_requests_parse_the_same_in_split_reads(limits in limits(), reads in reads()) {
        for raw in EXAMPLES {
            check(raw.as_bytes(), &limits, &reads)?;
        }
    }
}

proptest! {
    #[test]
    fn generated_requests_parse_the_same_in_split_reads(raw in request(), limits in limits(), reads in reads()) {
        check(&raw, &limits, &reads)?;
    }
}
