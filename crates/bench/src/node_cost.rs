//! `locus bench node-cost`: calibrates the node's CPU model against the real node. An
//! in-process `locus node` (one worker, no model) on 127.0.0.1 serves cached files of a few
//! sizes to a client on the calling thread, keep-alive and one connection per request; the
//! node's CPU time (the process's CPU clock minus the client thread's) per request is fitted
//! by non-negative least squares to `conn_us / requests-per-connection + request_us +
//! kb_us × KiB`, giving the `--cpu` spec that reproduces this machine's node.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use anyhow::{Context, bail};
use locus_node::{CpuModelConfig, NodeConfig, NodeServer};
use serde::Serialize;

/// Flags of `locus bench node-cost`.
#[derive(clap::Args, Debug, Clone)]
pub struct NodeCostArgs {
    /// Print the measurements and the fit as one JSON object.
    #[arg(long)]
    pub json: bool,
    /// Requests per size and connection setting.
    #[arg(long, default_value_t = 2000)]
    pub requests: u32,
    /// File sizes, comma-separated: bytes, or with a binary suffix (`k`, `m`).
    #[arg(long, value_delimiter = ',', default_value = "1k,16k,256k", value_parser = crate::proxy::parse_size)]
    pub sizes: Vec<u64>,
    /// Modelled CPUs written into the spec (the measured node has one worker).
    #[arg(long, default_value_t = 1)]
    pub cpus: u32,
}

/// One measured setting: a file size, keep-alive or not.
#[derive(Clone, Debug, Serialize)]
pub struct CostCell {
    pub size: u64,
    pub keepalive: bool,
    pub requests: u64,
    pub connections: u64,
    /// The node's CPU time per request, µs.
    pub node_cpu_us: f64,
    /// What the fitted model charges per request, µs.
    pub fitted_us: f64,
}

/// The measurements and the model fitted to them.
#[derive(Clone, Debug, Serialize)]
pub struct NodeCostReport {
    pub cells: Vec<CostCell>,
    pub conn_us: f64,
    pub request_us: f64,
    pub kb_us: f64,
    /// Root-mean-square of the fit's residuals, µs per request.
    pub rms_residual_us: f64,
    /// The `--cpu` spec of the fitted model.
    pub spec: String,
}

fn cpu_clock(clock: libc::clockid_t) -> Duration {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid, writable timespec and the clock ids used are constants.
    if unsafe { libc::clock_gettime(clock, &mut ts) } != 0 {
        return Duration::ZERO;
    }
    Duration::new(ts.tv_sec.max(0) as u64, ts.tv_nsec.clamp(0, 999_999_999) as u32)
}

/// CPU time of the process and of the calling thread.
fn cpu_now() -> (Duration, Duration) {
    (cpu_clock(libc::CLOCK_PROCESS_CPUTIME_ID), cpu_clock(libc::CLOCK_THREAD_CPUTIME_ID))
}

/// Read one response from `stream` and return its body length; `buf` keeps what was read
/// past it (nothing, as requests are not pipelined).
fn read_response(stream: &mut TcpStream, buf: &mut Vec<u8>) -> anyhow::Result<u64> {
    buf.clear();
    let mut chunk = [0u8; 64 * 1024];
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        let n = stream.read(&mut chunk).context("reading a response head")?;
        if n == 0 {
            bail!("the node closed the connection before a whole response head");
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = std::str::from_utf8(&buf[..head_end]).context("response head is not text")?;
    if !head.starts_with("HTTP/1.1 200") {
        bail!("unexpected response: {}", head.lines().next().unwrap_or(""));
    }
    let len: u64 = head
        .lines()
        .find_map(|l| l.strip_prefix("Content-Length: "))
        .and_then(|v| v.trim().parse().ok())
        .context("response without Content-Length")?;
    let mut have = (buf.len() - head_end) as u64;
    while have < len {
        let n = stream.read(&mut chunk).context("reading a response body")?;
        if n == 0 {
            bail!("the node closed the connection inside a body");
        }
        have += n as u64;
    }
    Ok(len)
}

/// Fetch `target` `requests` times, on one keep-alive connection or one connection each;
/// returns the node's CPU time spent meanwhile.
fn drive(addr: SocketAddr, target: &str, requests: u32, keepalive: bool) -> anyhow::Result<Duration> {
    let request = if keepalive {
        format!("GET {target} HTTP/1.1\r\nHost: bench\r\n\r\n")
    } else {
        format!("GET {target} HTTP/1.1\r\nHost: bench\r\nConnection: close\r\n\r\n")
    };
    let mut buf = Vec::new();
    let connect = || -> anyhow::Result<TcpStream> {
        let s = TcpStream::connect(addr).with_context(|| format!("connecting to the node at {addr}"))?;
        s.set_nodelay(true)?;
        s.set_read_timeout(Some(Duration::from_secs(10)))?;
        Ok(s)
    };
    let (process0, thread0) = cpu_now();
    let mut stream = connect()?;
    for i in 0..requests {
        if !keepalive && i > 0 {
            stream = connect()?;
        }
        stream.write_all(request.as_bytes()).context("sending a request")?;
        read_response(&mut stream, &mut buf)?;
        if !keepalive {
            // Wait for the node's close, so its work for this connection is in the interval.
            let _ = stream.read(&mut [0u8; 16]);
        }
    }
    drop(stream);
    let (process1, thread1) = cpu_now();
    Ok((process1 - process0).saturating_sub(thread1 - thread0))
}

/// Least squares of `y ≈ X β` over the columns in `cols` (others zero); `None` if singular.
fn least_squares(x: &[[f64; 3]], y: &[f64], cols: &[usize]) -> Option<[f64; 3]> {
    let k = cols.len();
    // Normal equations, solved by Gaussian elimination with partial pivoting.
    let mut a = vec![vec![0.0; k + 1]; k];
    for (row, &yi) in x.iter().zip(y) {
        for (i, &ci) in cols.iter().enumerate() {
            for (j, &cj) in cols.iter().enumerate() {
                a[i][j] += row[ci] * row[cj];
            }
            a[i][k] += row[ci] * yi;
        }
    }
    for p in 0..k {
        let pivot = (p..k).max_by(|&r, &s| a[r][p].abs().total_cmp(&a[s][p].abs()))?;
        if a[pivot][p].abs() < 1e-12 {
            return None;
        }
        a.swap(p, pivot);
        let pivot_row = a[p].clone();
        for (r, row) in a.iter_mut().enumerate() {
            if r != p {
                let f = row[p] / pivot_row[p];
                for (v, pv) in row.iter_mut().zip(&pivot_row).skip(p) {
                    *v -= f * pv;
                }
            }
        }
    }
    let mut beta = [0.0; 3];
    for (i, &ci) in cols.iter().enumerate() {
        beta[ci] = a[i][k] / a[i][i];
    }
    Some(beta)
}

/// Non-negative least squares of three coefficients: the best fit over every subset of
/// columns whose solution has no negative coefficient.
pub fn fit_non_negative(x: &[[f64; 3]], y: &[f64]) -> [f64; 3] {
    let mut best = ([0.0; 3], y.iter().map(|v| v * v).sum::<f64>());
    for mask in 1u8..8 {
        let cols: Vec<usize> = (0..3).filter(|i| mask & (1 << i) != 0).collect();
        let Some(beta) = least_squares(x, y, &cols) else { continue };
        if beta.iter().any(|b| *b < 0.0 || !b.is_finite()) {
            continue;
        }
        let sse: f64 = x.iter().zip(y).map(|(r, yi)| (yi - dot(r, &beta)).powi(2)).sum();
        if sse < best.1 {
            best = (beta, sse);
        }
    }
    best.0
}

fn dot(a: &[f64; 3], b: &[f64; 3]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// Start a node serving files of `sizes`, measure every setting, fit the model.
pub fn run_node_cost(args: &NodeCostArgs) -> anyhow::Result<NodeCostReport> {
    if args.sizes.is_empty() {
        bail!("node-cost needs at least one size");
    }
    let requests = args.requests.max(1);
    let root = tempfile::tempdir().context("creating the node's document root")?;
    for &size in &args.sizes {
        let body: Vec<u8> = (0..size).map(|i| (i * 31 % 251) as u8).collect();
        std::fs::write(root.path().join(format!("f{size}")), body).context("writing a bench file")?;
    }
    let largest = args.sizes.iter().max().copied().unwrap_or(0);
    let mut config = NodeConfig {
        root: root.path().to_path_buf(),
        name: "cost".into(),
        workers: 1,
        cpu_threads: 1,
        ..NodeConfig::default()
    };
    config.limits.max_connections = 1000;
    config.cache.max_object = locus_node::ByteSize(largest.max(config.cache.max_object.bytes()));
    config.cache.capacity = locus_node::ByteSize(config.cache.capacity.bytes().max(4 * largest));
    let node = NodeServer::start(config).context("starting the node")?;
    let addr = node.addr();
    let mut cells = Vec::new();
    for &size in &args.sizes {
        let target = format!("/f{size}");
        drive(addr, &target, 3, true)?; // load it into the cache, warm the paths
        for keepalive in [true, false] {
            let cpu = drive(addr, &target, requests, keepalive)?;
            cells.push(CostCell {
                size,
                keepalive,
                requests: u64::from(requests),
                connections: if keepalive { 1 } else { u64::from(requests) },
                node_cpu_us: cpu.as_secs_f64() * 1e6 / f64::from(requests),
                fitted_us: 0.0,
            });
        }
    }
    node.shutdown();
    Ok(fit_report(cells, args.cpus))
}

/// Fit the model to measured cells.
pub fn fit_report(mut cells: Vec<CostCell>, cpus: u32) -> NodeCostReport {
    let row = |c: &CostCell| [c.connections as f64 / c.requests.max(1) as f64, 1.0, c.size as f64 / 1024.0];
    let x: Vec<[f64; 3]> = cells.iter().map(row).collect();
    let y: Vec<f64> = cells.iter().map(|c| c.node_cpu_us).collect();
    let beta = fit_non_negative(&x, &y);
    let mut sse = 0.0;
    for (c, r) in cells.iter_mut().zip(&x) {
        c.fitted_us = dot(r, &beta);
        sse += (c.node_cpu_us - c.fitted_us).powi(2);
    }
    let round = |v: f64| (v * 100.0).round() / 100.0;
    let (conn_us, request_us, kb_us) = (round(beta[0]), round(beta[1]), round(beta[2]));
    let spec = format!("conn_us={conn_us},request_us={request_us},kb_us={kb_us},cpus={}", cpus.max(1));
    let rms_residual_us = (sse / cells.len().max(1) as f64).sqrt();
    NodeCostReport { cells, conn_us, request_us, kb_us, rms_residual_us, spec }
}

impl NodeCostReport {
    /// The spec as a configuration (it always parses: the fit is finite and non-negative).
    pub fn config(&self) -> Result<CpuModelConfig, String> {
        self.spec.parse()
    }

    /// A Markdown table of the cells, then the fitted model and its spec.
    pub fn render_text(&self) -> String {
        let mut t = String::from(
            "| size (B) | keep-alive | requests | node CPU µs/request | model µs/request |\n|---:|---|---:|---:|---:|\n",
        );
        for c in &self.cells {
            t.push_str(&format!(
                "| {} | {} | {} | {:.1} | {:.1} |\n",
                c.size,
                if c.keepalive { "yes" } else { "no" },
                c.requests,
                c.node_cpu_us,
                c.fitted_us
            ));
        }
        t.push_str(&format!(
            "\nfitted: conn_us = {}, request_us = {}, kb_us = {} (rms residual {:.1} µs/request)\n--cpu {}\n",
            self.conn_us, self.request_us, self.kb_us, self.rms_residual_us, self.spec
        ));
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_exact_linear_cost_is_recovered_and_negative_terms_are_dropped() {
        let truth = [150.0, 20.0, 3.0];
        let x =
            vec![[1.0, 1.0, 1.0], [0.001, 1.0, 1.0], [1.0, 1.0, 16.0], [0.001, 1.0, 16.0], [1.0, 1.0, 256.0]];
        let y: Vec<f64> = x.iter().map(|r| dot(r, &truth)).collect();
        let beta = fit_non_negative(&x, &y);
        for (b, t) in beta.iter().zip(truth) {
            assert!((b - t).abs() < 1e-6, "{beta:?}");
        }
        // Costs falling with size would need a negative kb_us: it is held at zero instead.
        let y = [50.0, 10.0, 40.0, 5.0, 30.0];
        let beta = fit_non_negative(&x, &y);
        assert!(beta.iter().all(|b| *b >= 0.0) && beta[2] == 0.0, "{beta:?}");
    }
}
