//! `locus bench clubweb`: ClubWeb's comparison of a two-way user-space switch (`proxy`), a
//! two-way kernel switch (`splice`) and a one-way switch (`handoff`) at rising connection
//! rates — one request per connection, open loop, Poisson arrivals — in the lab with two
//! nodes: achieved rate, response-time percentiles and the switch's CPU per request.

use std::fmt::Write as _;
use std::time::Duration;

use anyhow::{Context, bail};
use locus_load::{DocumentSet, ErrorKind, LoadConfig, Popularity, Verification, Workload};
use serde::Serialize;

use crate::lab_rig::{
    Rig, RigArgs, failure_note, failures, file_content, json_lines, parse_size, size_label,
};

/// The modes compared, in their default order.
pub const MODES: [&str; 3] = ["proxy", "splice", "handoff"];

/// Flags of `locus bench clubweb`.
#[derive(clap::Args, Debug)]
pub struct ClubwebArgs {
    /// Print one JSON object per mode and rate.
    #[arg(long)]
    pub json: bool,
    /// Connection rates (new connections per second, one request each), comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "500,1000,2000,4000,8000")]
    pub rates: Vec<u32>,
    /// Size of every file: bytes, or with a binary suffix (`k`, `m`).
    #[arg(long, default_value = "16k", value_parser = parse_size)]
    pub size: u64,
    /// Modes to compare, comma-separated: proxy, splice, handoff.
    #[arg(long, value_delimiter = ',', default_value = "proxy,splice,handoff")]
    pub modes: Vec<String>,
    /// Switch policy.
    #[arg(long, default_value = "lard")]
    pub policy: String,
    /// Files in the site (requests pick one uniformly).
    #[arg(long, default_value_t = 100)]
    pub files: usize,
    #[command(flatten)]
    pub rig: RigArgs,
}

/// One mode at one rate.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ClubwebRow {
    /// Always `clubweb`.
    pub bench: String,
    pub mode: String,
    /// Offered connections (= requests) per second.
    pub rate: u32,
    /// Responses per second over the measured time.
    pub achieved_rps: f64,
    pub p50_ms: f64,
    pub p90_ms: f64,
    pub p99_ms: f64,
    /// CPU time of the switch process over the measured run ÷ responses.
    pub switch_cpu_us_per_req: f64,
    /// CPU time of both node processes over the measured run ÷ responses.
    pub node_cpu_us_per_req: f64,
    /// Busy time of the whole machine over the measured run ÷ responses: switch, nodes, load
    /// generator, kernel network work (softirqs, the tc forwarder) and any other job.
    pub host_cpu_us_per_req: f64,
    /// Failed requests (connect, reset, timeout, framing, 4xx, 5xx) plus responses with wrong
    /// bytes.
    pub errors: u64,
    /// Open loop: requests the load generator sent more than 200 µs after their scheduled
    /// time (their latency counts from the schedule); not errors of the cluster.
    pub late: u64,
}

/// The modes in the order they run at the `index`-th rate: rotated by one per rate.
pub fn rotated<T: Clone>(items: &[T], index: usize) -> Vec<T> {
    let n = items.len();
    (0..n).map(|i| items[(i + index) % n.max(1)].clone()).collect()
}

/// Connections the load generator may hold open at `rate`: 200 ms of arrivals, 64 to 4000.
pub fn open_connections(rate: u32) -> usize {
    ((f64::from(rate) * 0.2).ceil() as usize).clamp(64, 4000)
}

/// The Markdown table: a row per rate and mode (modes in `MODES` order), with the switch's
/// CPU per request beside the proxy mode's at the same rate.
pub fn markdown_table(rows: &[ClubwebRow]) -> String {
    let mut out = String::from(
        "| rate (conn/s) | mode | achieved (req/s) | p50 (ms) | p90 (ms) | p99 (ms) | switch CPU (µs/req) | CPU ÷ proxy | nodes CPU (µs/req) | host CPU (µs/req) | errors | late |\n\
         |---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    let mut rates: Vec<u32> = rows.iter().map(|r| r.rate).collect();
    rates.dedup();
    rates.sort_unstable();
    rates.dedup();
    let order = |m: &str| MODES.iter().position(|x| *x == m).unwrap_or(MODES.len());
    for rate in rates {
        let mut at: Vec<&ClubwebRow> = rows.iter().filter(|r| r.rate == rate).collect();
        at.sort_by_key(|r| order(&r.mode));
        let proxy = at.iter().find(|r| r.mode == "proxy").map(|r| r.switch_cpu_us_per_req);
        for r in at {
            let ratio = match proxy {
                Some(p) if p > 0.0 => format!("{:.2}", r.switch_cpu_us_per_req / p),
                _ => "—".to_string(),
            };
            let _ = writeln!(
                out,
                "| {} | {} | {:.0} | {:.2} | {:.2} | {:.2} | {:.1} | {ratio} | {:.1} | {:.0} | {} | {} |",
                r.rate,
                r.mode,
                r.achieved_rps,
                r.p50_ms,
                r.p90_ms,
                r.p99_ms,
                r.switch_cpu_us_per_req,
                r.node_cpu_us_per_req,
                r.host_cpu_us_per_req,
                r.errors,
                r.late
            );
        }
    }
    out
}

/// The output: JSON lines, or the Markdown table.
pub fn render(rows: &[ClubwebRow], json: bool) -> anyhow::Result<String> {
    if json { json_lines(rows) } else { Ok(markdown_table(rows)) }
}

/// Check the flags.
fn validate(a: &ClubwebArgs) -> anyhow::Result<()> {
    if a.rates.is_empty() || a.rates.contains(&0) {
        bail!("--rates must list positive connection rates");
    }
    for m in &a.modes {
        if !MODES.contains(&m.as_str()) {
            bail!("unknown mode {m:?} (proxy, splice, handoff)");
        }
    }
    if a.modes.is_empty() || a.files == 0 {
        bail!("--modes and --files must not be empty");
    }
    a.rig.validate()?;
    locus_policy::PolicyConfig::from_name(&a.policy)?;
    Ok(())
}

/// Run the sweep; `progress` gets a line per point.
pub fn run_clubweb(a: &ClubwebArgs, mut progress: impl FnMut(&str)) -> anyhow::Result<Vec<ClubwebRow>> {
    validate(a)?;
    let locus = a.rig.locus()?;
    let site = locus_rig::ScratchFolder::new("clubweb-site")?;
    for i in 0..a.files {
        let name = format!("f{i:04}");
        std::fs::write(site.path().join(&name), file_content(&name, a.size as usize))?;
    }
    let mut rig = Rig::new(&locus, site.path(), a.rig.keep.as_deref())?;
    let mut rows = Vec::new();
    for (i, &rate) in a.rates.iter().enumerate() {
        for mode in rotated(&a.modes, i) {
            let config = a.rig.cluster(&mode, &a.policy, None);
            rig.start(&config).with_context(|| format!("starting the {mode} cluster"))?;
            let load = LoadConfig {
                targets: vec![rig.url("/")?],
                workload: Workload::Synthetic {
                    popularity: Popularity::Uniform,
                    documents: DocumentSet::Docroot(site.path().to_path_buf()),
                },
                clients: open_connections(rate),
                rate: Some(f64::from(rate)),
                keepalive: false,
                duration: Some(Duration::from_secs_f64(a.rig.duration)),
                threads: a.rig.load_threads,
                timeout: Duration::from_secs(5),
                verification: Verification::Root(site.path().to_path_buf()),
                seed: 1 + i as u64,
                mismatch_samples: 3,
                ..LoadConfig::default()
            };
            let warmup = (a.rig.warmup > 0.0).then(|| LoadConfig {
                duration: Some(Duration::from_secs_f64(a.rig.warmup)),
                seed: 1000 + i as u64,
                ..load.clone()
            });
            // The switch's own CPU while idle, for reading the per-request figure.
            let idle_before = rig.cpu()?.switch;
            std::thread::sleep(Duration::from_secs(1));
            let idle_ms = (rig.cpu()?.switch.saturating_sub(idle_before)).as_secs_f64() * 1e3;
            let (report, cpu) =
                rig.measure(warmup.as_ref(), &load).with_context(|| format!("{mode} at {rate} conn/s"))?;
            let row = ClubwebRow {
                bench: "clubweb".into(),
                mode: mode.clone(),
                rate,
                achieved_rps: report.rps,
                p50_ms: report.p50_ms,
                p90_ms: report.p90_ms,
                p99_ms: report.p99_ms,
                switch_cpu_us_per_req: cpu.switch,
                node_cpu_us_per_req: cpu.nodes,
                host_cpu_us_per_req: cpu.host,
                errors: failures(&report),
                late: report.errors_by_kind.get(ErrorKind::Late),
            };
            progress(&format!(
                "clubweb {} {mode:<7} {rate:>5} conn/s: {:.0} req/s, p50 {:.2} ms, p99 {:.2} ms, switch {:.1} µs/req (idle {idle_ms:.0} ms/s), nodes {:.1} µs/req, host {:.0} µs/req, {} errors, {} late{}",
                size_label(a.size),
                row.achieved_rps,
                row.p50_ms,
                row.p99_ms,
                row.switch_cpu_us_per_req,
                row.node_cpu_us_per_req,
                row.host_cpu_us_per_req,
                row.errors,
                row.late,
                failure_note(&report)
            ));
            rows.push(row);
        }
    }
    drop(rig);
    Ok(rows)
}

/// `locus bench clubweb`.
pub fn run(a: ClubwebArgs) -> anyhow::Result<()> {
    let rows = run_clubweb(&a, |line| eprintln!("{line}"))?;
    print!("{}", render(&rows, a.json)?);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(mode: &str, rate: u32, cpu: f64) -> ClubwebRow {
        ClubwebRow {
            bench: "clubweb".into(),
            mode: mode.into(),
            rate,
            achieved_rps: f64::from(rate) - 1.0,
            p50_ms: 0.5,
            p90_ms: 0.9,
            p99_ms: 2.25,
            switch_cpu_us_per_req: cpu,
            node_cpu_us_per_req: 30.0,
            host_cpu_us_per_req: 400.0,
            errors: 0,
            late: 3,
        }
    }

    #[test]
    fn json_lines_carry_every_field_in_order() {
        let rows = [row("handoff", 500, 20.0), row("proxy", 500, 80.0)];
        let text = render(&rows, true).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2);
        assert_eq!(
            lines[0],
            r#"{"bench":"clubweb","mode":"handoff","rate":500,"achieved_rps":499.0,"p50_ms":0.5,"p90_ms":0.9,"p99_ms":2.25,"switch_cpu_us_per_req":20.0,"node_cpu_us_per_req":30.0,"host_cpu_us_per_req":400.0,"errors":0,"late":3}"#
        );
    }

    #[test]
    fn table_groups_by_rate_in_mode_order_with_the_cpu_ratio_to_proxy() {
        let rows = [
            row("handoff", 1000, 20.0),
            row("splice", 500, 40.0),
            row("proxy", 1000, 80.0),
            row("proxy", 500, 80.0),
        ];
        let table = markdown_table(&rows);
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(lines.len(), 2 + 4, "{table}");
        assert!(
            lines[2]
                .starts_with("| 500 | proxy | 499 | 0.50 | 0.90 | 2.25 | 80.0 | 1.00 | 30.0 | 400 | 0 | 3 |"),
            "{table}"
        );
        assert!(lines[3].starts_with("| 500 | splice |") && lines[3].contains("| 0.50 |"), "{table}");
        assert!(lines[4].starts_with("| 1000 | proxy |"), "{table}");
        assert!(
            lines[5].starts_with("| 1000 | handoff |") && lines[5].contains("| 20.0 | 0.25 |"),
            "{table}"
        );
    }

    #[test]
    fn modes_rotate_per_rate_and_connections_follow_the_rate() {
        let modes = ["proxy", "splice", "handoff"];
        assert_eq!(rotated(&modes, 0), modes);
        assert_eq!(rotated(&modes, 1), ["splice", "handoff", "proxy"]);
        assert_eq!(rotated(&modes, 5), ["handoff", "proxy", "splice"]);
        assert_eq!(
            (open_connections(100), open_connections(8000), open_connections(100_000)),
            (64, 1600, 4000)
        );
    }
}
