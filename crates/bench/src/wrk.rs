//! Running wrk and reading its report, for every bench that uses wrk: requests per second,
//! latency percentiles from `--latency`, socket errors and non-2xx/3xx responses.
//! Connection-per-request runs send `Connection: close`, so the server ends every connection
//! after one response. wrk dies with the bench (Ctrl-C, SIGTERM, even SIGKILL) instead of
//! running out its time.

use anyhow::{Context, bail};
use serde::Serialize;
use std::process::Command;

/// Where the Debian package puts wrk.
pub const WRK_PROGRAM: &str = "/usr/bin/wrk";

/// wrk's report as written: the latency percentiles only when run with `--latency`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct WrkReport {
    pub rps: f64,
    pub requests: u64,
    pub p50_ms: Option<f64>,
    pub p99_ms: Option<f64>,
    /// Socket errors and non-2xx/3xx responses.
    pub errors: u64,
}

/// What one wrk run measured.
#[derive(Clone, Debug, PartialEq)]
pub struct WrkResult {
    pub rps: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub requests: u64,
    pub errors: u64,
}

/// How wrk loads a server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WrkLoad {
    pub threads: u32,
    pub connections: u32,
    pub seconds: u32,
    /// false: every request carries `Connection: close` (a new connection per request).
    pub keepalive: bool,
}

impl WrkLoad {
    /// wrk's arguments before the URL.
    pub fn args(&self) -> Vec<String> {
        let mut args: Vec<String> = ["-t", &self.threads.to_string(), "-c", &self.connections.to_string()]
            .into_iter()
            .map(String::from)
            .collect();
        args.extend(["-d".to_string(), format!("{}s", self.seconds)]);
        if !self.keepalive {
            args.extend(["-H".to_string(), "Connection: close".to_string()]);
        }
        args.extend(["--latency", "--timeout", "10s"].map(String::from));
        args
    }
}

/// Run `wrk … --latency url` with `load`; `wrk` is the command to run (already placed on the
/// client's host).
pub fn run_wrk(mut wrk: Command, url: &str, load: &WrkLoad) -> anyhow::Result<WrkResult> {
    locus_rig::die_with_spawning_thread(&mut wrk);
    let out =
        wrk.args(load.args()).arg(url).output().with_context(|| format!("run {:?}", wrk.get_program()))?;
    let text = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        bail!("wrk failed on {url}: {}{}", text, String::from_utf8_lossy(&out.stderr));
    }
    parse_wrk_output(&text).with_context(|| format!("reading wrk output for {url}:\n{text}"))
}

/// A duration as wrk writes it (`290.00us`, `1.31ms`, `2.00s`, `1.00m`), in ms.
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

/// Read wrk's text report (the one reader of it in the workspace).
pub fn parse_wrk_report(text: &str) -> anyhow::Result<WrkReport> {
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
        rps: rps.context("no Requests/sec line")?,
        requests: requests.context("no request count line")?,
        p50_ms: p50,
        p99_ms: p99,
        errors,
    })
}

/// wrk's report as the benches need it: `parse_wrk_report`, with the latency percentiles
/// `--latency` adds required.
pub fn parse_wrk_output(text: &str) -> anyhow::Result<WrkResult> {
    let report = parse_wrk_report(text)?;
    Ok(WrkResult {
        rps: report.rps,
        p50_ms: report.p50_ms.context("no 50% latency line (was --latency given?)")?,
        p99_ms: report.p99_ms.context("no 99% latency line")?,
        requests: report.requests,
        errors: report.errors,
    })
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
     99%    2.90ms
  115258 requests in 5.00s, 139.24MB read
  Socket errors: connect 0, read 2, write 1, timeout 3
  Non-2xx or 3xx responses: 4
Requests/sec:  23047.61
Transfer/sec:     27.84MB
";

    #[test]
    fn wrk_report_fields_are_read_with_units() {
        let r = parse_wrk_output(SAMPLE).unwrap();
        assert_eq!(r.rps, 23047.61);
        assert!((r.p50_ms - 1.31).abs() < 1e-9);
        assert!((r.p99_ms - 2.90).abs() < 1e-9);
        assert_eq!(r.requests, 115258);
        assert_eq!(r.errors, 10);
    }

    #[test]
    fn connection_per_request_runs_send_connection_close() {
        let load = WrkLoad { threads: 1, connections: 32, seconds: 2, keepalive: false };
        assert_eq!(load.args().join(" "), "-t 1 -c 32 -d 2s -H Connection: close --latency --timeout 10s");
        let ka = WrkLoad { keepalive: true, ..load };
        assert!(!ka.args().iter().any(|a| a.contains("Connection")));
    }

    #[test]
    fn wrk_report_fields_are_read_with_units_and_microseconds() {
        let sample = SAMPLE.replace("99%    2.90ms", "99%  290.00us");
        let r = parse_wrk_report(&sample).unwrap();
        assert_eq!((r.rps, r.requests, r.errors), (23047.61, 115258, 10));
        assert!((r.p50_ms.unwrap() - 1.31).abs() < 1e-9);
        assert!((r.p99_ms.unwrap() - 0.29).abs() < 1e-9);
        assert!(parse_wrk_report("nothing useful").is_err());
    }

    #[test]
    fn a_report_without_latency_lines_is_an_error() {
        let text = SAMPLE.lines().filter(|l| !l.contains('%')).collect::<Vec<_>>().join("\n");
        assert!(parse_wrk_output(&text).is_err());
    }
}
