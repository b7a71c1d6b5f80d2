//! The cluster of `locus bench clubweb` and `locus bench rehandoff`: two Locus nodes running
//! the handoff agent and a switch in any mode on the virtual IP, in the lab's namespaces,
//! all made afresh per point (new namespaces too: no sockets left over from the point before);
//! load from the client host; process CPU of the switch and the nodes. Servers, namespaces
//! and scratch files go away on drop (also on failure).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use locus_load::{LoadConfig, LoadReport, TargetUrl, fetch_status, run_load};
use locus_rig::servers::{HTTP_PORT, NodeSpec, Server, SwitchSpec, locus_node, locus_switch};
use locus_rig::{LabNetwork, Net, ScratchFolder, get_header, process_tree_cpu};

/// What one point's cluster runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ClusterConfig {
    /// Switch mode: proxy, splice, handoff.
    pub mode: String,
    pub policy: String,
    /// Nodes' `--handoff-rehandoff` (handoff or forward); `None`: their default.
    pub rehandoff: Option<String>,
    pub switch_workers: u32,
    pub node_workers: u32,
}

/// The flags every benchmark on this rig takes: the timing of a point, the cluster's threads,
/// the load generator's, where logs are kept and which `locus` runs.
#[derive(clap::Args, Clone, Debug)]
pub struct RigArgs {
    /// Measured seconds per point.
    #[arg(long, default_value_t = 5.0)]
    pub duration: f64,
    /// Warm-up seconds per point (the same load, not counted).
    #[arg(long, default_value_t = 1.0)]
    pub warmup: f64,
    /// Switch worker threads.
    #[arg(long, default_value_t = 1)]
    pub switch_workers: u32,
    /// Worker threads per node.
    #[arg(long, default_value_t = 1)]
    pub node_workers: u32,
    /// Load generator threads (0: one per CPU).
    #[arg(long, default_value_t = 0)]
    pub load_threads: usize,
    /// Keep the server logs in a folder under this one.
    #[arg(long)]
    pub keep: Option<PathBuf>,
    /// The `locus` executable the nodes and switch run (default: this one).
    #[arg(long)]
    pub locus: Option<PathBuf>,
}

impl RigArgs {
    /// Check the timing flags.
    pub(crate) fn validate(&self) -> anyhow::Result<()> {
        let (d, w) = (self.duration, self.warmup);
        if !(d > 0.0 && d <= 600.0 && (0.0..=600.0).contains(&w)) {
            bail!("--duration must be in (0, 600] seconds and --warmup in [0, 600]");
        }
        Ok(())
    }

    /// The `locus` executable to start: the one given, or this one.
    pub(crate) fn locus(&self) -> anyhow::Result<PathBuf> {
        match &self.locus {
            Some(path) => Ok(path.clone()),
            None => std::env::current_exe().context("locating the locus executable"),
        }
    }

    /// A point's cluster: the switch in `mode` with `policy`, the nodes' re-handoff choice.
    pub(crate) fn cluster(&self, mode: &str, policy: &str, rehandoff: Option<&str>) -> ClusterConfig {
        ClusterConfig {
            mode: mode.to_string(),
            policy: policy.to_string(),
            rehandoff: rehandoff.map(str::to_string),
            switch_workers: self.switch_workers.max(1),
            node_workers: self.node_workers.max(1),
        }
    }
}

/// CPU time of the switch and of every node at one moment.
#[derive(Clone, Copy, Debug)]
pub(crate) struct CpuReading {
    pub switch: Duration,
    pub nodes: Duration,
    /// Busy time of every CPU of the machine (all processes, interrupts and softirqs: the
    /// load generator's and the kernel's network work too, and any other job's).
    pub host: Duration,
}

/// Busy time (all but idle and iowait) summed over the CPUs, from the `cpu` line of
/// /proc/stat, in clock ticks of 10 ms (USER_HZ = 100 on Linux).
pub(crate) fn host_busy_ticks(proc_stat: &str) -> Option<u64> {
    let line = proc_stat.lines().find(|l| l.starts_with("cpu "))?;
    let fields: Vec<u64> = line.split_whitespace().skip(1).map(|f| f.parse().ok()).collect::<Option<_>>()?;
    let total: u64 = fields.iter().take(8).sum();
    let idle = fields.get(3)? + fields.get(4)?;
    Some(total - idle)
}

/// (After `start`) a lab network with two nodes and a switch.
pub(crate) struct Rig {
    // Dropped in this order: the switch, the nodes, the namespaces, the scratch folder.
    switch: Option<Server>,
    nodes: Vec<Server>,
    net: Option<Net>,
    /// Where server logs and the handoff key go: in `scratch`, or in the folder to keep.
    files: PathBuf,
    _scratch: Option<ScratchFolder>,
    key: PathBuf,
    locus: PathBuf,
    root: PathBuf,
    /// Clusters started so far (names their log folders).
    starts: u32,
}

/// Fail with the reason when the lab cannot be built here (not root, no `ip`).
pub(crate) fn require_lab() -> anyhow::Result<()> {
    LabNetwork::available()
        .map_err(|why| anyhow::anyhow!("this benchmark runs in the lab's namespaces: {why}"))
}

impl Rig {
    /// A rig for two nodes serving `root`; `locus` is the executable to start; server logs go
    /// to `keep` (kept) if given, else to a scratch folder removed on drop.
    pub fn new(locus: &Path, root: &Path, keep: Option<&Path>) -> anyhow::Result<Rig> {
        require_lab()?;
        let (files, scratch) = match keep {
            Some(dir) => {
                std::fs::create_dir_all(dir)?;
                let kept = tempfile::Builder::new()
                    .prefix("locus-bench-rig")
                    .disable_cleanup(true)
                    .tempdir_in(dir)?;
                (kept.path().to_path_buf(), None)
            }
            None => {
                let scratch = ScratchFolder::new("bench-rig")?;
                (scratch.path().to_path_buf(), Some(scratch))
            }
        };
        let key = files.join("handoff.key");
        locus_rig::servers::write_handoff_key(&key)?;
        Ok(Rig {
            switch: None,
            nodes: Vec::new(),
            net: None,
            files,
            _scratch: scratch,
            key,
            locus: locus.to_path_buf(),
            root: root.to_path_buf(),
            starts: 0,
        })
    }

    /// Stop whatever runs and start fresh nodes (cold caches) and a switch as `config` says;
    /// in handoff mode, wait until the switch's control channels to both agents are up.
    pub fn start(&mut self, config: &ClusterConfig) -> anyhow::Result<()> {
        self.stop_switch();
        self.nodes.clear();
        self.net = None;
        self.starts += 1;
        let logs = self.files.join(format!("{:03}-{}", self.starts, config.mode));
        std::fs::create_dir_all(&logs)?;
        let net =
            self.net.insert(Net::Namespaces(LabNetwork::create(2).context("creating the lab network")?));
        for i in 1..=2 {
            let spec = NodeSpec {
                workers: config.node_workers,
                admin: true,
                handoff_key_file: Some(self.key.clone()),
                handoff_rehandoff: config.rehandoff.clone(),
                ..NodeSpec::new(&format!("node{i}"), &self.root)
            };
            self.nodes.push(locus_node(net, &self.locus, &logs, &spec)?);
        }
        let handoff = config.mode == "handoff";
        let spec = SwitchSpec {
            admin: true,
            handoff_key_file: handoff.then(|| self.key.clone()),
            handoff_agents: if handoff {
                self.nodes.iter().filter_map(|n| n.agent).collect()
            } else {
                Vec::new()
            },
            ..SwitchSpec::new(&config.policy, &config.mode, config.switch_workers, 9000)
        };
        let named: Vec<(String, SocketAddr)> = self.nodes.iter().map(|n| (n.name.clone(), n.addr)).collect();
        let listen = net.switch_addr(HTTP_PORT)?;
        let switch = locus_switch(net, &self.locus, &logs, listen, &named, &spec)?;
        self.switch = Some(switch);
        if handoff {
            let started = Instant::now();
            loop {
                let status = self.switch_status()?;
                if status["handoff"]["channels_up"].as_u64() == Some(2) {
                    break;
                }
                if started.elapsed() > Duration::from_secs(10) {
                    bail!("the switch's control channels did not come up: {}", status["handoff"]);
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        Ok(())
    }

    /// Stop the switch with SIGTERM (a handoff switch then takes its tc forwarder off the
    /// interface), waiting up to 3 s before the guard's SIGKILL.
    fn stop_switch(&mut self) {
        let Some(mut switch) = self.switch.take() else { return };
        // Our own child, not reaped yet: the pid is still its.
        let _ =
            std::process::Command::new("kill").args(["-TERM", &switch.process.pid().to_string()]).status();
        let started = Instant::now();
        while switch.process.exited().is_none() && started.elapsed() < Duration::from_secs(3) {
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    fn net(&self) -> anyhow::Result<&Net> {
        self.net.as_ref().context("no lab network made yet")
    }

    /// The URL clients use (the virtual IP).
    pub fn url(&self, path: &str) -> anyhow::Result<TargetUrl> {
        let addr = self.net()?.switch_addr(HTTP_PORT)?;
        Ok(format!("http://{addr}{path}").parse()?)
    }

    fn running_switch(&self) -> anyhow::Result<&Server> {
        self.switch.as_ref().context("no switch started")
    }

    /// The switch's `/locus/status`.
    pub fn switch_status(&self) -> anyhow::Result<serde_json::Value> {
        let admin = self.running_switch()?.admin.context("switch without admin listener")?;
        self.admin_status(admin)
    }

    /// Every node's `/locus/status`.
    pub fn node_statuses(&self) -> anyhow::Result<Vec<serde_json::Value>> {
        self.nodes
            .iter()
            .map(|n| self.admin_status(n.admin.context("node without admin listener")?))
            .collect()
    }

    fn admin_status(&self, addr: SocketAddr) -> anyhow::Result<serde_json::Value> {
        let url: TargetUrl = format!("http://{addr}/").parse()?;
        self.net()?.on_host("client", || {
            fetch_status(&url, Duration::from_secs(5)).map_err(|e| anyhow::anyhow!("admin status: {e}"))
        })
    }

    /// CPU time used so far by the switch and by the nodes together.
    pub fn cpu(&self) -> anyhow::Result<CpuReading> {
        let switch = process_tree_cpu(self.running_switch()?.process.pid())?;
        let mut nodes = Duration::ZERO;
        for n in &self.nodes {
            nodes += process_tree_cpu(n.process.pid())?;
        }
        let stat = std::fs::read_to_string("/proc/stat")?;
        let ticks = host_busy_ticks(&stat).context("/proc/stat without a cpu line")?;
        Ok(CpuReading { switch, nodes, host: Duration::from_millis(ticks * 10) })
    }

    /// Fail if the switch or a node has exited.
    pub fn check_running(&mut self) -> anyhow::Result<()> {
        if let Some(s) = self.switch.as_mut() {
            s.check_running()?;
        }
        for n in &mut self.nodes {
            n.check_running()?;
        }
        Ok(())
    }

    /// Run `config` on the client host.
    pub fn load(&self, config: &LoadConfig) -> anyhow::Result<LoadReport> {
        self.net()?.on_host("client", || run_load(config).map_err(anyhow::Error::from))
    }

    /// A warm-up run (its numbers dropped), then the measured run between two CPU readings.
    pub fn measure(
        &mut self,
        warmup: Option<&LoadConfig>,
        config: &LoadConfig,
    ) -> anyhow::Result<(LoadReport, CpuPerRequest)> {
        if let Some(w) = warmup {
            self.load(w).context("warm-up")?;
        }
        let before = self.cpu()?;
        let report = self.load(config)?;
        let after = self.cpu()?;
        self.check_running()?;
        let cpu = CpuPerRequest::between(&before, &after, report.requests);
        Ok((report, cpu))
    }

    /// Which node (`X-Locus-Node`) serves `GET path` on a fresh connection to the switch.
    pub fn node_of(&self, path: &str) -> anyhow::Result<String> {
        let addr = self.net()?.switch_addr(HTTP_PORT)?;
        let (status, node) = self.net()?.on_host("client", || get_header(addr, path, "x-locus-node"))?;
        if status != 200 {
            bail!("GET {path}: status {status}");
        }
        if node.is_empty() {
            bail!("GET {path}: no X-Locus-Node header");
        }
        Ok(node)
    }
}

/// Deterministic printable content of `len` bytes for a file named `name`.
pub(crate) fn file_content(name: &str, len: usize) -> Vec<u8> {
    let seed = name.bytes().fold(7u32, |h, b| h.wrapping_mul(31).wrapping_add(u32::from(b)));
    (0..len).map(|i| b'a' + ((i as u32).wrapping_mul(7).wrapping_add(seed) % 26) as u8).collect()
}

/// Microseconds of CPU per request between two readings (0 without requests).
fn us_per_request(before: Duration, after: Duration, requests: u64) -> f64 {
    locus_rig::cpu_us_per_request(before, after, requests).unwrap_or(0.0)
}

/// CPU per request of one measured point, in µs (0 without requests).
#[derive(Clone, Copy, Debug)]
pub(crate) struct CpuPerRequest {
    pub switch: f64,
    pub nodes: f64,
    pub host: f64,
}

impl CpuPerRequest {
    /// The CPU used between two readings over the requests served meanwhile.
    pub fn between(before: &CpuReading, after: &CpuReading, requests: u64) -> CpuPerRequest {
        CpuPerRequest {
            switch: us_per_request(before.switch, after.switch, requests),
            nodes: us_per_request(before.nodes, after.nodes, requests),
            host: us_per_request(before.host, after.host, requests),
        }
    }
}

/// Requests of a report that failed or came back wrong (open-loop lateness left out).
pub(crate) fn failures(report: &LoadReport) -> u64 {
    report.errors - report.errors_by_kind.get(locus_load::ErrorKind::Late) + report.mismatches
}

/// The end of a point's progress line: its errors by kind when any request failed.
pub(crate) fn failure_note(report: &LoadReport) -> String {
    if failures(report) > 0 { format!(" {:?}", report.errors_by_kind) } else { String::new() }
}

/// Rows as JSON lines, one object a row.
pub(crate) fn json_lines<R: serde::Serialize>(rows: &[R]) -> anyhow::Result<String> {
    let mut out = String::new();
    for r in rows {
        out.push_str(&serde_json::to_string(r)?);
        out.push('\n');
    }
    Ok(out)
}

/// Sizes as written on the command line: bytes, or with a `k` / `m` suffix (binary).
pub(crate) fn parse_size(text: &str) -> Result<u64, String> {
    let t = text.trim().to_ascii_lowercase();
    let (digits, unit) = match t.strip_suffix('k') {
        Some(d) => (d, 1024),
        None => match t.strip_suffix('m') {
            Some(d) => (d, 1 << 20),
            None => (t.as_str(), 1),
        },
    };
    let n: u64 = digits.parse().map_err(|_| format!("size {text:?}: a number with an optional k or m"))?;
    if n == 0 {
        return Err(format!("size {text:?} must be positive"));
    }
    n.checked_mul(unit).ok_or_else(|| format!("size {text:?} is too large"))
}

/// A size for people: `16k`, `1m`, or bytes.
pub(crate) fn size_label(bytes: u64) -> String {
    if bytes >= 1 << 20 && bytes.is_multiple_of(1 << 20) {
        format!("{}m", bytes >> 20)
    } else if bytes >= 1024 && bytes.is_multiple_of(1024) {
        format!("{}k", bytes >> 10)
    } else {
        bytes.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_with_binary_suffixes_and_print_back() {
        assert_eq!(parse_size("16k"), Ok(16 * 1024));
        assert_eq!(parse_size("1M"), Ok(1 << 20));
        assert_eq!(parse_size("100"), Ok(100));
        assert!(parse_size("0").is_err() && parse_size("x").is_err());
        assert_eq!(
            (size_label(65536), size_label(1 << 20), size_label(100)),
            ("64k".into(), "1m".into(), "100".into())
        );
    }

    #[test]
    fn host_busy_time_leaves_idle_and_iowait_out() {
        // user nice system idle iowait irq softirq steal guest guest_nice
        let stat = "cpu  100 5 50 1000 20 3 7 1 9 9\ncpu0 50 2 25 500 10 1 3 0 0 0\n";
        assert_eq!(host_busy_ticks(stat), Some(100 + 5 + 50 + 3 + 7 + 1));
        assert_eq!(host_busy_ticks("intr 1 2\n"), None);
    }

    #[test]
    fn content_is_deterministic_and_printable() {
        let a = file_content("f1", 100);
        assert_eq!(a, file_content("f1", 100));
        assert!(a.iter().all(u8::is_ascii_lowercase));
        assert_ne!(a, file_content("f2", 100));
    }
}
