//! Running an experiment: check what it needs, generate the sites, build one `LabNetwork`
//! with the largest node count (or put every role on loopback), then for every point start a fresh `LabCluster`, run the
//! load on a thread in the client namespace (warm-up, then the measured interval, every
//! response verified), snapshot the admin listeners and the switch's CPU at both ends of the
//! measured interval, record a `PointResult`, and tear the cluster down.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use locus_load::{
    DocumentSet, DynamicTarget, HotSpot, LoadConfig, LoadReport, Popularity, Verification, Workload, run_load,
};

use crate::cluster::{ClusterDelta, ClusterSnapshot, ClusterSpec, LabCluster};
use crate::error::LabError;
use crate::experiment::{Experiment, ExperimentPoint, LoadClient, SwitchKind};
use crate::measured_load::MeasuredLoad;
use crate::report::LabReport;
use crate::results::{FailedPoint, PointResult, write_results_json};
use crate::site::LabSite;
use crate::utc_time::UtcTime;
use locus_rig::Net;
use locus_rig::ScratchFolder;
use locus_rig::cpu_us_per_request;
use locus_rig::require_program;
use locus_rig::servers::{CertKind, write_tls_files};
use locus_rig::{LabNetwork, RigError};

/// How to run an experiment.
#[derive(Clone, Debug)]
pub struct LabOptions {
    /// The `locus` executable the nodes and Locus switches run.
    pub locus: PathBuf,
    /// The report folder (server logs go to `logs/` inside it).
    pub out_dir: PathBuf,
    /// Where the sites are generated; `None`: a temporary folder removed afterwards.
    pub site_dir: Option<PathBuf>,
}

/// The outcome of a run that got as far as measuring: the report of what was measured, and
/// the error that stopped it early, if any.
pub struct LabRun {
    pub report: LabReport,
    pub error: Option<LabError>,
}

/// Longest wait for a load response.
const LOAD_TIMEOUT: Duration = Duration::from_secs(10);

/// `nproc` CPUs, the kernel release, and how nodes' CPU limits are enforced when a workload
/// sets them.
fn describe_machine(experiment: &Experiment) -> String {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let mut out = format!(
        "{cpus} CPUs shared by the load generator, the switch and every node (Linux {})",
        kernel.trim()
    );
    let limited = (0..experiment.workloads.len()).any(|w| experiment.node_of(w).cpu_limit.is_some());
    if limited {
        let how = locus_rig::detect_cpu_hierarchy()
            .map_or_else(|e| e.to_string(), |h| h.mechanism.describe().to_string());
        out.push_str(&format!("; nodes' CPU limits by {how}, period {} ms", locus_rig::CFS_PERIOD_US / 1000));
    }
    out
}

/// Everything that can be checked before the first point: root and `ip`, the `locus`
/// executable, HAProxy, NGINX and h2load when the experiment uses them, and every Locus policy and mode (with
/// `locus switch --check`).
pub fn preflight(experiment: &Experiment, locus: &Path) -> Result<(), LabError> {
    LabNetwork::available().map_err(RigError::Unavailable)?;
    check_programs(experiment, locus)
}

/// `preflight` without the lab's own needs (root, `ip`): what a run on loopback checks.
fn check_programs(experiment: &Experiment, locus: &Path) -> Result<(), LabError> {
    if !locus.is_file() {
        return Err(LabError::io(
            locus,
            std::io::Error::new(std::io::ErrorKind::NotFound, "no locus executable here"),
        ));
    }
    if experiment.uses(SwitchKind::Haproxy) {
        require_program("haproxy", "haproxy")?;
    }
    if experiment.uses(SwitchKind::Nginx) {
        require_program("nginx", "nginx")?;
    }
    if experiment.workloads.iter().any(|w| w.client == LoadClient::H2load) {
        require_program("h2load", "nghttp2-client")?;
    }
    let scratch = tempfile::tempdir().map_err(|e| LabError::io(std::env::temp_dir(), e))?;
    check_third_party_configs(experiment, scratch.path())?;
    // One-way modes are checked as the lab runs them: with a key file, an agent per node and
    // (l4) an interface for the forwarder.
    let key = scratch.path().join("handoff.key");
    for (r, row) in experiment.switches.iter().enumerate().filter(|(_, r)| r.kind == SwitchKind::Locus) {
        // The classes of a workload the row runs on, as its points will have them.
        let classes =
            match experiment.workloads.iter().find(|w| row.runs_on(&w.name) && !w.dynamic.is_empty()) {
                Some(w) => {
                    let path = scratch.path().join(format!("row{r}.classes.toml"));
                    std::fs::write(&path, w.class_file_text()).map_err(|e| LabError::io(&path, e))?;
                    Some(path)
                }
                None => None,
            };
        for policy in &row.policies {
            for mode in &row.modes {
                let mut cmd = Command::new(locus);
                cmd.args(["switch", "--check", "--mode", mode]);
                match row.policy_table(policy) {
                    Some(table) => {
                        let path = scratch.path().join(format!("row{r}-{policy}.toml"));
                        std::fs::write(&path, table).map_err(|e| LabError::io(&path, e))?;
                        cmd.arg("--config").arg(&path);
                    }
                    None => {
                        cmd.args(["--policy", policy]);
                    }
                }
                if let Some(path) = &classes {
                    cmd.arg("--class-file").arg(path);
                }
                if locus_rig::servers::is_one_way_mode(mode) {
                    if !key.exists() {
                        locus_rig::servers::write_handoff_key(&key)?;
                    }
                    cmd.args(["--node", "node1=127.0.0.1:1@127.0.0.1:2+127.0.0.1:3"]);
                    cmd.arg("--handoff-key-file").arg(&key);
                    if mode == "l4" {
                        cmd.args(["--handoff-interface", "lo"]);
                    }
                } else {
                    // An admin listener too, for the policies fed by node reports.
                    cmd.args(["--node", "node1=127.0.0.1:1+127.0.0.1:3"]);
                }
                let command = format!("{} switch --check --policy {policy} --mode {mode}", locus.display());
                let out = cmd
                    .output()
                    .map_err(|e| RigError::Command { command: command.clone(), message: e.to_string() })?;
                if !out.status.success() {
                    let message = String::from_utf8_lossy(&out.stderr).trim().to_string();
                    return Err(RigError::Command { command, message }.into());
                }
            }
        }
    }
    Ok(())
}

/// Every HAProxy and NGINX configuration the rows will run, checked by the program itself
/// (`haproxy -c`, `nginx -t`) before the first point.
fn check_third_party_configs(experiment: &Experiment, scratch: &Path) -> Result<(), LabError> {
    for row in &experiment.switches {
        for policy in &row.policies {
            match row.kind {
                SwitchKind::Haproxy => {
                    if let Some(balance) = crate::experiment::haproxy_balance(policy) {
                        locus_rig::servers::check_haproxy_config(
                            scratch,
                            balance,
                            &row.haproxy_tuning(),
                            row.workers,
                        )?;
                    }
                }
                SwitchKind::Nginx => {
                    if let Some(balance) = crate::experiment::nginx_balance(policy) {
                        locus_rig::servers::check_nginx_config(scratch, balance, row.workers)?;
                    }
                }
                SwitchKind::Locus | SwitchKind::Dc => {}
            }
        }
    }
    Ok(())
}

/// Run every point of `experiment`; `progress` gets a line per step. `results.json` in the
/// report folder is rewritten after every point; the caller writes the rest of the report.
/// `Err` means nothing was measured (a failed check or set-up); a failure after that is
/// returned in `LabRun::error` beside the report of the points measured so far.
pub fn run_experiment(
    experiment: &Experiment,
    options: &LabOptions,
    progress: &mut dyn FnMut(&str),
) -> Result<LabRun, LabError> {
    run_on(experiment, options, false, progress)
}

/// `run_experiment` with every role on 127.0.0.1 instead of in namespaces: no root needed, no
/// virtual IP, no one-way modes (they need root), the machine's TCP settings.
pub fn run_experiment_on_loopback(
    experiment: &Experiment,
    options: &LabOptions,
    progress: &mut dyn FnMut(&str),
) -> Result<LabRun, LabError> {
    run_on(experiment, options, true, progress)
}

fn run_on(
    experiment: &Experiment,
    options: &LabOptions,
    loopback: bool,
    progress: &mut dyn FnMut(&str),
) -> Result<LabRun, LabError> {
    let started = Instant::now();
    let started_utc = UtcTime::now().display();
    if loopback {
        check_programs(experiment, &options.locus)?;
    } else {
        preflight(experiment, &options.locus)?;
    }
    let out = &options.out_dir;
    std::fs::create_dir_all(out).map_err(|e| LabError::io(out, e))?;
    let copy = out.join("experiment.toml");
    std::fs::write(&copy, experiment.to_toml()).map_err(|e| LabError::io(&copy, e))?;
    let scratch_sites = ScratchFolder::new("sites")?;
    run_with_sites(experiment, options, loopback, progress, scratch_sites.path(), started, started_utc)
}

fn run_with_sites(
    experiment: &Experiment,
    options: &LabOptions,
    loopback: bool,
    progress: &mut dyn FnMut(&str),
    scratch_sites: &Path,
    started: Instant,
    started_utc: String,
) -> Result<LabRun, LabError> {
    let out = &options.out_dir;
    let site_dir = options.site_dir.clone().unwrap_or_else(|| scratch_sites.to_path_buf());
    let mut sites = Vec::new();
    for w in &experiment.workloads {
        let site = LabSite::generate(w, &site_dir)?;
        progress(&format!(
            "site `{}`: {} files, {:.1} MiB (median {:.1} KiB)",
            w.name,
            site.files,
            site.total_bytes as f64 / (1 << 20) as f64,
            site.median_bytes as f64 / 1024.0
        ));
        sites.push(site);
    }
    let net = make_net(experiment.max_nodes(), loopback, progress)?;
    let mut report = LabReport {
        experiment: experiment.clone(),
        sites: sites.clone(),
        points: Vec::new(),
        started_utc,
        wall_s: 0.0,
        machine: describe_machine(experiment),
        notes: Vec::new(),
        failed_points: Vec::new(),
        failure: None,
    };
    let points = experiment.points();
    let mut error = None;
    for point in &points {
        let t = Instant::now();
        let outcome = run_point_twice(&net, experiment, point, &sites[point.workload], options, progress);
        match outcome {
            Ok(result) => {
                progress(&format!(
                    "[{}/{}] {:<40} {:>7.0} req/s  hit {:.3}  imbalance {:.2}  switch {} µs/req  ({:.1} s)",
                    point.index + 1,
                    points.len(),
                    point.label(),
                    result.rps,
                    result.hit_ratio,
                    result.imbalance,
                    result.switch_cpu_us_per_request.map_or("—".into(), |c| format!("{c:.0}")),
                    t.elapsed().as_secs_f64()
                ));
                report.points.push(result);
            }
            Err(PointFailure::Stop(e)) => {
                error = Some(e);
                break;
            }
            Err(PointFailure::Failed(failed)) => {
                progress(&format!(
                    "[{}/{}] {} FAILED twice: {}",
                    point.index + 1,
                    points.len(),
                    point.label(),
                    failed.failed
                ));
                report.failed_points.push(failed);
            }
        }
        if let Err(e) = write_results_json(out, &report) {
            error = Some(e);
            break;
        }
    }
    drop(net);
    // The simulator's twin of a workload with cooperative caching, while its site is on disk.
    match crate::sim_twin::twin_notes(experiment, &sites, &report.points) {
        Ok(notes) => report.notes.extend(notes),
        Err(e) => progress(&format!("simulator twin: {e}")),
    }
    if let Some(e) = &error {
        report.failure = Some(e.to_string());
    }
    if let (None, Some(first)) = (&error, report.failed_points.first()) {
        error = Some(LabError::PointsFailed {
            failed: report.failed_points.len(),
            total: points.len(),
            first: first.failed.clone(),
        });
    }
    report.wall_s = started.elapsed().as_secs_f64();
    Ok(LabRun { report, error })
}

/// Every role on loopback, or a namespace lab with `nodes` nodes.
fn make_net(nodes: usize, loopback: bool, progress: &mut dyn FnMut(&str)) -> Result<Net, LabError> {
    if loopback {
        progress("network: loopback, every role on 127.0.0.1");
        return Ok(Net::Loopback);
    }
    let lab = Net::Namespaces(LabNetwork::create(nodes)?);
    progress(&format!("network: client, switch and {nodes} node namespaces on a bridge"));
    Ok(lab)
}

/// Why a point has no result: it failed on both tries (the run goes on), or the run must stop
/// (an interrupt, or `results.json` could not be written).
enum PointFailure {
    Failed(FailedPoint),
    Stop(LabError),
}

/// Run a point; if it fails (a server that did not start or died, an address still held,
/// wrong bytes), sweep the lab's hosts and run it once more.
fn run_point_twice(
    net: &Net,
    experiment: &Experiment,
    point: &ExperimentPoint,
    site: &LabSite,
    options: &LabOptions,
    progress: &mut dyn FnMut(&str),
) -> Result<PointResult, PointFailure> {
    let mut last = String::new();
    for attempt in 1..=2 {
        let outcome =
            run_point(net, experiment, point, site, options, attempt).and_then(|r| match r.mismatches {
                0 => Ok(r),
                n => Err(LabError::Point {
                    point: point.label(),
                    message: format!("{n} responses did not match the site (see the point's warnings)"),
                }),
            });
        // Whatever a server left behind on the hosts goes before the next point starts.
        net.sweep_hosts();
        match outcome {
            Ok(mut result) => {
                result.attempts = attempt;
                return Ok(result);
            }
            Err(LabError::Rig(RigError::Interrupted)) => {
                return Err(PointFailure::Stop(RigError::Interrupted.into()));
            }
            Err(e) => {
                last = e.to_string();
                if attempt == 1 {
                    progress(&format!("{last}; trying the point once more"));
                }
            }
        }
    }
    Err(PointFailure::Failed(FailedPoint {
        switch: point.switch,
        policy: point.policy_label(),
        mode: point.mode.clone(),
        nodes: point.nodes,
        workload: experiment.workloads[point.workload].name.clone(),
        repetition: point.repetition,
        attempts: 2,
        failed: last,
    }))
}

/// The load of one point: the workload's Zipf stream over the site (with its hot set and
/// dynamic classes mixed in), closed or open loop, or surfers following the site's links from
/// its entry page; every response verified (documents against the manifest — pages rewritten by
/// DC nodes against their originals — dynamic answers against the body their target implies).
fn load_config(
    experiment: &Experiment,
    point: &ExperimentPoint,
    site: &LabSite,
    cluster: &LabCluster<'_>,
) -> Result<LoadConfig, LabError> {
    let w = &experiment.workloads[point.workload];
    let switch_url = cluster.switch_url();
    let common = LoadConfig {
        clients: w.clients,
        threads: w.load_threads,
        keepalive: true,
        pipeline: 1,
        duration: Some(Duration::from_secs_f64(experiment.measure_of(point.workload))),
        requests: experiment.measure_requests,
        warmup: Duration::from_secs_f64(experiment.warmup_of(point.workload)),
        timeout: LOAD_TIMEOUT,
        verification: Verification::Manifest(site.manifest()),
        seed: point.seed,
        progress: false,
        mismatch_samples: 5,
        h2: w.h2,
        streams: w.streams,
        ..LoadConfig::default()
    };
    if let Some(surf) = &w.surf {
        let entry = format!("{}{}", switch_url.trim_end_matches('/'), site.entry);
        // Without a switch every node may be named by a rewritten link.
        let hosts = match point.switch {
            SwitchKind::Dc => cluster.node_addrs(),
            _ => vec![cluster.switch_addr()],
        };
        let hosts = hosts.iter().map(|a| format!("http://{a}/").parse()).collect::<Result<Vec<_>, _>>()?;
        return Ok(LoadConfig {
            workload: Workload::Surf {
                entry: entry.parse()?,
                hosts,
                session_requests: surf.session_requests,
            },
            keepalive: surf.keepalive,
            ..common
        });
    }
    let hot_spot = w.hot_spot.as_ref().map(|h| HotSpot {
        documents: h.documents,
        share: h.share,
        shift: h.shift_s.map(Duration::from_secs_f64),
    });
    let dynamic = w
        .dynamic
        .iter()
        .map(|d| DynamicTarget {
            path: d.class.prefix.clone(),
            share: d.share,
            variants: d.variants,
            size: d.class.size.0,
        })
        .collect();
    Ok(LoadConfig {
        targets: vec![switch_url.parse()?],
        rate: w.rate,
        hot_spot,
        dynamic,
        workload: Workload::Synthetic {
            popularity: Popularity::Zipf { alpha: w.alpha },
            documents: DocumentSet::Manifest(site.manifest()),
        },
        ..common
    })
}

/// The snapshot at the start of the measured interval: taken, or being taken by a thread.
enum PendingSnapshot<'scope> {
    Taken(Result<ClusterSnapshot, LabError>),
    Watching(std::thread::ScopedJoinHandle<'scope, Result<ClusterSnapshot, LabError>>),
}

/// Run the load on a thread in the client namespace; a second thread there snapshots the
/// cluster when the warm-up ends, and the first snapshots it again when the load ends.
pub fn measure(
    cluster: &LabCluster<'_>,
    config: &LoadConfig,
) -> Result<(LoadReport, ClusterSnapshot, ClusterSnapshot), LabError> {
    cluster.net().on_host("client", || {
        std::thread::scope(|s| {
            let warmup = config.warmup;
            // With a warm-up, a second thread (on the client host too: it inherits the
            // namespace) takes the first snapshot when the warm-up ends.
            let before = if warmup.is_zero() {
                PendingSnapshot::Taken(cluster.snapshot_here())
            } else {
                PendingSnapshot::Watching(s.spawn(move || {
                    std::thread::sleep(warmup);
                    cluster.snapshot_here()
                }))
            };
            let report = run_load(config);
            let after = cluster.snapshot_here();
            let before = match before {
                PendingSnapshot::Taken(b) => b,
                PendingSnapshot::Watching(w) => w.join().unwrap_or_else(|_| {
                    Err(LabError::system("snapshot thread", std::io::Error::other("panicked")))
                }),
            };
            Ok((report?, before?, after?))
        })
    })
}

/// One point: a fresh cluster, the load, the numbers.
fn run_point(
    net: &Net,
    experiment: &Experiment,
    point: &ExperimentPoint,
    site: &LabSite,
    options: &LabOptions,
    attempt: u32,
) -> Result<PointResult, LabError> {
    let scratch = options.out_dir.join("logs").join(format!(
        "{:03}-{}-{}-{}-{}n-r{}{}",
        point.index + 1,
        experiment.workloads[point.workload].name,
        point.switch.name(),
        point.policy_label(),
        point.nodes,
        point.repetition,
        if attempt > 1 { format!("-try{attempt}") } else { String::new() }
    ));
    let spec = ClusterSpec {
        nodes: point.nodes,
        node: experiment.node_of(point.workload).clone(),
        root: site.root.clone(),
        class_file: site.class_file.clone(),
        switch: point.switch,
        policy: point.policy.clone(),
        mode: point.mode.clone(),
        workers: point.workers,
        splice_min_bytes: point.splice_min_bytes,
        rehandoff: point.rehandoff.clone(),
        policy_table: point.policy_table.clone(),
        coop: point.coop.clone(),
        dc_quota: point.dc_quota.clone(),
        dc_balance_ms: point.dc_balance_ms,
        haproxy: point.haproxy,
        switch_class_file: switch_class_file(experiment, point, site, &scratch)?,
        tls: match experiment.workloads[point.workload].tls {
            true => {
                Some(write_tls_files(&scratch.join("tls"), CertKind::EcdsaP256, crate::cluster::TLS_NAME)?)
            }
            false => None,
        },
    };
    let in_point = |e: LabError| LabError::Point { point: point.label(), message: e.to_string() };
    let mut cluster = LabCluster::start(net, &options.locus, &scratch, &spec).map_err(in_point)?;
    let mut config = load_config(experiment, point, site, &cluster)?;
    if let Some(tls) = &spec.tls {
        config.tls_ca = Some(tls.cert.clone());
        config.tls_name = Some(crate::cluster::TLS_NAME.into());
    }
    let (load, before, after) = match experiment.workloads[point.workload].client {
        LoadClient::Locus => {
            let (report, before, after) = measure(&cluster, &config).map_err(in_point)?;
            (MeasuredLoad::from(&report), before, after)
        }
        LoadClient::H2load => {
            let run = crate::h2load_point::h2load_run(experiment, point, &config, &scratch)?;
            crate::h2load_point::measure_h2load(&cluster, &run, config.warmup).map_err(in_point)?
        }
    };
    cluster.check_running().map_err(in_point)?;
    drop(cluster);
    let mut result = point_result(experiment, point, &load, &before, &after);
    result.congestion_control = net.congestion_control();
    Ok(result)
}

/// A class file with the row's scaled costs for the switch, in the point's folder; `None`
/// when the row scales nothing (the switch reads the nodes' file).
fn switch_class_file(
    experiment: &Experiment,
    point: &ExperimentPoint,
    site: &LabSite,
    scratch: &Path,
) -> Result<Option<PathBuf>, LabError> {
    let (Some(factor), Some(_)) = (point.class_cost_scale, &site.class_file) else { return Ok(None) };
    std::fs::create_dir_all(scratch).map_err(|e| LabError::io(scratch, e))?;
    let path = scratch.join("switch-classes.toml");
    let text = experiment.workloads[point.workload].class_file_text_scaled(factor);
    std::fs::write(&path, text).map_err(|e| LabError::io(&path, e))?;
    Ok(Some(path))
}

/// The numbers of a point from what its client measured and the cluster snapshots.
pub fn point_result(
    experiment: &Experiment,
    point: &ExperimentPoint,
    load: &MeasuredLoad,
    before: &ClusterSnapshot,
    after: &ClusterSnapshot,
) -> PointResult {
    let delta = ClusterDelta::between(before, after);
    let mut warnings = load.warnings.clone();
    if delta.hit_ratio.is_none() {
        warnings.push("no cache hits or misses counted: hit ratio shown as 0".into());
    }
    if delta.imbalance.is_none() {
        warnings.push("no requests reached a node: imbalance shown as 0".into());
    }
    PointResult {
        switch: point.switch,
        policy: point.policy_label(),
        mode: point.mode.clone(),
        nodes: point.nodes,
        workload: experiment.workloads[point.workload].name.clone(),
        repetition: point.repetition,
        seed: point.seed,
        config: point.config.clone(),
        rps: load.rps,
        mean_ms: load.mean_ms,
        p50_ms: load.p50_ms,
        p90_ms: load.p90_ms,
        p99_ms: load.p99_ms,
        hit_ratio: delta.hit_ratio.unwrap_or(0.0),
        remote_hit_ratio: delta.remote_hit_ratio.unwrap_or(0.0),
        replica_share: load.replica_share,
        imbalance: delta.imbalance.unwrap_or(0.0),
        errors: load.errors,
        timeouts: load.timeouts,
        outstanding: load.outstanding,
        node_cpu: experiment.node_of(point.workload).node_cpu().to_string(),
        mismatches: load.mismatches,
        requests: load.requests,
        duration_s: load.duration_s,
        // Per request served (the nodes' counts): a one-way switch counts only the requests it
        // routed itself, not those a handed-off connection's node served without asking.
        switch_cpu_us_per_request: cpu_us_per_request(
            Duration::ZERO,
            delta.switch_cpu,
            delta.node_requests.iter().sum(),
        ),
        node_cpu_us_per_request: cpu_us_per_request(
            Duration::ZERO,
            delta.node_cpu,
            delta.node_requests.iter().sum(),
        ),
        node_requests: delta.node_requests,
        congestion_control: String::new(),
        attempts: 1,
        warnings,
    }
}
