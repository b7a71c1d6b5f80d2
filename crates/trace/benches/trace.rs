//! Criterion benchmark of trace throughput in records per second: reading the Locus text
//! format from memory (100,000 synthetic records, parse and allocate each record), writing
//! it, and generating a synthetic Zipf trace with one-timers, a dynamic class and Poisson times.

use std::hint::black_box;
use std::io::Cursor;
use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use locus_trace::{
    Arrivals, DynamicClassSpec, LocusReader, ReadOptions, TraceFormat, TraceReader, TraceRecord, TraceWriter,
    ZipfTraceGenerator, ZipfTraceSpec,
};

const RECORDS: u64 = 100_000;

fn spec() -> ZipfTraceSpec {
    ZipfTraceSpec {
        seed: 42,
        requests: RECORDS,
        documents: 20_000,
        alpha: 0.8,
        one_timer_share: 0.05,
        dynamic: vec![DynamicClassSpec { class: 1, share: 0.05 }],
        arrivals: Arrivals::Poisson { rate: 1000.0 },
        ..ZipfTraceSpec::default()
    }
}

fn records() -> Vec<TraceRecord> {
    ZipfTraceGenerator::new(spec()).expect("valid spec").collect()
}

fn locus_bytes(records: &[TraceRecord]) -> Vec<u8> {
    let mut w = TraceWriter::new(Vec::new(), TraceFormat::Locus, "mem").expect("writer");
    for r in records {
        w.write(r).expect("writable");
    }
    w.finish().expect("flush")
}

fn bench(c: &mut Criterion) {
    let records = records();
    let bytes = locus_bytes(&records);
    let mut group = c.benchmark_group("trace");
    group.throughput(Throughput::Elements(RECORDS));
    group.sample_size(10);
    group.bench_function("read_locus_format", |b| {
        b.iter(|| {
            let reader = LocusReader::new(&bytes[..], "mem", 0, 1 << 20);
            let mut n = 0u64;
            for r in reader {
                n += black_box(r.expect("valid")).size;
            }
            n
        })
    });
    group.bench_function("read_locus_format_detected", |b| {
        b.iter(|| {
            let reader = TraceReader::from_reader(Cursor::new(bytes.clone()), "mem", &ReadOptions::default())
                .expect("detected");
            reader.map(|r| r.expect("valid").size).sum::<u64>()
        })
    });
    group.bench_function("write_locus_format", |b| b.iter(|| locus_bytes(black_box(&records)).len()));
    group.bench_function("synth_generate", |b| {
        b.iter(|| ZipfTraceGenerator::new(spec()).expect("valid spec").map(|r| r.size).sum::<u64>())
    });
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(2));
    targets = bench
}
criterion_main!(benches);
