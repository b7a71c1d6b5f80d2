//! Criterion benchmarks of picking a node: one `Cluster::assign` plus one `complete` per
//! iteration, for every policy, on 8 nodes over a pre-generated Zipf-like target stream; and
//! for the estimating policies (CSLD, metric-fed WRR, CAP) on 64 nodes, each iteration also
//! feeding the request to the sniffer and, once per period, every node's report, so the
//! periodic estimation is amortized into the figure.

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use locus_policy::{
    ClassCost, Cluster, FileInfo, FileTable, NodeId, NodeReport, PolicyConfig, PolicyInputs, RequestInfo,
    ResourceKind, Time, WrrVariant, build, build_with,
};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::collections::VecDeque;
use std::hint::black_box;
use std::sync::Arc;
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

/// Nodes for the estimating policies.
const BIG_CLUSTER: usize = 64;
/// Simulated time between requests: 6 400 requests/s, the CSLD paper's heaviest case.
const INTERVAL_NS: u64 = 156_250;

/// The site the estimating policies know: five dynamic classes of k·10 ms (CPU or disk
/// bound) and every static target with a size.
fn site(targets: &[String]) -> PolicyInputs {
    let classes: Vec<ClassCost> = (1..=5u64)
        .map(|k| ClassCost {
            cpu_ns: k * 10_000_000,
            disk_ns: if k % 2 == 0 { 5_000_000 } else { 0 },
            size: 4096,
            resource: if k % 2 == 0 { ResourceKind::CpuDisk } else { ResourceKind::Cpu },
        })
        .collect();
    let files: FileTable = targets
        .iter()
        .map(|t| {
            (RequestInfo::get(t).target_hash, FileInfo { size: 1_000 + t.len() as u64 * 700, mtime: 100 })
        })
        .collect();
    PolicyInputs { classes: classes.into(), files: Some(Arc::new(files)) }
}

/// The request stream: 5% dynamic (class uniform), 28% conditional, the rest full GETs.
fn mixed_requests(targets: &[String]) -> Vec<RequestInfo<'_>> {
    let mut rng = SmallRng::seed_from_u64(7);
    targets
        .iter()
        .map(|t| {
            let mut r = RequestInfo::get(t);
            let x: f64 = rng.random();
            if x < 0.05 {
                r.class = Some(rng.random_range(0..5));
            } else if x < 0.33 {
                r.if_modified_since = Some(200);
            }
            r
        })
        .collect()
}

fn bench_estimating(c: &mut Criterion) {
    let targets = zipf_targets(43);
    let requests = mixed_requests(&targets);
    let inputs = site(&targets);
    let mut group = c.benchmark_group("estimating_64");
    group.measurement_time(Duration::from_secs(3)).warm_up_time(Duration::from_secs(1)).sample_size(20);
    let weights = [1u32; BIG_CLUSTER];
    let configs = [
        PolicyConfig::from_name("csld").unwrap(),
        PolicyConfig::wrr_metrics(WrrVariant::I),
        PolicyConfig::from_name("cap").unwrap(),
    ];
    for config in configs {
        let mut cluster =
            Cluster::new(build_with(&config, &weights, &inputs).unwrap(), &weights, Duration::ZERO);
        let report_every = cluster.report_period().map(|p| (p.as_nanos() as u64 / INTERVAL_NS).max(1));
        let mut outstanding: VecDeque<(NodeId, u64)> = VecDeque::with_capacity(IN_FLIGHT + 1);
        let mut i = 0u64;
        let rtt = Duration::from_millis(150);
        let name = format!("{}{}", config.name(), if config.name() == "wrr-metrics" { "-i" } else { "" });
        group.bench_function(BenchmarkId::from_parameter(name), |b| {
            b.iter(|| {
                let req = &requests[i as usize % REQUESTS];
                let now = Time(i * INTERVAL_NS);
                if let Some(every) = report_every
                    && i.is_multiple_of(every)
                {
                    for k in 0..BIG_CLUSTER {
                        let r = NodeReport {
                            listen_queue: (k as u32 * 7 + i as u32) % 5,
                            disk_wait: (k as u32 + i as u32) % 3,
                            static_active: 4,
                            dynamic_active: (k % 2) as u32,
                            probe: Some(Duration::from_micros(500 + k as u64 * 10)),
                        };
                        cluster.report(NodeId(k as u32), &r, now);
                    }
                }
                i += 1;
                let node = cluster.assign(black_box(req), now).unwrap();
                cluster.observe(node, req, rtt, now);
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

criterion_group!(benches, bench_pick, bench_estimating);
criterion_main!(benches);
