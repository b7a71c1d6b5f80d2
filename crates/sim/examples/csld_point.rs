//! One point of the CSLD study on the process-driven back end, for calibration: prints the
//! server latency, rejection ratio, CPU utilisation and wall time.
//! `cargo run --release -p locus-sim --example csld_point -- POLICY RATE P_DREQ CLASS SECONDS`

use std::time::Instant;

use locus_sim::{Arrivals, Backend, SimConfig, SimPolicy, Wc98LikeSpec, simulate};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let arg = |i: usize, d: &str| args.get(i).cloned().unwrap_or_else(|| d.to_string());
    let policy = SimPolicy::from_name(&arg(0, "wrr"))?;
    let rate: f64 = arg(1, "4000").parse()?;
    let p_dreq: f64 = arg(2, "0.05").parse()?;
    let class: u16 = arg(3, "3").parse()?;
    let secs: f64 = arg(4, "60").parse()?;
    let warm: f64 = arg(5, "15").parse()?;
    let requests = (rate * (warm + secs)) as u64;
    let t = Instant::now();
    let w = Wc98LikeSpec::new(requests, p_dreq, vec![class], 1).build()?;
    let built = t.elapsed();
    let config = SimConfig {
        policy,
        backend: Backend::Apache,
        arrivals: Arrivals::Poisson { rate },
        warmup_requests: (rate * warm) as u64,
        ..SimConfig::csld03()
    };
    let t = Instant::now();
    let r = simulate(&w, &config)?;
    let s = r.server.as_ref().expect("server metrics");
    println!(
        "{} rate {rate} p {p_dreq} class {class}: latency {:.4} s (p90 {:.4}), rejection {:.4}, cpu {:.3} \
         ({:.3}–{:.3}), miss {:.4} (predicted {:?}), procs {}, failed {} | workload {:.1?}, sim {:.1?}",
        r.label,
        s.latency_mean_s,
        s.latency_p90_s,
        s.rejection_ratio,
        s.cpu_utilization,
        s.cpu_utilization_min,
        s.cpu_utilization_max,
        r.miss_ratio,
        s.predicted_miss_ratio,
        s.max_processes,
        s.failed_requests,
        built,
        t.elapsed()
    );
    Ok(())
}
