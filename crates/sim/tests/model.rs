//! Tests of the simulation model on small hand-computable scenarios (disk reads shared,
//! CPU/disk overlap, idle time, admission limit), determinism, and the qualitative results
//! the LARD paper's model must give on small synthetic traces.

use locus_policy::PolicyConfig;
use locus_sim::{Arrivals, ClassCost, FrontEndLimit, SimConfig, SimPolicy, SimReport, Workload, simulate};
use locus_trace::{DocumentSizes, DynamicClassSpec, SizeModel, TraceRecord, ZipfTraceSpec};

const US: f64 = 1e-6;

fn files(targets: &[(&str, u64)]) -> Workload {
    let recs: Vec<TraceRecord> = targets.iter().map(|&(t, s)| TraceRecord::get(t, s)).collect();
    Workload::from_records(&recs)
}

fn config(policy: &str, nodes: u32, clients: u32) -> SimConfig {
    SimConfig {
        policy: SimPolicy::from_name(policy).unwrap(),
        nodes,
        arrivals: Arrivals::Closed { clients: Some(clients) },
        frontend_limit: FrontEndLimit::None,
        ..SimConfig::lard98()
    }
}

fn assert_secs(got: f64, want_us: f64) {
    assert!((got - want_us * US).abs() < 1e-12, "simulated {got} s, expected {want_us} µs");
}

// The LARD costs for a 1 KB file: setup 145 µs, disk 28 ms + 410 µs, transmit 2 × 40 µs,
// teardown 145 µs.
const SETUP: f64 = 145.0;
const READ_1K: f64 = 28_410.0;
const TAIL_1K: f64 = 80.0 + 145.0;

#[test]
fn concurrent_requests_for_one_file_share_one_disk_read() {
    let w = files(&[("/a", 1024), ("/a", 1024), ("/a", 1024)]);
    let r = simulate(&w, &config("rr", 1, 3)).unwrap();
    assert_eq!(r.disk_reads, 1, "three requests, one read");
    assert_eq!(r.miss_ratio, 1.0, "all three waited for the disk");
    // Setups at 0..145, 145..290, 290..435; the read 145..28555; then three transmits.
    assert_secs(r.sim_seconds, SETUP + READ_1K + 3.0 * TAIL_1K);
    // Two different files are two reads, one after the other.
    let w = files(&[("/a", 1024), ("/b", 1024), ("/a", 1024)]);
    let r = simulate(&w, &config("rr", 1, 3)).unwrap();
    assert_eq!(r.disk_reads, 2);
}

#[test]
fn cpu_and_disk_overlap_across_requests() {
    // Two misses on one node with one disk: A's transmit runs on the CPU while the disk
    // reads B's file.
    let w = files(&[("/a", 1024), ("/b", 1024)]);
    let r = simulate(&w, &config("rr", 1, 2)).unwrap();
    // A: setup 0..145, read 145..28555, tail 28555..28780.
    // B: setup 145..290, read 28555..56965 (waits for the disk), tail 56965..57190.
    let overlapped = SETUP + 2.0 * READ_1K + TAIL_1K;
    assert_secs(r.sim_seconds, overlapped);
    let sequential = 2.0 * (SETUP + READ_1K + TAIL_1K);
    assert!(overlapped < sequential);
    assert!((r.mean_delay_ms - (28_780.0 + 57_190.0) / 2.0 / 1000.0).abs() < 1e-9, "{}", r.mean_delay_ms);
    // With a second disk (files striped by popularity rank) the reads overlap too: B's read
    // ends at 290 + 28410 = 28700, and its tail waits for A's (28555..28780).
    let mut two = config("rr", 1, 2);
    two.disks = 2;
    let r = simulate(&w, &two).unwrap();
    assert_secs(r.sim_seconds, SETUP + READ_1K + 2.0 * TAIL_1K);
}

#[test]
fn idle_time_is_the_share_of_time_a_node_is_below_the_threshold() {
    // Round robin over two nodes, one client: /a on node 0 (miss), /b on node 1 (miss),
    // /a on node 0 again (hit). Idle = load below 1 (0.04 × T_low 25).
    let w = files(&[("/a", 1024), ("/b", 1024), ("/a", 1024)]);
    let mut c = config("rr", 2, 1);
    c.idle_fraction = 0.04;
    let r = simulate(&w, &c).unwrap();
    let miss = SETUP + READ_1K + TAIL_1K; // 28 780 µs
    let hit = SETUP + TAIL_1K; // 370 µs
    let total = 2.0 * miss + hit;
    assert_secs(r.sim_seconds, total);
    let node0 = miss / total; // idle while node 1 serves /b
    let node1 = (miss + hit) / total; // idle during both requests on node 0
    assert!((r.per_node[0].idle_ratio - node0).abs() < 1e-12, "{:?}", r.per_node[0]);
    assert!((r.per_node[1].idle_ratio - node1).abs() < 1e-12, "{:?}", r.per_node[1]);
    assert!((r.idle_ratio - (node0 + node1) / 2.0).abs() < 1e-12);
    assert_eq!(r.hit_ratio, 1.0 / 3.0);
    // Mean load of node 0: one connection while it is busy.
    assert!((r.per_node[0].mean_load - (miss + hit) / total).abs() < 1e-12);
}

fn zipf(requests: u64, documents: u64, alpha: f64, seed: u64) -> Workload {
    Workload::synthetic(ZipfTraceSpec {
        seed,
        requests,
        documents,
        alpha,
        sizes: DocumentSizes::Model(SizeModel { max_size: 1 << 20, ..SizeModel::surge() }),
        ..ZipfTraceSpec::default()
    })
    .unwrap()
}

#[test]
fn admission_limit_is_never_exceeded() {
    let w = zipf(3000, 300, 0.8, 5);
    // A configured S of 7 through LARD/R's own admission limit, as the switch applies it.
    let mut c = config("lard-r", 3, 50);
    c.policy = SimPolicy::Switch(PolicyConfig::LardR {
        t_low: 25,
        t_high: 65,
        k_secs: 20.0,
        admission_limit: Some(7),
        max_targets: 1000,
    });
    c.frontend_limit = FrontEndLimit::Policy;
    let r = simulate(&w, &c).unwrap();
    assert_eq!(r.admission_limit, Some(7));
    assert_eq!(r.max_in_flight, 7, "the limit is reached and never exceeded");
    // The paper's S for two nodes, (2 − 1)·65 + 25 − 1 = 89, with 300 clients.
    let mut c = config("lard-r", 2, 300);
    c.frontend_limit = FrontEndLimit::Policy;
    let r = simulate(&w, &c).unwrap();
    assert_eq!((r.admission_limit, r.max_in_flight), (Some(89), 89));
    // The same S applied to WRR by the paper-style front-end.
    let mut c = config("wrr", 2, 300);
    c.frontend_limit = FrontEndLimit::Auto;
    assert_eq!(simulate(&w, &c).unwrap().max_in_flight, 89);
    // Without a limit all 50 clients get in.
    let r = simulate(&w, &config("wrr", 3, 50)).unwrap();
    assert_eq!((r.admission_limit, r.max_in_flight), (None, 50));
}

fn json(r: &SimReport) -> String {
    serde_json::to_string(r).unwrap()
}

#[test]
fn same_trace_config_and_seed_give_identical_output_and_another_seed_differs() {
    let w = Workload::synthetic(ZipfTraceSpec {
        seed: 3,
        requests: 4000,
        documents: 400,
        dynamic: vec![DynamicClassSpec { class: 2, share: 0.1 }],
        ..ZipfTraceSpec::default()
    })
    .unwrap();
    let mut c = config("lard-r", 4, 40);
    c.arrivals = Arrivals::Poisson { rate: 800.0 };
    c.costs.classes = vec![ClassCost { class: 2, mean_ns: 5_000_000, stddev_ratio: 0.3, disk_ns: 0 }];
    c.seed = 11;
    let a = json(&simulate(&w, &c).unwrap());
    let b = json(&simulate(&w, &c).unwrap());
    assert_eq!(a, b);
    c.seed = 12;
    let other = json(&simulate(&w, &c).unwrap());
    assert_ne!(a, other, "the seed drives arrivals and dynamic costs");
    // Closed loop, every policy including the baselines: repeatable too.
    for p in ["wrr", "hash", "lb-gc", "lard", "lard-r", "wrr-gms", "p2c", "chash"] {
        let c = config(p, 3, 30);
        assert_eq!(json(&simulate(&w, &c).unwrap()), json(&simulate(&w, &c).unwrap()), "{p}");
    }
}

/// A trace whose working set is several times one 4 MB cache, measured after warm-up.
fn big_working_set() -> (Workload, SimConfig) {
    let w = zipf(60_000, 3000, 0.9, 9);
    let mut c = SimConfig::lard98();
    c.cache.capacity_bytes = 4 << 20;
    c.warmup_requests = 15_000;
    (w, c)
}

fn point(base: &SimConfig, w: &Workload, policy: &str, nodes: u32) -> SimReport {
    let mut c = base.clone();
    c.policy = SimPolicy::from_name(policy).unwrap();
    c.nodes = nodes;
    simulate(w, &c).unwrap()
}

#[test]
fn wrr_miss_ratio_is_roughly_independent_of_node_count() {
    let (w, c) = big_working_set();
    assert!(w.unique_bytes() > 8 * c.cache.capacity_bytes, "working set {} B", w.unique_bytes());
    let ratios: Vec<f64> = [1, 2, 4, 8].iter().map(|&n| point(&c, &w, "wrr", n).miss_ratio).collect();
    let mean = ratios.iter().sum::<f64>() / ratios.len() as f64;
    assert!(mean > 0.05, "the cache is too large for the test: {ratios:?}");
    for r in &ratios {
        assert!((r / mean - 1.0).abs() < 0.15, "WRR miss ratios {ratios:?}");
    }
    // Locality-aware distribution does lower it with more nodes.
    let lard8 = point(&c, &w, "lard", 8).miss_ratio;
    assert!(lard8 < 0.6 * mean, "LARD at 8 nodes {lard8} vs WRR {mean}");
}

#[test]
fn lard_hit_ratio_beats_wrr_when_the_working_set_exceeds_one_cache() {
    let (w, c) = big_working_set();
    let wrr = point(&c, &w, "wrr", 4);
    let lard = point(&c, &w, "lard", 4);
    let lard_r = point(&c, &w, "lard-r", 4);
    assert!(lard.hit_ratio > wrr.hit_ratio + 0.1, "LARD {} vs WRR {}", lard.hit_ratio, wrr.hit_ratio);
    assert!(lard_r.hit_ratio > wrr.hit_ratio + 0.1, "LARD/R {} vs WRR {}", lard_r.hit_ratio, wrr.hit_ratio);
    assert!(lard.rps > wrr.rps, "LARD {} vs WRR {} req/s", lard.rps, wrr.rps);
}

#[test]
fn global_cache_baselines_aggregate_memory() {
    let (w, c) = big_working_set();
    let lb = point(&c, &w, "hash", 4);
    let lb_gc = point(&c, &w, "lb-gc", 4);
    let wrr = point(&c, &w, "wrr", 4);
    let gms = point(&c, &w, "wrr-gms", 4);
    assert!(lb_gc.miss_ratio <= lb.miss_ratio + 0.01, "LB/GC {} vs LB {}", lb_gc.miss_ratio, lb.miss_ratio);
    assert!(gms.remote_hit_ratio > 0.05, "GMS serves from remote memory: {}", gms.remote_hit_ratio);
    assert!(gms.miss_ratio < wrr.miss_ratio - 0.05, "GMS {} vs WRR {}", gms.miss_ratio, wrr.miss_ratio);
    let sends: u64 = gms.per_node.iter().map(|n| n.remote_sends).sum();
    assert!(sends > 0);
}

#[test]
fn cpu_speed_and_disk_count_scale_their_bottleneck() {
    // Hits only (one small file): CPU-bound, twice the CPU speed gives twice the throughput.
    // (The first request's miss is left out of the measurement.)
    let hits = files(&vec![("/a", 1024); 2000]);
    let mut base = config("rr", 1, 4);
    base.warmup_requests = 10;
    let mut fast = base.clone();
    fast.cpu_speed = 2.0;
    let base = simulate(&hits, &base).unwrap();
    let fast = simulate(&hits, &fast).unwrap();
    let speedup = fast.rps / base.rps;
    assert!((speedup - 2.0).abs() < 0.01, "CPU 2×: {speedup}");
    // Misses only (every file distinct): disk-bound, two disks double it and CPU does not.
    let names: Vec<String> = (0..400).map(|i| format!("/m{i}")).collect();
    let misses = files(&names.iter().map(|n| (n.as_str(), 1024)).collect::<Vec<_>>());
    let one = simulate(&misses, &config("rr", 1, 8)).unwrap();
    let mut two = config("rr", 1, 8);
    two.disks = 2;
    let two = simulate(&misses, &two).unwrap();
    assert!((two.rps / one.rps - 2.0).abs() < 0.05, "2 disks: {}", two.rps / one.rps);
    let mut cpu = config("rr", 1, 8);
    cpu.cpu_speed = 4.0;
    assert!((simulate(&misses, &cpu).unwrap().rps / one.rps - 1.0).abs() < 0.02);
    // Memory scale multiplies the cache.
    let mut mem = config("rr", 1, 8);
    mem.memory_scale = 3.0;
    assert_eq!(simulate(&misses, &mem).unwrap().cache_bytes, 3 * (32 << 20));
}

#[test]
fn csld_model_charges_rtt_request_cpu_fork_and_class_cost() {
    // One dynamic request of class 2 (20 ms, no variance) under the CSLD costs with a
    // constant 10 ms RTT: RTT + setup + basic processing + fork + class + transmit + teardown.
    let recs = vec![TraceRecord { class: Some(2), ..TraceRecord::get("/cgi-bin/x", 4096) }];
    let w = Workload::from_records(&recs);
    let mut c = SimConfig::csld03();
    c.nodes = 1;
    c.costs.class_stddev_ratio = 0.0;
    c.costs.rtt = locus_sim::RttModel::Const { ns: 10_000_000 };
    let r = simulate(&w, &c).unwrap();
    let want_us = 10_000.0 + 132.0 + 213.0 + 1_400.0 + 20_000.0 + 8.0 * 37.0 + 132.0;
    assert_secs(r.sim_seconds, want_us);
    assert_eq!(r.disk_reads, 0, "dynamic requests read no file");
    // A static 1 KB miss under CSLD: no extra-seek rule, 15.6 ms + 300 µs.
    let w = files(&[("/s", 1024)]);
    let r = simulate(&w, &c).unwrap();
    assert_secs(r.sim_seconds, 10_000.0 + 132.0 + 213.0 + 15_900.0 + 2.0 * 37.0 + 132.0);
}

#[test]
fn trace_times_drive_an_open_loop_and_a_front_end_cost_delays_each_request() {
    // Two 1 KB misses arriving at 0 s and 1 s (trace times), on different files.
    let recs = vec![
        TraceRecord { time: Some(10.0), ..TraceRecord::get("/a", 1024) },
        TraceRecord { time: Some(11.0), ..TraceRecord::get("/b", 1024) },
    ];
    let w = Workload::from_records(&recs);
    let mut c = config("rr", 1, 1);
    c.arrivals = Arrivals::Trace;
    let miss = SETUP + READ_1K + TAIL_1K;
    let r = simulate(&w, &c).unwrap();
    assert_secs(r.sim_seconds, 1e6 + miss);
    assert!((r.mean_delay_ms - miss / 1000.0).abs() < 1e-9);
    // A front-end that spends 1 ms per request adds 1 ms to each.
    c.costs.frontend_ns = 1_000_000;
    let r = simulate(&w, &c).unwrap();
    assert!((r.mean_delay_ms - (miss + 1000.0) / 1000.0).abs() < 1e-9, "{}", r.mean_delay_ms);
}
