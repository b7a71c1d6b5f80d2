//! The process-driven back end end to end: dropped SYNs and client retries, server latency
//! against the client RTT, the pool bound, and repeatability.

use locus_sim::{
    Arrivals, Backend, ClassCost, FrontEndEvent, RttModel, SimConfig, SimPolicy, Simulation, Wc98LikeSpec,
    Workload, simulate,
};
use locus_trace::TraceRecord;

/// One node with one process and a backlog of one; class 1 costs exactly 5 s of CPU.
fn one_slot_config() -> SimConfig {
    let mut c = SimConfig {
        policy: SimPolicy::from_name("wrr").unwrap(),
        nodes: 1,
        backend: Backend::Apache,
        arrivals: Arrivals::Trace,
        ..SimConfig::csld03()
    };
    c.costs.rtt = RttModel::None;
    c.costs.classes = vec![ClassCost { class: 1, mean_ns: 5_000_000_000, stddev_ratio: 0.0, disk_ns: 0 }];
    c.apache.max_clients = 1;
    c.apache.start_servers = 1;
    c.apache.min_spare = 0;
    c.apache.max_spare = 1;
    c.apache.backlog = 1;
    c
}

fn dynamic_at(time: f64, n: u32) -> TraceRecord {
    TraceRecord { time: Some(time), class: Some(1), ..TraceRecord::get(format!("/cgi/{n}"), 100) }
}

#[test]
fn full_backlog_drops_syns_and_clients_retry_after_3_s_then_6_s_then_give_up() {
    // R0 runs 0–5 s, R1 waits in the backlog and runs 5–10 s; R2's SYNs at 0.002, 3.002
    // find the backlog full, its SYN at 9.002 gets in; R3's three SYNs (0.003, 3.003,
    // 9.003) all find it full (R2 waits there from 9.002): R3 fails.
    let recs = [dynamic_at(0.0, 0), dynamic_at(0.001, 1), dynamic_at(0.002, 2), dynamic_at(0.003, 3)];
    let w = Workload::from_records(&recs);
    let run = Simulation::new(&w, one_slot_config()).unwrap().recording().run().unwrap();
    let s = run.report.server.clone().unwrap();
    assert_eq!((s.syns, s.rejected_syns, s.retries, s.failed_requests), (2 + 3 + 3, 5, 4, 1));
    assert!((s.rejection_ratio - 5.0 / 8.0).abs() < 1e-12);
    let assigned = |request: u64| -> Vec<f64> {
        run.front_end_log
            .iter()
            .filter_map(|e| match *e {
                FrontEndEvent::Assign { at, request: r, .. } if r == request => Some(at as f64 / 1e9),
                _ => None,
            })
            .collect()
    };
    let close =
        |a: &[f64], b: &[f64]| a.len() == b.len() && a.iter().zip(b).all(|(x, y)| (x - y).abs() < 1e-6);
    assert!(close(&assigned(2), &[0.002, 3.002, 9.002]), "{:?}", assigned(2));
    assert!(close(&assigned(3), &[0.003, 3.003, 9.003]), "{:?}", assigned(3));
    assert_eq!(run.report.measured_requests, 3, "three requests completed");
    assert_eq!(s.max_processes, 1);
}

#[test]
fn server_latency_excludes_the_client_rtt() {
    let w = Wc98LikeSpec::new(4_000, 0.02, vec![1], 5).build().unwrap();
    let point = |rtt_ns: u64| {
        let mut c = SimConfig {
            policy: SimPolicy::from_name("wrr").unwrap(),
            nodes: 4,
            backend: Backend::Apache,
            arrivals: Arrivals::Poisson { rate: 200.0 },
            ..SimConfig::csld03()
        };
        c.costs.rtt = RttModel::Const { ns: rtt_ns };
        simulate(&w, &c).unwrap()
    };
    let (near, far) = (point(0), point(500_000_000));
    let (sn, sf) = (near.server.unwrap(), far.server.unwrap());
    // Light load: the latency is the request's own work (under 2 ms on average) either way.
    assert!(sn.latency_mean_s < 0.002, "{}", sn.latency_mean_s);
    assert!(
        (sf.latency_mean_s - sn.latency_mean_s).abs() < 0.001,
        "{} vs {}",
        sf.latency_mean_s,
        sn.latency_mean_s
    );
    // The client's view does include it.
    assert!(
        far.mean_delay_ms - near.mean_delay_ms > 490.0,
        "{} vs {}",
        far.mean_delay_ms,
        near.mean_delay_ms
    );
}

fn overloaded(seed: u64) -> SimConfig {
    SimConfig {
        policy: SimPolicy::from_name("wrr").unwrap(),
        nodes: 2,
        seed,
        backend: Backend::Apache,
        arrivals: Arrivals::Poisson { rate: 120.0 },
        warmup_requests: 1_000,
        ..SimConfig::csld03()
    }
}

#[test]
fn same_seed_gives_an_identical_report_and_the_pool_stays_within_max_clients() {
    // 10% class-5 requests at 120/s on 2 nodes: ~0.35 CPU-s per s per node plus 90% static.
    let w = Wc98LikeSpec::new(12_000, 0.10, vec![5], 2).build().unwrap();
    let a = simulate(&w, &overloaded(7)).unwrap();
    let b = simulate(&w, &overloaded(7)).unwrap();
    assert_eq!(serde_json::to_string(&a).unwrap(), serde_json::to_string(&b).unwrap());
    let c = simulate(&w, &overloaded(8)).unwrap();
    assert_ne!(a.server, c.server, "another seed draws other RTTs and costs");
    // Overload the same nodes: the pool grows to MaxClients and no further; SYNs drop.
    let mut heavy = overloaded(7);
    heavy.arrivals = Arrivals::Poisson { rate: 400.0 };
    let h = simulate(&w, &heavy).unwrap().server.unwrap();
    assert_eq!(h.max_processes, 150);
    assert!(h.rejected_syns > 0 && h.cpu_utilization > 0.95, "{h:?}");
}
