//! Criterion benchmark of the simulator's speed: one LARD-model point (LARD/R and WRR on
//! 8 nodes) over 200 000 requests of the Rice-like trace per iteration; criterion's
//! throughput line reads as simulated requests per second on one core.

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use locus_sim::reproduce::rice_like_spec;
use locus_sim::{SimConfig, SimPolicy, Workload, simulate};
use std::hint::black_box;

const REQUESTS: u64 = 200_000;

fn bench(c: &mut Criterion) {
    let workload = Workload::synthetic(rice_like_spec(REQUESTS, 1)).expect("trace");
    let mut group = c.benchmark_group("simulate_lard98_8_nodes");
    group.throughput(Throughput::Elements(REQUESTS));
    group.sample_size(10);
    for policy in ["lard-r", "wrr", "wrr-gms"] {
        let config =
            SimConfig { policy: SimPolicy::from_name(policy).unwrap(), nodes: 8, ..SimConfig::lard98() };
        group.bench_function(policy, |b| b.iter(|| black_box(simulate(&workload, &config).unwrap().rps)));
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
