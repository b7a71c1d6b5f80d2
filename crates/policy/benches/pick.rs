//! Criterion benchmarks of picking a node: one `Cluster::assign` plus one `complete` per
//! iteration, for every policy, on 8 nodes over a pre-generated Zipf-like target stream.

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use locus_policy::{Cluster, NodeId, PolicyConfig, RequestInfo, Time, build};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::collections::VecDeque;
use std::hint::black_box;
use std::time::Duration;

const NODES: usize = 8;
const REQUESTS: usize = 10_000;
const DISTINCT_TARGETS: usize = 5_000;
/// Requests kept in flight, so that load-driven policies see non-zero, uneven loads.
const IN_FLIGHT: usize = 64;

/// `REQUESTS` target strings drawn from `DISTINCT_TARGETS` with Zipf (s = 1) popularity.
fn zipf_targets(seed: u64) -> Vec<String> {
    let weights: Vec<f64> = (1..=DISTINCT_TARGETS).map(|r| 1.0 / r as f64).collect();
    let mut cdf = Vec::with_capacity(DISTINCT_TARGETS);
    let mut acc = 0.0;
    for w in &weights {
        acc += w;
        cdf.push(acc);
    }
    let mut rng = SmallRng::seed_from_u64(seed);
    (0..REQUESTS)
        .map(|_| {
            let x = rng.random::<f64>() * acc;
            let rank = cdf.partition_point(|&c| c < x).min(DISTINCT_TARGETS - 1);
            format!("/docs/section{}/page{rank}.html", rank % 31)
        })
        .collect()
}

fn bench_pick(c: &mut Criterion) {
    let targets = zipf_targets(42);
    let requests: Vec<RequestInfo<'_>> = targets.iter().map(|t| RequestInfo::get(t)).collect();
    let mut group = c.benchmark_group("assign_complete");
    group.measurement_time(Duration::from_secs(2)).warm_up_time(Duration::from_secs(1)).sample_size(20);
    let weights = [1u32; NODES];
    for name in PolicyConfig::canonical_names() {
        let config = PolicyConfig::from_name(name).unwrap();
        let mut cluster = Cluster::new(build(&config, &weights).unwrap(), &weights, Duration::ZERO);
        let mut outstanding: VecDeque<(NodeId, u64)> = VecDeque::with_capacity(IN_FLIGHT + 1);
        let mut i = 0usize;
        group.bench_function(BenchmarkId::from_parameter(name), |b| {
            b.iter(|| {
                let req = &requests[i % REQUESTS];
                // Simulated time: 100 µs per request.
                let now = Time(i as u64 * 100_000);
                i += 1;
                let node = cluster.assign(black_box(req), now).unwrap();
                outstanding.push_back((node, req.target_hash));
                if outstanding.len() > IN_FLIGHT {
                    let (done, h) = outstanding.pop_front().unwrap();
                    cluster.complete(done, h, now);
                }
                node
            })
        });
    }
    group.finish();
}

criterion_group!(benches, bench_pick);
criterion_main!(benches);
