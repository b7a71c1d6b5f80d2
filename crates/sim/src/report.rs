//! `SimReport`: the outputs of one simulation point — throughput, cache miss ratio, idle
//! time, mean and p99 delay, per-node load — as written to `results.json` (one object per
//! point) and `results.csv`.

use serde::{Deserialize, Serialize};

/// What one node did during the measured period.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NodeReport {
    pub node: u32,
    /// Requests that reached the node.
    pub requests: u64,
    /// Static requests served from the node's memory / all static requests it served.
    pub hit_ratio: f64,
    /// Time-averaged load (active connections).
    pub mean_load: f64,
    pub max_load: u32,
    /// Share of time the load was below the idle threshold.
    pub idle_ratio: f64,
    pub cpu_utilization: f64,
    /// Mean utilisation of the node's disks.
    pub disk_utilization: f64,
    pub disk_reads: u64,
    /// Documents sent from this node's memory to others (WRR/GMS, cooperative caching).
    pub remote_sends: u64,
    /// The node's link over the measured period (absent without a link model).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link: Option<LinkUse>,
}

/// A node's full-duplex link over the measured period.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LinkUse {
    /// Share of the time TX (responses, cooperative sends) was busy.
    pub tx_utilization: f64,
    /// Share of the time RX (file-server reads, cooperative fetches) was busy.
    pub rx_utilization: f64,
    pub tx_bytes: u64,
    pub rx_bytes: u64,
}

/// The shared file server over the measured period.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct FileServerUse {
    pub reads: u64,
    /// Share of the time its TX link was busy.
    pub tx_utilization: f64,
    /// Share of the time its read service was busy.
    pub service_utilization: f64,
    pub tx_bytes: u64,
}

/// The result of one simulation point. The first six fields are the stable
/// machine-readable contract of `results.json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SimReport {
    /// Policy configuration name (`wrr`, `hash`, `lb-gc`, `lard`, `lard-r`, `wrr-gms`, ...).
    pub policy: String,
    /// Back-end nodes.
    pub nodes: u32,
    /// Throughput: requests completed / simulated time (requests per second).
    pub rps: f64,
    /// Static requests that needed a disk read (their own or a shared one) / static requests.
    pub miss_ratio: f64,
    /// Share of time a node's load was below the idle threshold, averaged over nodes.
    pub idle_ratio: f64,
    /// Mean time from a request's issue (arrival at the front-end) to its completion.
    pub mean_delay_ms: f64,
    /// The paper's name for the policy (`LARD/R`, `LB/GC`, ...).
    pub label: String,
    /// 99th percentile of the delay (nearest rank).
    pub p99_delay_ms: f64,
    /// Static requests served from the node's own memory / static requests.
    pub hit_ratio: f64,
    /// Static requests served from another node's memory / static requests (WRR/GMS).
    pub remote_hit_ratio: f64,
    /// Requests in the trace.
    pub requests: u64,
    /// Requests measured (after warm-up).
    pub measured_requests: u64,
    /// Simulated seconds of the measured period.
    pub sim_seconds: f64,
    pub disk_reads: u64,
    /// The idle threshold (load below it counts as idle).
    pub idle_threshold: f64,
    /// Admission limit when all nodes are up, if any.
    pub admission_limit: Option<usize>,
    /// Most requests in the cluster at once.
    pub max_in_flight: usize,
    /// Closed-loop clients (absent for open loop).
    pub clients: Option<u32>,
    pub preset: String,
    pub cache_bytes: u64,
    pub replacement: String,
    pub cpu_speed: f64,
    pub memory_scale: f64,
    pub disks: u32,
    pub seed: u64,
    pub per_node: Vec<NodeReport>,
    /// What the process-driven back end measured (absent with the FIFO back end).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<ServerMetrics>,
    /// The shared file server, if the nodes read from one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file_server: Option<FileServerUse>,
}

/// Outputs of the process-driven back end over the measured requests.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ServerMetrics {
    /// Server latency (request arrival at the node → first response byte), mean, seconds.
    pub latency_mean_s: f64,
    /// 90th percentile of the server latency (nearest rank), seconds.
    pub latency_p90_s: f64,
    /// Requests whose server latency was measured.
    pub served: u64,
    /// SYNs sent to nodes (first attempts and retries).
    pub syns: u64,
    /// SYNs dropped because the node's backlog was full.
    pub rejected_syns: u64,
    /// `rejected_syns / syns`.
    pub rejection_ratio: f64,
    /// Retries sent after a dropped SYN.
    pub retries: u64,
    /// Requests given up after their last retry was dropped.
    pub failed_requests: u64,
    /// CPU utilisation averaged over nodes (measured period).
    pub cpu_utilization: f64,
    /// Highest and lowest per-node CPU utilisation.
    pub cpu_utilization_max: f64,
    pub cpu_utilization_min: f64,
    /// Most server processes any node had.
    pub max_processes: u32,
    /// Processes forked over the run, all nodes.
    pub forks: u64,
    /// Share of the static requests of the measured period the policy predicted to miss
    /// (CSLD), beside the measured `SimReport::miss_ratio`; absent for other policies.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub predicted_miss_ratio: Option<f64>,
}

impl SimReport {
    /// CSV header matching `csv_row`.
    pub const CSV_HEADER: &'static str = "policy,label,nodes,rps,miss_ratio,idle_ratio,mean_delay_ms,p99_delay_ms,\
hit_ratio,remote_hit_ratio,requests,measured_requests,sim_seconds,disk_reads,max_in_flight,cache_bytes,\
cpu_speed,memory_scale,disks,seed";

    /// One CSV line (no newline).
    pub fn csv_row(&self) -> String {
        format!(
            "{},{},{},{:.3},{:.6},{:.6},{:.3},{:.3},{:.6},{:.6},{},{},{:.6},{},{},{},{},{},{},{}",
            self.policy,
            self.label,
            self.nodes,
            self.rps,
            self.miss_ratio,
            self.idle_ratio,
            self.mean_delay_ms,
            self.p99_delay_ms,
            self.hit_ratio,
            self.remote_hit_ratio,
            self.requests,
            self.measured_requests,
            self.sim_seconds,
            self.disk_reads,
            self.max_in_flight,
            self.cache_bytes,
            self.cpu_speed,
            self.memory_scale,
            self.disks,
            self.seed
        )
    }

    /// A one-line human summary.
    pub fn summary(&self) -> String {
        format!(
            "{:<8} n={:<3} {:>9.1} req/s  miss {:>6.2}%  idle {:>6.2}%  delay mean {:>8.2} ms p99 {:>8.2} ms",
            self.label,
            self.nodes,
            self.rps,
            self.miss_ratio * 100.0,
            self.idle_ratio * 100.0,
            self.mean_delay_ms,
            self.p99_delay_ms
        )
    }
}

/// `reports` as CSV text with a header.
pub fn to_csv(reports: &[SimReport]) -> String {
    let mut out = String::from(SimReport::CSV_HEADER);
    out.push('\n');
    for r in reports {
        out.push_str(&r.csv_row());
        out.push('\n');
    }
    out
}
