//! `report.md` of `reproduce lard`: the claims, the trace's character beside the Rice trace's,
//! and tables of throughput, miss ratio, idle time and delay by policy and node count.

use std::fmt::Write as _;

use locus_trace::{DocumentSizes, TraceStats, ZipfTraceSpec, human_bytes};

use super::claims::{find, node_counts, observations};
use super::run::{CHOICE, ReproduceOptions};
use crate::config::SimConfig;
use crate::report::SimReport;
use crate::reproduce::{Claim, write_claims_table};

fn table(out: &mut String, reports: &[SimReport], title: &str, value: impl Fn(&SimReport) -> String) {
    let counts = node_counts(reports);
    let _ = writeln!(out, "\n**{title}**\n");
    let _ = write!(out, "| policy |");
    for n in &counts {
        let _ = write!(out, " {n} |");
    }
    let _ = write!(out, "\n|---|");
    for _ in &counts {
        let _ = write!(out, "---:|");
    }
    out.push('\n');
    let mut labels: Vec<(&str, &str)> = Vec::new();
    for r in reports {
        if !labels.iter().any(|(p, _)| *p == r.policy) {
            labels.push((&r.policy, &r.label));
        }
    }
    for (policy, label) in labels {
        let _ = write!(out, "| {label} |");
        for &n in &counts {
            let cell = find(reports, policy, n).map(&value).unwrap_or_else(|| "–".into());
            let _ = write!(out, " {cell} |");
        }
        out.push('\n');
    }
}

/// The study's `report.md`.
pub(super) fn markdown(
    opts: &ReproduceOptions,
    spec: &ZipfTraceSpec,
    stats: &TraceStats,
    base: &SimConfig,
    reports: &[SimReport],
    claims: &[Claim],
) -> String {
    let mut o = String::new();
    let met = claims.iter().filter(|c| c.met).count();
    let c = &base.costs;
    let us = |ns: u64| ns as f64 / 1000.0;
    let _ = writeln!(o, "# LARD (Pai et al., ASPLOS 1998) — simulation study reproduced with `locus sim`\n");
    let _ = writeln!(
        o,
        "{met} of {} claims met. Command: `locus sim reproduce lard --out {}` (requests {}, seed {}, \
         node counts {:?}). Every result below comes from `results.json` in this directory; the same \
         command, trace and seed give the same bytes.\n",
        claims.len(),
        opts.out.display(),
        opts.requests,
        opts.seed,
        opts.node_counts
    );
    write_claims_table(&mut o, claims);
    let _ = writeln!(o, "\nOther statements of the paper, beside these results (not graded):\n");
    for obs in observations(reports) {
        let _ = writeln!(o, "- {obs}");
    }
    let _ = writeln!(o, "\n## Model\n");
    let _ = writeln!(
        o,
        "The LARD cost model (`lard98` preset): connection setup {} µs and teardown {} µs of CPU, transmit {} µs \
         per 512 bytes; a disk read costs {} ms plus {} µs per 4 KB and {} ms per further {} KB beyond the first \
         {} KB; one CPU and {} disk per node, each a FIFO queue, CPU and disk work of different requests \
         overlapped; requests waiting for a file being read share the read. Whole-file caches of {} MiB per node \
         with {} replacement (the node's own `locus_cache::DocCache`, miss cost 1). The front-end costs nothing \
         and admits at most S = (n−1)·T_high + T_low − 1 requests (T_low = {}, T_high = {}) under every \
         strategy — LARD/R's own limit, the same formula for the others — the rest wait in a FIFO queue; a \
         closed loop of S + n clients keeps it saturated. Idle time: share of time a node's load (active \
         connections) is below {}% of T_low = {}, averaged over nodes. Throughput: requests / simulated time \
         to serve the whole trace (no warm-up excluded, as in the paper).\n",
        us(c.conn_setup_ns),
        us(c.conn_teardown_ns),
        us(c.transmit_per_512_ns),
        c.disk_latency_ns as f64 / 1e6,
        us(c.disk_per_4k_ns),
        c.disk_extra_seek_ns as f64 / 1e6,
        c.disk_seek_block_bytes / 1024,
        c.disk_seek_block_bytes / 1024,
        base.disks,
        base.cache_capacity() >> 20,
        base.cache.replacement.as_str().to_uppercase(),
        base.t_low,
        base.t_high,
        base.idle_fraction * 100.0,
        base.idle_threshold()
    );
    let _ = writeln!(
        o,
        "Strategies: **WRR** = the switch's `wrr` (smooth weighted round robin; all weights 1, so plain round \
         robin — the paper's WRR is weighted by a load measure, see gaps); **LB** = the switch's `hash` (target \
         hash mod n); **LARD** = `lard`, **LARD/R** = `lard-r` (K = 20 s) — all built by `locus_policy::build` \
         and driven through `locus_policy::Cluster` exactly as the switch drives them. **LB/GC** (simulator \
         only): a request goes to a node that caches or is fetching its target (least loaded of them), else to \
         the node whose cache holds the globally oldest content (a node with room first; then the smallest GDS \
         inflation value), so the miss evicts the globally oldest document. **WRR/GMS** (simulator only): `wrr` \
         in front; a local miss that another node's memory holds is fetched from there — the holder spends {}× \
         the transmit cost on its CPU and the data arrives {} µs later — and a document evicted while no other \
         node holds it moves to the node with the globally oldest content; the directory and global \
         replacement cost nothing (the paper's generous assumptions).\n",
        c.gms.sender_cpu_share,
        us(c.gms.latency_ns)
    );
    let _ = writeln!(o, "## Trace\n");
    let _ = writeln!(
        o,
        "The paper's Rice trace is not available. A synthetic trace (`locus_trace::ZipfTraceGenerator`) stands \
         in: {} requests, Zipf α = {} over {} documents (popularity rank independent of size), SURGE sizes \
         (lognormal body, Pareto tail) capped at {}, {}% one-timers, seed {}. The paper says the Rice trace \
         needs the combined caches of eight to ten 32 MB nodes to hold its working set and has much less \
         locality than the IBM trace; the spec was chosen so that the memory covering 90–99% of the requests is \
         about 8–10 nodes' worth (with 1% one-timers that no cache helps), and — since the paper notes that \
         the Rice trace has no high-frequency targets, which is why LARD/R barely beats LARD on it — so that \
         no target gets more than ~2% of the requests. A first choice (10 000 documents, α 1.0) met the \
         coverage goal but gave one target 10% of the requests; it was replaced for that reason (the four \
         claims were also met with it). Candidates (coverage in nodes of 32 MB):\n",
        spec.requests,
        spec.alpha,
        spec.documents,
        match &spec.sizes {
            DocumentSizes::Model(m) => human_bytes(m.max_size),
            DocumentSizes::Files(_) => "the files' sizes".into(),
        },
        spec.one_timer_share * 100.0,
        spec.seed
    );
    let _ = writeln!(o, "| candidate | 90% | 95% | 99% | top target |\n|---|---:|---:|---:|---:|");
    for (name, c90, c95, c99, top) in CHOICE {
        let _ = writeln!(o, "| {name} | {c90:.1} | {c95:.1} | {c99:.1} | {top:.1}% |");
    }
    let _ = writeln!(
        o,
        "\nThe trace used (statistics from `locus_trace::StatsAccumulator`, as `locus trace stats` prints \
         them): {} requests, {} targets, working set {}, one-timers {:.2}% of requests, mean request size {}, \
         most requested target {:.2}% of requests.\n",
        stats.requests,
        stats.unique_targets,
        human_bytes(stats.unique_bytes),
        stats.one_timers.request_share * 100.0,
        human_bytes(stats.request_sizes.mean.round() as u64),
        stats.top_target_share * 100.0
    );
    let _ =
        writeln!(o, "| requests covered | memory needed | targets | nodes of 32 MB |\n|---:|---:|---:|---:|");
    for cov in &stats.coverage {
        let _ = writeln!(
            o,
            "| {:.0}% | {} | {} | {:.1} |",
            cov.share * 100.0,
            human_bytes(cov.bytes),
            cov.targets,
            cov.bytes as f64 / (32u64 << 20) as f64
        );
    }
    let _ = writeln!(
        o,
        "\n## Results\n\n![throughput](throughput.svg)\n![miss ratio](miss_ratio.svg)\n![idle time](idle_time.svg)\n![delay](delay.svg)"
    );
    table(&mut o, reports, "Throughput (requests/s)", |r| format!("{:.0}", r.rps));
    table(&mut o, reports, "Cache miss ratio (%)", |r| format!("{:.1}", r.miss_ratio * 100.0));
    table(&mut o, reports, "Idle time (%)", |r| format!("{:.1}", r.idle_ratio * 100.0));
    table(&mut o, reports, "Mean delay (ms)", |r| format!("{:.0}", r.mean_delay_ms));
    let _ = writeln!(
        o,
        "\n## Known gaps\n\n\
         - The trace is synthetic (Zipf popularity independent of size), not the Rice logs; absolute numbers \
         are not comparable with the paper's figures, only the shapes and ratios.\n\
         - WRR is the switch's weight-based round robin; the paper's WRR weights by a load measure, which would \
         lower WRR's idle time (the paper has WRR with the least idle time of all).\n\
         - A large file is read whole and then transmitted; the paper interleaves 44 KB disk blocks with their \
         transmission.\n\
         - A request that finds its file cached runs setup, transmit and teardown as one CPU job (the same CPU \
         work, less interleaving with other requests' jobs).\n\
         - GMS here is cooperative caching with forwarding of evicted singlets, inserted as fresh at the \
         receiver (the cache cannot take an object's age); its remote-fetch cost is a parameter (`costs.gms`).\n"
    );
    o
}
