//! Running wrk and reading its report: requests per second, latency percentiles from
//! `--latency`, socket errors and non-2xx/3xx responses. Connection-per-request runs send
//! `Connection: close`, so the server ends every connection after one response. wrk dies with
//! the bench (Ctrl-C, SIGTERM, even SIGKILL) instead of running out its time.

use anyhow::{Context, bail};
use locus_load::parse_wrk_report;
use std::process::Command;

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
    locus_lab::die_with_spawning_thread(&mut wrk);
    let out =
        wrk.args(load.args()).arg(url).output().with_context(|| format!("run {:?}", wrk.get_program()))?;
    let text = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        bail!("wrk failed on {url}: {}{}", text, String::from_utf8_lossy(&out.stderr));
    }
    parse_wrk_output(&text).with_context(|| format!("reading wrk output for {url}:\n{text}"))
}

/// wrk's report as the benches need it: `locus_load::parse_wrk_report` (one reader of wrk's
/// text for the whole workspace), with the latency percentiles `--latency` adds required.
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
    fn a_report_without_latency_lines_is_an_error() {
        let text = SAMPLE.lines().filter(|l| !l.contains('%')).collect::<Vec<_>>().join("\n");
        assert!(parse_wrk_output(&text).is_err());
    }
}
