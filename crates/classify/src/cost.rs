//! `CostDistribution`: a class's CPU-cost distribution in milliseconds (constant, normal,
//! exponential, uniform), checked as it is read so a bad parameter is refused at its line.

use std::time::Duration;

use rand::Rng;
use rand_distr::{Distribution, Exp, Normal};
use serde::{Deserialize, Serialize};

/// A CPU-cost distribution, in milliseconds.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "dist", rename_all = "lowercase", deny_unknown_fields, try_from = "RawCost")]
pub enum CostDistribution {
    /// Always `ms`.
    Const { ms: f64 },
    /// Normal with `mean_ms` and `stddev_ms`, clamped at 0 (CSLD: σ = 20 % of the mean).
    Normal { mean_ms: f64, stddev_ms: f64 },
    /// Exponential with mean `mean_ms`.
    Exponential { mean_ms: f64 },
    /// Uniform on `[min_ms, max_ms]`.
    Uniform { min_ms: f64, max_ms: f64 },
}

/// The distribution as written, before its parameters are checked.
#[derive(Deserialize)]
#[serde(tag = "dist", rename_all = "lowercase", deny_unknown_fields)]
enum RawCost {
    Const { ms: f64 },
    Normal { mean_ms: f64, stddev_ms: f64 },
    Exponential { mean_ms: f64 },
    Uniform { min_ms: f64, max_ms: f64 },
}

impl TryFrom<RawCost> for CostDistribution {
    type Error = String;

    fn try_from(raw: RawCost) -> Result<CostDistribution, String> {
        let d = match raw {
            RawCost::Const { ms } => CostDistribution::Const { ms },
            RawCost::Normal { mean_ms, stddev_ms } => CostDistribution::Normal { mean_ms, stddev_ms },
            RawCost::Exponential { mean_ms } => CostDistribution::Exponential { mean_ms },
            RawCost::Uniform { min_ms, max_ms } => CostDistribution::Uniform { min_ms, max_ms },
        };
        d.validate().map_err(|e| format!("cost: {e}"))?;
        Ok(d)
    }
}

impl CostDistribution {
    /// Check that every parameter is finite and non-negative (and `min_ms <= max_ms`).
    pub fn validate(&self) -> Result<(), String> {
        let params: &[(&str, f64)] = match self {
            CostDistribution::Const { ms } => &[("ms", *ms)],
            CostDistribution::Normal { mean_ms, stddev_ms } => {
                &[("mean_ms", *mean_ms), ("stddev_ms", *stddev_ms)]
            }
            CostDistribution::Exponential { mean_ms } => &[("mean_ms", *mean_ms)],
            CostDistribution::Uniform { min_ms, max_ms } => &[("min_ms", *min_ms), ("max_ms", *max_ms)],
        };
        for (name, v) in params {
            if !v.is_finite() || *v < 0.0 {
                return Err(format!("{name} must be a finite number >= 0, not {v}"));
            }
        }
        if let CostDistribution::Uniform { min_ms, max_ms } = self
            && min_ms > max_ms
        {
            return Err(format!("min_ms ({min_ms}) is above max_ms ({max_ms})"));
        }
        Ok(())
    }

    /// The same shape with every cost multiplied by `factor` (a class table whose costs are
    /// wrong by that factor: the lab's test of CSLD against costs it does not know).
    pub fn scaled(&self, factor: f64) -> CostDistribution {
        match *self {
            CostDistribution::Const { ms } => CostDistribution::Const { ms: ms * factor },
            CostDistribution::Normal { mean_ms, stddev_ms } => {
                CostDistribution::Normal { mean_ms: mean_ms * factor, stddev_ms: stddev_ms * factor }
            }
            CostDistribution::Exponential { mean_ms } => {
                CostDistribution::Exponential { mean_ms: mean_ms * factor }
            }
            CostDistribution::Uniform { min_ms, max_ms } => {
                CostDistribution::Uniform { min_ms: min_ms * factor, max_ms: max_ms * factor }
            }
        }
    }

    /// The mean cost in milliseconds (of the unclamped distribution).
    pub fn mean_ms(&self) -> f64 {
        match *self {
            CostDistribution::Const { ms } => ms,
            CostDistribution::Normal { mean_ms, .. } | CostDistribution::Exponential { mean_ms } => mean_ms,
            CostDistribution::Uniform { min_ms, max_ms } => (min_ms + max_ms) / 2.0,
        }
    }

    /// Draw one cost.
    pub fn sample<R: Rng + ?Sized>(&self, rng: &mut R) -> Duration {
        let ms = match *self {
            CostDistribution::Const { ms } => ms,
            CostDistribution::Normal { mean_ms, stddev_ms } => match Normal::new(mean_ms, stddev_ms) {
                Ok(normal) => normal.sample(rng),
                Err(_) => mean_ms,
            },
            CostDistribution::Exponential { mean_ms } => {
                if mean_ms > 0.0 {
                    Exp::new(1.0 / mean_ms).map_or(mean_ms, |exp| exp.sample(rng))
                } else {
                    0.0
                }
            }
            CostDistribution::Uniform { min_ms, max_ms } => {
                if max_ms > min_ms {
                    rng.random_range(min_ms..=max_ms)
                } else {
                    min_ms
                }
            }
        };
        if ms.is_finite() && ms > 0.0 { Duration::from_secs_f64(ms / 1000.0) } else { Duration::ZERO }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand::rngs::SmallRng;

    fn mean_of(dist: CostDistribution, n: usize, seed: u64) -> (f64, f64) {
        let mut rng = SmallRng::seed_from_u64(seed);
        let draws: Vec<f64> = (0..n).map(|_| dist.sample(&mut rng).as_secs_f64() * 1000.0).collect();
        let mean = draws.iter().sum::<f64>() / n as f64;
        let min = draws.iter().cloned().fold(f64::INFINITY, f64::min);
        (mean, min)
    }

    #[test]
    fn cost_distributions_have_their_means_and_never_go_negative() {
        let n = 20_000;
        let (mean, _) = mean_of(CostDistribution::Const { ms: 7.0 }, 10, 1);
        assert!((mean - 7.0).abs() < 1e-9);
        let (mean, min) = mean_of(CostDistribution::Normal { mean_ms: 30.0, stddev_ms: 6.0 }, n, 2);
        assert!((mean - 30.0).abs() < 0.3, "{mean}");
        assert!(min >= 0.0);
        let (mean, min) = mean_of(CostDistribution::Exponential { mean_ms: 20.0 }, n, 3);
        assert!((mean - 20.0).abs() < 1.0, "{mean}");
        assert!(min >= 0.0);
        let (mean, min) = mean_of(CostDistribution::Uniform { min_ms: 5.0, max_ms: 15.0 }, n, 4);
        assert!((mean - 10.0).abs() < 0.2, "{mean}");
        assert!(min >= 5.0);
        // A normal with a huge spread around 0 is clamped at 0, not negative.
        let (_, min) = mean_of(CostDistribution::Normal { mean_ms: 0.0, stddev_ms: 50.0 }, 1000, 5);
        assert_eq!(min, 0.0);
    }

    #[derive(Deserialize, Debug)]
    struct W {
        #[allow(dead_code)]
        cost: CostDistribution,
    }

    #[test]
    fn cost_distribution_deserializes_by_dist_tag_and_refuses_unknown_fields() {
        let w: W = toml::from_str("cost = { dist = \"normal\", mean_ms = 30, stddev_ms = 6 }").unwrap();
        assert_eq!(w.cost, CostDistribution::Normal { mean_ms: 30.0, stddev_ms: 6.0 });
        let w: W = toml::from_str("cost = { dist = \"const\", ms = 2.5 }").unwrap();
        assert_eq!(w.cost, CostDistribution::Const { ms: 2.5 });
        assert!(toml::from_str::<W>("cost = { dist = \"const\", ms = 1, extra = 2 }").is_err());
        assert!(toml::from_str::<W>("cost = { dist = \"pareto\", ms = 1 }").is_err());
    }

    #[test]
    fn negative_or_inverted_cost_is_refused_at_its_line() {
        let e = toml::from_str::<W>("a = 1\ncost = { dist = \"const\", ms = -1 }").unwrap_err().to_string();
        assert!(e.contains("line 2") && e.contains("ms must be a finite number >= 0"), "{e}");
        let e = toml::from_str::<W>("cost = { dist = \"uniform\", min_ms = 5, max_ms = 1 }")
            .unwrap_err()
            .to_string();
        assert!(e.contains("line 1") && e.contains("min_ms (5) is above max_ms (1)"), "{e}");
    }
}
