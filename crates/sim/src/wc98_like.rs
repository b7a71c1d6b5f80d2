//! `Wc98LikeSpec`: the CSLD study's workload when the WC98 logs are not on disk — a Zipf
//! static set (`locus_trace::ZipfTraceGenerator`) whose requests get the status mix of the
//! WC98 peak day (CSLD Table 1: 71.76% 200, 27.87% 304 ⇒ IMS, 0.35% 404 ⇒ INV, of the
//! non-dynamic requests), with dynamic requests injected: each request is dynamic with
//! probability `p_dreq`, its class uniform over `classes` (the static order is kept).

use locus_trace::{DocumentSizes, SizeModel, TraceRecord, ZipfTraceGenerator, ZipfTraceSpec};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use crate::error::SimError;
use crate::workload::{DEFAULT_DYNAMIC_SIZE, Workload, WorkloadBuilder};

/// Table 1's shares of the non-dynamic requests answered 304 and 404.
pub const WC98_IMS_SHARE: f64 = 0.2787 / 0.9998;
pub const WC98_INV_SHARE: f64 = 0.0035 / 0.9998;

/// Distinct targets the 404 requests name.
const MISSING_TARGETS: u64 = 500;

/// A WC98-like synthetic workload.
#[derive(Clone, Debug)]
pub struct Wc98LikeSpec {
    pub seed: u64,
    pub requests: u64,
    /// Documents in the Zipf set and the Zipf exponent.
    pub documents: u64,
    pub alpha: f64,
    /// Document sizes (see `wc98_like_sizes`).
    pub sizes: SizeModel,
    /// Shares of the non-dynamic requests that are IMS (304) and INV (404).
    pub ims_share: f64,
    pub inv_share: f64,
    /// Probability that a request is dynamic.
    pub p_dreq: f64,
    /// Dynamic classes, drawn uniformly (repeat a class to weight it).
    pub classes: Vec<u16>,
    /// Response size of a dynamic request, bytes.
    pub dynamic_size: u64,
}

/// Sizes of the WC98-like documents: lognormal body (median e^5.95 ≈ 380 B, σ 1.0) below
/// 16 KiB and 0.5% Pareto tail (α 1.3) from 16 KiB to 1 MiB. Chosen so that the mean CPU
/// of a non-dynamic request under the CSLD costs is ≈ 0.545 ms — the figure that puts RR's
/// knee for {4}, 5% near 6.3 K/s (CSLD.md §5's calibration); the WC98 logs themselves are
/// not available to take sizes from.
pub fn wc98_like_sizes() -> SizeModel {
    SizeModel {
        body_mu: 5.95,
        body_sigma: 1.0,
        tail_alpha: 1.3,
        tail_k: 16_384.0,
        tail_share: 0.005,
        min_size: 1,
        max_size: 1 << 20,
    }
}

impl Wc98LikeSpec {
    /// `requests` requests over 8 000 documents (Zipf α 0.8), Table 1's status mix, dynamic
    /// share `p_dreq` over `classes`.
    pub fn new(requests: u64, p_dreq: f64, classes: Vec<u16>, seed: u64) -> Wc98LikeSpec {
        Wc98LikeSpec {
            seed,
            requests,
            documents: 8_000,
            alpha: 0.8,
            sizes: wc98_like_sizes(),
            ims_share: WC98_IMS_SHARE,
            inv_share: WC98_INV_SHARE,
            p_dreq,
            classes,
            dynamic_size: DEFAULT_DYNAMIC_SIZE,
        }
    }

    /// Generate the workload.
    pub fn build(&self) -> Result<Workload, SimError> {
        let shares = [self.ims_share, self.inv_share, self.p_dreq];
        if shares.iter().any(|s| !(0.0..=1.0).contains(s)) || self.ims_share + self.inv_share > 1.0 {
            return Err(SimError::Config(format!("WC98-like shares out of range: {shares:?}")));
        }
        if self.p_dreq > 0.0 && self.classes.is_empty() {
            return Err(SimError::Config("dynamic requests need at least one class".into()));
        }
        let spec = ZipfTraceSpec {
            seed: self.seed,
            requests: self.requests,
            documents: self.documents,
            alpha: self.alpha,
            sizes: DocumentSizes::Model(self.sizes.clone()),
            ..ZipfTraceSpec::default()
        };
        let mut rng = SmallRng::seed_from_u64(self.seed ^ 0x5743_3938);
        let mut b = WorkloadBuilder::new();
        for (i, mut r) in ZipfTraceGenerator::new(spec)?.enumerate() {
            self.shape(&mut r, i as u64, &mut rng);
            b.add(&r);
        }
        if b.is_empty() {
            return Err(SimError::EmptyTrace);
        }
        Ok(b.finish())
    }

    /// Make static record `r` (number `i`) dynamic, IMS or INV by the spec's shares.
    fn shape(&self, r: &mut TraceRecord, i: u64, rng: &mut SmallRng) {
        if rng.random::<f64>() < self.p_dreq {
            let class = self.classes[rng.random_range(0..self.classes.len())];
            *r = TraceRecord {
                target: format!("/cgi-bin/class{class}?id={}", i % 1000),
                size: self.dynamic_size,
                class: Some(class),
                ..r.clone()
            };
            return;
        }
        let u = rng.random::<f64>();
        if u < self.ims_share {
            r.status = 304;
        } else if u < self.ims_share + self.inv_share {
            r.status = 404;
            r.target = format!("/missing/{}", rng.random_range(0..MISSING_TARGETS));
            r.size = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::RequestKind;

    #[test]
    fn wc98_like_workload_has_table_1s_status_mix_and_the_dynamic_share() {
        let w = Wc98LikeSpec::new(200_000, 0.05, vec![4], 3).build().unwrap();
        let count = |k: RequestKind| w.kinds().iter().filter(|&&x| x == k).count() as f64 / w.len() as f64;
        assert!((count(RequestKind::Dynamic) - 0.05).abs() < 0.003);
        assert!((count(RequestKind::Ims) - 0.95 * WC98_IMS_SHARE).abs() < 0.005);
        assert!((count(RequestKind::Inv) - 0.95 * WC98_INV_SHARE).abs() < 0.001);
        let inputs = w.policy_inputs(&crate::CostModel::csld03());
        assert_eq!(inputs.classes[4].cpu_ns, 40_000_000);
        let files = inputs.files.unwrap();
        let missing = w.targets().iter().find(|t| t.missing).unwrap();
        assert!(files.get(missing.hash).is_none(), "404 targets are not in the file table");
        let ims = (0..w.len()).find(|&i| w.kinds()[i] == RequestKind::Ims).unwrap();
        let info = w.request_info_at(ims);
        assert_eq!(info.if_modified_since, Some(files.get(info.target_hash).unwrap().mtime + 1));
    }
}
