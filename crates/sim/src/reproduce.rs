//! `locus sim reproduce lard`: the LARD paper's simulation study. Makes a synthetic trace
//! with the character of the paper's Rice University trace, runs WRR, LB, LB/GC, LARD,
//! LARD/R and WRR/GMS over 1–16 nodes, and writes `report.md`, `results.json`, CSV and SVG
//! plots, setting the results beside the paper's claims and marking each met or not.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use locus_trace::{
    DEFAULT_COVERAGE_SHARES, DocumentSizes, SizeModel, TraceStats, ZipfTraceSpec, human_bytes,
};
use serde::Serialize;

use crate::config::SimConfig;
use crate::error::SimError;
use crate::plot::write_plots;
use crate::report::SimReport;
use crate::sweep::{SweepSpec, run_sweep, write_results};
use crate::workload::Workload;

/// A synthetic trace with the character of the LARD paper's Rice trace: Zipf popularity
/// (α = 0.7) over 7 000 documents, SURGE sizes capped at 4 MiB, 1% one-timers. With two
/// million requests it has ~27 000 targets and a 1.4 GiB working set (mostly one-timers);
/// the memory of ~8 nodes of 32 MB covers 90% of the requests and ~9–10 nodes 95–99%, and
/// no target has more than ~2% of the requests (see `CHOICE`).
pub fn rice_like_spec(requests: u64, seed: u64) -> ZipfTraceSpec {
    ZipfTraceSpec {
        seed,
        requests,
        documents: 7_000,
        alpha: 0.7,
        sizes: DocumentSizes::Model(SizeModel { max_size: 4 << 20, ..SizeModel::surge() }),
        one_timer_share: 0.01,
        ..ZipfTraceSpec::default()
    }
}

/// How `rice_like_spec` was chosen: candidate specs (2 M requests, seed 1, SURGE sizes) with
/// the memory they need to cover 90%, 95% and 99% of the requests, in nodes of 32 MB, and
/// the share of requests of the most requested target, as measured with
/// `examples/trace_character.rs` (the trace crate's statistics).
pub const CHOICE: &[(&str, f64, f64, f64, f64)] = &[
    ("40 000 docs, α 1.0, 2% one-timers, ≤ 8 MiB", 24.7, 41.5, 70.7, 8.8),
    ("30 000 docs, α 1.2, 1% one-timers, ≤ 4 MiB", 3.4, 11.1, 40.8, 20.0),
    ("20 000 docs, α 1.1, 1% one-timers, ≤ 4 MiB", 6.2, 14.2, 31.5, 14.4),
    ("10 000 docs, α 1.0, 1% one-timers, ≤ 4 MiB (first choice)", 5.9, 9.9, 15.2, 10.1),
    ("10 000 docs, α 0.8, 1% one-timers, ≤ 4 MiB", 9.8, 12.6, 15.1, 3.7),
    ("8 000 docs, α 0.6, 1% one-timers, ≤ 4 MiB", 9.2, 10.4, 11.7, 1.1),
    ("7 000 docs, α 0.6, 1% one-timers, ≤ 4 MiB", 8.4, 9.3, 10.1, 1.2),
    ("7 000 docs, α 0.9, 1% one-timers, ≤ 4 MiB", 5.8, 8.0, 10.1, 6.7),
    ("7 000 docs, α 0.7, 1% one-timers, ≤ 4 MiB (chosen)", 7.6, 9.1, 10.1, 2.2),
];

/// The strategies of the paper's figures, in its order.
pub const LARD_POLICIES: [&str; 6] = ["wrr", "hash", "lb-gc", "lard", "lard-r", "wrr-gms"];

/// Options of the reproduction.
#[derive(Clone, Debug)]
pub struct ReproduceOptions {
    pub out: PathBuf,
    pub requests: u64,
    pub seed: u64,
    pub node_counts: Vec<u32>,
    pub threads: usize,
    pub progress: bool,
}

impl ReproduceOptions {
    /// Two million requests, seed 1, 1–16 nodes, two threads.
    pub fn new(out: impl Into<PathBuf>) -> ReproduceOptions {
        ReproduceOptions {
            out: out.into(),
            requests: 2_000_000,
            seed: 1,
            node_counts: (1..=16).collect(),
            threads: 2,
            progress: true,
        }
    }
}

/// One of the paper's claims checked against the results.
#[derive(Clone, Debug, Serialize)]
pub struct Claim {
    /// What the paper says.
    pub statement: &'static str,
    /// How it is checked here (fixed before the runs, not tuned to them).
    pub criterion: &'static str,
    pub met: bool,
    /// The numbers behind the verdict.
    pub evidence: String,
}

/// The `## Claims` section of a study's `report.md`: one row per claim, met or not met, with
/// its criterion and evidence.
pub(crate) fn write_claims_table(o: &mut String, claims: &[Claim]) {
    let _ = writeln!(o, "## Claims\n\n| | claim | criterion | result |\n|---|---|---|---|");
    for c in claims {
        let mark = if c.met { "**met**" } else { "**not met**" };
        let _ = writeln!(o, "| {mark} | {} | {} | {} |", c.statement, c.criterion, c.evidence);
    }
}

/// What a reproduction produced.
#[derive(Clone, Debug)]
pub struct Reproduction {
    pub reports: Vec<SimReport>,
    pub stats: TraceStats,
    pub claims: Vec<Claim>,
    pub files: Vec<PathBuf>,
}

/// Run the LARD study and write its outputs into `opts.out`.
pub fn reproduce_lard(opts: &ReproduceOptions) -> Result<Reproduction, SimError> {
    let spec = rice_like_spec(opts.requests, opts.seed);
    let (workload, stats) = Workload::synthetic_with_stats(spec.clone(), &DEFAULT_COVERAGE_SHARES)?;
    let base = SimConfig { seed: opts.seed, ..SimConfig::lard98() };
    let sweep = SweepSpec::named(base.clone(), &LARD_POLICIES, &opts.node_counts, opts.threads)?;
    let reports = run_sweep(&workload, &sweep, opts.progress)?;
    let claims = check_claims(&reports);

    let dir = &opts.out;
    write_results(dir, &reports)?;
    let mut files = vec![dir.join("results.json"), dir.join("results.csv")];
    files.extend(write_plots(dir, &reports, "LARD paper, Rice-like trace")?);
    let write = |name: &str, text: String| -> Result<PathBuf, SimError> {
        let path = dir.join(name);
        std::fs::write(&path, text).map_err(|e| SimError::io(&path, e))?;
        Ok(path)
    };
    files.push(write(
        "trace_stats.json",
        serde_json::to_string_pretty(&stats).expect("stats serialize") + "\n",
    )?);
    files
        .push(write("claims.json", serde_json::to_string_pretty(&claims).expect("claims serialize") + "\n")?);
    let config_toml = toml::to_string(&base).map_err(|e| SimError::Config(e.to_string()))?;
    files.push(write("config.toml", config_toml)?);
    files.push(write("report.md", markdown(opts, &spec, &stats, &base, &reports, &claims))?);
    Ok(Reproduction { reports, stats, claims, files })
}

fn find<'a>(reports: &'a [SimReport], policy: &str, nodes: u32) -> Option<&'a SimReport> {
    reports.iter().find(|r| r.policy == policy && r.nodes == nodes)
}

fn node_counts(reports: &[SimReport]) -> Vec<u32> {
    let mut n: Vec<u32> = reports.iter().map(|r| r.nodes).collect();
    n.sort_unstable();
    n.dedup();
    n
}

/// Check the four claims of the brief against `reports`.
pub fn check_claims(reports: &[SimReport]) -> Vec<Claim> {
    let counts = node_counts(reports);
    let pairs = |a: &str, b: &str, from: u32| -> Vec<(u32, &SimReport, &SimReport)> {
        counts
            .iter()
            .filter(|&&n| n >= from)
            .filter_map(|&n| Some((n, find(reports, a, n)?, find(reports, b, n)?)))
            .collect()
    };
    let mut claims = Vec::new();

    let c1 = pairs("lard-r", "wrr", 8);
    let ratios: Vec<String> = c1.iter().map(|(n, a, b)| format!("{n}: {:.2}×", a.rps / b.rps)).collect();
    claims.push(Claim {
        statement: "LARD/R's throughput is at least twice WRR's from 8 nodes on",
        criterion: "LARD/R rps / WRR rps ≥ 2.0 at every node count ≥ 8",
        met: !c1.is_empty() && c1.iter().all(|(_, a, b)| a.rps >= 2.0 * b.rps),
        evidence: format!("LARD/R / WRR throughput by nodes: {}", ratios.join(", ")),
    });

    let wrr: Vec<(u32, f64)> =
        counts.iter().filter_map(|&n| find(reports, "wrr", n).map(|r| (n, r.miss_ratio))).collect();
    let mean = wrr.iter().map(|&(_, m)| m).sum::<f64>() / wrr.len().max(1) as f64;
    let spread = wrr.iter().map(|&(_, m)| (m / mean - 1.0).abs()).fold(0.0, f64::max);
    let lard_drop =
        match (find(reports, "lard", counts[0]), find(reports, "lard", *counts.last().unwrap_or(&1))) {
            (Some(a), Some(b)) => format!(
                "; for contrast LARD falls from {:.1}% at {} node(s) to {:.1}% at {}",
                a.miss_ratio * 100.0,
                a.nodes,
                b.miss_ratio * 100.0,
                b.nodes
            ),
            _ => String::new(),
        };
    claims.push(Claim {
        statement: "WRR's cache miss ratio stays flat as nodes are added (its effective cache is one node's)",
        criterion: "every WRR miss ratio within ±10% (relative) of their mean over all node counts",
        met: wrr.len() >= 2 && spread <= 0.10,
        evidence: format!(
            "WRR miss ratio {:.1}%–{:.1}% (mean {:.1}%, largest deviation {:.1}%){lard_drop}",
            wrr.iter().map(|&(_, m)| m).fold(f64::INFINITY, f64::min) * 100.0,
            wrr.iter().map(|&(_, m)| m).fold(0.0, f64::max) * 100.0,
            mean * 100.0,
            spread * 100.0
        ),
    });

    let c3 = pairs("hash", "lard", 2);
    let held = c3.iter().filter(|(_, lb, lard)| lb.idle_ratio > lard.idle_ratio).count();
    let mean_of = |v: &[(u32, &SimReport, &SimReport)], first: bool| {
        v.iter().map(|(_, a, b)| if first { a.idle_ratio } else { b.idle_ratio }).sum::<f64>()
            / v.len().max(1) as f64
    };
    claims.push(Claim {
        statement: "LB loses load balance: it has more idle time than LARD",
        criterion: "LB idle ratio > LARD idle ratio at every node count ≥ 2",
        met: !c3.is_empty() && held == c3.len(),
        evidence: format!(
            "holds at {held} of {} node counts; mean idle LB {:.1}% vs LARD {:.1}%",
            c3.len(),
            mean_of(&c3, true) * 100.0,
            mean_of(&c3, false) * 100.0
        ),
    });

    let c4 = pairs("wrr-gms", "lard", 2);
    let worst =
        c4.iter().map(|(n, g, l)| (*n, g.rps / l.rps)).fold((0, 0.0), |a, b| if b.1 > a.1 { b } else { a });
    claims.push(Claim {
        statement: "WRR/GMS's throughput stays below LARD's",
        criterion: "WRR/GMS rps < LARD rps at every node count ≥ 2",
        met: !c4.is_empty() && c4.iter().all(|(_, g, l)| g.rps < l.rps),
        evidence: format!(
            "WRR/GMS reaches at most {:.0}% of LARD's throughput (at {} nodes)",
            worst.1 * 100.0,
            worst.0
        ),
    });
    claims
}

/// Other statements of the paper set beside the results (not graded).
pub fn observations(reports: &[SimReport]) -> Vec<String> {
    let counts = node_counts(reports);
    let mean_ratio = |a: &str, b: &str, from: u32, f: fn(&SimReport) -> f64| -> Option<f64> {
        let v: Vec<f64> = counts
            .iter()
            .filter(|&&n| n >= from)
            .filter_map(|&n| Some(f(find(reports, a, n)?) / f(find(reports, b, n)?)))
            .collect();
        (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
    };
    let mut out = Vec::new();
    if let Some(r) = mean_ratio("lb-gc", "hash", 2, |r| r.rps) {
        out.push(format!(
            "Paper: LB/GC, despite its global knowledge, gives no significant advantage over LB. Here LB/GC's \
             throughput is on average {:.0}% of LB's (2–{} nodes): its misses all go to the node with the oldest \
             cache, which costs it load balance.",
            r * 100.0,
            counts.last().unwrap_or(&0)
        ));
    }
    if let Some(r) = mean_ratio("lard-r", "lard", 7, |r| r.rps) {
        out.push(format!(
            "Paper: LARD/R slightly exceeds LARD from about seven nodes on. Here LARD/R / LARD throughput \
             averages {r:.3} from 7 nodes on."
        ));
    }
    let lard: Vec<(u32, f64)> =
        counts.iter().filter_map(|&n| Some((n, find(reports, "lard", n)?.miss_ratio))).collect();
    if let (Some(min), Some(last)) =
        (lard.iter().copied().min_by(|a, b| a.1.total_cmp(&b.1)), lard.last().copied())
        && let Some(r) = find(reports, "lard", last.0)
    {
        let mean_load = r.per_node.iter().map(|n| n.mean_load).sum::<f64>() / r.per_node.len().max(1) as f64;
        let peak = r.per_node.iter().map(|n| n.max_load).max().unwrap_or(0);
        out.push(format!(
            "Paper: LARD's miss ratio falls as nodes are added. Here it falls to {:.1}% at {} nodes and then \
             {} {:.1}% at {} nodes. With S requests admitted, LARD's nodes average {:.0} active connections \
             at {} nodes (T_high = 65) and peak at {peak}, so targets are often reassigned to keep the load \
             balanced, and each move costs misses; LARD/R's replicas avoid part of this.",
            min.1 * 100.0,
            min.0,
            if last.1 > min.1 + 0.005 { "rises again to" } else { "stays near that," },
            last.1 * 100.0,
            last.0,
            mean_load,
            last.0
        ));
    }
    let idle_mean = |p: &str| -> Option<f64> {
        let v: Vec<f64> = counts
            .iter()
            .filter(|&&n| n >= 2)
            .filter_map(|&n| Some(find(reports, p, n)?.idle_ratio))
            .collect();
        (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
    };
    if let (Some(wrr), Some(lard)) = (idle_mean("wrr"), idle_mean("lard")) {
        out.push(format!(
            "Paper: WRR has the lowest idle time of all strategies. {}: WRR's idle time averages {:.1}% over \
             2–{} nodes against LARD's {:.1}%, because the switch's WRR (equal weights) is round robin and \
             ignores load, while the paper's WRR is weighted by a load measure.",
            if wrr <= lard { "Also here" } else { "Not here" },
            wrr * 100.0,
            counts.last().unwrap_or(&0),
            lard * 100.0
        ));
    }
    let last = *counts.last().unwrap_or(&1);
    if let (Some(a), Some(b)) = (find(reports, "lard-r", last), find(reports, "wrr", last)) {
        out.push(format!(
            "Paper: LARD/R's mean delay is well below WRR's. Here at {last} nodes LARD/R's mean delay is {:.0}% of \
             WRR's ({:.0} ms vs {:.0} ms).",
            a.mean_delay_ms / b.mean_delay_ms * 100.0,
            a.mean_delay_ms,
            b.mean_delay_ms
        ));
    }
    out
}

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

fn markdown(
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

/// The directory a reproduction writes into, for messages.
pub fn describe_outputs(files: &[PathBuf], dir: &Path) -> String {
    let names: Vec<String> =
        files.iter().map(|f| f.strip_prefix(dir).unwrap_or(f).display().to_string()).collect();
    format!("{}: {}", dir.display(), names.join(", "))
}
