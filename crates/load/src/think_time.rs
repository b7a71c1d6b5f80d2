//! Think time: the pause a closed-loop client takes after one job (a request, a pipelined
//! batch or a session) before starting the next — none, fixed, or exponential with a given
//! mean — drawn from a seeded generator so runs repeat.

use std::str::FromStr;
use std::time::Duration;

use rand::SeedableRng;
use rand::rngs::SmallRng;
use rand_distr::{Distribution, Exp1};

/// How long clients think between jobs.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub enum ThinkTime {
    /// No pause.
    #[default]
    None,
    /// Always this long.
    Fixed(Duration),
    /// Exponentially distributed with this mean.
    Exponential(Duration),
}

impl FromStr for ThinkTime {
    type Err = String;

    /// `50` (fixed 50 ms), `exp:50` (exponential, mean 50 ms), `0` (none). Fractions allowed.
    fn from_str(s: &str) -> Result<ThinkTime, String> {
        let (exp, ms) = match s.strip_prefix("exp:") {
            Some(rest) => (true, rest),
            None => (false, s),
        };
        let ms: f64 = ms.trim().parse().map_err(|_| format!("think time `{s}`: expected MS or exp:MS"))?;
        if !(ms.is_finite() && ms >= 0.0) {
            return Err(format!("think time `{s}` must be a non-negative number of milliseconds"));
        }
        let d =
            Duration::try_from_secs_f64(ms / 1000.0).map_err(|_| format!("think time `{s}` is too long"))?;
        Ok(match (exp, d.is_zero()) {
            (_, true) => ThinkTime::None,
            (true, false) => ThinkTime::Exponential(d),
            (false, false) => ThinkTime::Fixed(d),
        })
    }
}

/// Draws think times for one client.
#[derive(Clone, Debug)]
pub struct ThinkSampler {
    think: ThinkTime,
    rng: SmallRng,
}

impl ThinkSampler {
    /// A sampler for `think`, seeded with `seed`.
    pub fn new(think: ThinkTime, seed: u64) -> ThinkSampler {
        ThinkSampler { think, rng: SmallRng::seed_from_u64(seed) }
    }

    /// Whether there is any think time at all.
    pub fn is_none(&self) -> bool {
        self.think == ThinkTime::None
    }

    /// The next pause.
    pub fn next_pause(&mut self) -> Duration {
        match self.think {
            ThinkTime::None => Duration::ZERO,
            ThinkTime::Fixed(d) => d,
            ThinkTime::Exponential(mean) => {
                let x: f64 = Exp1.sample(&mut self.rng);
                // Cap at 50× the mean so one unlucky draw cannot stall a client for the run.
                Duration::from_secs_f64(mean.as_secs_f64() * x.min(50.0))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn think_time_parses_fixed_exponential_and_zero() {
        assert_eq!("25".parse(), Ok(ThinkTime::Fixed(Duration::from_millis(25))));
        assert_eq!("exp:10".parse(), Ok(ThinkTime::Exponential(Duration::from_millis(10))));
        assert_eq!("0".parse(), Ok(ThinkTime::None));
        assert!("-1".parse::<ThinkTime>().is_err());
        assert!("exp:x".parse::<ThinkTime>().is_err());
        assert!("1e300".parse::<ThinkTime>().is_err() && "nan".parse::<ThinkTime>().is_err());
    }

    #[test]
    fn fixed_think_time_is_always_the_same_pause() {
        let mut s = ThinkSampler::new(ThinkTime::Fixed(Duration::from_millis(7)), 3);
        assert!((0..100).all(|_| s.next_pause() == Duration::from_millis(7)));
        assert_eq!(ThinkSampler::new(ThinkTime::None, 1).next_pause(), Duration::ZERO);
    }

    #[test]
    fn exponential_think_time_is_seeded_and_has_the_mean_and_spread_asked_for() {
        let think = ThinkTime::Exponential(Duration::from_millis(20));
        let draw = |seed| {
            let mut s = ThinkSampler::new(think, seed);
            (0..20_000).map(|_| s.next_pause().as_secs_f64() * 1000.0).collect::<Vec<f64>>()
        };
        let a = draw(9);
        assert_eq!(a, draw(9), "same seed, same pauses");
        assert_ne!(a, draw(10));
        let mean = a.iter().sum::<f64>() / a.len() as f64;
        assert!((mean - 20.0).abs() < 0.6, "mean {mean} ms");
        let var = a.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / a.len() as f64;
        let cv = var.sqrt() / mean;
        assert!((cv - 1.0).abs() < 0.05, "coefficient of variation {cv}, exponential has 1");
    }
}
