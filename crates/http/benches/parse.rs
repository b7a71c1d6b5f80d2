//! Criterion benchmarks of request-head parsing and chunked body tracking.

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use locus_http::{BodyKind, BodyTracker, Limits, RequestHead, parse_request};
use std::hint::black_box;

fn bench_parse(c: &mut Criterion) {
    let small = b"GET /docs/index.html HTTP/1.1\r\nHost: www.example.com\r\n\r\n".to_vec();
    let browser = b"GET /images/logo-large.png?v=3 HTTP/1.1\r\nHost: www.example.com\r\nUser-Agent: Mozilla/5.0 (X11; Linux x86_64) Gecko/20100101 Firefox/128.0\r\nAccept: image/avif,image/webp,*/*\r\nAccept-Language: en-US,en;q=0.5\r\nAccept-Encoding: gzip, deflate, br\r\nReferer: https://www.example.com/\r\nConnection: keep-alive\r\nCookie: session=0123456789abcdef; theme=dark\r\nSec-Fetch-Dest: image\r\n\r\n".to_vec();
    let limits = Limits::default();
    let mut g = c.benchmark_group("parse_request");
    g.warm_up_time(std::time::Duration::from_secs(1))
        .measurement_time(std::time::Duration::from_secs(2))
        .sample_size(30);
    for (name, raw) in [("minimal", &small), ("browser", &browser)] {
        let mut head = RequestHead::default();
        g.throughput(Throughput::Bytes(raw.len() as u64));
        g.bench_function(name, |b| {
            b.iter(|| {
                let done = parse_request(black_box(raw), &limits, &mut head).unwrap();
                black_box((done, head.head_len))
            })
        });
    }
    g.finish();

    let mut body = Vec::new();
    for _ in 0..16 {
        body.extend_from_slice(b"1000\r\n");
        body.extend_from_slice(&[b'x'; 4096]);
        body.extend_from_slice(b"\r\n");
    }
    body.extend_from_slice(b"0\r\n\r\n");
    let mut g = c.benchmark_group("body");
    g.warm_up_time(std::time::Duration::from_secs(1))
        .measurement_time(std::time::Duration::from_secs(2))
        .sample_size(30);
    g.throughput(Throughput::Bytes(body.len() as u64));
    g.bench_function("chunked_64k", |b| {
        b.iter(|| {
            let mut t = BodyTracker::new(BodyKind::Chunked);
            black_box(t.advance(black_box(&body)).unwrap())
        })
    });
    g.finish();
}

criterion_group!(benches, bench_parse);
criterion_main!(benches);
