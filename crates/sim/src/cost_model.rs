//! `CostModel`: what each step of a request costs a back-end node (CPU for connection
//! setup, processing, transmit and teardown; disk latency, transfer and extra seeks; dynamic
//! classes; an optional client RTT; the remote-memory cost of WRR/GMS), with the LARD (1998)
//! and CSLD (2003) presets and CPU-speed scaling.

use rand::Rng;
use rand_distr::{Distribution, Normal};
use serde::{Deserialize, Serialize};

/// Bytes in the unit of transmit cost.
pub const TRANSMIT_UNIT: u64 = 512;
/// Bytes in the unit of disk transfer cost.
pub const DISK_BLOCK: u64 = 4096;

/// Cost of one dynamic cost class: CPU normal with `mean_ns` and a standard deviation of
/// `stddev_ratio × mean`, clamped at 0; and, if `disk_ns > 0`, one uncached FIFO disk read
/// of `disk_ns` (a disk-bound class; only the process-driven back end charges it).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClassCost {
    pub class: u16,
    pub mean_ns: u64,
    #[serde(default = "default_stddev_ratio")]
    pub stddev_ratio: f64,
    #[serde(default)]
    pub disk_ns: u64,
}

fn default_stddev_ratio() -> f64 {
    0.2
}

/// Round-trip time between client and cluster, paid once per connection between the
/// front-end's decision and the request reaching the node (the connection counts as load
/// meanwhile, as it does in the CSLD simulator).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, Default)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
pub enum RttModel {
    /// No RTT (the LARD simulator's infinitely fast network).
    #[default]
    None,
    /// The same RTT for every connection.
    Const { ns: u64 },
    /// Pareto-distributed RTTs with this mean and shape (> 1); CSLD used a mean of 150 ms.
    Pareto { mean_ns: u64, shape: f64 },
}

impl RttModel {
    /// One RTT in ns.
    pub fn sample<R: Rng + ?Sized>(&self, rng: &mut R) -> u64 {
        match *self {
            RttModel::None => 0,
            RttModel::Const { ns } => ns,
            RttModel::Pareto { mean_ns, shape } => {
                // Pareto(scale, shape) has mean scale·shape/(shape−1); inverse-CDF draw.
                let scale = mean_ns as f64 * (shape - 1.0) / shape;
                let u: f64 = rng.random::<f64>();
                let x = scale / (1.0 - u).max(1e-12).powf(1.0 / shape);
                x.min(1e15) as u64
            }
        }
    }

    /// Whether this model ever adds time.
    pub fn is_none(&self) -> bool {
        matches!(self, RttModel::None) || matches!(self, RttModel::Const { ns: 0 })
    }
}

/// What serving a document from another node's memory costs under WRR/GMS. The global cache
/// directory and global replacement cost nothing (the LARD paper's "generous" assumption);
/// the holder spends `sender_cpu_share` × the transmit cost of the document on its CPU, and
/// the data arrives `latency_ns` later (the network has infinite capacity).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GmsCost {
    pub latency_ns: u64,
    pub sender_cpu_share: f64,
}

impl Default for GmsCost {
    fn default() -> Self {
        GmsCost { latency_ns: 100_000, sender_cpu_share: 0.5 }
    }
}

/// Costs of the steps of a request on a back-end node, in ns. The steps of one request run
/// in sequence; CPU and disk work of different requests overlap.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CostModel {
    /// CPU to establish a connection.
    pub conn_setup_ns: u64,
    /// CPU to tear a connection down.
    pub conn_teardown_ns: u64,
    /// CPU for the basic per-request processing (parse, log); 0 in the LARD model.
    pub request_cpu_ns: u64,
    /// CPU per 512 bytes (or part) transmitted.
    pub transmit_per_512_ns: u64,
    /// Disk latency (seeks and rotation) per file read.
    pub disk_latency_ns: u64,
    /// Disk transfer per 4 KB (or part).
    pub disk_per_4k_ns: u64,
    /// Files longer than this pay `disk_extra_seek_ns` per further block of this size (or
    /// part); 0 turns extra seeks off. LARD: 44 KB, the mean transfer between seeks.
    pub disk_seek_block_bytes: u64,
    /// Extra seek and rotation per further block.
    pub disk_extra_seek_ns: u64,
    /// Fixed CPU of a dynamic request besides its class cost (CSLD: a process fork).
    pub dynamic_fixed_ns: u64,
    /// CPU of the short reply to an If-Modified-Since (304) or invalid (404) request, on top
    /// of the basic processing (CSLD: 30 µs; only the process-driven back end uses it).
    #[serde(default = "default_reply_ns")]
    pub reply_ns: u64,
    /// CPU cost of listed dynamic classes.
    #[serde(default)]
    pub classes: Vec<ClassCost>,
    /// An unlisted class k costs k × this on average (CSLD: 10 ms per class step).
    pub class_unit_ns: u64,
    /// Relative standard deviation of unlisted class costs.
    pub class_stddev_ratio: f64,
    /// Client round-trip time per connection.
    #[serde(default)]
    pub rtt: RttModel,
    /// CPU the front-end spends per request (a FIFO server in front of the cluster); the
    /// LARD model's front-end costs nothing.
    pub frontend_ns: u64,
    /// WRR/GMS remote-memory cost.
    #[serde(default)]
    pub gms: GmsCost,
}

fn default_reply_ns() -> u64 {
    30_000
}

fn units(size: u64, unit: u64) -> u64 {
    size.div_ceil(unit)
}

impl CostModel {
    /// The LARD paper's costs (300 MHz Pentium II, FreeBSD, "aggressive" server): 145 µs
    /// connection setup and teardown each, 40 µs per 512 bytes, 28 ms per disk read plus
    /// 410 µs per 4 KB and 14 ms per further 44 KB; a front-end that costs nothing.
    pub fn lard98() -> CostModel {
        CostModel {
            conn_setup_ns: 145_000,
            conn_teardown_ns: 145_000,
            request_cpu_ns: 0,
            transmit_per_512_ns: 40_000,
            disk_latency_ns: 28_000_000,
            disk_per_4k_ns: 410_000,
            disk_seek_block_bytes: 44 * 1024,
            disk_extra_seek_ns: 14_000_000,
            dynamic_fixed_ns: 0,
            reply_ns: default_reply_ns(),
            classes: Vec::new(),
            class_unit_ns: 10_000_000,
            class_stddev_ratio: 0.2,
            rtt: RttModel::None,
            frontend_ns: 0,
            gms: GmsCost::default(),
        }
    }

    /// The CSLD paper's costs (700 MHz Pentium III, Apache 1.3): 132 µs setup and teardown,
    /// 213 µs basic processing, 37 µs per 512 bytes, 15.6 ms seek and rotation, 300 µs per
    /// 4 KB (no extra-seek rule), 1.4 ms fork for dynamic requests, class k ≈ k × 10 ms with
    /// σ = 20%, Pareto RTTs with a mean of 150 ms (shape 1.5: the paper gives no shape).
    pub fn csld03() -> CostModel {
        CostModel {
            conn_setup_ns: 132_000,
            conn_teardown_ns: 132_000,
            request_cpu_ns: 213_000,
            transmit_per_512_ns: 37_000,
            disk_latency_ns: 15_600_000,
            disk_per_4k_ns: 300_000,
            disk_seek_block_bytes: 0,
            disk_extra_seek_ns: 0,
            dynamic_fixed_ns: 1_400_000,
            reply_ns: default_reply_ns(),
            classes: Vec::new(),
            class_unit_ns: 10_000_000,
            class_stddev_ratio: 0.2,
            rtt: RttModel::Pareto { mean_ns: 150_000_000, shape: 1.5 },
            frontend_ns: 0,
            gms: GmsCost::default(),
        }
    }

    /// The same model on a CPU `speed` times faster: every CPU cost divided by `speed`
    /// (disk, RTT and network unchanged). The LARD paper's sensitivity runs use 2, 3 and 4.
    pub fn with_cpu_speed(&self, speed: f64) -> CostModel {
        let s = |ns: u64| (ns as f64 / speed).round() as u64;
        let mut c = self.clone();
        c.conn_setup_ns = s(c.conn_setup_ns);
        c.conn_teardown_ns = s(c.conn_teardown_ns);
        c.request_cpu_ns = s(c.request_cpu_ns);
        c.transmit_per_512_ns = s(c.transmit_per_512_ns);
        c.dynamic_fixed_ns = s(c.dynamic_fixed_ns);
        c.reply_ns = s(c.reply_ns);
        c.class_unit_ns = s(c.class_unit_ns);
        for k in &mut c.classes {
            k.mean_ns = s(k.mean_ns);
        }
        c
    }

    /// Check that the model can be used.
    pub fn validate(&self) -> Result<(), String> {
        if !(self.class_stddev_ratio.is_finite() && self.class_stddev_ratio >= 0.0) {
            return Err(format!("class_stddev_ratio must be >= 0, not {}", self.class_stddev_ratio));
        }
        for k in &self.classes {
            if !(k.stddev_ratio.is_finite() && k.stddev_ratio >= 0.0) {
                return Err(format!("class {} stddev_ratio must be >= 0", k.class));
            }
        }
        if let RttModel::Pareto { shape, .. } = self.rtt
            && !(shape.is_finite() && shape > 1.0)
        {
            return Err(format!("Pareto RTT shape must be > 1 (a finite mean), not {shape}"));
        }
        let g = &self.gms;
        if !(g.sender_cpu_share.is_finite() && g.sender_cpu_share >= 0.0) {
            return Err(format!("gms.sender_cpu_share must be >= 0, not {}", g.sender_cpu_share));
        }
        Ok(())
    }

    /// Time to read a file of `size` bytes from disk: latency, transfer per 4 KB, and an
    /// extra seek per further seek block (44 KB) beyond the first.
    pub fn disk_read_ns(&self, size: u64) -> u64 {
        let extra = match self.disk_seek_block_bytes {
            0 => 0,
            block if size > block => units(size - block, block) * self.disk_extra_seek_ns,
            _ => 0,
        };
        self.disk_latency_ns + units(size, DISK_BLOCK) * self.disk_per_4k_ns + extra
    }

    /// CPU to transmit `size` bytes.
    pub fn transmit_ns(&self, size: u64) -> u64 {
        units(size, TRANSMIT_UNIT) * self.transmit_per_512_ns
    }

    /// CPU the holder spends sending `size` bytes from its memory to another node (GMS).
    pub fn gms_sender_ns(&self, size: u64) -> u64 {
        (self.transmit_ns(size) as f64 * self.gms.sender_cpu_share).round() as u64
    }

    /// Mean CPU of `class` (without the fixed part).
    pub fn class_mean_ns(&self, class: u16) -> u64 {
        match self.classes.iter().find(|k| k.class == class) {
            Some(k) => k.mean_ns,
            None => class as u64 * self.class_unit_ns,
        }
    }

    /// Disk time of one request of `class` (0 unless the class is listed with disk time).
    pub fn class_disk_ns(&self, class: u16) -> u64 {
        self.classes.iter().find(|k| k.class == class).map_or(0, |k| k.disk_ns)
    }

    /// A draw of the class cost of a dynamic request of `class` (without the fixed part).
    pub fn class_cpu_ns<R: Rng + ?Sized>(&self, class: u16, rng: &mut R) -> u64 {
        let (mean, ratio) = match self.classes.iter().find(|k| k.class == class) {
            Some(k) => (k.mean_ns as f64, k.stddev_ratio),
            None => (class as f64 * self.class_unit_ns as f64, self.class_stddev_ratio),
        };
        if mean <= 0.0 {
            return 0;
        }
        if ratio <= 0.0 {
            return mean as u64;
        }
        match Normal::new(mean, ratio * mean) {
            Ok(n) => n.sample(rng).max(0.0) as u64,
            Err(_) => mean as u64,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand::rngs::SmallRng;

    #[test]
    fn disk_read_time_follows_the_lard_cost_model_for_1k_44k_and_100k() {
        let c = CostModel::lard98();
        // 1 KB: latency + one 4 KB block.
        assert_eq!(c.disk_read_ns(1024), 28_000_000 + 410_000);
        // 44 KB: eleven blocks, no extra seek (not beyond 44 KB).
        assert_eq!(c.disk_read_ns(44 * 1024), 28_000_000 + 11 * 410_000);
        // 100 KB: 25 blocks and 56 KB beyond 44 KB = two further 44 KB blocks (or part).
        assert_eq!(c.disk_read_ns(100 * 1024), 28_000_000 + 25 * 410_000 + 2 * 14_000_000);
        // One byte past 44 KB already pays a seek.
        assert_eq!(c.disk_read_ns(44 * 1024 + 1), 28_000_000 + 12 * 410_000 + 14_000_000);
    }

    #[test]
    fn transmit_is_per_512_bytes_or_part_and_an_8k_hit_costs_930_us() {
        let c = CostModel::lard98();
        assert_eq!(c.transmit_ns(0), 0);
        assert_eq!(c.transmit_ns(1), 40_000);
        assert_eq!(c.transmit_ns(513), 80_000);
        // The paper's check: an 8 KB document from cache ≈ 1075 requests/s.
        let hit = c.conn_setup_ns + c.transmit_ns(8192) + c.conn_teardown_ns;
        assert_eq!(hit, 930_000);
    }

    #[test]
    fn cpu_speed_scales_cpu_costs_only() {
        let c = CostModel::lard98().with_cpu_speed(2.0);
        assert_eq!(c.conn_setup_ns, 72_500);
        assert_eq!(c.transmit_per_512_ns, 20_000);
        assert_eq!(c.disk_read_ns(1024), CostModel::lard98().disk_read_ns(1024));
    }

    #[test]
    fn class_costs_and_pareto_rtts_have_their_means() {
        let c = CostModel::csld03();
        let mut rng = SmallRng::seed_from_u64(3);
        let n = 20_000;
        let mean = (0..n).map(|_| c.class_cpu_ns(3, &mut rng) as f64).sum::<f64>() / n as f64;
        assert!((mean / 30e6 - 1.0).abs() < 0.02, "class 3 mean {mean}");
        let rtt = (0..200_000).map(|_| c.rtt.sample(&mut rng) as f64).sum::<f64>() / 200_000.0;
        // Shape 1.5 has infinite variance: the sample mean converges slowly.
        assert!((rtt / 150e6 - 1.0).abs() < 0.15, "rtt mean {rtt}");
        assert!(CostModel::lard98().validate().is_ok() && c.validate().is_ok());
    }
}
