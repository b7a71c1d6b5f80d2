//! Criterion benchmark of `DocCache`: for each replacement policy, a get-or-insert loop over
//! a pre-generated Zipf-distributed sequence of 100,000 u64 keys with seeded random sizes,
//! the cache holding 20% of the distinct bytes; once as the node uses it (default hasher,
//! `insert`) and once as a simulator would (cheap hasher, `insert_with_evictions`).

use std::hash::{BuildHasher, BuildHasherDefault, Hasher};
use std::hint::black_box;
use std::time::Duration;

use criterion::measurement::WallTime;
use criterion::{BenchmarkGroup, Criterion, Throughput, criterion_group, criterion_main};
use locus_cache::{DocCache, Replacement};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use rand_distr::{Distribution, Zipf};

const REQUESTS: usize = 100_000;
const DOCUMENTS: u64 = 20_000;
const ZIPF_EXPONENT: f64 = 0.8;

/// A request sequence of `(key, size)` and the cache capacity: 20% of the bytes of the
/// distinct documents requested.
struct Trace {
    requests: Vec<(u64, u64)>,
    capacity_bytes: u64,
}

fn trace() -> Trace {
    let mut rng = SmallRng::seed_from_u64(0x10C05);
    // Document sizes from 256 B to 256 KiB, roughly log-uniform, like a web site's files.
    let sizes: Vec<u64> = (0..DOCUMENTS)
        .map(|_| {
            let base = 1u64 << rng.random_range(8..=17);
            base + rng.random_range(0..base)
        })
        .collect();
    let zipf = Zipf::new(DOCUMENTS as f64, ZIPF_EXPONENT).expect("valid Zipf parameters");
    let requests: Vec<(u64, u64)> = (0..REQUESTS)
        .map(|_| {
            // Scatter popularity ranks over the key space so hot keys are not adjacent.
            let rank = zipf.sample(&mut rng) as u64 - 1;
            let key = rank.wrapping_mul(0x9E37_79B9_7F4A_7C15);
            (key, sizes[rank as usize])
        })
        .collect();
    let mut distinct: Vec<(u64, u64)> = requests.clone();
    distinct.sort_unstable();
    distinct.dedup();
    let distinct_bytes: u64 = distinct.iter().map(|&(_, size)| size).sum();
    Trace { requests, capacity_bytes: distinct_bytes / 5 }
}

/// A multiply-xor hasher for u64 keys: fast, and fine for trusted keys such as a trace's.
#[derive(Default)]
struct MultiplyHasher(u64);

impl Hasher for MultiplyHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &byte in bytes {
            self.write_u64(u64::from(byte));
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(5) ^ n).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

/// How a benchmark inserts after a miss.
#[derive(Clone, Copy)]
enum InsertCall {
    /// `insert`, which collects the evicted objects in a `Vec`.
    Collecting,
    /// `insert_with_evictions`, which hands them to a closure.
    Streaming,
}

fn replay<S: BuildHasher>(cache: &mut DocCache<u64, (), S>, requests: &[(u64, u64)], insert: InsertCall) {
    for &(key, size) in requests {
        if cache.get(&key).is_some() {
            continue;
        }
        match insert {
            InsertCall::Collecting => {
                black_box(cache.insert(key, (), size, 1.0));
            }
            InsertCall::Streaming => {
                black_box(cache.insert_with_evictions(key, (), size, 1.0, |key, value| {
                    black_box((key, value));
                }));
            }
        }
    }
}

fn bench_policies<S: BuildHasher + Default>(
    group: &mut BenchmarkGroup<'_, WallTime>,
    trace: &Trace,
    insert: InsertCall,
) {
    for replacement in Replacement::ALL {
        let mut cache = DocCache::with_hasher(trace.capacity_bytes, u64::MAX, replacement, S::default());
        // Warm the cache, and show the hit ratio so the workload's realism can be judged.
        replay(&mut cache, &trace.requests, insert);
        cache.reset_stats();
        replay(&mut cache, &trace.requests, insert);
        eprintln!(
            "{replacement}: {} of {} bytes used by {} objects, warm hit ratio {:.3}",
            cache.used_bytes(),
            trace.capacity_bytes,
            cache.len(),
            cache.stats().hit_ratio()
        );
        // Each iteration replays the whole sequence on the cache the previous one left.
        group
            .bench_function(replacement.as_str(), |b| b.iter(|| replay(&mut cache, &trace.requests, insert)));
    }
}

fn get_or_insert(c: &mut Criterion) {
    let trace = trace();
    for (name, insert) in
        [("get_or_insert", InsertCall::Collecting), ("get_or_insert_fast_hash", InsertCall::Streaming)]
    {
        let mut group = c.benchmark_group(name);
        group
            .warm_up_time(Duration::from_secs(1))
            .measurement_time(Duration::from_secs(2))
            .sample_size(20)
            .throughput(Throughput::Elements(REQUESTS as u64));
        match insert {
            InsertCall::Collecting => {
                bench_policies::<std::hash::RandomState>(&mut group, &trace, insert);
            }
            InsertCall::Streaming => {
                bench_policies::<BuildHasherDefault<MultiplyHasher>>(&mut group, &trace, insert);
            }
        }
        group.finish();
    }
}

criterion_group!(benches, get_or_insert);
criterion_main!(benches);
