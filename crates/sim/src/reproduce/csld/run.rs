//! `locus sim reproduce csld`: the CSLD paper's (Hyun et al. 2003) simulation study on the
//! process-driven back end — Table 4 (six cases × RR, LC, the six metric-fed WRRs and CSLD
//! on 16 nodes), Table 5 (RR, class {4}, 5% dynamic, 3.0–6.3 K/s) and Fig. 6 (WRR_i, WRR_a
//! and CSLD ÷ RR over Table 5's rates) — over a WC98-like synthetic workload, written as
//! `results.json`, `claims.json`, `report.md` and SVG plots.

use std::path::PathBuf;

use locus_policy::{CsldPick, PolicyConfig};

use crate::config::{Arrivals, Backend, CpuModel, SimConfig};
use crate::error::SimError;
use crate::plot::{Axes, Series, plot_lines};
use crate::reproduce::Claim;
use crate::reproduce::csld::claims::check_csld_claims;
use crate::reproduce::csld::report::csld_markdown;
use crate::reproduce::study::{Durations, StudyPoint, find_point, run_jobs, write_study};
use crate::sim_policy::SimPolicy;
use crate::wc98_like::Wc98LikeSpec;
use crate::workload::Workload;

/// One row of Table 4: dynamic class, dynamic share, rate, and the paper's mean server
/// latencies (s) in `TABLE4_POLICIES` order, with its rejection marks.
#[derive(Clone, Copy, Debug)]
pub struct CsldCase {
    pub id: u8,
    pub class: u16,
    pub p_dreq: f64,
    pub rate: f64,
    pub paper: [f64; 9],
    pub paper_rejects: [bool; 9],
}

const NO: bool = false;
const YES: bool = true;

/// The paper's Table 4.
pub const TABLE4: [CsldCase; 6] = [
    CsldCase {
        id: 1,
        class: 3,
        p_dreq: 0.05,
        rate: 4000.0,
        paper: [0.0226, 0.2172, 0.0186, 0.0209, 0.0229, 0.0219, 0.0230, 0.0245, 0.0223],
        paper_rejects: [NO; 9],
    },
    CsldCase {
        id: 2,
        class: 3,
        p_dreq: 0.064,
        rate: 6400.0,
        paper: [0.3469, 0.5041, 0.1309, 0.1759, 0.1805, 1.4940, 0.2113, 0.1835, 0.1500],
        paper_rejects: [NO, YES, NO, NO, NO, YES, NO, NO, NO],
    },
    CsldCase {
        id: 3,
        class: 4,
        p_dreq: 0.04,
        rate: 4000.0,
        paper: [0.0267, 0.2247, 0.0225, 0.0254, 0.0273, 0.0256, 0.0275, 0.0298, 0.0262],
        paper_rejects: [NO, YES, NO, NO, NO, NO, NO, NO, NO],
    },
    CsldCase {
        id: 4,
        class: 4,
        p_dreq: 0.06,
        rate: 4800.0,
        paper: [0.1202, 0.4606, 0.0799, 0.0932, 0.1008, 0.1003, 0.1049, 1.7166, 0.0829],
        paper_rejects: [NO, NO, NO, NO, NO, NO, NO, YES, NO],
    },
    CsldCase {
        id: 5,
        class: 5,
        p_dreq: 0.04,
        rate: 4000.0,
        paper: [0.0428, 0.2674, 0.0347, 0.0363, 0.0423, 0.0370, 0.0429, 0.7917, 0.0395],
        paper_rejects: [NO, NO, NO, NO, NO, NO, NO, YES, NO],
    },
    CsldCase {
        id: 6,
        class: 5,
        p_dreq: 0.068,
        rate: 4000.0,
        paper: [0.9975, 0.6065, 0.2564, 0.3802, 0.4503, 2.2888, 0.8784, 2.6801, 0.3139],
        paper_rejects: [NO, NO, NO, NO, NO, YES, NO, YES, NO],
    },
];

/// Table 4's columns, in order (as `SimPolicy` names).
pub const TABLE4_POLICIES: [&str; 9] =
    ["wrr", "lc", "wrr-i", "wrr-a", "wrr-b", "wrr-a-prime", "wrr-b-prime", "wrr-p", "csld"];

/// Table 5: RR with class {4} at 5% dynamic, rates and the paper's latencies.
pub const TABLE5: [(f64, f64); 6] = [
    (3000.0, 0.0211),
    (4000.0, 0.0341),
    (5000.0, 0.0567),
    (6000.0, 0.1734),
    (6200.0, 0.4644),
    (6300.0, 1.5899),
];

/// Fig. 6's policies (with RR, which it divides by).
pub const FIG6_POLICIES: [&str; 4] = ["wrr", "wrr-i", "wrr-a", "csld"];

/// The case name of Table 5 / Fig. 6's points.
pub const TABLE5_CASE: &str = "table5";

/// Options of the CSLD study.
#[derive(Clone, Debug)]
pub struct CsldOptions {
    pub out: PathBuf,
    pub seed: u64,
    pub durations: Durations,
    pub nodes: u32,
    /// The nodes' CPU scheduling (processor sharing by default).
    pub cpu: CpuModel,
    pub threads: usize,
    pub progress: bool,
}

impl CsldOptions {
    /// 60 s warm-up + 180 s measured per point (the paper: 15 + 30 min), 16 nodes, 2 threads.
    pub fn full(out: impl Into<PathBuf>) -> CsldOptions {
        CsldOptions {
            out: out.into(),
            seed: 1,
            durations: Durations { warmup_s: 60.0, measure_s: 180.0 },
            nodes: 16,
            cpu: CpuModel::Ps,
            threads: 2,
            progress: true,
        }
    }

    /// Every point, 1 s warm-up + 2 s measured (seconds of wall time; for tests).
    pub fn quick(out: impl Into<PathBuf>) -> CsldOptions {
        CsldOptions { durations: Durations { warmup_s: 1.0, measure_s: 2.0 }, ..CsldOptions::full(out) }
    }
}

/// What the study produced.
#[derive(Clone, Debug)]
pub struct StudyOutput {
    pub points: Vec<StudyPoint>,
    pub claims: Vec<Claim>,
    pub files: Vec<PathBuf>,
}

/// The label the CSLD paper gives `name` (RR for the switch's `wrr`).
pub fn csld_label(name: &str) -> Result<String, SimError> {
    Ok(match name {
        "wrr" => "RR".to_string(),
        other => SimPolicy::from_name(other)?.label(),
    })
}

/// One point of a study on the process-driven back end: `policy` at Poisson `rate` on the
/// CSLD paper's costs, with `opts`' nodes, seed, durations and CPU model.
pub(crate) fn point_config(opts: &CsldOptions, policy: &str, rate: f64) -> Result<SimConfig, SimError> {
    let (_, warmup) = opts.durations.requests(rate);
    let mut policy = SimPolicy::from_name(policy)?;
    if let SimPolicy::Switch(PolicyConfig::Csld(p)) = &mut policy {
        // The paper's CSLD: smooth WRR over each period's weights.
        p.pick = CsldPick::Wrr;
    }
    let mut c = SimConfig {
        policy,
        nodes: opts.nodes,
        seed: opts.seed,
        backend: Backend::Apache,
        arrivals: Arrivals::Poisson { rate },
        warmup_requests: warmup,
        ..SimConfig::csld03()
    };
    c.apache.cpu = opts.cpu;
    Ok(c)
}

/// What a job's point is: case, policy label, rate, and the paper's (latency, rejections).
struct PointMeta {
    case: String,
    label: String,
    rate: f64,
    paper: Option<(f64, bool)>,
}

/// Every workload and (workload, configuration) job of the study, with what each job is.
struct Plan {
    workloads: Vec<Workload>,
    jobs: Vec<(usize, SimConfig)>,
    meta: Vec<PointMeta>,
}

fn plan(opts: &CsldOptions) -> Result<Plan, SimError> {
    let mut workloads: Vec<Workload> = Vec::new();
    let mut jobs: Vec<(usize, SimConfig)> = Vec::new();
    let mut meta: Vec<PointMeta> = Vec::new();
    for case in &TABLE4 {
        let (requests, _) = opts.durations.requests(case.rate);
        workloads.push(Wc98LikeSpec::new(requests, case.p_dreq, vec![case.class], opts.seed).build()?);
        for (i, p) in TABLE4_POLICIES.iter().enumerate() {
            jobs.push((workloads.len() - 1, point_config(opts, p, case.rate)?));
            let paper = Some((case.paper[i], case.paper_rejects[i]));
            meta.push(PointMeta { case: case.id.to_string(), label: csld_label(p)?, rate: case.rate, paper });
        }
    }
    for &(rate, rr_paper) in &TABLE5 {
        let (requests, _) = opts.durations.requests(rate);
        workloads.push(Wc98LikeSpec::new(requests, 0.05, vec![4], opts.seed).build()?);
        for p in FIG6_POLICIES {
            jobs.push((workloads.len() - 1, point_config(opts, p, rate)?));
            let paper = (p == "wrr").then_some((rr_paper, false));
            meta.push(PointMeta { case: TABLE5_CASE.to_string(), label: csld_label(p)?, rate, paper });
        }
    }
    Ok(Plan { workloads, jobs, meta })
}

/// Run the study and write its outputs into `opts.out`.
pub fn reproduce_csld(opts: &CsldOptions) -> Result<StudyOutput, SimError> {
    let Plan { workloads, jobs, meta } = plan(opts)?;
    let reports = run_jobs(&workloads, &jobs, opts.threads, opts.progress)?;
    let points: Vec<StudyPoint> = reports
        .iter()
        .zip(meta)
        .map(|(r, m)| StudyPoint {
            paper_latency_s: m.paper.map(|x| x.0),
            paper_rejections: m.paper.map(|x| x.1),
            ..StudyPoint::new(m.case, m.label, m.rate, r)
        })
        .collect();
    let claims = check_csld_claims(&points);
    let mut files = csld_plots(opts, &points)?;
    let stats = workload_stats(&workloads[0]);
    let md = csld_markdown(opts, &points, &claims, &stats);
    files.extend(write_study(&opts.out, &points, &claims, &md)?);
    Ok(StudyOutput { points, claims, files })
}

/// Facts of a workload the report states: (mean CPU of a non-dynamic request in ms under
/// the CSLD costs, mean static size in bytes, distinct static documents, their bytes).
pub fn workload_stats(w: &Workload) -> (f64, f64, usize, u64) {
    use crate::workload::RequestKind;
    let c = crate::cost_model::CostModel::csld03();
    let (mut cpu, mut n, mut size, mut statics) = (0u64, 0u64, 0u64, 0u64);
    for (i, &id) in w.requests().iter().enumerate() {
        let base = c.conn_setup_ns + c.request_cpu_ns + c.conn_teardown_ns;
        match w.kinds()[i] {
            RequestKind::Dynamic => continue,
            RequestKind::Static => {
                let s = w.targets()[id as usize].size;
                cpu += base + c.transmit_ns(s);
                size += s;
                statics += 1;
            }
            RequestKind::Ims | RequestKind::Inv => cpu += base + c.reply_ns,
        }
        n += 1;
    }
    let docs: Vec<u64> =
        w.targets().iter().filter(|t| t.class.is_none() && !t.missing).map(|t| t.size).collect();
    (cpu as f64 / n.max(1) as f64 / 1e6, size as f64 / statics.max(1) as f64, docs.len(), docs.iter().sum())
}

fn csld_plots(opts: &CsldOptions, points: &[StudyPoint]) -> Result<Vec<PathBuf>, SimError> {
    std::fs::create_dir_all(&opts.out).map_err(|e| SimError::io(&opts.out, e))?;
    let mut files = Vec::new();
    let ratio = |case: &str, label: &str| -> Option<f64> {
        let rr = find_point(points, case, "RR")?.latency_s;
        Some(find_point(points, case, label)?.latency_s / rr.max(1e-12))
    };
    let mut t4: Vec<Series> = Vec::new();
    for p in TABLE4_POLICIES.iter().skip(1) {
        let label = csld_label(p)?;
        let pts =
            TABLE4.iter().filter_map(|c| Some((c.id as f64, ratio(&c.id.to_string(), &label)?))).collect();
        t4.push((label, pts));
    }
    let path = opts.out.join("table4_ratio_to_rr.svg");
    let axes = Axes { title: "Table 4: mean server latency ÷ RR", x: "case", y: "latency / RR" };
    plot_lines(&path, axes, &t4)?;
    files.push(path);
    let rr_ours: Vec<(f64, f64)> = TABLE5
        .iter()
        .filter_map(|&(rate, _)| {
            points.iter().find(|p| p.case == TABLE5_CASE && p.policy == "RR" && p.rate == rate)
        })
        .map(|p| (p.rate, p.latency_s))
        .collect();
    let rr_paper: Vec<(f64, f64)> = TABLE5.to_vec();
    let path = opts.out.join("table5_rr_latency.svg");
    let axes = Axes { title: "Table 5: RR, {4}, 5% dynamic", x: "requests/s", y: "mean server latency (s)" };
    plot_lines(&path, axes, &[("RR (sim)".into(), rr_ours), ("RR (paper)".into(), rr_paper)])?;
    files.push(path);
    let mut f6: Vec<Series> = Vec::new();
    for label in ["WRR_i", "WRR_a", "CSLD"] {
        let pts = TABLE5
            .iter()
            .filter_map(|&(rate, _)| {
                let at = |l: &str| {
                    points.iter().find(|p| p.case == TABLE5_CASE && p.policy == l && p.rate == rate)
                };
                Some((rate, at(label)?.latency_s / at("RR")?.latency_s.max(1e-12)))
            })
            .collect();
        f6.push((label.to_string(), pts));
    }
    let path = opts.out.join("fig6_ratio_to_rr.svg");
    let axes = Axes { title: "Fig. 6: latency ÷ RR, {4}, 5% dynamic", x: "requests/s", y: "latency / RR" };
    plot_lines(&path, axes, &f6)?;
    files.push(path);
    Ok(files)
}
