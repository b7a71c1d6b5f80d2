//! `locus bench`: command-line flags for the system benchmarks and their output, JSON lines
//! (`--json`) or a Markdown table.

use crate::proxy::{ProxyBenchOptions, markdown_table, run_proxy_bench};
use std::path::PathBuf;

/// `locus bench` subcommands.
#[derive(clap::Subcommand, Debug)]
pub enum BenchCommand {
    /// Throughput through the switch beside HAProxy and NGINX, and idle-connection memory.
    Proxy(ProxyArgs),
}

/// Flags of `locus bench proxy`.
#[derive(clap::Args, Debug)]
pub struct ProxyArgs {
    /// Print one JSON object per measured path and size.
    #[arg(long)]
    pub json: bool,
    /// File sizes in bytes, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1024,65536")]
    pub sizes: Vec<u64>,
    /// Seconds per wrk run.
    #[arg(long, default_value_t = 5)]
    pub seconds: u32,
    /// wrk connections.
    #[arg(long, default_value_t = 32)]
    pub connections: u32,
    /// Rounds over all paths (each path reports its median round).
    #[arg(long, default_value_t = 3)]
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
    /// Idle keep-alive connections to hold against the switch (0 to skip).
    #[arg(long, default_value_t = 10_000)]
    pub idle_connections: usize,
    /// Paths to measure, comma-separated: direct, direct-nginx, locus, haproxy.
    #[arg(long, value_delimiter = ',', default_value = "direct,direct-nginx,locus,haproxy")]
    pub paths: Vec<String>,
    /// Keep configurations and server logs in this folder.
    #[arg(long)]
    pub keep: Option<PathBuf>,
}

/// Run a `locus bench` subcommand.
pub fn run(cmd: BenchCommand) -> anyhow::Result<()> {
    match cmd {
        BenchCommand::Proxy(a) => {
            for p in &a.paths {
                if !["direct", "direct-nginx", "locus", "haproxy"].contains(&p.as_str()) {
                    anyhow::bail!("unknown path `{p}`: use direct, direct-nginx, locus or haproxy");
                }
            }
            let opts = ProxyBenchOptions {
                sizes: a.sizes,
                seconds: a.seconds.max(1),
                connections: a.connections.max(1),
                wrk_threads: 1,
                rounds: a.rounds.max(1),
                policy: a.policy,
                switch_workers: a.switch_workers.max(1),
                node_workers: a.node_workers.max(1),
                idle_connections: a.idle_connections,
                paths: a.paths,
                keep: a.keep,
            };
            let json = a.json;
            let rows = run_proxy_bench(&opts, |line| eprintln!("{line}"))?;
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
