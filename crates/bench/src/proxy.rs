//! `locus bench proxy`: two Locus nodes behind each load balancer of [`paths::PATHS`] (the Locus
//! switch per mode, HAProxy, NGINX), in the lab's namespaces or on loopback; wrk measures every
//! path per file size, with and without keep-alive, in one run. Each round runs one node directly
//! before every path and after the last, and a path's efficiency in a round is its rps ÷ the mean
//! of the two direct runs around it; rows report the median round. Then the switch's resident
//! memory with thousands of idle keep-alive connections.

mod paths;
mod plot;
mod table;

use crate::idle::hold_idle_connections;
use crate::wrk::{WrkLoad, WrkResult, run_wrk};
use anyhow::Context;
use locus_rig::{LabNetwork, Net, find_program, rss_mb};
pub use paths::{DIRECT, IDLE_PATH, PATHS, PathKind, resolve_paths};
pub use plot::write_plot;
use serde::Serialize;
use std::net::SocketAddr;
use std::path::PathBuf;
pub use table::markdown_table;

/// Settings of one benchmark run.
#[derive(Clone, Debug)]
pub struct ProxyBenchOptions {
    /// File sizes in bytes.
    pub sizes: Vec<u64>,
    /// Keep-alive settings to measure, in order (true: keep-alive, false: `Connection: close`).
    pub keepalive: Vec<bool>,
    /// Seconds per wrk run.
    pub seconds: u32,
    /// wrk connections.
    pub connections: u32,
    /// wrk threads.
    pub wrk_threads: u32,
    /// Rounds over all paths; each path reports its median round (rps and efficiency).
    pub rounds: u32,
    /// Switch policy.
    pub policy: String,
    /// Switch worker threads (HAProxy gets as many threads).
    pub switch_workers: u32,
    /// Worker threads per Locus node (NGINX has one worker process).
    pub node_workers: u32,
    /// Idle keep-alive connections to hold against the proxy-mode switch (0 skips that part).
    pub idle_connections: usize,
    /// Paths to measure, names from [`PATHS`]; `direct` is always added.
    pub paths: Vec<String>,
    /// Keep the scratch folder (configurations and server logs) here.
    pub keep: Option<PathBuf>,
    /// Where to run: network namespaces (a host per role on a bridge) or loopback.
    pub net: NetChoice,
    /// TCP congestion control of every lab host (`None`: the lab's default, cubic). On
    /// loopback the machine's own applies, and naming another one is an error.
    pub congestion_control: Option<String>,
}

/// Where a benchmark runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NetChoice {
    /// Namespaces when running as root with iproute2, loopback otherwise.
    Auto,
    Loopback,
    Namespaces,
}

impl std::str::FromStr for NetChoice {
    type Err = String;
    fn from_str(s: &str) -> Result<NetChoice, String> {
        match s {
            "auto" => Ok(NetChoice::Auto),
            "loopback" => Ok(NetChoice::Loopback),
            "namespaces" | "netns" => Ok(NetChoice::Namespaces),
            _ => Err(format!("unknown network `{s}`: use auto, loopback or namespaces")),
        }
    }
}

impl NetChoice {
    pub(crate) fn make(self) -> anyhow::Result<Net> {
        Ok(match self {
            NetChoice::Loopback => Net::Loopback,
            NetChoice::Namespaces => Net::Namespaces(LabNetwork::create(2)?),
            NetChoice::Auto if LabNetwork::available().is_ok() => Net::Namespaces(LabNetwork::create(2)?),
            NetChoice::Auto => Net::Loopback,
        })
    }
}

/// Which keep-alive settings to measure (`--keepalive`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeepAliveChoice {
    /// Keep-alive, then a connection per request.
    Both,
    On,
    /// A connection per request (`Connection: close`).
    Off,
}

impl KeepAliveChoice {
    /// The settings in measuring order (true: keep-alive).
    pub fn settings(self) -> Vec<bool> {
        match self {
            KeepAliveChoice::Both => vec![true, false],
            KeepAliveChoice::On => vec![true],
            KeepAliveChoice::Off => vec![false],
        }
    }
}

impl std::str::FromStr for KeepAliveChoice {
    type Err = String;
    fn from_str(s: &str) -> Result<KeepAliveChoice, String> {
        match s {
            "both" => Ok(KeepAliveChoice::Both),
            "on" => Ok(KeepAliveChoice::On),
            "off" => Ok(KeepAliveChoice::Off),
            _ => Err(format!("unknown keep-alive setting `{s}`: use both, on or off")),
        }
    }
}

/// A file size: bytes, or with a binary suffix `k` / `m` (`KiB`, `MiB` also accepted).
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let lower = t.to_ascii_lowercase();
    let (digits, scale) = if let Some(d) = lower.strip_suffix("kib").or_else(|| lower.strip_suffix('k')) {
        (d, 1u64 << 10)
    } else if let Some(d) = lower.strip_suffix("mib").or_else(|| lower.strip_suffix('m')) {
        (d, 1 << 20)
    } else {
        (lower.strip_suffix('b').unwrap_or(&lower), 1)
    };
    let n: u64 = digits.trim().parse().map_err(|_| format!("bad size `{s}`: use e.g. 100, 4k, 1m"))?;
    match n.checked_mul(scale) {
        Some(0) => Err(format!("size `{s}` must be at least 1 byte")),
        Some(v) => Ok(v),
        None => Err(format!("size `{s}` is too large")),
    }
}

impl Default for ProxyBenchOptions {
    fn default() -> ProxyBenchOptions {
        ProxyBenchOptions {
            sizes: vec![1024, 65536],
            keepalive: KeepAliveChoice::Both.settings(),
            seconds: 3,
            connections: 32,
            wrk_threads: 1,
            rounds: 5,
            policy: "lard-r".into(),
            switch_workers: 2,
            node_workers: 1,
            idle_connections: 10_000,
            paths: PATHS.iter().map(|p| p.name.to_string()).collect(),
            keep: None,
            net: NetChoice::Auto,
            congestion_control: None,
        }
    }
}

/// One measured line of the report (also the JSON object printed per line).
#[derive(Clone, Debug, Serialize, PartialEq)]
#[serde(untagged)]
pub enum ProxyRow {
    Throughput {
        path: String,
        size: u64,
        keepalive: bool,
        rps: f64,
        /// Median over rounds of rps ÷ the mean rps of the `direct` runs just before and after
        /// (null if those were 0).
        efficiency: Option<f64>,
        /// Each round's efficiency, in round order (the median's spread).
        efficiency_rounds: Vec<f64>,
        p50_ms: f64,
        p99_ms: f64,
        /// wrk's socket errors plus non-2xx/3xx responses, summed over all rounds.
        errors: u64,
    },
    Idle {
        path: String,
        connections: usize,
        rss_mb: f64,
    },
    /// Where the run took place (`path` is `network`): `namespaces` or `loopback`, and the TCP
    /// congestion control of its hosts.
    Network {
        path: String,
        net: String,
        congestion_control: String,
    },
}

fn median_by_rps(mut runs: Vec<WrkResult>) -> WrkResult {
    runs.sort_by(|a, b| a.rps.total_cmp(&b.rps));
    runs.swap_remove(runs.len() / 2)
}

/// A path's rounds as one result: the median round, with the errors of every round (an error
/// in a round that was not the median must not disappear).
fn summarize_rounds(runs: Vec<WrkResult>) -> WrkResult {
    let errors = runs.iter().map(|r| r.errors).sum();
    WrkResult { errors, ..median_by_rps(runs) }
}

/// The order of one round over `paths` paths, `direct` being index `direct`: direct before every
/// other path and once more after the last (`D A D B D`), so that each path sits between two
/// direct runs and drift that is linear over those three runs cancels out of its efficiency.
fn round_order(paths: usize, direct: usize) -> Vec<usize> {
    let mut order = vec![direct];
    for i in (0..paths).filter(|&i| i != direct) {
        order.extend([i, direct]);
    }
    order
}

/// One round's efficiency per path from its runs in [`round_order`]: a path's rps ÷ the mean of
/// the direct runs on either side (`None` if both were 0); `direct` itself is 1.
fn round_efficiencies(order: &[usize], rps: &[f64], paths: usize, direct: usize) -> Vec<Option<f64>> {
    let mut eff = vec![None; paths];
    eff[direct] = Some(1.0);
    for (at, &i) in order.iter().enumerate() {
        if i == direct {
            continue;
        }
        let base = (rps[at - 1] + rps[at + 1]) / 2.0;
        eff[i] = (base > 0.0).then(|| rps[at] / base);
    }
    eff
}

fn median(values: &[f64]) -> Option<f64> {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => None,
        n if n % 2 == 1 => Some(v[n / 2]),
        n => Some((v[n / 2 - 1] + v[n / 2]) / 2.0),
    }
}

fn round4(v: f64) -> f64 {
    (v * 10_000.0).round() / 10_000.0
}

/// A path's result at one size and keep-alive setting: its runs and its efficiency per round.
struct PathRuns {
    runs: Vec<WrkResult>,
    efficiency: Vec<Option<f64>>,
}

/// The rows of one size and keep-alive setting: each path's median run, and the median of its
/// per-round efficiencies (rounds where direct measured 0 are left out).
fn point_rows(size: u64, keepalive: bool, paths: Vec<(&str, PathRuns)>) -> Vec<ProxyRow> {
    paths
        .into_iter()
        .map(|(path, p)| {
            let rounds: Vec<f64> = p.efficiency.iter().flatten().map(|&e| round4(e)).collect();
            let m = summarize_rounds(p.runs);
            ProxyRow::Throughput {
                path: path.to_string(),
                size,
                keepalive,
                rps: m.rps,
                efficiency: median(&rounds).map(round4),
                efficiency_rounds: rounds,
                p50_ms: m.p50_ms,
                p99_ms: m.p99_ms,
                errors: m.errors,
            }
        })
        .collect()
}

/// TCP sockets in TIME_WAIT on `role`'s host (from the calling thread's network namespace).
fn time_wait(net: &Net, role: &str) -> anyhow::Result<usize> {
    net.on_host(role, || -> anyhow::Result<usize> {
        let mut n = 0;
        for table in ["/proc/thread-self/net/tcp", "/proc/thread-self/net/tcp6"] {
            let text = std::fs::read_to_string(table).with_context(|| format!("reading {table}"))?;
            // Fields: sl local_address rem_address st …; state 06 is TIME_WAIT.
            n += text.lines().skip(1).filter(|l| l.split_whitespace().nth(3) == Some("06")).count();
        }
        Ok(n)
    })
}

/// Where TCP connections sit in TIME_WAIT after connection-per-request runs: per host in the
/// lab (they expire after 60 s), for the one host on loopback.
fn time_wait_note(net: &Net) -> anyhow::Result<String> {
    if net.lab().is_none() {
        return Ok(format!("  TIME_WAIT {}", time_wait(net, "client")?));
    }
    let mut note = String::from("  TIME_WAIT");
    for role in ["client", "switch", "node1", "node2"] {
        note.push_str(&format!(" {role} {}", time_wait(net, role)?));
    }
    Ok(note)
}

/// A sysctl under /proc/sys/net as `role`'s host sees it.
fn net_sysctl(net: &Net, role: &str, key: &str) -> anyhow::Result<String> {
    let path = format!("/proc/sys/{}", key.replace('.', "/"));
    net.on_host(role, || -> anyhow::Result<String> {
        Ok(std::fs::read_to_string(&path)
            .with_context(|| format!("reading {path}"))?
            .trim()
            .replace('\t', " "))
    })
}

/// Give every lab connection `wanted` (if named) and say which congestion control the run
/// uses: in the lab, what its probe connection got (cubic by default, set per route; where
/// the kernel refuses, what the namespaces have, with why); on loopback the machine's, and
/// naming another is refused rather than ignored.
fn set_congestion_control(net: &Net, wanted: Option<&str>) -> anyhow::Result<String> {
    if let Net::Namespaces(lab) = net {
        if let Some(name) = wanted {
            lab.set_congestion_control(name)?;
        }
        return Ok(lab.congestion_control().to_string());
    }
    let used = net_sysctl(net, "client", "net.ipv4.tcp_congestion_control")?;
    if let Some(name) = wanted.filter(|w| *w != used) {
        anyhow::bail!(
            "--congestion-control {name}: on loopback the machine's own ({used}) applies; run in the lab's \
             namespaces (--net namespaces, as root) to choose it"
        );
    }
    Ok(used)
}

/// Run the benchmark; `progress` receives a line per finished measurement.
pub fn run_proxy_bench(
    opts: &ProxyBenchOptions,
    mut progress: impl FnMut(&str),
) -> anyhow::Result<Vec<ProxyRow>> {
    let kinds = resolve_paths(&opts.paths)?;
    anyhow::ensure!(!opts.sizes.is_empty() && !opts.keepalive.is_empty(), "no sizes or keep-alive settings");
    let wrk = find_program("wrk").context("wrk not found (apt-get install wrk)")?;
    let locus = std::env::current_exe().context("locating the locus executable")?;
    let files = crate::bench_files::BenchFiles::create(
        "bench-proxy",
        opts.keep.as_ref(),
        opts.sizes.iter().copied(),
    )?;
    let (scratch, root) = (files.scratch.clone(), files.root.clone());
    let rounds = opts.rounds.max(1);
    let per_round = round_order(kinds.len(), 0).len();
    let runs = opts.sizes.len() * opts.keepalive.len() * per_round * rounds as usize;
    let warmups = opts.sizes.len() * kinds.len();
    progress(&format!(
        "{runs} wrk runs of {} s and {warmups} warm-ups of 1 s: about {:.1} min of load",
        opts.seconds,
        (runs as f64 * f64::from(opts.seconds) + warmups as f64) / 60.0
    ));
    let net = opts.net.make()?;
    let congestion_control = set_congestion_control(&net, opts.congestion_control.as_deref())?;
    progress(&format!("network: {}, TCP congestion control {congestion_control}", net.describe()));
    if opts.keepalive.contains(&false) {
        for role in ["client", "switch"] {
            progress(&format!(
                "{role}: ip_local_port_range {}, tcp_tw_reuse {}",
                net_sysctl(&net, role, "net.ipv4.ip_local_port_range")?,
                net_sysctl(&net, role, "net.ipv4.tcp_tw_reuse")?
            ));
        }
    }
    let (node_servers, nodes) = files.start_nodes(&net, &locus, opts.node_workers)?;
    let env = paths::Env {
        net: &net,
        locus: &locus,
        scratch: &scratch,
        root: &root,
        nodes: &nodes,
        opts,
        one_way_nodes: Default::default(),
    };
    // The idle connections are held against the proxy-mode switch, measured or not.
    let idle_kind = PATHS.iter().find(|p| p.name == IDLE_PATH).expect("the proxy path exists");
    let mut started = Vec::new();
    for kind in kinds.iter().copied().chain((opts.idle_connections > 0).then_some(idle_kind)) {
        if !kind.exclusive && started.iter().all(|(k, _): &(&PathKind, _)| k.name != kind.name) {
            let s = kind.start(&env).with_context(|| format!("starting path `{}`", kind.name))?;
            progress(&format!("{:<13} {}", kind.name, s.addr));
            started.push((kind, s));
        }
    }
    // A path that runs all along, or one started for this run only (stopped when the value
    // is dropped).
    let target = |kind: &PathKind| -> anyhow::Result<(SocketAddr, Option<paths::Started>)> {
        if kind.exclusive {
            let s = kind.start(&env).with_context(|| format!("starting path `{}`", kind.name))?;
            return Ok((s.addr, Some(s)));
        }
        let addr = started.iter().find(|(k, _)| k.name == kind.name).map(|(_, s)| s.addr);
        Ok((addr.expect("started above"), None))
    };

    let mut rows = vec![ProxyRow::Network {
        path: "network".into(),
        net: net.describe().into(),
        congestion_control: congestion_control.clone(),
    }];
    for &size in &opts.sizes {
        // Warm every path (caches, pools) before measuring.
        for kind in &kinds {
            let (addr, _running) = target(kind)?;
            let warm = WrkLoad { threads: 1, connections: 4, seconds: 1, keepalive: true };
            run_wrk(net.command("client", &wrk)?, &format!("http://{addr}/{size}.bin"), &warm)?;
        }
        for &keepalive in &opts.keepalive {
            let load = WrkLoad {
                threads: opts.wrk_threads,
                connections: opts.connections,
                seconds: opts.seconds,
                keepalive,
            };
            let direct = kinds.iter().position(|k| k.name == DIRECT).expect("direct is always measured");
            let order = round_order(kinds.len(), direct);
            let mut results: Vec<PathRuns> =
                kinds.iter().map(|_| PathRuns { runs: Vec::new(), efficiency: Vec::new() }).collect();
            for round in 0..rounds {
                let mut rps = Vec::with_capacity(order.len());
                for &i in &order {
                    let kind = kinds[i];
                    let (addr, _running) = target(kind)?;
                    let r =
                        run_wrk(net.command("client", &wrk)?, &format!("http://{addr}/{size}.bin"), &load)?;
                    let tw = if keepalive { String::new() } else { time_wait_note(&net)? };
                    progress(&format!(
                        "size {size:>7} keep-alive {:<3} round {} {:<13} {:>9.0} req/s  p50 {:.2} ms  p99 {:.2} ms  errors {}{tw}",
                        if keepalive { "on" } else { "off" },
                        round + 1,
                        kind.name,
                        r.rps,
                        r.p50_ms,
                        r.p99_ms,
                        r.errors
                    ));
                    rps.push(r.rps);
                    results[i].runs.push(r);
                }
                let eff = round_efficiencies(&order, &rps, kinds.len(), direct);
                let line: Vec<String> = kinds
                    .iter()
                    .zip(&eff)
                    .filter(|(k, _)| k.name != DIRECT)
                    .map(|(k, e)| format!("{} {}", k.name, e.map_or("—".into(), |e| format!("{e:.2}"))))
                    .collect();
                progress(&format!("  round {} efficiency: {}", round + 1, line.join(", ")));
                for (p, e) in results.iter_mut().zip(eff) {
                    p.efficiency.push(e);
                }
            }
            let medians = kinds.iter().map(|k| k.name).zip(results).collect();
            rows.extend(point_rows(size, keepalive, medians));
        }
    }
    if opts.idle_connections > 0 {
        let smallest = opts.sizes.iter().min().copied().expect("sizes checked above");
        let path = format!("/{smallest}.bin");
        let (_, proxy) = started.iter().find(|(k, _)| k.name == IDLE_PATH).expect("started above");
        let (switch_addr, pid) = (proxy.addr, proxy.servers[0].process.pid());
        let n = opts.idle_connections;
        let (held, stopped, rss) = net.on_host("client", || -> anyhow::Result<_> {
            let idle = hold_idle_connections(switch_addr, &path, n)?;
            std::thread::sleep(std::time::Duration::from_millis(500));
            let rss = rss_mb(pid)?;
            Ok((idle.held.len(), idle.stopped, rss))
        })?;
        if let Some(why) = stopped {
            // The switch fits max_connections to its open-file limit (see its log).
            progress(&format!("idle connections: the switch took {held} of {n} ({why})"));
        }
        progress(&format!("idle connections {held}: switch RSS {rss:.1} MiB"));
        rows.push(ProxyRow::Idle { path: "idle-connections".into(), connections: held, rss_mb: rss });
    }
    drop(started);
    drop(node_servers);
    drop(net);
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(rps: f64) -> WrkResult {
        WrkResult { rps, p50_ms: 0.5, p99_ms: 2.0, requests: 1, errors: 0 }
    }

    #[test]
    fn on_loopback_the_machines_congestion_control_is_reported_and_another_is_refused() {
        let host =
            std::fs::read_to_string("/proc/sys/net/ipv4/tcp_congestion_control").unwrap().trim().to_string();
        assert_eq!(set_congestion_control(&Net::Loopback, None).unwrap(), host);
        assert_eq!(set_congestion_control(&Net::Loopback, Some(&host)).unwrap(), host);
        let other = if host == "cubic" { "reno" } else { "cubic" };
        let err = set_congestion_control(&Net::Loopback, Some(other)).unwrap_err().to_string();
        assert!(err.contains(&format!("machine's own ({host})")), "{err}");
    }

    #[test]
    fn rows_serialize_to_the_documented_json_shape() {
        let row = ProxyRow::Throughput {
            path: "locus".into(),
            size: 1024,
            keepalive: false,
            rps: 1.5,
            efficiency: Some(0.5),
            efficiency_rounds: vec![0.5, 0.25],
            p50_ms: 0.25,
            p99_ms: 1.0,
            errors: 0,
        };
        assert_eq!(
            serde_json::to_string(&row).unwrap(),
            r#"{"path":"locus","size":1024,"keepalive":false,"rps":1.5,"efficiency":0.5,"efficiency_rounds":[0.5,0.25],"p50_ms":0.25,"p99_ms":1.0,"errors":0}"#
        );
        let idle = ProxyRow::Idle { path: "idle-connections".into(), connections: 10, rss_mb: 2.5 };
        assert_eq!(
            serde_json::to_string(&idle).unwrap(),
            r#"{"path":"idle-connections","connections":10,"rss_mb":2.5}"#
        );
    }

    #[test]
    fn median_round_is_reported() {
        assert_eq!(median_by_rps(vec![run(3.0), run(1.0), run(2.0)]).rps, 2.0);
    }

    #[test]
    fn errors_of_every_round_are_kept() {
        let e = |rps, errors| WrkResult { errors, ..run(rps) };
        let s = summarize_rounds(vec![e(3.0, 1), e(1.0, 4), e(2.0, 0)]);
        assert_eq!((s.rps, s.errors), (2.0, 5));
    }

    #[test]
    fn every_path_runs_between_two_direct_runs() {
        assert_eq!(round_order(4, 0), [0, 1, 0, 2, 0, 3, 0]);
        assert_eq!(round_order(3, 1), [1, 0, 1, 2, 1]);
        assert_eq!(round_order(1, 0), [0]);
    }

    #[test]
    fn a_round_divides_each_path_by_the_mean_of_its_neighbouring_direct_runs() {
        // Direct drifts 100 → 200 → 300; each path runs at half of direct's speed at its time.
        let order = round_order(3, 0);
        let rps = [100.0, 75.0, 200.0, 125.0, 300.0];
        let eff = round_efficiencies(&order, &rps, 3, 0);
        assert_eq!(eff, [Some(1.0), Some(0.5), Some(0.5)]);
        let dead = round_efficiencies(&order, &[0.0, 5.0, 0.0, 5.0, 10.0], 3, 0);
        assert_eq!(dead, [Some(1.0), None, Some(1.0)]);
    }

    #[test]
    fn rows_report_the_median_round_of_rps_and_of_efficiency() {
        let runs = |rps: &[f64], eff: &[Option<f64>]| PathRuns {
            runs: rps.iter().map(|&r| run(r)).collect(),
            efficiency: eff.to_vec(),
        };
        let rows = point_rows(
            4096,
            true,
            vec![
                ("direct", runs(&[200.0, 100.0, 300.0], &[Some(1.0); 3])),
                ("splice", runs(&[150.0, 50.0, 90.0], &[Some(0.75), Some(0.2), Some(0.6)])),
                ("nginx", runs(&[10.0, 20.0, 30.0], &[None, Some(0.1), Some(0.3)])),
            ],
        );
        let got: Vec<(String, f64, Option<f64>, Vec<f64>)> = rows
            .iter()
            .map(|r| match r {
                ProxyRow::Throughput { path, rps, efficiency, efficiency_rounds, .. } => {
                    (path.clone(), *rps, *efficiency, efficiency_rounds.clone())
                }
                _ => unreachable!(),
            })
            .collect();
        assert_eq!(
            got,
            [
                ("direct".into(), 200.0, Some(1.0), vec![1.0, 1.0, 1.0]),
                ("splice".into(), 90.0, Some(0.6), vec![0.75, 0.2, 0.6]),
                ("nginx".into(), 20.0, Some(0.2), vec![0.1, 0.3]),
            ]
        );
        let none = point_rows(4096, false, vec![("locus", runs(&[10.0], &[None]))]);
        assert!(matches!(none[0], ProxyRow::Throughput { efficiency: None, keepalive: false, .. }));
    }

    #[test]
    fn sizes_take_binary_suffixes() {
        let parsed: Vec<u64> =
            "100,1k,4k,16k,64k,256k,1m".split(',').map(|s| parse_size(s).unwrap()).collect();
        assert_eq!(parsed, [100, 1024, 4096, 16384, 65536, 262144, 1 << 20]);
        assert_eq!(parse_size("65536"), Ok(65536));
        assert_eq!(parse_size("2MiB"), Ok(2 << 20));
        assert_eq!(parse_size("1KiB"), Ok(1024));
        assert!(parse_size("0").is_err() && parse_size("1g").is_err() && parse_size("k").is_err());
    }

    #[test]
    fn keepalive_choices_map_to_settings() {
        assert_eq!("both".parse::<KeepAliveChoice>().unwrap().settings(), [true, false]);
        assert_eq!("on".parse::<KeepAliveChoice>().unwrap().settings(), [true]);
        assert_eq!("off".parse::<KeepAliveChoice>().unwrap().settings(), [false]);
        assert!("yes".parse::<KeepAliveChoice>().is_err());
    }
}
