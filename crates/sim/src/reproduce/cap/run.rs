//! `locus sim reproduce cap`: CAP (Casalicchio & Colajanni) beside LARD, LARD/R, LC and WRR
//! on the process-driven back end, 16 nodes — (a) a static Zipf "Web publishing" workload
//! whose working set exceeds one node's cache, (b) WC98-like static traffic mixed with
//! CPU-bound (10–40 ms), disk-bound (20 ms uncached disk) and CPU+disk dynamic classes at
//! several dynamic shares and CB:DB ratios, and (c) LARD's T_low/T_high swept on one mix —
//! written as `results.json`, `claims.json`, `report.md` and plots.

use locus_trace::{DocumentSizes, SizeModel, ZipfTraceSpec};

use crate::config::SimConfig;
use crate::cost_model::ClassCost;
use crate::error::SimError;
use crate::plot::{Axes, Series, plot_lines};
use crate::reproduce::cap::claims::check_cap_claims;
use crate::reproduce::cap::report::cap_markdown;
use crate::reproduce::csld::{CsldOptions, StudyOutput, point_config};
use crate::reproduce::study::{StudyPoint, run_jobs, write_study};
use crate::sim_policy::SimPolicy;
use crate::wc98_like::Wc98LikeSpec;
use crate::workload::Workload;

/// The policies compared on every workload.
pub const CAP_POLICIES: [&str; 5] = ["cap", "lard-r", "lard", "wrr", "lc"];

/// Dynamic shares of the mix sweep (CB:DB:DCB 1:1:1).
pub const MIX_SHARES: [f64; 3] = [0.10, 0.20, 0.30];

/// CB:DB:DCB weights of the ratio sweep (at 20% dynamic).
pub const MIX_RATIOS: [(u16, u16, u16); 2] = [(3, 1, 1), (1, 3, 1)];

/// LARD's (T_low, T_high) settings swept on the 20%, 1:1:1 mix.
pub const THRESHOLDS: [(u32, u32); 4] = [(5, 15), (25, 65), (60, 150), (150, 400)];

/// Offered load of the static workload, requests per second: RR's disks run at ≈ 85%
/// (at 1 600/s they saturate from the cold start on and every policy collapses).
pub const STATIC_RATE: f64 = 1200.0;

/// RR's target utilisation of its busier resource (CPU or disk), from which each mix's rate
/// follows.
pub const MIX_TARGET_UTILISATION: f64 = 0.85;

/// The dynamic classes: 1–4 CPU-bound (k·10 ms), 5 disk-bound (20 ms of uncached disk),
/// 6 both (20 ms CPU + 20 ms disk).
pub fn cap_classes() -> Vec<ClassCost> {
    let mut c: Vec<ClassCost> = (1..=4)
        .map(|k| ClassCost { class: k, mean_ns: k as u64 * 10_000_000, stddev_ratio: 0.2, disk_ns: 0 })
        .collect();
    c.push(ClassCost { class: 5, mean_ns: 0, stddev_ratio: 0.0, disk_ns: 20_000_000 });
    c.push(ClassCost { class: 6, mean_ns: 20_000_000, stddev_ratio: 0.2, disk_ns: 20_000_000 });
    c
}

/// The class list drawn uniformly for CB:DB:DCB weights `(cb, db, dcb)`.
pub fn mix_classes((cb, db, dcb): (u16, u16, u16)) -> Vec<u16> {
    let mut v = Vec::new();
    for _ in 0..cb {
        v.extend(1..=4);
    }
    v.extend(std::iter::repeat_n(5, 4 * db as usize));
    v.extend(std::iter::repeat_n(6, 4 * dcb as usize));
    v
}

/// The rate (a multiple of 100/s) that puts `nodes` at `MIX_TARGET_UTILISATION` of their
/// busier resource: CPU — non-dynamic requests at 0.545 ms (the WC98-like calibration),
/// dynamic ones at their class's mean CPU plus basic processing and a 4 KiB transmit — or
/// disk (the classes' disk time; static misses are rare with warm caches).
pub fn mix_rate(share: f64, weights: (u16, u16, u16), nodes: u32) -> f64 {
    let classes = cap_classes();
    let list = mix_classes(weights);
    let mean = |f: &dyn Fn(&ClassCost) -> u64| {
        list.iter().map(|k| classes.iter().find(|c| c.class == *k).map_or(0, f) as f64 / 1e6).sum::<f64>()
            / list.len() as f64
    };
    let cpu_ms = share * (mean(&|c| c.mean_ns) + 0.77) + (1.0 - share) * 0.545;
    let disk_ms = share * mean(&|c| c.disk_ns);
    (MIX_TARGET_UTILISATION * nodes as f64 / (cpu_ms.max(disk_ms) / 1e3) / 100.0).round() * 100.0
}

/// The static "Web publishing" workload: 20 000 documents, Zipf α 0.8, SURGE sizes up to
/// 1 MiB (a working set of several hundred MB: more than a node's 64 MB, less than 16).
pub fn static_spec(requests: u64, seed: u64) -> ZipfTraceSpec {
    ZipfTraceSpec {
        seed,
        requests,
        documents: 20_000,
        alpha: 0.8,
        sizes: DocumentSizes::Model(SizeModel { max_size: 1 << 20, ..SizeModel::surge() }),
        ..ZipfTraceSpec::default()
    }
}

fn config(
    opts: &CsldOptions,
    policy: &str,
    rate: f64,
    warm: bool,
    t: (u32, u32),
) -> Result<SimConfig, SimError> {
    let mut c = point_config(opts, policy, rate)?;
    (c.t_low, c.t_high) = t;
    c.costs.classes = cap_classes();
    c.apache.warm_caches = warm;
    Ok(c)
}

/// One job's description: case, policy label, rate, parameters.
type Meta = (String, String, f64, serde_json::Map<String, serde_json::Value>);

fn params(share: f64, w: (u16, u16, u16), t: (u32, u32)) -> serde_json::Map<String, serde_json::Value> {
    let mut m = serde_json::Map::new();
    m.insert("dynamic_share".into(), share.into());
    m.insert("cb_db_dcb".into(), format!("{}:{}:{}", w.0, w.1, w.2).into());
    m.insert("t_low".into(), t.0.into());
    m.insert("t_high".into(), t.1.into());
    m
}

/// The mix workloads' case names, with share and weights.
pub fn mix_cases() -> Vec<(String, f64, (u16, u16, u16))> {
    let mut v: Vec<(String, f64, (u16, u16, u16))> =
        MIX_SHARES.iter().map(|&s| (format!("mix-{:.0}%", s * 100.0), s, (1, 1, 1))).collect();
    for w in MIX_RATIOS {
        v.push((format!("mix-20%-{}:{}:{}", w.0, w.1, w.2), 0.20, w));
    }
    v
}

/// Run the study and write its outputs into `opts.out`.
pub fn reproduce_cap(opts: &CsldOptions) -> Result<StudyOutput, SimError> {
    let label = |p: &str| -> Result<String, SimError> {
        Ok(if p == "wrr" { "RR".into() } else { SimPolicy::from_name(p)?.label() })
    };
    let default_t = (25, 65);
    let mut workloads: Vec<Workload> = Vec::new();
    let mut jobs: Vec<(usize, SimConfig)> = Vec::new();
    let mut meta: Vec<Meta> = Vec::new();
    let (requests, _) = opts.durations.requests(STATIC_RATE);
    workloads.push(Workload::synthetic(static_spec(requests, opts.seed))?);
    for p in CAP_POLICIES {
        jobs.push((0, config(opts, p, STATIC_RATE, false, default_t)?));
        meta.push(("static".into(), label(p)?, STATIC_RATE, params(0.0, (0, 0, 0), default_t)));
    }
    for (case, share, w) in mix_cases() {
        let rate = mix_rate(share, w, opts.nodes);
        let (requests, _) = opts.durations.requests(rate);
        workloads.push(Wc98LikeSpec::new(requests, share, mix_classes(w), opts.seed).build()?);
        for p in CAP_POLICIES {
            jobs.push((workloads.len() - 1, config(opts, p, rate, true, default_t)?));
            meta.push((case.clone(), label(p)?, rate, params(share, w, default_t)));
        }
        if share == 0.20 && w == (1, 1, 1) {
            for t in THRESHOLDS.into_iter().filter(|&t| t != default_t) {
                for p in ["lard-r", "lard"] {
                    jobs.push((workloads.len() - 1, config(opts, p, rate, true, t)?));
                    meta.push((format!("thresholds-{}-{}", t.0, t.1), label(p)?, rate, params(share, w, t)));
                }
            }
        }
    }
    let reports = run_jobs(&workloads, &jobs, opts.threads, opts.progress)?;
    let points: Vec<StudyPoint> = reports
        .iter()
        .zip(meta)
        .map(|(r, (case, label, rate, params))| StudyPoint {
            params,
            ..StudyPoint::new(case, label, rate, r)
        })
        .collect();
    let claims = check_cap_claims(&points);
    let mut files = cap_plots(opts, &points)?;
    files.extend(write_study(&opts.out, &points, &claims, &cap_markdown(opts, &points, &claims))?);
    Ok(StudyOutput { points, claims, files })
}

fn cap_plots(opts: &CsldOptions, points: &[StudyPoint]) -> Result<Vec<std::path::PathBuf>, SimError> {
    std::fs::create_dir_all(&opts.out).map_err(|e| SimError::io(&opts.out, e))?;
    let mut series: Vec<Series> = Vec::new();
    for label in ["CAP", "LARD/R", "LARD", "RR", "LC"] {
        let pts = MIX_SHARES
            .iter()
            .filter_map(|&s| {
                let case = format!("mix-{:.0}%", s * 100.0);
                points.iter().find(|p| p.case == case && p.policy == label).map(|p| (s * 100.0, p.latency_s))
            })
            .collect();
        series.push((label.to_string(), pts));
    }
    let path = opts.out.join("mix_latency.svg");
    let axes = Axes {
        title: "CPU/disk-bound mix (CB:DB:DCB 1:1:1)",
        x: "dynamic share (%)",
        y: "mean server latency (s)",
    };
    plot_lines(&path, axes, &series)?;
    Ok(vec![path])
}
