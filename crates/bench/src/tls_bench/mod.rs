//! `locus bench tls`: HTTPS through each path of [`paths::TLS_PATHS`] — a Locus node and NGINX
//! serving TLS themselves, the Locus switch, HAProxy and NGINX terminating it before two
//! cleartext nodes — with one certificate (ECDSA P-256, then RSA-2048), one suite
//! (`TLS13_AES_128_GCM_SHA256`, the only one the client offers) and equal worker counts.
//! `locus load` is the client: full handshakes (a connection per request), resumed ones
//! (`--resume`), keep-alive at 1 KiB and 64 KiB; each run also reads the path's own CPU time.
//! Rounds are interleaved (every path once per measure per round, the order rotating) and rows
//! report the median round with the range. Then the memory of idle TLS keep-alive connections.

mod paths;
mod table;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use locus_load::{Expectation, LoadConfig, Verification, run_load};
use locus_rig::servers::{CertKind, TlsFiles, write_tls_files};
use locus_rig::{Net, Server, cpu_us_per_request, process_tree_cpu};
pub use paths::{TLS_PATHS, TlsPath, resolve_tls_paths};
use serde::Serialize;
pub use table::tls_markdown;

use crate::idle_tls::hold_idle_tls_connections;
use crate::proxy::NetChoice;

/// The one suite every path negotiates (the client offers nothing else).
pub const SUITE: &str = "TLS13_AES_128_GCM_SHA256";
/// The name on the certificate, asked for by the client whatever address it connects to.
const SERVER_NAME: &str = "locus.test";

/// Settings of one run.
#[derive(Clone, Debug)]
pub struct TlsBenchOptions {
    pub certs: Vec<CertKind>,
    /// Seconds per load run.
    pub seconds: u32,
    /// Client connections per run.
    pub connections: u32,
    /// Rounds; each measures every path once per measure.
    pub rounds: u32,
    /// Worker threads of every TLS server (switch, HAProxy, NGINX, the TLS node).
    pub workers: u32,
    /// Idle TLS keep-alive connections held against each balancer (0 skips that part).
    pub idle_connections: usize,
    /// Paths to measure (empty: all).
    pub paths: Vec<String>,
    pub keep: Option<PathBuf>,
    pub net: NetChoice,
}

impl Default for TlsBenchOptions {
    fn default() -> TlsBenchOptions {
        TlsBenchOptions {
            certs: vec![CertKind::EcdsaP256, CertKind::Rsa2048],
            seconds: 3,
            connections: 32,
            rounds: 3,
            workers: 1,
            idle_connections: 10_000,
            paths: Vec::new(),
            keep: None,
            net: NetChoice::Auto,
        }
    }
}

/// One kind of run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Measure {
    pub size: u64,
    pub keepalive: bool,
    pub resumed: bool,
}

/// The file sizes the measures fetch.
const SIZES: [u64; 2] = [1024, 65536];

/// What each path is measured at, in order: full handshakes, resumed ones, keep-alive 1 KiB
/// and 64 KiB.
pub const MEASURES: [Measure; 4] = [
    Measure { size: 1024, keepalive: false, resumed: false },
    Measure { size: 1024, keepalive: false, resumed: true },
    Measure { size: 1024, keepalive: true, resumed: false },
    Measure { size: 65536, keepalive: true, resumed: false },
];

/// One line of the report (also a JSON object).
#[derive(Clone, Debug, Serialize, PartialEq)]
#[serde(untagged)]
pub enum TlsRow {
    Throughput {
        path: String,
        cert: String,
        size: u64,
        keepalive: bool,
        resumed: bool,
        /// Median over rounds.
        rps: f64,
        rps_rounds: Vec<f64>,
        /// The path's own CPU (user + system of its processes) per request, median round.
        proxy_us_per_req: Option<f64>,
        /// Median handshake time at the client, median round (runs without keep-alive).
        handshake_p50_ms: Option<f64>,
        /// Failed requests and 4xx/5xx answers over all rounds.
        errors: u64,
    },
    Idle {
        path: String,
        cert: String,
        /// Connections asked for, and held (fewer when the server stopped taking them).
        connections: usize,
        held: usize,
        rss_mb: f64,
        rss_before_mb: f64,
        /// Why fewer were held, if they were.
        stopped: Option<String>,
    },
}

/// One run's figures.
#[derive(Clone, Copy, Debug)]
struct RunFigures {
    rps: f64,
    us_per_req: Option<f64>,
    handshake_p50_ms: Option<f64>,
    errors: u64,
}

/// What the runs of one certificate share.
struct Bench<'a> {
    net: &'a Net,
    opts: &'a TlsBenchOptions,
    tls: &'a TlsFiles,
    /// What every response of each size must be, by size (computed once).
    expected: &'a [(u64, Expectation)],
}

impl Bench<'_> {
    /// One `locus load` run of `measure` against `addr`, with the CPU time of `servers`.
    fn run(
        &self,
        addr: SocketAddr,
        servers: &[Server],
        measure: Measure,
        seconds: u32,
    ) -> anyhow::Result<RunFigures> {
        let expected = self.expected.iter().find(|(size, _)| *size == measure.size).map(|(_, e)| *e);
        let config = LoadConfig {
            clients: self.opts.connections as usize,
            threads: 1,
            keepalive: measure.keepalive,
            duration: Some(Duration::from_secs(u64::from(seconds))),
            verification: Verification::Pinned(
                expected.context("a measure of a size the bench did not write")?,
            ),
            tls_ca: Some(self.tls.cert.clone()),
            tls_resume: measure.resumed,
            tls_name: Some(SERVER_NAME.into()),
            tls_suite: Some(SUITE.into()),
            ..LoadConfig::new(vec![format!("https://{addr}/{}.bin", measure.size).parse()?])
        };
        let cpu = || -> anyhow::Result<Duration> {
            servers.iter().map(|s| Ok(process_tree_cpu(s.process.pid())?)).sum()
        };
        let before = cpu()?;
        let report = self.net.on_host("client", || run_load(&config).map_err(anyhow::Error::from))?;
        let after = cpu()?;
        anyhow::ensure!(
            report.mismatches == 0,
            "{addr}: {} responses differed from the file",
            report.mismatches
        );
        anyhow::ensure!(
            report.requests > 0,
            "{addr}: no response in {seconds} s ({} errors: {:?})",
            report.errors,
            report.errors_by_kind
        );
        Ok(RunFigures {
            rps: report.rps,
            us_per_req: cpu_us_per_request(before, after, report.requests),
            handshake_p50_ms: (!measure.keepalive).then(|| report.tls.map(|t| t.handshake_p50_ms)).flatten(),
            errors: report.errors,
        })
    }
}

/// Run the benchmark; `progress` receives a line per finished run.
pub fn run_tls_bench(opts: &TlsBenchOptions, mut progress: impl FnMut(&str)) -> anyhow::Result<Vec<TlsRow>> {
    let kinds = resolve_tls_paths(&opts.paths)?;
    let locus = std::env::current_exe().context("locating the locus executable")?;
    let files = crate::bench_files::BenchFiles::create("bench-tls", opts.keep.as_ref(), SIZES)?;
    let (scratch, root) = (files.scratch.clone(), files.root.clone());
    let runs = opts.certs.len() * opts.rounds.max(1) as usize * MEASURES.len() * kinds.len();
    progress(&format!(
        "{runs} load runs of {} s: about {:.1} min of load",
        opts.seconds,
        runs as f64 * f64::from(opts.seconds) / 60.0
    ));
    let net = opts.net.make()?;
    progress(&format!("network: {}", net.describe()));
    let (_node_servers, nodes) = files.start_nodes(&net, &locus, 1)?;
    let expected: Vec<(u64, Expectation)> =
        SIZES.iter().map(|&size| (size, Expectation::of_body(&crate::bench_files::body(size)))).collect();
    let mut rows = Vec::new();
    for (i, &cert) in opts.certs.iter().enumerate() {
        let tls = write_tls_files(&scratch.join("tls"), cert, SERVER_NAME)?;
        let env = paths::Env {
            net: &net,
            locus: &locus,
            scratch: &scratch,
            root: &root,
            nodes: &nodes,
            tls: &tls,
            workers: opts.workers,
        };
        let bench = Bench { net: &net, opts, tls: &tls, expected: &expected };
        let mut started = Vec::new();
        for kind in &kinds {
            let s = kind.start(&env).with_context(|| format!("starting TLS path `{}`", kind.name))?;
            progress(&format!("{:<13} {} ({})", kind.name, s.addr, cert.name()));
            started.push((kind.name, s));
        }
        for (name, s) in &started {
            bench.run(s.addr, &s.servers, MEASURES[2], 1).with_context(|| format!("warming {name}"))?;
        }
        rows.extend(measure_all(&bench, &started, cert, &mut progress)?);
        if i == 0 && opts.idle_connections > 0 {
            rows.extend(idle_rows(&bench, &started, cert, &mut progress)?);
        }
    }
    Ok(rows)
}

/// Every measure of every path, rounds interleaved (the path order rotates each round).
fn measure_all(
    bench: &Bench<'_>,
    started: &[(&str, paths::Started)],
    cert: CertKind,
    progress: &mut impl FnMut(&str),
) -> anyhow::Result<Vec<TlsRow>> {
    let rounds = bench.opts.rounds.max(1) as usize;
    let mut figures: Vec<Vec<Vec<RunFigures>>> = vec![vec![Vec::new(); started.len()]; MEASURES.len()];
    for round in 0..rounds {
        for (m, &measure) in MEASURES.iter().enumerate() {
            for k in 0..started.len() {
                let p = (k + round) % started.len();
                let (name, s) = &started[p];
                let f = bench.run(s.addr, &s.servers, measure, bench.opts.seconds)?;
                progress(&format!(
                    "round {} {name:<13} {} {:>5} B {:<10} {:>9.0} req/s {:>7.1} us/req",
                    round + 1,
                    cert.name(),
                    measure.size,
                    if measure.keepalive {
                        "keep-alive"
                    } else if measure.resumed {
                        "resumed"
                    } else {
                        "full"
                    },
                    f.rps,
                    f.us_per_req.unwrap_or(0.0)
                ));
                figures[m][p].push(f);
            }
        }
    }
    let mut rows = Vec::new();
    for (m, measure) in MEASURES.iter().enumerate() {
        for (p, (name, _)) in started.iter().enumerate() {
            rows.push(summarize(name, cert, *measure, &figures[m][p]));
        }
    }
    Ok(rows)
}

/// A path's rounds at one measure: the median round's figures, every round's rps, and the
/// errors of all rounds.
fn summarize(path: &str, cert: CertKind, measure: Measure, runs: &[RunFigures]) -> TlsRow {
    let mut sorted = runs.to_vec();
    sorted.sort_by(|a, b| a.rps.total_cmp(&b.rps));
    let median = sorted[sorted.len() / 2];
    TlsRow::Throughput {
        path: path.to_string(),
        cert: cert.name().to_string(),
        size: measure.size,
        keepalive: measure.keepalive,
        resumed: measure.resumed,
        rps: median.rps.round(),
        rps_rounds: runs.iter().map(|r| r.rps.round()).collect(),
        proxy_us_per_req: median.us_per_req.map(|u| (u * 10.0).round() / 10.0),
        handshake_p50_ms: median.handshake_p50_ms,
        errors: runs.iter().map(|r| r.errors).sum(),
    }
}

/// Resident memory of every process of `servers` (a master and its workers alike).
fn tree_rss_mb(servers: &[Server]) -> anyhow::Result<f64> {
    let mut total = 0.0;
    for s in servers {
        let pid = s.process.pid();
        total += locus_rig::rss_mb(pid)?;
        for d in locus_rig::descendants(pid) {
            total += locus_rig::rss_mb(d).unwrap_or(0.0);
        }
    }
    Ok(total)
}

/// Each balancer's memory with `idle_connections` idle TLS keep-alive connections.
fn idle_rows(
    bench: &Bench<'_>,
    started: &[(&str, paths::Started)],
    cert: CertKind,
    progress: &mut impl FnMut(&str),
) -> anyhow::Result<Vec<TlsRow>> {
    let n = bench.opts.idle_connections;
    let config = locus_load::tls_client_config(&bench.tls.cert, false, Some(SUITE))?;
    let name = rustls::pki_types::ServerName::try_from(SERVER_NAME)?.to_owned();
    let mut rows = Vec::new();
    for (path, s) in started.iter().filter(|(p, _)| ["locus", "haproxy", "nginx"].contains(p)) {
        let before = tree_rss_mb(&s.servers)?;
        let held = bench.net.on_host("client", || {
            hold_idle_tls_connections(s.addr, "/1024.bin", n, Arc::clone(&config), name.clone())
        })?;
        let rss = tree_rss_mb(&s.servers)?;
        progress(&format!(
            "{path:<13} {} idle TLS connections: {rss:.1} MB (before {before:.1} MB)",
            held.held
        ));
        rows.push(TlsRow::Idle {
            path: path.to_string(),
            cert: cert.name().to_string(),
            connections: n,
            held: held.held,
            rss_mb: (rss * 10.0).round() / 10.0,
            rss_before_mb: (before * 10.0).round() / 10.0,
            stopped: held.stopped.clone(),
        });
    }
    Ok(rows)
}
