//! Measures simulated requests per second on one core: the LARD cost model on the Rice-like
//! trace, one point per policy, single-threaded; per CPU second of this thread (what a core
//! delivers, whatever else runs on a shared machine) and per wall second.
//! `cargo run --release -p locus-sim --example sim_speed -- [requests] [nodes] [policies...]`

use std::time::Instant;

/// CPU time this thread has used, in seconds.
fn thread_cpu_secs() -> f64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes into the timespec we own.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime");
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

use locus_sim::reproduce::rice_like_spec;
use locus_sim::{SimConfig, SimPolicy, Workload, simulate};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let requests: u64 = args.first().and_then(|a| a.parse().ok()).unwrap_or(2_000_000);
    let nodes: u32 = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(8);
    let mut policies: Vec<String> = args.iter().skip(2).cloned().collect();
    if policies.is_empty() {
        policies = ["wrr", "hash", "lb-gc", "lard", "lard-r", "wrr-gms"].map(String::from).to_vec();
    }
    let t = Instant::now();
    let workload = Workload::synthetic(rice_like_spec(requests, 1)).expect("trace");
    println!(
        "trace: {} requests, {} targets, made in {:.2?}",
        workload.len(),
        workload.targets().len(),
        t.elapsed()
    );
    let (mut total, mut wall, mut cpu) = (0u64, 0.0, 0.0);
    for p in &policies {
        let config =
            SimConfig { policy: SimPolicy::from_name(p).expect("policy"), nodes, ..SimConfig::lard98() };
        let (t, c) = (Instant::now(), thread_cpu_secs());
        let r = simulate(&workload, &config).expect("simulation");
        let (secs, cpu_secs) = (t.elapsed().as_secs_f64(), thread_cpu_secs() - c);
        total += r.requests;
        wall += secs;
        cpu += cpu_secs;
        println!(
            "{:<8} n={nodes}: {:.2} M simulated req per CPU second ({:.2} per wall second; CPU {:.2} s)",
            r.label,
            r.requests as f64 / cpu_secs / 1e6,
            r.requests as f64 / secs / 1e6,
            cpu_secs
        );
    }
    println!(
        "overall: {:.2} M simulated requests per CPU second on one core ({:.2} M per wall second)",
        total as f64 / cpu / 1e6,
        total as f64 / wall / 1e6
    );
}
