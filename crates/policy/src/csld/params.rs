//! `CsldParams`: every parameter of CSLD's sniffer and load estimator, with the defaults of
//! the design (the CSLD paper's cost table, 200 ms period, 50 ms slots, 64 MB node cache).

use serde::{Deserialize, Serialize};

/// How CSLD picks a node for a request it sees.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CsldPick {
    /// The paper's: smooth WRR over the weights of the latest period.
    Wrr,
    /// Request by request, the node whose requests in flight would share the least work
    /// with this one by the sniffer's estimate (Σ min(c_i, x)); the period's weights split
    /// an idle cluster. Needs the request's end, which the two-way modes see.
    #[default]
    SharedWork,
}

/// CSLD's parameters. Costs are the means of the paper's cost table, in ns.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CsldParams {
    /// How a request's node is picked (`wrr`: the paper's; `shared-work`: by the work in
    /// flight, the default).
    pub pick: CsldPick,
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
            pick: CsldPick::SharedWork,
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

/// Longest period, slot or history accepted (a day), so time arithmetic cannot overflow.
const MAX_SPAN_MS: u64 = 24 * 3600 * 1000;
/// Most slots per board accepted.
const MAX_SLOTS: u32 = 1 << 20;

impl CsldParams {
    /// Why these parameters cannot run, naming the offending key, if they cannot.
    pub fn check(&self) -> Result<(), String> {
        let positive = [
            ("period_ms", self.period_ms),
            ("slot_ms", self.slot_ms),
            ("slots", self.slots as u64),
            ("history_secs", self.history_secs),
            ("stats_periods", self.stats_periods as u64),
            ("mss", self.mss),
            ("initial_cwnd", self.initial_cwnd),
            ("max_files", self.max_files as u64),
        ];
        if let Some((key, _)) = positive.iter().find(|(_, v)| *v == 0) {
            return Err(format!("{key} must be at least 1"));
        }
        for (key, ms) in
            [("period_ms", self.period_ms), ("history_secs", self.history_secs.saturating_mul(1000))]
        {
            if ms > MAX_SPAN_MS {
                return Err(format!("{key} must be at most a day"));
            }
        }
        if self.slots > MAX_SLOTS {
            return Err(format!("slots ({}) must be at most {MAX_SLOTS}", self.slots));
        }
        if self.slot_ms > self.period_ms || !self.period_ms.is_multiple_of(self.slot_ms) {
            return Err(format!(
                "slot_ms ({}) must divide period_ms ({}): a period is a whole number of slots",
                self.slot_ms, self.period_ms
            ));
        }
        if (self.slots as u64) * self.slot_ms < 2 * self.period_ms {
            return Err(format!(
                "slots × slot_ms ({} × {} ms) is a horizon shorter than two periods of {} ms",
                self.slots, self.slot_ms, self.period_ms
            ));
        }
        check_ordered("miss", [self.miss_l, self.miss_m, self.miss_h])?;
        check_ordered("load", [self.load_l, self.load_m, self.load_h])
    }
}

/// `{prefix}_l < {prefix}_m < {prefix}_h`, each a fraction in [0, 1].
fn check_ordered(prefix: &str, [l, m, h]: [f64; 3]) -> Result<(), String> {
    for (suffix, v) in [("l", l), ("m", m), ("h", h)] {
        if !(0.0..=1.0).contains(&v) {
            return Err(format!("{prefix}_{suffix} ({v}) must be a fraction from 0 to 1"));
        }
    }
    if !(l < m && m < h) {
        return Err(format!("{prefix}_l < {prefix}_m < {prefix}_h must hold (got {l}, {m}, {h})"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn check_refuses_nonsense_naming_the_key() {
        assert_eq!(CsldParams::default().check(), Ok(()));
        let bad = |f: fn(&mut CsldParams), key: &str| {
            let mut p = CsldParams::default();
            f(&mut p);
            let e = p.check().unwrap_err();
            assert!(e.contains(key), "{e:?} does not name {key}");
        };
        bad(|p| p.period_ms = 0, "period_ms");
        bad(|p| p.slot_ms = 0, "slot_ms");
        bad(|p| p.slots = 0, "slots");
        bad(|p| p.slot_ms = 300, "slot_ms");
        bad(|p| p.slot_ms = 30, "slot_ms");
        bad(|p| p.slots = 7, "horizon");
        bad(|p| p.miss_m = 0.01, "miss_l < miss_m");
        bad(|p| p.load_h = 1.5, "load_h");
        bad(|p| p.miss_l = f64::NAN, "miss_l");
        bad(|p| p.mss = 0, "mss");
        bad(|p| p.max_files = 0, "max_files");
        bad(|p| p.initial_cwnd = 0, "initial_cwnd");
        bad(|p| p.stats_periods = 0, "stats_periods");
        bad(|p| p.history_secs = 0, "history_secs");
        bad(|p| p.period_ms = MAX_SPAN_MS + 50, "period_ms");
        bad(|p| p.slots = MAX_SLOTS + 1, "slots");
        bad(|p| p.history_secs = u64::MAX, "history_secs");
    }
}
