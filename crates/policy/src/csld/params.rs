//! `CsldParams`: every parameter of CSLD's sniffer and load estimator, with the defaults of
//! the design (the CSLD paper's cost table, 200 ms period, 50 ms slots, 64 MB node cache).

use serde::{Deserialize, Serialize};

/// CSLD's parameters. Costs are the means of the paper's cost table, in ns.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CsldParams {
    /// Estimation period P (weights are recomputed every P), ms.
    pub period_ms: u64,
    /// Length of one cost-board slot, ms.
    pub slot_ms: u64,
    /// Slots per cost board (the horizon is `slots × slot_ms`).
    pub slots: u32,
    /// A node's document cache, bytes (predicts misses).
    pub cache_bytes: u64,
    /// How far back the disk-read history reaches, s (older references count as misses).
    pub history_secs: u64,
    /// Periods the sliding statistics (miss ratio, mean costs) cover.
    pub stats_periods: u32,
    /// A node's socket send buffer, bytes: larger responses are split by slow start.
    pub send_buffer: u64,
    /// Segment size for the slow-start split, bytes.
    pub mss: u64,
    /// Initial congestion window, segments.
    pub initial_cwnd: u64,
    /// Miss-ratio thresholds miss_l < miss_m < miss_h (fractions).
    pub miss_l: f64,
    pub miss_m: f64,
    pub miss_h: f64,
    /// CPU-load thresholds load_l < load_m < load_h, as fractions of P per node.
    pub load_l: f64,
    pub load_m: f64,
    pub load_h: f64,
    /// Connection setup (and, separately, teardown) CPU cost, ns.
    pub conn_ns: u64,
    /// Basic request-processing CPU cost, ns.
    pub basic_ns: u64,
    /// Extra CPU cost of an IMS or invalid-request reply, ns.
    pub reply_ns: u64,
    /// CPU cost per 512 bytes sent, ns.
    pub send_ns_per_512: u64,
    /// Disk cost of a miss: fixed part, ns.
    pub disk_ns: u64,
    /// Disk cost of a miss per 4 KiB block, ns.
    pub disk_ns_per_block: u64,
    /// Size assumed for a document whose size nothing states, bytes.
    pub default_size: u64,
    /// Most documents whose per-node reference times the sniffer keeps (least recently
    /// seen go first), so no client can grow its tables without bound.
    pub max_files: usize,
}

impl Default for CsldParams {
    fn default() -> CsldParams {
        CsldParams {
            period_ms: 200,
            slot_ms: 50,
            slots: 200,
            cache_bytes: 64 << 20,
            history_secs: 6 * 3600,
            stats_periods: 50,
            send_buffer: 16 << 10,
            mss: 1460,
            initial_cwnd: 2,
            miss_l: 0.02,
            miss_m: 0.05,
            miss_h: 0.15,
            load_l: 0.3,
            load_m: 0.6,
            load_h: 0.9,
            conn_ns: 132_000,
            basic_ns: 213_000,
            reply_ns: 30_000,
            send_ns_per_512: 37_000,
            disk_ns: 15_600_000,
            disk_ns_per_block: 300_000,
            default_size: 8 << 10,
            max_files: 1_000_000,
        }
    }
}
