//! `locus bench proxy`: two Locus nodes behind the Locus switch and behind HAProxy, plus
//! NGINX serving the same files, in the lab's namespaces (or on loopback); wrk measures every path for every file size
//! in the same run, rounds interleaved so that drift hits every path alike; then the switch's
//! resident memory with thousands of idle keep-alive connections.

use crate::idle::hold_idle_connections;
use crate::wrk::{WrkResult, run_wrk};
use anyhow::Context;
use locus_lab::{HaproxyBalance, LabNetwork, Net, NodeSpec, SwitchSpec, find_program, rss_mb, servers};
use serde::Serialize;
use std::path::PathBuf;

/// Settings of one benchmark run.
#[derive(Clone, Debug)]
pub struct ProxyBenchOptions {
    /// File sizes in bytes.
    pub sizes: Vec<u64>,
    /// Seconds per wrk run.
    pub seconds: u32,
    /// wrk connections.
    pub connections: u32,
    /// wrk threads.
    pub wrk_threads: u32,
    /// Rounds over all paths; each path reports its median round.
    pub rounds: u32,
    /// Switch policy.
    pub policy: String,
    /// Switch worker threads (HAProxy gets as many threads).
    pub switch_workers: u32,
    /// Worker threads per Locus node (NGINX has one worker process).
    pub node_workers: u32,
    /// Idle keep-alive connections to hold against the switch (0 skips that part).
    pub idle_connections: usize,
    /// Paths to measure: any of direct, direct-nginx, locus, haproxy.
    pub paths: Vec<String>,
    /// Keep the scratch folder (configurations and server logs) here.
    pub keep: Option<PathBuf>,
    /// Where to run: network namespaces (a host per role on a bridge) or loopback.
    pub net: NetChoice,
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
    fn make(self) -> anyhow::Result<Net> {
        Ok(match self {
            NetChoice::Loopback => Net::Loopback,
            NetChoice::Namespaces => Net::Namespaces(LabNetwork::create(2)?),
            NetChoice::Auto if LabNetwork::available().is_ok() => Net::Namespaces(LabNetwork::create(2)?),
            NetChoice::Auto => Net::Loopback,
        })
    }
}

impl Default for ProxyBenchOptions {
    fn default() -> ProxyBenchOptions {
        ProxyBenchOptions {
            sizes: vec![1024, 65536],
            seconds: 5,
            connections: 32,
            wrk_threads: 1,
            rounds: 3,
            policy: "lard-r".into(),
            switch_workers: 2,
            node_workers: 1,
            idle_connections: 10_000,
            paths: ["direct", "direct-nginx", "locus", "haproxy"].map(String::from).to_vec(),
            keep: None,
            net: NetChoice::Auto,
        }
    }
}

/// One measured line of the report (also the JSON object printed per line).
#[derive(Clone, Debug, Serialize, PartialEq)]
#[serde(untagged)]
pub enum ProxyRow {
    Throughput { path: String, size: u64, keepalive: bool, rps: f64, p50_ms: f64, p99_ms: f64, errors: u64 },
    Idle { path: String, connections: usize, rss_mb: f64 },
}

fn median_by_rps(mut runs: Vec<WrkResult>) -> WrkResult {
    runs.sort_by(|a, b| a.rps.total_cmp(&b.rps));
    runs.swap_remove(runs.len() / 2)
}

/// Run the benchmark; `progress` receives a line per finished measurement.
pub fn run_proxy_bench(
    opts: &ProxyBenchOptions,
    mut progress: impl FnMut(&str),
) -> anyhow::Result<Vec<ProxyRow>> {
    let wrk = find_program("wrk").context("wrk not found (apt-get install wrk)")?;
    let locus = std::env::current_exe().context("locating the locus executable")?;
    let scratch_dir = tempfile::Builder::new().prefix("locus-bench-").tempdir()?;
    let scratch = match &opts.keep {
        Some(p) => {
            std::fs::create_dir_all(p)?;
            p.clone()
        }
        None => scratch_dir.path().to_path_buf(),
    };
    let root = scratch.join("www");
    std::fs::create_dir_all(&root)?;
    for &size in &opts.sizes {
        let body: Vec<u8> = (0..size).map(|i| b'a' + (i % 26) as u8).collect();
        std::fs::write(root.join(format!("{size}.bin")), body)?;
    }
    let net = opts.net.make()?;
    progress(&format!("network: {}", net.describe()));
    let node = |role: &str| NodeSpec { workers: opts.node_workers, ..NodeSpec::new(role, &root) };
    let node1 = servers::locus_node(&net, &locus, &scratch, &node("node1"))?;
    let node2 = servers::locus_node(&net, &locus, &scratch, &node("node2"))?;
    let nodes = [("node1".to_string(), node1.addr), ("node2".to_string(), node2.addr)];
    let switch_spec = SwitchSpec {
        policy: opts.policy.clone(),
        mode: "proxy".into(),
        workers: opts.switch_workers,
        max_connections: opts.idle_connections + 1000,
        admin: false,
        splice_min_bytes: None,
    };
    let switch =
        servers::locus_switch(&net, &locus, &scratch, net.listen_addr("switch", 80)?, &nodes, &switch_spec)?;
    let haproxy = if opts.paths.iter().any(|p| p == "haproxy") {
        let listen = net.listen_addr("switch", 81)?;
        Some(servers::haproxy(
            &net,
            &scratch,
            listen,
            &nodes,
            HaproxyBalance::UriChashBounded,
            opts.switch_workers,
        )?)
    } else {
        None
    };
    let nginx = if opts.paths.iter().any(|p| p == "direct-nginx") {
        Some(servers::nginx_static(&net, &scratch, "node1", &root)?)
    } else {
        None
    };

    let target = |path: &str| -> Option<std::net::SocketAddr> {
        match path {
            "direct" => Some(node1.addr),
            "direct-nginx" => nginx.as_ref().map(|s| s.addr),
            "locus" => Some(switch.addr),
            "haproxy" => haproxy.as_ref().map(|s| s.addr),
            _ => None,
        }
    };
    let mut rows = Vec::new();
    for &size in &opts.sizes {
        let mut runs: Vec<(String, Vec<WrkResult>)> =
            opts.paths.iter().map(|p| (p.clone(), Vec::new())).collect();
        // Warm every path (caches, pools) before measuring.
        for (path, _) in &runs {
            let addr = target(path).with_context(|| format!("unknown path `{path}`"))?;
            run_wrk(net.command("client", &wrk)?, &format!("http://{addr}/{size}.bin"), 1, 4, 1)?;
        }
        for round in 0..opts.rounds.max(1) {
            for (path, results) in runs.iter_mut() {
                let addr = target(path).expect("checked above");
                let url = format!("http://{addr}/{size}.bin");
                let r = run_wrk(
                    net.command("client", &wrk)?,
                    &url,
                    opts.wrk_threads,
                    opts.connections,
                    opts.seconds,
                )?;
                progress(&format!(
                    "size {size:>7} round {} {path:<13} {:>10.0} req/s  p50 {:.2} ms  p99 {:.2} ms  errors {}",
                    round + 1,
                    r.rps,
                    r.p50_ms,
                    r.p99_ms,
                    r.errors
                ));
                results.push(r);
            }
        }
        for (path, results) in runs {
            let m = median_by_rps(results);
            rows.push(ProxyRow::Throughput {
                path,
                size,
                keepalive: true,
                rps: m.rps,
                p50_ms: m.p50_ms,
                p99_ms: m.p99_ms,
                errors: m.errors,
            });
        }
    }
    if opts.idle_connections > 0 {
        let path = format!("/{}.bin", opts.sizes.first().copied().unwrap_or(1024));
        let switch_addr = switch.addr;
        let pid = switch.process.pid();
        let n = opts.idle_connections;
        let (held, rss) = net.on_host("client", || -> anyhow::Result<_> {
            let held = hold_idle_connections(switch_addr, &path, n)?;
            std::thread::sleep(std::time::Duration::from_millis(500));
            let rss = rss_mb(pid)?;
            Ok((held.len(), rss))
        })?;
        progress(&format!("idle connections {held}: switch RSS {rss:.1} MiB"));
        rows.push(ProxyRow::Idle { path: "idle-connections".into(), connections: held, rss_mb: rss });
    }
    drop((switch, haproxy, nginx, node1, node2));
    drop(net);
    Ok(rows)
}

/// A Markdown table of throughput rows, one line per size, with the ratios that matter.
pub fn markdown_table(rows: &[ProxyRow]) -> String {
    let mut sizes: Vec<u64> = rows
        .iter()
        .filter_map(|r| match r {
            ProxyRow::Throughput { size, .. } => Some(*size),
            _ => None,
        })
        .collect();
    sizes.dedup();
    let rps = |path: &str, size: u64| {
        rows.iter().find_map(|r| match r {
            ProxyRow::Throughput { path: p, size: s, rps, .. } if p == path && *s == size => Some(*rps),
            _ => None,
        })
    };
    let fmt = |v: Option<f64>| v.map_or("—".to_string(), |v| format!("{v:.0}"));
    let ratio = |a: Option<f64>, b: Option<f64>| match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => format!("{:.2}×", a / b),
        _ => "—".into(),
    };
    let mut out = String::from(
        "| size | Locus node direct | NGINX direct | through Locus | through HAProxy | Locus / HAProxy | node / NGINX |\n|---|---|---|---|---|---|---|\n",
    );
    for s in sizes {
        let (d, n, l, h) = (rps("direct", s), rps("direct-nginx", s), rps("locus", s), rps("haproxy", s));
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} |\n",
            human_size(s),
            fmt(d),
            fmt(n),
            fmt(l),
            fmt(h),
            ratio(l, h),
            ratio(d, n)
        ));
    }
    for r in rows {
        if let ProxyRow::Idle { connections, rss_mb, .. } = r {
            out.push_str(&format!(
                "\nSwitch resident memory with {connections} idle keep-alive connections: {rss_mb:.1} MiB\n"
            ));
        }
    }
    out
}

fn human_size(bytes: u64) -> String {
    if bytes >= 1 << 20 && bytes.is_multiple_of(1 << 20) {
        format!("{} MiB", bytes >> 20)
    } else if bytes >= 1024 && bytes.is_multiple_of(1024) {
        format!("{} KiB", bytes >> 10)
    } else {
        format!("{bytes} B")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_serialize_to_the_documented_json_shape() {
        let row = ProxyRow::Throughput {
            path: "locus".into(),
            size: 1024,
            keepalive: true,
            rps: 1.5,
            p50_ms: 0.25,
            p99_ms: 1.0,
            errors: 0,
        };
        assert_eq!(
            serde_json::to_string(&row).unwrap(),
            r#"{"path":"locus","size":1024,"keepalive":true,"rps":1.5,"p50_ms":0.25,"p99_ms":1.0,"errors":0}"#
        );
        let idle = ProxyRow::Idle { path: "idle-connections".into(), connections: 10, rss_mb: 2.5 };
        assert_eq!(
            serde_json::to_string(&idle).unwrap(),
            r#"{"path":"idle-connections","connections":10,"rss_mb":2.5}"#
        );
    }

    #[test]
    fn median_round_is_reported() {
        let r = |rps| WrkResult { rps, p50_ms: 0.0, p99_ms: 0.0, requests: 1, errors: 0 };
        assert_eq!(median_by_rps(vec![r(3.0), r(1.0), r(2.0)]).rps, 2.0);
    }

    #[test]
    fn table_shows_ratios() {
        let t = |path: &str, rps| ProxyRow::Throughput {
            path: path.into(),
            size: 65536,
            keepalive: true,
            rps,
            p50_ms: 0.0,
            p99_ms: 0.0,
            errors: 0,
        };
        let md =
            markdown_table(&[t("direct", 10.0), t("direct-nginx", 5.0), t("locus", 8.0), t("haproxy", 4.0)]);
        assert!(md.contains("| 64 KiB | 10 | 5 | 8 | 4 | 2.00× | 2.00× |"), "{md}");
    }
}
