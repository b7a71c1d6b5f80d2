//! `BerkeleyLikeSpec`: the synthetic stand-in for the Socket Cloning paper's trace (UC Berkeley
//! CS Division, January 2001: 3 940 707 requests, 87 425 files, ≈6.6 GB, 40 KB mean request
//! size), which is not available. Independent Zipf draws (no sessions or bursts: low temporal
//! locality); file sizes lognormal, scaled to the total, then assigned so that popular files
//! tend to be smaller — sorted by size plus noise, the noise bisected until the mean request
//! size is the trace's.

use locus_trace::TraceRecord;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use rand_distr::{Distribution, LogNormal, StandardNormal};
use serde::Serialize;

use crate::error::SimError;
use crate::workload::{Workload, WorkloadBuilder};

/// The trace's figures, as the paper gives them.
pub const BERKELEY_REQUESTS: u64 = 3_940_707;
pub const BERKELEY_FILES: u64 = 87_425;
pub const BERKELEY_BYTES: u64 = 6_600_000_000;
pub const BERKELEY_MEAN_REQUEST: u64 = 40_000;

/// A Berkeley-like synthetic trace.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct BerkeleyLikeSpec {
    pub seed: u64,
    pub requests: u64,
    pub files: u64,
    /// Sum of the file sizes, bytes.
    pub total_bytes: u64,
    /// Zipf exponent of popularity.
    pub alpha: f64,
    /// σ of the lognormal file sizes (before scaling to `total_bytes`).
    pub size_sigma: f64,
    /// Largest file, bytes.
    pub max_size: u64,
    /// Mean size of a request the size–popularity assignment aims at, bytes.
    pub mean_request_bytes: u64,
}

/// What the generated trace turned out to be.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct BerkeleyLikeStats {
    pub requests: u64,
    pub files: u64,
    pub unique_bytes: u64,
    /// Expected mean request size under the popularity law, and the realised one.
    pub expected_mean_request_bytes: f64,
    pub mean_request_bytes: f64,
    /// σ of the noise that assigns sizes to ranks (0: strictly smaller files more popular).
    pub size_rank_noise: f64,
    /// Share of requested bytes the most popular files fitting in 256 MB and in 12 × 256 MB
    /// account for (an ideal static cache).
    pub byte_coverage_256mb: f64,
    pub byte_coverage_12x256mb: f64,
    /// Same, as a share of requests.
    pub request_coverage_256mb: f64,
    pub request_coverage_12x256mb: f64,
}

impl BerkeleyLikeSpec {
    /// The paper's figures with `requests` requests (α 0.75, σ 1.5, files up to 64 MiB).
    pub fn new(requests: u64, seed: u64) -> BerkeleyLikeSpec {
        BerkeleyLikeSpec {
            seed,
            requests,
            files: BERKELEY_FILES,
            total_bytes: BERKELEY_BYTES,
            alpha: 0.75,
            size_sigma: 1.5,
            max_size: 64 << 20,
            mean_request_bytes: BERKELEY_MEAN_REQUEST,
        }
    }

    /// Popularity weights of ranks 0.. (normalised).
    fn weights(&self) -> Vec<f64> {
        let w: Vec<f64> = (1..=self.files).map(|r| (r as f64).powf(-self.alpha)).collect();
        let sum: f64 = w.iter().sum();
        w.into_iter().map(|x| x / sum).collect()
    }

    /// File sizes by popularity rank, and the noise σ that gave them.
    fn sizes_by_rank(&self, weights: &[f64], rng: &mut SmallRng) -> Result<(Vec<u64>, f64), SimError> {
        let dist = LogNormal::new(0.0, self.size_sigma)
            .map_err(|e| SimError::Config(format!("Berkeley-like sizes: {e}")))?;
        let raw: Vec<f64> = (0..self.files).map(|_| dist.sample(&mut *rng)).collect();
        let scale = self.total_bytes as f64 / raw.iter().sum::<f64>();
        let sizes: Vec<u64> =
            raw.iter().map(|&x| ((x * scale).round() as u64).clamp(1, self.max_size)).collect();
        let noise: Vec<f64> = (0..self.files).map(|_| rng.sample::<f64, _>(StandardNormal)).collect();
        let assign = |sigma: f64| -> Vec<u64> {
            let mut order: Vec<usize> = (0..sizes.len()).collect();
            let key = |i: usize| (sizes[i] as f64).ln() + sigma * noise[i];
            order.sort_by(|&a, &b| key(a).total_cmp(&key(b)).then(a.cmp(&b)));
            order.into_iter().map(|i| sizes[i]).collect()
        };
        let mean_of = |by_rank: &[u64]| by_rank.iter().zip(weights).map(|(&s, &w)| s as f64 * w).sum::<f64>();
        let target = self.mean_request_bytes as f64;
        // More noise: popularity less tied to size, larger mean request (towards the file mean).
        let (mut lo, mut hi) = (0.0f64, 64.0f64);
        if mean_of(&assign(lo)) >= target {
            return Ok((assign(lo), lo));
        }
        if mean_of(&assign(hi)) <= target {
            return Ok((assign(hi), hi));
        }
        for _ in 0..40 {
            let mid = (lo + hi) / 2.0;
            if mean_of(&assign(mid)) < target {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        let sigma = (lo + hi) / 2.0;
        Ok((assign(sigma), sigma))
    }

    /// Generate the workload and its statistics.
    pub fn build(&self) -> Result<(Workload, BerkeleyLikeStats), SimError> {
        if self.files == 0 || self.requests == 0 {
            return Err(SimError::Config("a Berkeley-like trace needs files and requests".into()));
        }
        if !(self.alpha.is_finite()
            && self.alpha >= 0.0
            && self.size_sigma.is_finite()
            && self.size_sigma > 0.0)
        {
            return Err(SimError::Config(format!(
                "Berkeley-like trace: alpha {} and size_sigma {} must be finite, alpha >= 0, sigma > 0",
                self.alpha, self.size_sigma
            )));
        }
        let mut rng = SmallRng::seed_from_u64(self.seed ^ 0xBE4C_E1E7);
        let weights = self.weights();
        let (sizes, noise) = self.sizes_by_rank(&weights, &mut rng)?;
        let mut cdf = Vec::with_capacity(weights.len());
        let mut acc = 0.0;
        for w in &weights {
            acc += w;
            cdf.push(acc);
        }
        let names: Vec<String> =
            (0..self.files).map(|r| format!("/~cs/{:05x}/f{r}.html", r * 7919 % 65_521)).collect();
        let mut b = WorkloadBuilder::new();
        let mut bytes = 0u64;
        for _ in 0..self.requests {
            let u = rng.random::<f64>() * acc;
            let rank = cdf.partition_point(|&c| c < u).min(cdf.len() - 1);
            bytes += sizes[rank];
            b.add(&TraceRecord::get(names[rank].clone(), sizes[rank]));
        }
        let workload = b.finish();
        let (b1, r1) = coverage(&sizes, &weights, 256 << 20);
        let (b12, r12) = coverage(&sizes, &weights, 12 * (256 << 20));
        let stats = BerkeleyLikeStats {
            requests: self.requests,
            files: workload.targets().len() as u64,
            unique_bytes: workload.unique_bytes(),
            expected_mean_request_bytes: sizes.iter().zip(&weights).map(|(&s, &w)| s as f64 * w).sum(),
            mean_request_bytes: bytes as f64 / self.requests as f64,
            size_rank_noise: noise,
            byte_coverage_256mb: b1,
            byte_coverage_12x256mb: b12,
            request_coverage_256mb: r1,
            request_coverage_12x256mb: r12,
        };
        Ok((workload, stats))
    }
}

/// (share of requested bytes, share of requests) of the files an ideal static cache of
/// `capacity` bytes holds: the most requested per byte first, as long as they fit.
fn coverage(sizes: &[u64], weights: &[f64], capacity: u64) -> (f64, f64) {
    let mut order: Vec<usize> = (0..sizes.len()).collect();
    order.sort_by(|&a, &b| (weights[b] / sizes[b] as f64).total_cmp(&(weights[a] / sizes[a] as f64)));
    let total: f64 = sizes.iter().zip(weights).map(|(&s, &w)| s as f64 * w).sum();
    let (mut used, mut bytes, mut reqs) = (0u64, 0.0, 0.0);
    for i in order {
        if used + sizes[i] <= capacity {
            used += sizes[i];
            bytes += sizes[i] as f64 * weights[i];
            reqs += weights[i];
        }
    }
    (bytes / total, reqs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn berkeley_like_trace_has_the_papers_totals_and_smaller_popular_files() {
        let spec = BerkeleyLikeSpec {
            files: 5_000,
            total_bytes: 5_000 * 75_000,
            ..BerkeleyLikeSpec::new(100_000, 1)
        };
        let (w, stats) = spec.build().unwrap();
        assert_eq!(w.len(), 100_000);
        // Scaled to the total (the cap may shave a little off).
        assert!(stats.unique_bytes as f64 <= 5_000.0 * 75_000.0 * 1.001, "{stats:?}");
        assert!((stats.expected_mean_request_bytes / 40_000.0 - 1.0).abs() < 0.01, "{stats:?}");
        assert!((stats.mean_request_bytes / 40_000.0 - 1.0).abs() < 0.1, "{stats:?}");
        assert!(stats.byte_coverage_256mb < stats.byte_coverage_12x256mb);
        // The same seed gives the same trace.
        let (again, _) = spec.build().unwrap();
        assert_eq!(again.requests(), w.requests());
    }
}
