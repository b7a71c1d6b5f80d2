//! `locus bench reload`: configuration reloads and binary upgrades under a steady load of
//! new connections and keep-alive clients, counting failed requests and resets — the Locus
//! switch (proxy, splice, handoff, HTTPS) beside HAProxy (master-worker, which passes its
//! sockets on, and `-sf`, which binds anew) and NGINX, each on a fresh lab cluster, seeds
//! outermost (every server once per seed), a row per server and seed, and a table of medians
//! and ranges.

mod client;
mod cluster;
mod draining;
mod pid_guard;
mod subject;
mod table;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde::Serialize;

pub use client::{Failure, KindCounts};
pub use subject::SUBJECTS;
pub use table::{markdown_table, summarize};

use client::{Load, LoadShape, Target};
use cluster::Cluster;
use draining::DrainReport;
use subject::{Running, Subject};

/// Flags of `locus bench reload`.
#[derive(clap::Args, Debug, Clone)]
pub struct ReloadArgs {
    /// Print one JSON object per server and seed.
    #[arg(long)]
    pub json: bool,
    /// Servers, comma-separated: locus-proxy, locus-splice, locus-handoff, locus-tls,
    /// haproxy-transfer, haproxy-sf, nginx.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "locus-proxy,locus-splice,locus-handoff,locus-tls,haproxy-transfer,haproxy-sf,nginx"
    )]
    pub servers: Vec<String>,
    /// Seeds (rounds): every server once per seed, seeds outermost.
    #[arg(long, default_value_t = 3)]
    pub seeds: u32,
    /// Configuration reloads per run.
    #[arg(long, default_value_t = 20)]
    pub reloads: u32,
    /// Binary upgrades per run (spread among the reloads).
    #[arg(long, default_value_t = 3)]
    pub upgrades: u32,
    /// Mean pause between two events (reload or upgrade), in ms; each drawn 0.5–1.5× from
    /// the seed.
    #[arg(long, default_value_t = 400)]
    pub interval_ms: u64,
    /// New connections per second (one request each), over all new-connection clients.
    #[arg(long, default_value_t = 200)]
    pub new_conn_rate: u32,
    /// New-connection client threads.
    #[arg(long, default_value_t = 4)]
    pub new_conn_clients: u32,
    /// Keep-alive clients (a connection and a thread each).
    #[arg(long, default_value_t = 16)]
    pub keepalive_clients: u32,
    /// A keep-alive client's pause between a response and its next request, in ms.
    #[arg(long, default_value_t = 20)]
    pub think_ms: u64,
    /// Worker threads or processes of every server under test.
    #[arg(long, default_value_t = 1)]
    pub workers: u32,
    /// Keep configurations and server logs in a folder under this one.
    #[arg(long)]
    pub keep: Option<PathBuf>,
    /// The `locus` executable the nodes and switches run (default: this one).
    #[arg(long)]
    pub locus: Option<PathBuf>,
}

/// One server at one seed.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct ReloadRow {
    pub server: String,
    pub mode: String,
    pub seed: u64,
    /// Reloads and upgrades done (fewer than asked if the run stopped on an error).
    pub reloads: u32,
    pub upgrades: u32,
    /// Requests of both kinds.
    pub requests: u64,
    /// Requests without a complete 2xx.
    pub failed: u64,
    /// Requests that met ECONNRESET, EPIPE or an EOF before a complete response.
    pub resets: u64,
    pub new_conn_requests: u64,
    pub new_conn_failed: u64,
    pub new_conn_resets: u64,
    /// New connections refused (a part of `new_conn_failed`).
    pub new_conn_refused: u64,
    pub keepalive_requests: u64,
    /// Keep-alive requests lost: sent and not answered with a complete 2xx.
    pub keepalive_failed: u64,
    pub keepalive_resets: u64,
    /// Keep-alive connections found closed by the server while idle (no request lost; the
    /// client opened a new one).
    pub keepalive_closed_idle: u64,
    /// Responses that said `Connection: close` (the server ended the connection after a
    /// complete answer).
    pub keepalive_close_header: u64,
    pub timeouts: u64,
    /// Responses with a status other than 2xx.
    pub bad_status: u64,
    /// Locus: takeovers refused while the previous generation drained, and retried.
    pub takeover_retries: u32,
    /// Longest time an old generation took to finish, in ms (to 10 ms): Locus, from its
    /// handover to its exit; HAProxy `-sf`, from the new process's start to the old one's
    /// exit; NGINX, from WINCH to the old workers' exit (upgrades); `null` for HAProxy's
    /// master-worker (its old workers are the master's children, not followed).
    pub longest_drain_ms: Option<u64>,
    /// Old generations still running 20 s after being told to finish (then killed).
    pub stuck_generations: u32,
    /// Why the run stopped early, if it did.
    pub error: Option<String>,
}

/// The schedule of one run: `true` for an upgrade, `false` for a reload, spread evenly.
pub fn schedule(reloads: u32, upgrades: u32) -> Vec<bool> {
    let (total, upgrades) = ((reloads + upgrades) as usize, upgrades as usize);
    let mut events = vec![false; total];
    for k in 1..=upgrades {
        events[k * total / (upgrades + 1)] = true;
    }
    // Two that fell on one place (few reloads): the rest take the first free places.
    let missing = upgrades - events.iter().filter(|&&u| u).count();
    for e in events.iter_mut().filter(|e| !**e).take(missing) {
        *e = true;
    }
    events
}

/// A small deterministic generator for the pauses (xorshift64*).
struct Pauses(u64);

impl Pauses {
    fn next(&mut self, mean: Duration) -> Duration {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        let unit = (self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 11) as f64 / (1u64 << 53) as f64;
        mean.mul_f64(0.5 + unit)
    }
}

/// The bench's files: the site, the TLS certificate, and where runs keep theirs.
struct BenchFiles {
    _scratch: Option<locus_rig::ScratchFolder>,
    root: PathBuf,
    site: PathBuf,
    tls: locus_rig::servers::TlsFiles,
}

impl BenchFiles {
    fn make(keep: Option<&Path>) -> anyhow::Result<BenchFiles> {
        let (root, scratch) = match keep {
            Some(dir) => {
                std::fs::create_dir_all(dir)?;
                let kept = tempfile::Builder::new()
                    .prefix("locus-bench-reload")
                    .disable_cleanup(true)
                    .tempdir_in(dir)?;
                (std::path::absolute(kept.path())?, None)
            }
            None => {
                let s = locus_rig::ScratchFolder::new("bench-reload")?;
                (s.path().to_path_buf(), Some(s))
            }
        };
        let site = root.join("site");
        std::fs::create_dir_all(&site)?;
        for i in 0..SITE_FILES {
            let name = format!("f{i:03}");
            std::fs::write(site.join(&name), crate::lab_rig::file_content(&name, SITE_FILE_BYTES))?;
        }
        let tls = locus_rig::servers::write_tls_files(
            &root.join("tls"),
            locus_rig::servers::CertKind::EcdsaP256,
            "locus.test",
        )?;
        Ok(BenchFiles { _scratch: scratch, root, site, tls })
    }
}

/// Files in the site, and each one's size.
const SITE_FILES: usize = 64;
const SITE_FILE_BYTES: usize = 4096;

/// Check the flags.
fn validate(a: &ReloadArgs) -> anyhow::Result<Vec<Subject>> {
    crate::lab_rig::require_lab()?;
    if a.seeds == 0 || a.servers.is_empty() {
        bail!("--seeds and --servers must not be empty");
    }
    if a.new_conn_clients == 0 && a.keepalive_clients == 0 {
        bail!("no client: give --new-conn-clients or --keepalive-clients");
    }
    if a.interval_ms == 0 || a.interval_ms > 60_000 || a.reloads + a.upgrades > 1000 {
        bail!("--interval-ms must be in 1..=60000 and at most 1000 events a run");
    }
    a.servers.iter().map(|s| Subject::from_name(s)).collect()
}

/// Run the bench; `progress` gets a line per run.
pub fn run_reload_bench(a: &ReloadArgs, mut progress: impl FnMut(&str)) -> anyhow::Result<Vec<ReloadRow>> {
    let subjects = validate(a)?;
    let locus = match &a.locus {
        Some(p) => p.clone(),
        None => std::env::current_exe().context("locating the locus executable")?,
    };
    let files = BenchFiles::make(a.keep.as_deref())?;
    let mut rows = Vec::new();
    for seed in 1..=u64::from(a.seeds) {
        // Every server once per seed; the order rotates so that none is always first.
        for (k, subject) in crate::clubweb::rotated(&subjects, seed as usize - 1).into_iter().enumerate() {
            let dir = files.root.join(format!("seed{seed}-{k}-{}", subject.labels().0));
            std::fs::create_dir_all(&dir)?;
            let started = Instant::now();
            let row = run_one(a, &locus, &files, subject, seed, &dir);
            progress(&format!("{} ({:.0} s)", progress_line(&row), started.elapsed().as_secs_f64()));
            rows.push(row);
        }
    }
    Ok(rows)
}

/// A run's line for the progress output.
fn progress_line(r: &ReloadRow) -> String {
    format!(
        "reload seed {} {} {}: {} reloads, {} upgrades, {} requests, {} failed, {} resets (new conn {}/{}, keep-alive {}/{}, closed idle {}){}",
        r.seed,
        r.server,
        r.mode,
        r.reloads,
        r.upgrades,
        r.requests,
        r.failed,
        r.resets,
        r.new_conn_failed,
        r.new_conn_requests,
        r.keepalive_failed,
        r.keepalive_requests,
        r.keepalive_closed_idle,
        r.error.as_ref().map_or(String::new(), |e| format!(" ERROR: {e}"))
    )
}

/// One server at one seed, on a cluster of its own; an error ends the run early and is
/// reported in the row.
fn run_one(
    a: &ReloadArgs,
    locus: &Path,
    files: &BenchFiles,
    subject: Subject,
    seed: u64,
    dir: &Path,
) -> ReloadRow {
    let (server, mode) = subject.labels();
    let mut row = ReloadRow { server: server.into(), mode: mode.into(), seed, ..ReloadRow::default() };
    if let Err(e) = run_events(a, locus, files, subject, seed, dir, &mut row) {
        row.error = Some(format!("{e:#}"));
    }
    row
}

/// Start the cluster, the server and the load, then reload and upgrade on schedule.
fn run_events(
    a: &ReloadArgs,
    locus: &Path,
    files: &BenchFiles,
    subject: Subject,
    seed: u64,
    dir: &Path,
    row: &mut ReloadRow,
) -> anyhow::Result<()> {
    let mut cluster = Cluster::start(locus, &files.site, dir, Some(files.tls.clone()))?;
    let mut running = Running::start(subject, &cluster, dir, a.workers)?;
    let target = client_target(subject, &running, files)?;
    let shape = LoadShape {
        new_conn_rate: a.new_conn_rate,
        new_conn_clients: a.new_conn_clients,
        keepalive_clients: a.keepalive_clients,
        think: Duration::from_millis(a.think_ms),
    };
    let epoch = Instant::now();
    let load =
        cluster.net.on_host("client", || Ok::<_, anyhow::Error>(Load::start(&target, shape, seed, epoch)))?;
    let mut events = Vec::new();
    let outcome = play_schedule(a, &mut running, &cluster, seed, epoch, row, &mut events);
    let finished = load.finish();
    fill_counts(row, &finished.new_conn, &finished.keepalive);
    // For finding causes: when failures and idle closes happened beside the events.
    std::fs::write(dir.join("events.jsonl"), crate::lab_rig::json_lines(&events)?)?;
    std::fs::write(dir.join("failures.jsonl"), crate::lab_rig::json_lines(&finished.failures)?)?;
    std::fs::write(dir.join("idle-closes.json"), serde_json::to_string(&finished.idle_closes)?)?;
    let finish = outcome?;
    row.longest_drain_ms = finish.longest_ms;
    row.stuck_generations = finish.stuck;
    cluster.check_nodes()
}

/// After a second of load, the reloads and upgrades with their pauses, a second more, then
/// the server's end of run; every event's time (ms since `epoch`) goes to `events`.
fn play_schedule(
    a: &ReloadArgs,
    running: &mut Running,
    cluster: &Cluster,
    seed: u64,
    epoch: Instant,
    row: &mut ReloadRow,
    events: &mut Vec<serde_json::Value>,
) -> anyhow::Result<DrainReport> {
    pause(running, Duration::from_secs(1));
    let mut pauses = Pauses(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
    let ms = || epoch.elapsed().as_secs_f64() * 1e3;
    for upgrade in schedule(a.reloads, a.upgrades) {
        pause(running, pauses.next(Duration::from_millis(a.interval_ms)));
        let at_ms = ms();
        if upgrade {
            let report = running.upgrade(cluster).with_context(|| format!("upgrade {}", row.upgrades + 1))?;
            row.takeover_retries += report.retries;
            row.upgrades += 1;
            events.push(serde_json::json!({"event": "upgrade", "at_ms": at_ms, "done_ms": ms()}));
        } else {
            running.reload(cluster).with_context(|| format!("reload {}", row.reloads + 1))?;
            row.reloads += 1;
            events.push(serde_json::json!({"event": "reload", "at_ms": at_ms}));
        }
    }
    pause(running, Duration::from_secs(1));
    running.finish()
}

/// Wait `length`, looking at the old generations every 10 ms.
fn pause(running: &mut Running, length: Duration) {
    let end = Instant::now() + length;
    while let Some(left) = end.checked_duration_since(Instant::now()) {
        std::thread::sleep(left.min(Duration::from_millis(10)));
        running.poll();
    }
}

/// Where the clients go and how (HTTPS for the TLS switch).
fn client_target(subject: Subject, running: &Running, files: &BenchFiles) -> anyhow::Result<Target> {
    let tls = if subject.tls() {
        let config = locus_load::tls_client_config(&files.tls.cert, false, None)?;
        let name = rustls::pki_types::ServerName::try_from(files.tls.name.clone())?;
        Some((config, name))
    } else {
        None
    };
    let paths = (0..SITE_FILES).map(|i| format!("/f{i:03}")).collect();
    Ok(Target { addr: running.client_addr(), tls, paths: Arc::new(paths) })
}

fn fill_counts(row: &mut ReloadRow, new_conn: &KindCounts, keepalive: &KindCounts) {
    row.requests = new_conn.requests + keepalive.requests;
    row.failed = new_conn.failed + keepalive.failed;
    row.resets = new_conn.resets + keepalive.resets;
    row.new_conn_requests = new_conn.requests;
    row.new_conn_failed = new_conn.failed;
    row.new_conn_resets = new_conn.resets;
    row.new_conn_refused = new_conn.refused;
    row.keepalive_requests = keepalive.requests;
    row.keepalive_failed = keepalive.failed;
    row.keepalive_resets = keepalive.resets;
    row.keepalive_closed_idle = keepalive.closed_idle;
    row.keepalive_close_header = keepalive.close_header;
    row.timeouts = new_conn.timeouts + keepalive.timeouts;
    row.bad_status = new_conn.bad_status + keepalive.bad_status;
}

/// `locus bench reload`.
pub fn run(a: ReloadArgs) -> anyhow::Result<()> {
    let rows = run_reload_bench(&a, |line| eprintln!("{line}"))?;
    if a.json {
        print!("{}", crate::lab_rig::json_lines(&rows)?);
    } else {
        print!("{}", markdown_table(&summarize(&rows)));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upgrades_are_spread_among_the_reloads() {
        let s = schedule(20, 3);
        assert_eq!((s.len(), s.iter().filter(|&&u| u).count()), (23, 3));
        let at: Vec<usize> = s.iter().enumerate().filter(|(_, u)| **u).map(|(i, _)| i).collect();
        assert_eq!(at, [5, 11, 17]);
        assert_eq!(schedule(0, 2), [true, true]);
        assert_eq!(schedule(3, 0), [false; 3]);
    }

    #[test]
    fn pauses_stay_within_half_and_one_and_a_half_of_the_mean() {
        let mut p = Pauses(42);
        let mean = Duration::from_millis(400);
        for _ in 0..1000 {
            let d = p.next(mean);
            assert!(d >= mean / 2 && d <= mean * 3 / 2, "{d:?}");
        }
    }
}
