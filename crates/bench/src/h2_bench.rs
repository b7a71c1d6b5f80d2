//! `locus bench h2`: HTTP/2 through each balancer — the lab experiment `experiments/h2.toml`
//! (built in): h2load over TLS with each connection's zipf URL list, 1, 10 and 100 streams per
//! connection, through the Locus switch (LARD/R, URI hash), HAProxy (bounded URI hash) and
//! NGINX (URI hash) before four disk-bound nodes; the same lists over HTTP/1.1; `locus load
//! --h2` verifying bytes; and cached documents for the switch's CPU per request. Rows are the
//! median over the seeds (rows interleaved seed by seed), with every seed's rate.

use std::collections::BTreeMap;
use std::path::PathBuf;

use locus_lab::{Experiment, LoadClient, PointResult, SwitchKind};
use serde::Serialize;

/// The experiment, as `locus lab run experiments/h2.toml` runs it.
pub const H2_EXPERIMENT: &str = include_str!("../../../experiments/h2.toml");

/// Flags of `locus bench h2`.
#[derive(clap::Args, Debug)]
pub struct H2Args {
    /// Print one JSON object per row.
    #[arg(long)]
    pub json: bool,
    /// Seeds, each running every row once (interleaved).
    #[arg(long, default_value_t = 3)]
    pub rounds: u32,
    /// Workloads to run, comma-separated (default: all): h2-m1, h2-m10, h2-m100, h1-keepalive,
    /// h2-m10-verified, cached-h1, cached-h2-m1, cached-h2-m10.
    #[arg(long, value_delimiter = ',')]
    pub workloads: Vec<String>,
    /// The lab's report folder (default: lab-out/<UTC timestamp>).
    #[arg(long)]
    pub out: Option<PathBuf>,
}

/// One row: a balancer and policy on one workload.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct H2Row {
    /// `locus`, `haproxy` or `nginx`.
    pub path: String,
    pub policy: String,
    pub workload: String,
    /// `h2` or `http/1.1`.
    pub protocol: String,
    pub streams: usize,
    /// `h2load`, or `locus` (every byte verified).
    pub client: String,
    /// Median over the seeds.
    pub rps: f64,
    pub rps_runs: Vec<f64>,
    /// Failed requests and 4xx/5xx answers over all seeds.
    pub errors: u64,
    pub mismatches: u64,
    /// Median over the seeds.
    pub p99_ms: f64,
    pub hit_ratio: f64,
    /// The balancer's CPU per request served, median over the seeds.
    pub switch_cpu_us_per_request: Option<f64>,
}

/// The built-in experiment with `rounds` seeds and only the workloads named (all when none).
pub fn h2_experiment(rounds: u32, workloads: &[String]) -> anyhow::Result<Experiment> {
    let mut e = Experiment::from_toml(H2_EXPERIMENT, "experiments/h2.toml")?;
    e.repeat = rounds.max(1);
    if !workloads.is_empty() {
        for w in workloads {
            anyhow::ensure!(
                e.workloads.iter().any(|x| &x.name == w),
                "unknown workload `{w}`: use {}",
                e.workloads.iter().map(|x| x.name.as_str()).collect::<Vec<_>>().join(", ")
            );
        }
        e.workloads.retain(|x| workloads.contains(&x.name));
    }
    Ok(e)
}

/// Run the bench: the lab experiment, its report written, then its rows.
pub fn run(a: &H2Args) -> anyhow::Result<Vec<H2Row>> {
    let experiment = h2_experiment(a.rounds, &a.workloads)?;
    let output = locus_lab::cli::OutputArgs { out: a.out.clone(), json: false, locus: None, site_dir: None };
    let report = locus_lab::cli::run_to_report(experiment.clone(), output, false)?;
    Ok(h2_rows(&experiment, &report.points))
}

/// The points grouped by workload, balancer and policy, in the experiment's order.
pub fn h2_rows(experiment: &Experiment, points: &[PointResult]) -> Vec<H2Row> {
    let mut groups: BTreeMap<(usize, usize, String), Vec<&PointResult>> = BTreeMap::new();
    for p in points {
        let Some(w) = experiment.workloads.iter().position(|w| w.name == p.workload) else { continue };
        let kind =
            [SwitchKind::Locus, SwitchKind::Haproxy, SwitchKind::Nginx].iter().position(|k| *k == p.switch);
        groups.entry((w, kind.unwrap_or(9), p.policy.clone())).or_default().push(p);
    }
    groups
        .into_iter()
        .map(|((w, _, policy), runs)| {
            let spec = &experiment.workloads[w];
            let median = |f: fn(&PointResult) -> f64| {
                let mut v: Vec<f64> = runs.iter().map(|p| f(p)).collect();
                v.sort_by(f64::total_cmp);
                v[v.len() / 2]
            };
            let cpu = {
                let mut v: Vec<f64> = runs.iter().filter_map(|p| p.switch_cpu_us_per_request).collect();
                v.sort_by(f64::total_cmp);
                v.get(v.len() / 2).copied()
            };
            H2Row {
                path: runs[0].switch.name().to_string(),
                policy,
                workload: spec.name.clone(),
                protocol: if spec.h2 { "h2" } else { "http/1.1" }.to_string(),
                streams: spec.streams,
                client: match spec.client {
                    LoadClient::Locus => "locus",
                    LoadClient::H2load => "h2load",
                }
                .to_string(),
                rps: median(|p| p.rps).round(),
                rps_runs: runs.iter().map(|p| p.rps.round()).collect(),
                errors: runs.iter().map(|p| p.errors).sum(),
                mismatches: runs.iter().map(|p| p.mismatches).sum(),
                p99_ms: (median(|p| p.p99_ms) * 10.0).round() / 10.0,
                hit_ratio: (median(|p| p.hit_ratio) * 1000.0).round() / 1000.0,
                switch_cpu_us_per_request: cpu.map(|c| (c * 10.0).round() / 10.0),
            }
        })
        .collect()
}

/// The rows as a Markdown table.
pub fn h2_markdown(rows: &[H2Row]) -> String {
    let mut out = String::from(
        "| workload | client | balancer | policy | req/s (seeds) | p99 ms | hit | switch µs/req | errors |\n\
         |---|---|---|---|---|---:|---:|---:|---:|\n",
    );
    for r in rows {
        let runs: Vec<String> = r.rps_runs.iter().map(|v| format!("{v:.0}")).collect();
        out.push_str(&format!(
            "| {} | {} | {} | {} | {:.0} ({}) | {:.1} | {:.3} | {} | {} |\n",
            r.workload,
            r.client,
            r.path,
            r.policy,
            r.rps,
            runs.join(", "),
            r.p99_ms,
            r.hit_ratio,
            r.switch_cpu_us_per_request.map_or("-".into(), |c| format!("{c:.1}")),
            r.errors + r.mismatches
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_built_in_experiment_parses_and_workloads_can_be_chosen() {
        let all = h2_experiment(2, &[]).unwrap();
        assert_eq!(all.repeat, 2);
        assert!(all.workloads.iter().any(|w| w.h2 && w.streams == 100 && w.client == LoadClient::H2load));
        let some = h2_experiment(1, &["h2-m10".into(), "cached-h1".into()]).unwrap();
        assert_eq!(some.workloads.len(), 2);
        let err = h2_experiment(1, &["nope".into()]).unwrap_err().to_string();
        assert!(err.contains("`nope`") && err.contains("h2-m100"), "{err}");
    }
}
