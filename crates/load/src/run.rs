//! `run_load`: one load run, in-process. It prepares the workload, starts the worker
//! threads (each with its own runtime, so it assumes nothing about the calling thread — it
//! may sit in a network namespace), reads the admin listeners before and after the measured
//! time, draws the progress line, and merges the workers' counts into a `LoadReport`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::admin_status::{CacheSnapshot, SwitchSnapshot, fetch_status, hit_ratio, imbalance, node_deltas};
use crate::config::{LoadConfig, Workload};
use crate::connection::{RequestBudget, RunSettings, RunTiming, ServerTarget};
use crate::error::LoadError;
use crate::h2_stream::H2Origin;
use crate::load_stream::{TlsTarget, client_config_offering};
use crate::progress::ProgressLine;
use crate::report::{LoadReport, RunShape, SurfReport};
use crate::stats::ThreadStats;
use crate::worker::{LoadWorker, WorkerPlan};
use crate::workload::{JobPlan, WorkloadPlan};

const ADMIN_TIMEOUT: Duration = Duration::from_secs(5);

/// Snapshots of the admin listeners, taken before and after the measured time.
struct AdminWatch {
    switch_before: Option<SwitchSnapshot>,
    nodes_before: Option<Vec<CacheSnapshot>>,
    taken: bool,
    warnings: Vec<String>,
}

impl AdminWatch {
    fn new() -> AdminWatch {
        AdminWatch { switch_before: None, nodes_before: None, taken: false, warnings: Vec::new() }
    }

    fn switch(&mut self, config: &LoadConfig) -> Option<SwitchSnapshot> {
        let url = config.switch_admin.as_ref()?;
        match fetch_status(url, ADMIN_TIMEOUT) {
            Ok(v) => {
                let snap = SwitchSnapshot::from_status(&v);
                if snap.is_none() {
                    self.warnings.push(format!("{url}: status has no `nodes` array"));
                }
                snap
            }
            Err(e) => {
                self.warnings.push(format!("switch admin: {e}"));
                None
            }
        }
    }

    fn nodes(&mut self, config: &LoadConfig) -> Option<Vec<CacheSnapshot>> {
        if config.node_admins.is_empty() {
            return None;
        }
        let mut out = Vec::new();
        for url in &config.node_admins {
            match fetch_status(url, ADMIN_TIMEOUT) {
                Ok(v) => match CacheSnapshot::from_status(&v) {
                    Some(s) => out.push(s),
                    None => {
                        self.warnings.push(format!("{url}: status has no cache counters"));
                        return None;
                    }
                },
                Err(e) => {
                    self.warnings.push(format!("node admin: {e}"));
                    return None;
                }
            }
        }
        Some(out)
    }

    fn before(&mut self, config: &LoadConfig) {
        self.taken = true;
        self.switch_before = self.switch(config);
        self.nodes_before = self.nodes(config);
    }

    fn after(mut self, config: &LoadConfig, report: &mut LoadReport) {
        report.switch = config.switch_admin.as_ref().map(|u| u.to_string());
        if self.taken {
            if let Some(before) = self.switch_before.take()
                && let Some(after) = self.switch(config)
            {
                let nodes = node_deltas(&before, &after);
                report.imbalance = imbalance(&nodes);
                report.nodes = Some(nodes);
                report.policy = after.policy;
                report.mode = after.mode;
            }
            if let Some(before) = self.nodes_before.take()
                && let Some(after) = self.nodes(config)
            {
                report.hit_ratio = hit_ratio(&before, &after);
            }
        } else if config.switch_admin.is_some() || !config.node_admins.is_empty() {
            self.warnings.push("the run ended before its warm-up did: no admin counters".into());
        }
        report.warnings.append(&mut self.warnings);
    }
}

/// Run the load described by `config` and report what it measured. Bad server behaviour
/// (refused connections, resets, timeouts, bad framing, wrong bytes) is counted in the
/// report, not returned as an error.
pub fn run_load(config: &LoadConfig) -> Result<LoadReport, LoadError> {
    config.validate()?;
    let threads = config.worker_threads();
    let plan = Arc::new(WorkloadPlan::build(config, threads)?);
    let mut servers = Vec::with_capacity(config.targets.len());
    let alpn = if config.h2 { locus_tls::ALPN_H2 } else { locus_tls::ALPN_HTTP1 };
    let tls_config = match &config.tls_ca {
        Some(ca) => Some(client_config_offering(ca, config.tls_resume, config.tls_suite.as_deref(), alpn)?),
        None => None,
    };
    for t in &config.targets {
        let close = if config.keepalive { "" } else { "Connection: close\r\n" };
        let tls = match (&tls_config, t.tls) {
            (Some(c), true) => {
                let name = server_name(config.tls_name.as_deref().unwrap_or(&t.host))?;
                Some(TlsTarget { config: c.clone(), name, resume: config.tls_resume })
            }
            _ => None,
        };
        servers.push(ServerTarget {
            addr: t.resolve()?,
            head_tail: format!("Host: {}\r\n{close}\r\n", t.host_header()).into_bytes().into_boxed_slice(),
            base: format!("{}://{}", t.scheme(), t.host_header()),
            tls,
        });
    }
    let origins = if config.h2 {
        servers.iter().map(|s| H2Origin::of(&s.base)).collect::<Result<Vec<_>, _>>()?
    } else {
        Vec::new()
    };
    let settings = Arc::new(RunSettings {
        servers,
        depth: config.pipeline,
        keepalive: config.keepalive,
        timeout: config.effective_timeout(),
        think: config.think,
        sessions: config.sessions,
        seed: config.seed,
        max_samples: config.mismatch_samples,
        h2: config.h2,
        streams: config.streams,
        origins,
    });
    let budget = Arc::new(RequestBudget::new(config.requests));
    let mut watch = AdminWatch::new();
    if config.warmup.is_zero() {
        watch.before(config);
    }
    let mut workers = Vec::with_capacity(threads);
    for index in 0..threads {
        let slots: Vec<usize> = (index..config.clients).step_by(threads).collect();
        let rate = config.rate.map(|r| r * slots.len() as f64 / config.clients as f64);
        let spec = WorkerPlan {
            index,
            slots,
            plan: plan.clone(),
            settings: settings.clone(),
            budget: budget.clone(),
            rate,
        };
        // On failure the workers already started see their start channel close and end.
        workers.push(LoadWorker::spawn(spec)?);
    }
    let start = Instant::now();
    // Validation bounds both durations, so these cannot overflow.
    let warmup_end = start.checked_add(config.warmup).unwrap_or(start);
    let run_end = config.measured_duration().map(|d| warmup_end.checked_add(d).unwrap_or(warmup_end));
    let timing = RunTiming { start, warmup_end, run_end };
    for w in &workers {
        w.begin(timing);
    }
    let mut progress = config.progress.then(|| ProgressLine::new(start));
    while !workers.iter().all(LoadWorker::is_finished) {
        std::thread::sleep(Duration::from_millis(10));
        let now = Instant::now();
        if !watch.taken && now >= warmup_end {
            watch.before(config);
        }
        if let Some(p) = progress.as_mut() {
            let (requests, errors) =
                workers.iter().map(|w| w.live.read()).fold((0, 0), |a, b| (a.0 + b.0, a.1 + b.1));
            p.update(now, requests, errors, now < warmup_end);
        }
    }
    let finished = Instant::now();
    if let Some(p) = progress.as_mut() {
        p.finish();
    }
    let mut stats = ThreadStats::default();
    let mut failure = None;
    for w in workers {
        match w.join() {
            Ok(s) => stats.merge(&s, config.mismatch_samples),
            Err(e) => failure = Some(e),
        }
    }
    if let Some(e) = failure {
        return Err(e);
    }
    // With a request count the run ends at its last response, not when the threads were
    // seen to have ended.
    let measured_end = match run_end {
        Some(end) => end.min(finished),
        None => stats.last_response.unwrap_or(finished),
    };
    let duration_s = measured_end.saturating_duration_since(warmup_end).as_secs_f64();
    let shape = RunShape {
        loop_kind: if config.rate.is_some() { "open" } else { "closed" },
        clients: config.clients,
        threads,
        keepalive: config.keepalive,
        pipeline: config.pipeline,
        protocol: if config.h2 { "h2" } else { "http/1.1" },
        streams: config.streams,
        sessions: config.sessions || matches!(config.workload, Workload::Surf { .. }),
        rate: config.rate,
        warmup_s: config.warmup.as_secs_f64(),
        targets: match &config.workload {
            Workload::Surf { entry, hosts, .. } => {
                std::iter::once(entry).chain(hosts).map(|t| t.to_string()).collect()
            }
            _ => config.targets.iter().map(|t| t.to_string()).collect(),
        },
    };
    let surf = matches!(plan.jobs, JobPlan::Surf(_)).then(|| SurfReport {
        connections_per_s: if duration_s > 0.0 { stats.surf.connections as f64 / duration_s } else { 0.0 },
        counts: stats.surf.clone(),
    });
    let mut report = LoadReport::from_stats(stats, duration_s, shape);
    report.surf = surf;
    report.trace_records_skipped = plan.skipped_records;
    watch.after(config, &mut report);
    Ok(report)
}

/// The name a TLS client asks for and checks the certificate against: the URL's host.
fn server_name(host: &str) -> Result<rustls::pki_types::ServerName<'static>, LoadError> {
    rustls::pki_types::ServerName::try_from(host.to_string())
        .map_err(|e| LoadError::Url { url: host.to_string(), message: format!("not a TLS server name: {e}") })
}
