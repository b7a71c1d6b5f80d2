//! `locus bench load`: shows that the load generator is not the bottleneck of a measurement —
//! wrk and `locus load` (verifying every response) take turns against the same URL
//! (`compare_with_wrk`); the bench itself serves one cached file from a Locus node on loopback.
//! `WrkComparison` holds the rates of both, round by round, and their ratio.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use anyhow::Context;
use locus_load::{LoadConfig, TargetUrl, Verification, pin_response, run_load};
use locus_rig::{Net, NodeSpec, ScratchFolder, find_program, servers};
use serde::Serialize;

use crate::wrk::{WRK_PROGRAM, WrkLoad, run_wrk};

/// Run the comparison on a `size`-byte file.
pub fn run_load_bench(
    size: u64,
    connections: u32,
    seconds: u32,
    threads: u32,
) -> anyhow::Result<WrkComparison> {
    let wrk = find_program("wrk").context("wrk not found (apt-get install wrk)")?;
    let locus = std::env::current_exe().context("locating the locus executable")?;
    let scratch = ScratchFolder::new("bench-load")?;
    let root = scratch.path().join("www");
    std::fs::create_dir_all(&root)?;
    let body: Vec<u8> = (0..size).map(|i| (i * 31 % 251) as u8).collect();
    std::fs::write(root.join("file.bin"), body)?;
    let net = Net::Loopback;
    let node = servers::locus_node(&net, &locus, scratch.path(), &NodeSpec::new("node1", &root))?;
    let url = format!("http://{}/file.bin", node.addr);
    compare_with_wrk_using(&wrk, &url, connections, seconds, threads, Some(&root))
}

/// Run wrk (`/usr/bin/wrk`) and locus-load against `url` one after the other, twice
/// alternating, with the same connections, threads and seconds, locus-load checking every
/// response against the first one fetched (status, length and checksum); report both rates
/// and their ratio.
pub fn compare_with_wrk(
    url: &str,
    connections: u32,
    seconds: u32,
    threads: u32,
) -> anyhow::Result<WrkComparison> {
    compare_with_wrk_using(Path::new(WRK_PROGRAM), url, connections, seconds, threads, None)
}

/// `compare_with_wrk` with another wrk binary, and optionally verification against a
/// document root instead of the first response.
pub fn compare_with_wrk_using(
    wrk: &Path,
    url: &str,
    connections: u32,
    seconds: u32,
    threads: u32,
    verify_root: Option<&Path>,
) -> anyhow::Result<WrkComparison> {
    let target: TargetUrl = url.parse()?;
    let verification = match verify_root {
        Some(root) => Verification::Root(root.to_path_buf()),
        None => Verification::Pinned(
            pin_response(&target, Duration::from_secs(10))
                .context("probing the URL before the comparison")?,
        ),
    };
    let config = LoadConfig {
        clients: connections as usize,
        threads: threads as usize,
        duration: Some(Duration::from_secs(u64::from(seconds.max(1)))),
        verification,
        ..LoadConfig::new(vec![target])
    };
    let load = WrkLoad { threads, connections, seconds: seconds.max(1), keepalive: true };
    let mut rounds = Vec::new();
    for round in 1..=2 {
        let w = run_wrk(Command::new(wrk), url, &load)?;
        rounds.push(ComparisonRound {
            tool: "wrk",
            round,
            rps: w.rps,
            p50_ms: Some(w.p50_ms),
            p99_ms: Some(w.p99_ms),
            errors: w.errors,
            mismatches: None,
        });
        let r = run_load(&config)?;
        rounds.push(ComparisonRound {
            tool: "locus-load",
            round,
            rps: r.rps,
            p50_ms: Some(r.p50_ms),
            p99_ms: Some(r.p99_ms),
            errors: r.errors,
            mismatches: Some(r.mismatches),
        });
    }
    Ok(WrkComparison::from_rounds(url, connections, seconds.max(1), threads, true, rounds))
}

/// One measurement of a comparison.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ComparisonRound {
    /// `wrk` or `locus-load`.
    pub tool: &'static str,
    pub round: u32,
    pub rps: f64,
    pub p50_ms: Option<f64>,
    pub p99_ms: Option<f64>,
    pub errors: u64,
    /// locus-load only: responses that failed verification.
    pub mismatches: Option<u64>,
}

/// wrk and locus-load on the same URL, alternating.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct WrkComparison {
    pub url: String,
    pub connections: u32,
    pub seconds: u32,
    pub threads: u32,
    /// Mean of wrk's rounds.
    pub wrk_rps: f64,
    /// Mean of locus-load's rounds.
    pub locus_rps: f64,
    /// `locus_rps / wrk_rps`.
    pub ratio: f64,
    /// Whether locus-load checked every response.
    pub verified: bool,
    pub rounds: Vec<ComparisonRound>,
}

impl WrkComparison {
    /// Summarise `rounds`.
    pub fn from_rounds(
        url: &str,
        connections: u32,
        seconds: u32,
        threads: u32,
        verified: bool,
        rounds: Vec<ComparisonRound>,
    ) -> WrkComparison {
        let mean = |tool: &str| {
            let rates: Vec<f64> = rounds.iter().filter(|r| r.tool == tool).map(|r| r.rps).collect();
            if rates.is_empty() { 0.0 } else { rates.iter().sum::<f64>() / rates.len() as f64 }
        };
        let (wrk_rps, locus_rps) = (mean("wrk"), mean("locus-load"));
        WrkComparison {
            url: url.to_string(),
            connections,
            seconds,
            threads,
            wrk_rps,
            locus_rps,
            ratio: if wrk_rps > 0.0 { locus_rps / wrk_rps } else { 0.0 },
            verified,
            rounds,
        }
    }

    /// A small table for a terminal.
    pub fn render_text(&self) -> String {
        let mut out = format!(
            "{} — {} connections, {} thread(s), {} s per round{}\n",
            self.url,
            self.connections,
            self.threads,
            self.seconds,
            if self.verified { ", locus-load verifying every response" } else { "" }
        );
        for r in &self.rounds {
            let ms = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.3}"));
            out.push_str(&format!(
                "  round {} {:<10} {:>10.0} req/s  p50 {} ms  p99 {} ms  errors {}{}\n",
                r.round,
                r.tool,
                r.rps,
                ms(r.p50_ms),
                ms(r.p99_ms),
                r.errors,
                r.mismatches.map_or(String::new(), |m| format!("  mismatches {m}"))
            ));
        }
        out.push_str(&format!(
            "  wrk {:.0} req/s, locus-load {:.0} req/s: ratio {:.3}\n",
            self.wrk_rps, self.locus_rps, self.ratio
        ));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn comparison_ratio_is_mean_locus_rate_over_mean_wrk_rate() {
        let round = |tool, round, rps| ComparisonRound {
            tool,
            round,
            rps,
            p50_ms: None,
            p99_ms: None,
            errors: 0,
            mismatches: None,
        };
        let rounds = vec![
            round("wrk", 1, 100.0),
            round("locus-load", 1, 90.0),
            round("wrk", 2, 120.0),
            round("locus-load", 2, 86.0),
        ];
        let c = WrkComparison::from_rounds("http://x", 32, 5, 1, true, rounds);
        assert_eq!((c.wrk_rps, c.locus_rps), (110.0, 88.0));
        assert!((c.ratio - 0.8).abs() < 1e-12);
        assert!(c.render_text().contains("ratio 0.800"));
    }
}
