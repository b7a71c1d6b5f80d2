//! `locus demo`: the whole cluster on loopback in one command. It generates a site whose
//! working set is several times one node's cache, starts two Locus nodes (with a disk model,
//! so misses cost what they cost on a disk-bound server) and the switch in-process, and runs
//! the same closed-loop, byte-checked load through each policy in turn, from content-blind
//! WRR to LARD/R, printing throughput, latency, cluster hit ratio and load shares.

use anyhow::{Context, bail};
use locus_http::{BodyTracker, ResponseHead, parse_response};
use locus_node::{ByteSize, CacheConfig, NodeConfig, NodeServer, Replacement, StorageConfig};
use locus_policy::PolicyConfig;
use locus_switch::{NodeEntry, SwitchConfig, SwitchServer};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use rand_distr::{Distribution, LogNormal, Zipf};
use serde::Serialize;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Settings of a demo run.
#[derive(Clone, Debug)]
pub struct DemoOptions {
    pub files: usize,
    pub nodes: usize,
    pub cache_bytes: u64,
    pub seek_ms: f64,
    pub transfer_mb_s: f64,
    pub clients: usize,
    pub warmup: Duration,
    pub measure: Duration,
    pub zipf_alpha: f64,
    pub policies: Vec<String>,
    pub seed: u64,
}

impl Default for DemoOptions {
    fn default() -> DemoOptions {
        DemoOptions {
            files: 2000,
            nodes: 2,
            cache_bytes: 4 << 20,
            seek_ms: 2.0,
            transfer_mb_s: 40.0,
            clients: 32,
            warmup: Duration::from_secs(3),
            measure: Duration::from_secs(6),
            zipf_alpha: 0.9,
            policies: ["wrr", "hash", "chash-bounded", "lard", "lard-r"].map(String::from).to_vec(),
            seed: 1,
        }
    }
}

/// One policy's result.
#[derive(Clone, Debug, Serialize)]
pub struct DemoRow {
    pub policy: String,
    pub rps: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub hit_ratio: f64,
    /// Share of requests each node served.
    pub shares: Vec<f64>,
    pub errors: u64,
    pub mismatches: u64,
}

/// The generated site: paths and contents.
struct Site {
    paths: Vec<String>,
    bodies: Vec<Arc<Vec<u8>>>,
    total_bytes: u64,
}

fn generate_site(root: &Path, files: usize, seed: u64) -> anyhow::Result<Site> {
    let mut rng = SmallRng::seed_from_u64(seed);
    // Sizes: lognormal around 6 KiB, clamped to [200 B, 256 KiB].
    let sizes = LogNormal::new((6.0f64 * 1024.0).ln(), 1.0).context("size distribution")?;
    let mut paths = Vec::with_capacity(files);
    let mut bodies = Vec::with_capacity(files);
    let mut total = 0u64;
    for i in 0..files {
        let size = (sizes.sample(&mut rng) as u64).clamp(200, 256 * 1024) as usize;
        let dir = format!("d{:02}", i % 32);
        std::fs::create_dir_all(root.join(&dir))?;
        let name = format!("{dir}/doc{i:05}.bin");
        let mut body = vec![0u8; size];
        rng.fill(&mut body[..]);
        std::fs::write(root.join(&name), &body)?;
        total += size as u64;
        paths.push(format!("/{name}"));
        bodies.push(Arc::new(body));
    }
    Ok(Site { paths, bodies, total_bytes: total })
}

struct ClientResult {
    latencies_us: Vec<u32>,
    errors: u64,
    mismatches: u64,
}

/// One closed-loop client: keep-alive GETs of Zipf-chosen documents until `stop`, checking
/// every body byte for byte; only requests finishing after `measure_from` are counted.
fn client_loop(
    addr: SocketAddr,
    site: &Site,
    zipf: Zipf<f64>,
    seed: u64,
    measure_from: Instant,
    stop: Instant,
) -> ClientResult {
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut out = ClientResult { latencies_us: Vec::new(), errors: 0, mismatches: 0 };
    let mut conn: Option<TcpStream> = None;
    let mut buf = Vec::with_capacity(512 * 1024);
    let mut body = Vec::with_capacity(512 * 1024);
    let mut head = ResponseHead::default();
    while Instant::now() < stop {
        let doc = (zipf.sample(&mut rng) as usize).clamp(1, site.paths.len()) - 1;
        let started = Instant::now();
        let result = (|| -> anyhow::Result<bool> {
            if conn.is_none() {
                let s = TcpStream::connect(addr)?;
                s.set_nodelay(true)?;
                s.set_read_timeout(Some(Duration::from_secs(10)))?;
                conn = Some(s);
                buf.clear();
            }
            let s = conn.as_mut().expect("connected");
            s.write_all(format!("GET {} HTTP/1.1\r\nHost: demo\r\n\r\n", site.paths[doc]).as_bytes())?;
            let mut chunk = [0u8; 65536];
            loop {
                if !buf.is_empty() && parse_response(&buf, 65536, false, &mut head)? {
                    break;
                }
                let n = s.read(&mut chunk)?;
                if n == 0 {
                    bail!("connection closed");
                }
                buf.extend_from_slice(&chunk[..n]);
            }
            let status = head.status;
            let mut tracker = BodyTracker::new(head.body);
            buf.drain(..head.head_len);
            body.clear();
            loop {
                let p = tracker.advance_with(&buf, |d| body.extend_from_slice(d))?;
                buf.drain(..p.consumed);
                if p.done {
                    break;
                }
                let n = s.read(&mut chunk)?;
                if n == 0 {
                    bail!("connection closed mid-body");
                }
                buf.extend_from_slice(&chunk[..n]);
            }
            Ok(status == 200 && body == *site.bodies[doc])
        })();
        let done = Instant::now();
        match result {
            Ok(ok) => {
                if done >= measure_from {
                    if !ok {
                        out.mismatches += 1;
                    }
                    out.latencies_us
                        .push(done.duration_since(started).as_micros().min(u32::MAX as u128) as u32);
                }
            }
            Err(_) => {
                conn = None;
                if done >= measure_from {
                    out.errors += 1;
                }
            }
        }
    }
    out
}

fn percentile_ms(sorted_us: &[u32], q: f64) -> f64 {
    if sorted_us.is_empty() {
        return 0.0;
    }
    let i = ((sorted_us.len() as f64 - 1.0) * q).round() as usize;
    sorted_us[i] as f64 / 1000.0
}

fn run_policy(opts: &DemoOptions, root: &Path, site: &Arc<Site>, policy: &str) -> anyhow::Result<DemoRow> {
    let mut nodes = Vec::new();
    for i in 0..opts.nodes {
        let config = NodeConfig {
            name: format!("node{}", i + 1),
            root: root.to_path_buf(),
            workers: 1,
            cache: CacheConfig {
                capacity: ByteSize(opts.cache_bytes),
                max_object: ByteSize(1 << 20),
                replacement: Replacement::Gds,
                ..CacheConfig::default()
            },
            storage: Some(StorageConfig {
                seek_ms: opts.seek_ms,
                transfer_mb_s: opts.transfer_mb_s,
                disks: 1,
            }),
            ..NodeConfig::default()
        };
        nodes.push(NodeServer::start(config).context("starting a node")?);
    }
    let switch_config = SwitchConfig {
        listen: "127.0.0.1:0".parse()?,
        workers: 1,
        policy: PolicyConfig::from_name(policy)?,
        nodes: nodes
            .iter()
            .enumerate()
            .map(|(i, n)| NodeEntry {
                name: Some(format!("node{}", i + 1)),
                addr: n.addr(),
                weight: 1,
                handoff: None,
            })
            .collect(),
        ..SwitchConfig::default()
    };
    let switch = SwitchServer::start(switch_config).context("starting the switch")?;
    let zipf = Zipf::new(site.paths.len() as f64, opts.zipf_alpha).context("popularity distribution")?;
    let start = Instant::now();
    let measure_from = start + opts.warmup;
    let stop = measure_from + opts.measure;
    let mut before = Vec::new();
    let handles: Vec<_> = (0..opts.clients)
        .map(|c| {
            let site = site.clone();
            let addr = switch.addr();
            let seed = opts.seed.wrapping_mul(1000).wrapping_add(c as u64);
            std::thread::spawn(move || client_loop(addr, &site, zipf, seed, measure_from, stop))
        })
        .collect();
    std::thread::sleep(measure_from.saturating_duration_since(Instant::now()));
    for n in &nodes {
        before.push(n.stats());
    }
    let results: Vec<ClientResult> = handles
        .into_iter()
        .map(|h| h.join().map_err(|_| anyhow::anyhow!("client thread panicked")))
        .collect::<Result<_, _>>()?;
    let after: Vec<_> = nodes.iter().map(|n| n.stats()).collect();
    let elapsed = opts.measure.as_secs_f64();
    switch.shutdown();
    for n in nodes {
        n.shutdown();
    }
    let mut lat: Vec<u32> = results.iter().flat_map(|r| r.latencies_us.iter().copied()).collect();
    lat.sort_unstable();
    let served: Vec<u64> = after.iter().zip(&before).map(|(a, b)| a.requests - b.requests).collect();
    let hits: u64 = after.iter().zip(&before).map(|(a, b)| a.hits - b.hits).sum();
    let misses: u64 =
        after.iter().zip(&before).map(|(a, b)| (a.misses + a.bypass) - (b.misses + b.bypass)).sum();
    let total_served: u64 = served.iter().sum::<u64>().max(1);
    Ok(DemoRow {
        policy: policy.to_string(),
        rps: lat.len() as f64 / elapsed,
        p50_ms: percentile_ms(&lat, 0.5),
        p99_ms: percentile_ms(&lat, 0.99),
        hit_ratio: hits as f64 / (hits + misses).max(1) as f64,
        shares: served.iter().map(|&s| s as f64 / total_served as f64).collect(),
        errors: results.iter().map(|r| r.errors).sum(),
        mismatches: results.iter().map(|r| r.mismatches).sum(),
    })
}

/// Run the demo; `progress` gets a line as each policy finishes.
pub fn run_demo(opts: &DemoOptions, mut progress: impl FnMut(&str)) -> anyhow::Result<Vec<DemoRow>> {
    let dir = locus_lab::ScratchFolder::new("demo-site")?;
    let site = Arc::new(generate_site(dir.path(), opts.files, opts.seed)?);
    progress(&format!(
        "site: {} files, {:.1} MiB; {} nodes with {:.1} MiB caches each; disk model {} ms + {} MB/s; {} clients; {} s warm-up + {} s measured per policy",
        site.paths.len(),
        site.total_bytes as f64 / (1 << 20) as f64,
        opts.nodes,
        opts.cache_bytes as f64 / (1 << 20) as f64,
        opts.seek_ms,
        opts.transfer_mb_s,
        opts.clients,
        opts.warmup.as_secs_f64(),
        opts.measure.as_secs_f64()
    ));
    let mut rows = Vec::new();
    for p in &opts.policies {
        let row = run_policy(opts, dir.path(), &site, p)?;
        progress(&format!("{p:<14} {:>8.0} req/s  hit ratio {:.3}", row.rps, row.hit_ratio));
        rows.push(row);
    }
    Ok(rows)
}

/// The result table in Markdown.
pub fn demo_table(rows: &[DemoRow]) -> String {
    let mut out = String::from(
        "| policy | req/s | p50 ms | p99 ms | hit ratio | load shares | errors | mismatches |\n|---|---|---|---|---|---|---|---|\n",
    );
    for r in rows {
        let shares: Vec<String> = r.shares.iter().map(|s| format!("{:.0}%", s * 100.0)).collect();
        out.push_str(&format!(
            "| {} | {:.0} | {:.2} | {:.2} | {:.3} | {} | {} | {} |\n",
            r.policy,
            r.rps,
            r.p50_ms,
            r.p99_ms,
            r.hit_ratio,
            shares.join(" / "),
            r.errors,
            r.mismatches
        ));
    }
    let rps = |p: &str| rows.iter().find(|r| r.policy == p).map(|r| r.rps);
    if let (Some(l), Some(w)) = (rps("lard-r"), rps("wrr"))
        && w > 0.0
    {
        out.push_str(&format!("\nLARD/R throughput is {:.2}× WRR's on this workload.\n", l / w));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn site_files_have_the_generated_contents() {
        let dir = tempfile::tempdir().unwrap();
        let site = generate_site(dir.path(), 20, 3).unwrap();
        assert_eq!(site.paths.len(), 20);
        for (p, b) in site.paths.iter().zip(&site.bodies) {
            assert_eq!(std::fs::read(dir.path().join(&p[1..])).unwrap(), **b);
        }
        let again = generate_site(tempfile::tempdir().unwrap().path(), 20, 3).unwrap();
        assert_eq!(again.total_bytes, site.total_bytes, "same seed, same site");
    }

    #[test]
    fn percentiles_pick_the_right_rank() {
        let v: Vec<u32> = (1..=100).map(|i| i * 1000).collect();
        assert_eq!(percentile_ms(&v, 0.5), 51.0);
        assert_eq!(percentile_ms(&v, 0.99), 99.0);
        assert_eq!(percentile_ms(&[], 0.5), 0.0);
    }

    #[test]
    fn a_short_demo_serves_every_byte_correctly_under_two_policies() {
        let opts = DemoOptions {
            files: 60,
            clients: 4,
            warmup: Duration::from_millis(200),
            measure: Duration::from_millis(600),
            seek_ms: 0.5,
            policies: vec!["wrr".into(), "lard-r".into()],
            ..DemoOptions::default()
        };
        let rows = run_demo(&opts, |_| {}).unwrap();
        assert_eq!(rows.len(), 2);
        for r in &rows {
            assert!(r.rps > 0.0, "{r:?}");
            assert_eq!((r.errors, r.mismatches), (0, 0), "{r:?}");
            assert!((r.shares.iter().sum::<f64>() - 1.0).abs() < 1e-6);
        }
    }
}
