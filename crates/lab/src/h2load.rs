//! h2load (nghttp2's benchmark client) as the lab's other load generator: an independent
//! client for the HTTP/2 comparisons. h2load walks a URL list (`-i`) in the same order on every
//! connection; so that each connection draws its own stream, as `locus load`'s do, the lab runs
//! one h2load process per connection (`-c 1`, `-m` streams), each with its connection's list,
//! all at once, for a measured time after a warm-up. The summaries give the rate and the
//! failures, the per-request logs (`--log-file`) the latency percentiles. h2load checks status
//! codes only, never bodies: the lab's own client (`locus load`) is the one that verifies bytes.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::error::LabError;

/// One h2load run: a process per connection.
#[derive(Clone, Debug)]
pub struct H2loadRun {
    /// Each connection's URL list, one URL a line (the first names the scheme, host and port).
    pub urls: Vec<PathBuf>,
    /// Streams in flight per connection (`-m`); HTTP/1.1 would pipeline them, so 1 there.
    pub streams: usize,
    pub warmup: Duration,
    pub measure: Duration,
    /// HTTP/2 (ALPN `h2`), or HTTP/1.1 (`--h1`).
    pub h2: bool,
    /// Where the per-request logs go (`<dir>/h2load-<i>.log`).
    pub log_dir: PathBuf,
}

/// What a run measured.
#[derive(Clone, Debug, PartialEq)]
pub struct H2loadFigures {
    /// Requests per second over the measured time (the processes' own figures, summed).
    pub rps: f64,
    /// Requests done in the measured time.
    pub done: u64,
    /// Of them, those answered 2xx or 3xx.
    pub succeeded: u64,
    /// Failed, errored or timed out, and answered 4xx or 5xx.
    pub errors: u64,
    pub timeouts: u64,
    pub duration_s: f64,
    /// The application protocol h2load reported (`h2`, `http/1.1`).
    pub protocol: String,
    pub p50_ms: f64,
    pub p90_ms: f64,
    pub p99_ms: f64,
    pub mean_ms: f64,
}

/// Run `run`'s processes at once (on the calling thread's network namespace) and add up their
/// figures.
pub fn run_h2load(run: &H2loadRun) -> Result<H2loadFigures, LabError> {
    let mut children = Vec::with_capacity(run.urls.len());
    for (i, urls) in run.urls.iter().enumerate() {
        let log = run.log_dir.join(format!("h2load-{i}.log"));
        let child = command(run, urls, &log)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| LabError::system("h2load (install nghttp2-client)", e))?;
        children.push((child, log));
    }
    let mut total: Option<H2loadFigures> = None;
    let mut log_text = String::new();
    for (child, log) in children {
        let f = finish(child, &log, run.h2)?;
        log_text.push_str(&std::fs::read_to_string(&log).map_err(|e| LabError::io(&log, e))?);
        total = Some(match total {
            None => f,
            Some(t) => H2loadFigures {
                rps: t.rps + f.rps,
                done: t.done + f.done,
                succeeded: t.succeeded + f.succeeded,
                errors: t.errors + f.errors,
                timeouts: t.timeouts + f.timeouts,
                duration_s: t.duration_s.max(f.duration_s),
                ..t
            },
        });
    }
    let mut total = total.ok_or_else(|| LabError::system("h2load", std::io::Error::other("no URL list")))?;
    (total.p50_ms, total.p90_ms, total.p99_ms, total.mean_ms) = latencies(&log_text);
    Ok(total)
}

/// One connection's h2load command.
fn command(run: &H2loadRun, urls: &Path, log: &Path) -> Command {
    let mut cmd = Command::new("h2load");
    cmd.arg("-i").arg(urls);
    cmd.args(["-c", "1", "-t", "1", "-m", &run.streams.to_string()]);
    cmd.arg("-D").arg(format!("{}", run.measure.as_secs_f64().ceil().max(1.0) as u64));
    cmd.arg("--warm-up-time").arg(format!("{}", run.warmup.as_secs_f64().ceil() as u64));
    cmd.arg("--log-file").arg(log);
    if !run.h2 {
        cmd.arg("--h1");
    }
    cmd
}

/// Wait for one process and read its summary; it must have spoken the protocol asked for.
fn finish(child: Child, log: &Path, h2: bool) -> Result<H2loadFigures, LabError> {
    let out = child.wait_with_output().map_err(|e| LabError::system("h2load", e))?;
    let text = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        return Err(h2load_error(log, format!("{}: {err}", out.status), &text));
    }
    let figures = parse_summary(&text).map_err(|e| h2load_error(log, e, &text))?;
    let want = if h2 { "h2" } else { "http/1.1" };
    if figures.protocol != want {
        return Err(h2load_error(log, format!("spoke {}, not {want}", figures.protocol), &text));
    }
    Ok(figures)
}

fn h2load_error(log: &Path, message: String, output: &str) -> LabError {
    LabError::system(
        format!("h2load (log {})", log.display()),
        std::io::Error::other(format!("{message}; its output:\n{output}")),
    )
}

/// The figures of h2load's summary (latencies left at 0: they come from the log).
pub fn parse_summary(text: &str) -> Result<H2loadFigures, String> {
    let line = |prefix: &str| {
        text.lines()
            .map(str::trim)
            .find(|l| l.starts_with(prefix))
            .ok_or_else(|| format!("no `{prefix}` line"))
    };
    let finished = line("finished in")?;
    let duration_s = number_before(finished, "s,").ok_or("no duration on the finished line")?;
    let rps = number_before(finished, "req/s").ok_or("no req/s on the finished line")?;
    let requests = line("requests:")?;
    let count =
        |what: &str| number_before(requests, what).map(|v| v as u64).ok_or(format!("no `{what}` count"));
    let (done, succeeded) = (count("done")?, count("succeeded")?);
    let (failed, errored, timeouts) = (count("failed")?, count("errored")?, count("timeout")?);
    let status = line("status codes:")?;
    let class = |c: &str| number_before(status, c).map(|v| v as u64).ok_or(format!("no {c} count"));
    let errors = failed + errored + timeouts + class("4xx")? + class("5xx")?;
    let protocol = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("Application protocol:"))
        .map(|p| p.trim().to_string())
        .unwrap_or_else(|| "http/1.1".to_string());
    Ok(H2loadFigures {
        rps,
        done,
        succeeded,
        errors,
        timeouts,
        duration_s,
        protocol,
        p50_ms: 0.0,
        p90_ms: 0.0,
        p99_ms: 0.0,
        mean_ms: 0.0,
    })
}

/// The number just before `unit` in `line` (`"20000 succeeded"`, `"1.86s,"`, `"10742.90 req/s"`).
fn number_before(line: &str, unit: &str) -> Option<f64> {
    let at = line.find(unit)?;
    let before = line[..at].trim_end();
    let start = before.rfind(|c: char| !(c.is_ascii_digit() || c == '.')).map_or(0, |i| i + 1);
    before[start..].parse().ok()
}

/// Median, 90th and 99th percentile and mean of the log's response times (its third column,
/// µs), in ms; failed streams (status -1) left out.
pub fn latencies(log: &str) -> (f64, f64, f64, f64) {
    let mut us: Vec<u64> = log
        .lines()
        .filter_map(|l| {
            let mut cols = l.split('\t');
            let (_start, status, took) = (cols.next()?, cols.next()?, cols.next()?);
            (status.trim() != "-1").then(|| took.trim().parse().ok()).flatten()
        })
        .collect();
    if us.is_empty() {
        return (0.0, 0.0, 0.0, 0.0);
    }
    us.sort_unstable();
    let at = |q: f64| us[((us.len() - 1) as f64 * q).round() as usize] as f64 / 1000.0;
    let mean = us.iter().sum::<u64>() as f64 / us.len() as f64 / 1000.0;
    (at(0.5), at(0.9), at(0.99), mean)
}

#[cfg(test)]
mod tests {
    use super::*;

    const OUTPUT: &str = "starting benchmark...
spawning thread #0: 8 total client(s). Timing-based test with 1s of warm-up time and 4s of main duration for each client.
TLS Protocol: TLSv1.3
Cipher: TLS_AES_128_GCM_SHA256
Server Temp Key: X25519 253 bits
Application protocol: h2
Warm-up phase is over for thread #0.
Main benchmark duration is over for thread #0. Stopping all clients.
finished in 4.00s, 10742.90 req/s, 78.71MB/s
requests: 42971 total, 42980 started, 42971 done, 42960 succeeded, 11 failed, 0 errored, 2 timeout
status codes: 42955 2xx, 5 3xx, 3 4xx, 0 5xx
traffic: 146.53MB (153649358) total, 1.55MB (1621235) headers (space savings 95.39%), 144.14MB (151142400) data
                     min         max         mean         sd        +/- sd
time for request:     2.97ms     18.53ms      7.42ms      1.33ms    75.02%
";

    #[test]
    fn the_summary_gives_rate_counts_errors_and_protocol() {
        let f = parse_summary(OUTPUT).unwrap();
        assert_eq!(f.rps, 10742.90);
        assert_eq!(f.duration_s, 4.0);
        assert_eq!((f.done, f.succeeded, f.timeouts), (42971, 42960, 2));
        assert_eq!(f.errors, 11 + 2 + 3, "failed, errored, timed out, 4xx and 5xx");
        assert_eq!(f.protocol, "h2");
        let h1 = OUTPUT.replace("Application protocol: h2\n", "");
        assert_eq!(parse_summary(&h1).unwrap().protocol, "http/1.1");
        let err = parse_summary("garbage").unwrap_err();
        assert!(err.contains("finished in"), "{err}");
    }

    #[test]
    fn percentiles_come_from_the_log_leaving_failed_streams_out() {
        let mut log = String::new();
        for i in 1..=100u64 {
            log.push_str(&format!("1700000000{i:06}\t200\t{}\n", i * 1000));
        }
        log.push_str("1700000000999999\t-1\t99999999\n");
        let (p50, p90, p99, mean) = latencies(&log);
        assert_eq!((p50, p90, p99), (51.0, 90.0, 99.0));
        assert!((mean - 50.5).abs() < 1e-9);
        assert_eq!(latencies(""), (0.0, 0.0, 0.0, 0.0));
    }
}
