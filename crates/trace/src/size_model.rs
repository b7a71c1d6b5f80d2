//! `SizeModel`: the SURGE file-size distribution (Barford & Crovella) — a lognormal body with
//! a Pareto tail above a cut-off — and `SizeSampler`, its prepared sampler.

use rand::Rng;
use rand_distr::{Distribution, LogNormal, Pareto};
use serde::Serialize;

use crate::error::TraceError;

/// A file-size distribution: with probability `tail_share` a Pareto(`tail_k`, `tail_alpha`)
/// size (never below `tail_k`), otherwise a lognormal(`body_mu`, `body_sigma`) size below
/// `tail_k`; then clamped to `min_size..=max_size`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SizeModel {
    /// Mean of ln(size) in the body (SURGE: 9.357, a median of ~11.6 KB).
    pub body_mu: f64,
    /// Standard deviation of ln(size) in the body (SURGE: 1.318).
    pub body_sigma: f64,
    /// Pareto shape of the tail (SURGE: 1.1).
    pub tail_alpha: f64,
    /// Pareto scale of the tail and the body/tail cut-off, in bytes (SURGE: 133 KB).
    pub tail_k: f64,
    /// Share of files in the tail (SURGE: about 7%).
    pub tail_share: f64,
    /// Smallest size produced.
    pub min_size: u64,
    /// Largest size produced (the tail has infinite variance: cap it).
    pub max_size: u64,
}

impl Default for SizeModel {
    fn default() -> Self {
        SizeModel::surge()
    }
}

impl SizeModel {
    /// SURGE's parameters, sizes from 1 byte to 64 MiB.
    pub fn surge() -> SizeModel {
        SizeModel {
            body_mu: 9.357,
            body_sigma: 1.318,
            tail_alpha: 1.1,
            tail_k: 133_000.0,
            tail_share: 0.07,
            min_size: 1,
            max_size: 64 << 20,
        }
    }

    /// A sampler for this model, or what is wrong with the parameters.
    pub fn sampler(&self) -> Result<SizeSampler, TraceError> {
        let bad = |m: String| TraceError::spec("size model", m);
        if !(self.body_sigma.is_finite() && self.body_sigma >= 0.0 && self.body_mu.is_finite()) {
            return Err(bad(format!(
                "body mu {} / sigma {} must be finite, sigma >= 0",
                self.body_mu, self.body_sigma
            )));
        }
        if !(self.tail_alpha.is_finite()
            && self.tail_alpha > 0.0
            && self.tail_k.is_finite()
            && self.tail_k >= 1.0)
        {
            return Err(bad(format!(
                "tail alpha {} must be > 0 and k {} >= 1",
                self.tail_alpha, self.tail_k
            )));
        }
        if !(0.0..=1.0).contains(&self.tail_share) {
            return Err(bad(format!("tail share {} must be within 0..=1", self.tail_share)));
        }
        if self.min_size > self.max_size {
            return Err(bad(format!("min size {} exceeds max size {}", self.min_size, self.max_size)));
        }
        Ok(SizeSampler {
            body: LogNormal::new(self.body_mu, self.body_sigma).map_err(|e| bad(e.to_string()))?,
            tail: Pareto::new(self.tail_k, self.tail_alpha).map_err(|e| bad(e.to_string()))?,
            model: self.clone(),
        })
    }
}

/// A prepared `SizeModel`.
#[derive(Clone, Debug)]
pub struct SizeSampler {
    body: LogNormal<f64>,
    tail: Pareto<f64>,
    model: SizeModel,
}

impl SizeSampler {
    /// One size in bytes.
    pub fn sample<R: Rng + ?Sized>(&self, rng: &mut R) -> u64 {
        let m = &self.model;
        let raw = if rng.random::<f64>() < m.tail_share {
            self.tail.sample(rng)
        } else {
            // The body lies below the cut-off: redraw the few (~3%) that land above it.
            let mut x = self.body.sample(rng);
            for _ in 0..32 {
                if x < m.tail_k {
                    break;
                }
                x = self.body.sample(rng);
            }
            x.min(m.tail_k)
        };
        (raw.round() as u64).clamp(m.min_size, m.max_size)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand::rngs::SmallRng;

    #[test]
    fn surge_sizes_have_the_body_median_and_the_tail_share_above_the_cutoff() {
        let sampler = SizeModel::surge().sampler().unwrap();
        let mut rng = SmallRng::seed_from_u64(1);
        let mut sizes: Vec<u64> = (0..100_000).map(|_| sampler.sample(&mut rng)).collect();
        let tail = sizes.iter().filter(|&&s| s >= 133_000).count() as f64 / sizes.len() as f64;
        // 7% drawn from the tail, plus body draws rounded onto the cut-off: a little above 7%.
        assert!((0.065..0.09).contains(&tail), "tail share {tail}");
        sizes.sort_unstable();
        let median = sizes[sizes.len() / 2] as f64;
        // Body median e^9.357 = 11.6 KB, nudged up by the 7% of tail draws.
        assert!((10_500.0..14_500.0).contains(&median), "median {median}");
        assert!(*sizes.last().unwrap() <= 64 << 20);
        assert!(sizes[0] >= 1);
    }

    #[test]
    fn invalid_size_models_are_refused_with_the_reason() {
        let m = SizeModel { tail_share: 1.5, ..SizeModel::surge() };
        assert!(m.sampler().unwrap_err().to_string().contains("tail share"));
        let m = SizeModel { min_size: 10, max_size: 5, ..SizeModel::surge() };
        assert!(m.sampler().is_err());
    }
}
