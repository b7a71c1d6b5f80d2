//! `locus bench`: command-line flags for the system benchmarks and their output, JSON lines
//! (`--json`) or a Markdown table.

use crate::proxy::{ProxyBenchOptions, markdown_table, run_proxy_bench};
use std::path::PathBuf;

/// `locus bench` subcommands.
#[derive(clap::Subcommand, Debug)]
pub enum BenchCommand {
    /// Throughput through the switch beside HAProxy and NGINX, and idle-connection memory.
    Proxy(ProxyArgs),
    /// HTTPS: handshakes, keep-alive throughput and CPU per request through the switch, a TLS
    /// node, HAProxy and NGINX; idle TLS connection memory.
    Tls(TlsArgs),
    /// The load generator against wrk on one cached URL, with verification on.
    Load(LoadBenchArgs),
    /// Latency of one TCP handoff (dump → HandOver → restore → Ready) on loopback.
    Handoff(crate::handoff::HandoffArgs),
    /// ClubWeb: proxy, splice and handoff switches at rising connection rates (lab, root).
    Clubweb(crate::clubweb::ClubwebArgs),
    /// Multiple handoff on keep-alive connections against back-end forwarding (lab, root).
    Rehandoff(crate::rehandoff::RehandoffArgs),
    /// The real node's CPU time per connection, request and KiB, fitted into a `--cpu` spec.
    NodeCost(crate::node_cost::NodeCostArgs),
    /// HTTP/2 through the switch, HAProxy and NGINX: h2load at 1, 10 and 100 streams on the
    /// lab's zipf workload, HTTP/1.1 beside it, CPU per request (lab, root).
    H2(crate::h2_bench::H2Args),
    /// Configuration reloads and binary upgrades under new-connection and keep-alive load:
    /// failed requests and resets of the switch, HAProxy and NGINX (lab, root).
    Reload(crate::reload_bench::ReloadArgs),
}

/// Flags of `locus bench tls`.
#[derive(clap::Args, Debug)]
pub struct TlsArgs {
    /// Print one JSON object per measurement.
    #[arg(long)]
    pub json: bool,
    /// Certificates, comma-separated: ecdsa (P-256), rsa (2,048 bits).
    #[arg(long, value_delimiter = ',', default_value = "ecdsa,rsa")]
    pub certs: Vec<locus_rig::servers::CertKind>,
    /// Seconds per load run.
    #[arg(long, default_value_t = 3)]
    pub seconds: u32,
    /// Client connections per run.
    #[arg(long, default_value_t = 32)]
    pub connections: u32,
    /// Rounds, interleaved: every path once per measure per round, the order rotating.
    #[arg(long, default_value_t = 3)]
    pub rounds: u32,
    /// Worker threads of every TLS server (switch, HAProxy, NGINX, the TLS node).
    #[arg(long, default_value_t = 1)]
    pub workers: u32,
    /// Idle TLS keep-alive connections held against each balancer (0 to skip).
    #[arg(long, default_value_t = 10_000)]
    pub idle_connections: usize,
    /// Paths, comma-separated (default: all): direct, direct-nginx, locus, handoff, haproxy,
    /// nginx.
    #[arg(long, value_delimiter = ',')]
    pub paths: Vec<String>,
    /// Keep configurations, certificates and server logs in this folder.
    #[arg(long)]
    pub keep: Option<PathBuf>,
    /// Network: namespaces (needs root), loopback, or auto.
    #[arg(long, default_value = "auto")]
    pub net: crate::proxy::NetChoice,
}

impl TlsArgs {
    fn options(&self) -> crate::tls_bench::TlsBenchOptions {
        crate::tls_bench::TlsBenchOptions {
            certs: self.certs.clone(),
            seconds: self.seconds.max(1),
            connections: self.connections.max(1),
            rounds: self.rounds.max(1),
            workers: self.workers.max(1),
            idle_connections: self.idle_connections,
            paths: self.paths.clone(),
            keep: self.keep.clone(),
            net: self.net,
        }
    }
}

/// Flags of `locus bench load`.
#[derive(clap::Args, Debug)]
pub struct LoadBenchArgs {
    /// Print the comparison as JSON.
    #[arg(long)]
    pub json: bool,
    /// Size of the file both tools fetch, in bytes.
    #[arg(long, default_value_t = 1024)]
    pub size: u64,
    /// Connections of each tool.
    #[arg(long, default_value_t = 32)]
    pub connections: u32,
    /// Seconds per round (two rounds each, alternating).
    #[arg(long, default_value_t = 5)]
    pub seconds: u32,
    /// Threads of each tool.
    #[arg(long, default_value_t = 1)]
    pub threads: u32,
}

/// Flags of `locus bench proxy`.
#[derive(clap::Args, Debug)]
pub struct ProxyArgs {
    /// Print one JSON object per measured path, size and keep-alive setting.
    #[arg(long)]
    pub json: bool,
    /// File sizes, comma-separated: bytes, or with a binary suffix (`k`, `m`). The full sweep
    /// is `100,1k,4k,16k,64k,256k,1m`.
    #[arg(long, value_delimiter = ',', default_value = "1k,64k", value_parser = crate::proxy::parse_size)]
    pub sizes: Vec<u64>,
    /// Keep-alive settings to measure: both, on, or off (a new connection per request,
    /// `Connection: close`).
    #[arg(long, default_value = "both")]
    pub keepalive: crate::proxy::KeepAliveChoice,
    /// Seconds per wrk run. Every run opens its connections afresh, and their TCP takes up to
    /// 2 s to settle on this kind of machine (longer through the one-way modes, whose client
    /// ACKs cross the switch's host): 1-s runs measure mostly that ramp, and swing by ±30%.
    #[arg(long, default_value_t = 3)]
    pub seconds: u32,
    /// wrk connections.
    #[arg(long, default_value_t = 32)]
    pub connections: u32,
    /// Rounds over all paths; in each, one node directly runs before every path and after the
    /// last, and a path's efficiency is its rps ÷ the mean of the two direct runs around it.
    /// Each path reports its median round.
    #[arg(long, default_value_t = 5)]
    pub rounds: u32,
    /// Switch policy.
    #[arg(long, default_value = "lard-r")]
    pub policy: String,
    /// Switch worker threads (HAProxy gets as many).
    #[arg(long, default_value_t = 2)]
    pub switch_workers: u32,
    /// Worker threads per Locus node.
    #[arg(long, default_value_t = 1)]
    pub node_workers: u32,
    /// Idle keep-alive connections to hold against the proxy-mode switch (0 to skip).
    #[arg(long, default_value_t = 10_000)]
    pub idle_connections: usize,
    /// Paths to measure, comma-separated (default: all): direct, direct-nginx, locus (the
    /// switch's proxy mode; `proxy` also names it), cf, splice, handoff, l4, haproxy, nginx.
    /// `direct` (the efficiency's denominator) is always measured.
    #[arg(long, value_delimiter = ',')]
    pub paths: Vec<String>,
    /// Keep configurations and server logs in this folder.
    #[arg(long)]
    pub keep: Option<PathBuf>,
    /// Also draw efficiency against file size (log scale), a line per path, to this SVG file.
    #[arg(long, value_name = "FILE.svg")]
    pub plot: Option<PathBuf>,
    /// Network: namespaces (a host per role on a bridge, needs root), loopback, or auto.
    #[arg(long, default_value = "auto")]
    pub net: crate::proxy::NetChoice,
    /// TCP congestion control of every host in the namespaces, e.g. cubic or bbr. Default: the
    /// lab's own, cubic, whatever the machine uses. BBR's pacing slows proxies that send in
    /// small pieces (HAProxy's 16 KiB buffers), so the choice moves the comparison; on loopback
    /// the machine's own applies and naming another is an error.
    #[arg(long)]
    pub congestion_control: Option<String>,
}

impl ProxyArgs {
    /// The benchmark's settings: path names checked (and `direct` added), counts at least 1.
    pub fn options(&self) -> anyhow::Result<ProxyBenchOptions> {
        let paths = if self.paths.is_empty() {
            crate::proxy::PATHS.iter().map(|p| p.name.to_string()).collect()
        } else {
            crate::proxy::resolve_paths(&self.paths)?.iter().map(|p| p.name.to_string()).collect()
        };
        Ok(ProxyBenchOptions {
            sizes: self.sizes.clone(),
            keepalive: self.keepalive.settings(),
            seconds: self.seconds.max(1),
            connections: self.connections.max(1),
            wrk_threads: 1,
            rounds: self.rounds.max(1),
            policy: self.policy.clone(),
            switch_workers: self.switch_workers.max(1),
            node_workers: self.node_workers.max(1),
            idle_connections: self.idle_connections,
            paths,
            keep: self.keep.clone(),
            net: self.net,
            congestion_control: self.congestion_control.clone(),
        })
    }
}

/// Run a `locus bench` subcommand.
pub fn run(cmd: BenchCommand) -> anyhow::Result<()> {
    // First, before any other thread starts (every later thread has the signals blocked): on
    // Ctrl-C or SIGTERM the servers, namespaces and scratch folders of the bench go too.
    let _watch = locus_rig::InterruptWatch::install()?;
    match cmd {
        BenchCommand::Handoff(a) => crate::handoff::run(a),
        BenchCommand::Clubweb(a) => crate::clubweb::run(a),
        BenchCommand::Rehandoff(a) => crate::rehandoff::run(a),
        BenchCommand::Reload(a) => crate::reload_bench::run(a),
        BenchCommand::H2(a) => {
            let rows = crate::h2_bench::run(&a)?;
            if a.json {
                for r in &rows {
                    println!("{}", serde_json::to_string(r)?);
                }
            } else {
                print!("{}", crate::h2_bench::h2_markdown(&rows));
            }
            Ok(())
        }
        BenchCommand::NodeCost(a) => {
            let report = crate::node_cost::run_node_cost(&a)?;
            if a.json {
                println!("{}", serde_json::to_string(&report)?);
            } else {
                print!("{}", report.render_text());
            }
            Ok(())
        }
        BenchCommand::Load(a) => {
            let c = crate::load_vs_wrk::run_load_bench(a.size, a.connections, a.seconds, a.threads)?;
            if a.json {
                println!("{}", serde_json::to_string(&c)?);
            } else {
                print!("{}", c.render_text());
            }
            Ok(())
        }
        BenchCommand::Tls(a) => {
            let rows = crate::tls_bench::run_tls_bench(&a.options(), |line| eprintln!("{line}"))?;
            if a.json {
                for r in &rows {
                    println!("{}", serde_json::to_string(r)?);
                }
            } else {
                print!("{}", crate::tls_bench::tls_markdown(&rows));
            }
            Ok(())
        }
        BenchCommand::Proxy(a) => {
            let opts = a.options()?;
            let json = a.json;
            let rows = run_proxy_bench(&opts, |line| eprintln!("{line}"))?;
            if let Some(path) = &a.plot {
                crate::proxy::write_plot(&rows, path)?;
                eprintln!("plot: {}", path.display());
            }
            if json {
                for r in &rows {
                    println!("{}", serde_json::to_string(r)?);
                }
            } else {
                print!("{}", markdown_table(&rows));
            }
            Ok(())
        }
    }
}
