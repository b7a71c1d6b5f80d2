//! Prints the locality of candidate Rice-like synthetic traces (memory to cover 90/95/98/99%
//! of requests, working set, one-timers): the tool used to choose `reproduce::rice_like_spec`.
//! `cargo run --release -p locus-sim --example trace_character -- [requests] [docs alpha one_timers max_mb]...`

use locus_sim::Workload;
use locus_sim::reproduce::rice_like_spec;
use locus_trace::{DEFAULT_COVERAGE_SHARES, DocumentSizes, SizeModel, human_bytes};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let requests: u64 = args.first().and_then(|a| a.parse().ok()).unwrap_or(1_000_000);
    let mut specs = vec![rice_like_spec(requests, 1)];
    for chunk in args.get(1..).unwrap_or(&[]).chunks(4) {
        if let [docs, alpha, once, max_mb] = chunk {
            let mut s = rice_like_spec(requests, 1);
            s.documents = docs.parse().expect("documents");
            s.alpha = alpha.parse().expect("alpha");
            s.one_timer_share = once.parse().expect("one-timer share");
            let max: u64 = max_mb.parse().expect("max MB");
            s.sizes = DocumentSizes::Model(SizeModel { max_size: max << 20, ..SizeModel::surge() });
            specs.push(s);
        }
    }
    for spec in specs {
        let label = format!(
            "docs {} alpha {} one-timers {} sizes {:?}",
            spec.documents,
            spec.alpha,
            spec.one_timer_share,
            match &spec.sizes {
                DocumentSizes::Model(m) => m.max_size >> 20,
                _ => 0,
            }
        );
        let (_, stats) = Workload::synthetic_with_stats(spec, &DEFAULT_COVERAGE_SHARES).expect("trace");
        let cov: Vec<String> = stats
            .coverage
            .iter()
            .map(|c| {
                format!(
                    "{:.0}%: {} ({:.1} nodes of 32 MB)",
                    c.share * 100.0,
                    human_bytes(c.bytes),
                    c.bytes as f64 / (32u64 << 20) as f64
                )
            })
            .collect();
        println!(
            "{label}\n  targets {} working set {} one-timers {:.2}% of requests, mean request size {}, top target {:.2}%\n  {}",
            stats.unique_targets,
            human_bytes(stats.unique_bytes),
            stats.one_timers.request_share * 100.0,
            human_bytes(stats.request_sizes.mean as u64),
            stats.top_target_share * 100.0,
            cov.join("; ")
        );
    }
}
