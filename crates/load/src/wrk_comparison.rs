//! Comparing this generator with wrk: running `wrk` and reading its report (`WrkReport`),
//! and `WrkComparison`, the rates of both measured one after the other on the same URL
//! (rounds alternating) and their ratio. `cli::compare_with_wrk` runs the comparison.

use std::path::Path;
use std::process::Command;

use serde::Serialize;

/// Where the Debian package puts wrk.
pub const WRK_PROGRAM: &str = "/usr/bin/wrk";

/// Why wrk could not be run or read.
#[derive(Debug, thiserror::Error)]
pub enum WrkError {
    #[error("cannot run {program}: {error}")]
    Spawn { program: String, error: std::io::Error },
    #[error("wrk failed: {0}")]
    Failed(String),
    #[error("cannot read wrk's report ({0}):\n{1}")]
    Parse(&'static str, String),
}

/// What one wrk run measured.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct WrkReport {
    pub rps: f64,
    pub requests: u64,
    pub p50_ms: Option<f64>,
    pub p99_ms: Option<f64>,
    /// Socket errors and non-2xx/3xx responses.
    pub errors: u64,
}

fn duration_ms(s: &str) -> Option<f64> {
    let s = s.trim();
    let (num, scale) = if let Some(v) = s.strip_suffix("us") {
        (v, 0.001)
    } else if let Some(v) = s.strip_suffix("ms") {
        (v, 1.0)
    } else if let Some(v) = s.strip_suffix('s') {
        (v, 1000.0)
    } else if let Some(v) = s.strip_suffix('m') {
        (v, 60_000.0)
    } else {
        return None;
    };
    num.trim().parse::<f64>().ok().map(|n| n * scale)
}

/// Read wrk's text report (latency percentiles only when run with `--latency`).
pub fn parse_wrk_report(text: &str) -> Result<WrkReport, WrkError> {
    let (mut rps, mut requests, mut p50, mut p99, mut errors) = (None, None, None, None, 0u64);
    for line in text.lines() {
        let t = line.trim();
        if let Some(v) = t.strip_prefix("Requests/sec:") {
            rps = v.trim().parse::<f64>().ok();
        } else if let Some(v) = t.strip_prefix("50%") {
            p50 = duration_ms(v);
        } else if let Some(v) = t.strip_prefix("99%") {
            p99 = duration_ms(v);
        } else if let Some(v) = t.strip_prefix("Non-2xx or 3xx responses:") {
            errors += v.trim().parse::<u64>().unwrap_or(0);
        } else if let Some(v) = t.strip_prefix("Socket errors:") {
            errors += v
                .split(',')
                .filter_map(|part| part.split_whitespace().last())
                .filter_map(|n| n.parse::<u64>().ok())
                .sum::<u64>();
        } else if t.contains(" requests in ") {
            requests = t.split_whitespace().next().and_then(|n| n.parse::<u64>().ok());
        }
    }
    Ok(WrkReport {
        rps: rps.ok_or_else(|| WrkError::Parse("no Requests/sec line", text.to_string()))?,
        requests: requests.ok_or_else(|| WrkError::Parse("no request count line", text.to_string()))?,
        p50_ms: p50,
        p99_ms: p99,
        errors,
    })
}

/// `wrk -t threads -c connections -d seconds --latency url`.
pub fn run_wrk(
    program: &Path,
    url: &str,
    connections: u32,
    seconds: u32,
    threads: u32,
) -> Result<WrkReport, WrkError> {
    let out = Command::new(program)
        .args(["-t", &threads.to_string(), "-c", &connections.to_string(), "-d", &format!("{seconds}s")])
        .args(["--latency", "--timeout", "10s", url])
        .output()
        .map_err(|source| WrkError::Spawn { program: program.display().to_string(), error: source })?;
    let text = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        return Err(WrkError::Failed(format!("{text}{}", String::from_utf8_lossy(&out.stderr))));
    }
    parse_wrk_report(&text)
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

    const SAMPLE: &str = "Running 5s test @ http://127.0.0.1:8080/1k.bin
  1 threads and 32 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency     1.40ms  383.23us  11.99ms   90.47%
    Req/Sec    23.16k     1.14k   24.94k    78.00%
  Latency Distribution
     50%    1.31ms
     75%    1.50ms
     90%    1.73ms
     99%  290.00us
  115258 requests in 5.00s, 139.24MB read
  Socket errors: connect 0, read 2, write 1, timeout 3
  Non-2xx or 3xx responses: 4
Requests/sec:  23047.61
Transfer/sec:     27.84MB
";

    #[test]
    fn wrk_report_fields_are_read_with_units() {
        let r = parse_wrk_report(SAMPLE).unwrap();
        assert_eq!((r.rps, r.requests, r.errors), (23047.61, 115258, 10));
        assert!((r.p50_ms.unwrap() - 1.31).abs() < 1e-9);
        assert!((r.p99_ms.unwrap() - 0.29).abs() < 1e-9);
        assert!(parse_wrk_report("nothing useful").is_err());
    }

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
