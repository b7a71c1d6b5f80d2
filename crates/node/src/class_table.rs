//! The class table of dynamic endpoints: URI patterns (a path prefix plus required query
//! parameters) mapped to a CPU-cost distribution and a response size, as in the CSLD paper's
//! class table; seeded cost draws; and the deterministic body a dynamic response carries.

use std::collections::BTreeMap;
use std::time::Duration;

use bytes::Bytes;
use parking_lot::Mutex;
use percent_encoding::percent_decode_str;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use rand_distr::{Distribution, Exp, Normal};
use serde::{Deserialize, Serialize};

use crate::byte_size::ByteSize;
use crate::config::ConfigError;

/// One class as written in configuration:
///
/// ```toml
/// [[classes]]
/// name = "search"
/// prefix = "/cgi-bin/search"
/// query = { q = "*", lang = "en" }   # q with any value, lang exactly "en"
/// cost = { dist = "normal", mean_ms = 30, stddev_ms = 6 }
/// size = "4KiB"
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClassConfig {
    /// Class name, sent back in `X-Locus-Class`.
    pub name: String,
    /// Path prefix the request path must start with (compared before percent-decoding).
    pub prefix: String,
    /// Query parameters the request must carry: `"*"` accepts any value, anything else must
    /// equal the (percent-decoded) value.
    #[serde(default)]
    pub query: BTreeMap<String, String>,
    /// CPU time each request of the class costs.
    pub cost: CostDistribution,
    /// Response body size.
    pub size: ByteSize,
}

/// A CPU-cost distribution, in milliseconds.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "dist", rename_all = "lowercase", deny_unknown_fields)]
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

/// What a query parameter of a class pattern must be.
#[derive(Clone, Debug, PartialEq, Eq)]
enum QueryValue {
    Any,
    Exact(String),
}

/// One class of the table, ready to match and draw costs.
#[derive(Debug)]
pub struct DynamicClass {
    name: String,
    prefix: String,
    query: Vec<(String, QueryValue)>,
    cost: CostDistribution,
    size: u64,
    rng: Mutex<SmallRng>,
    header_line: Bytes,
}

impl DynamicClass {
    /// The class name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Response body size in bytes.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// The cost distribution.
    pub fn cost(&self) -> &CostDistribution {
        &self.cost
    }

    /// `X-Locus-Class: <name>\r\n`, pre-rendered.
    pub fn header_line(&self) -> &Bytes {
        &self.header_line
    }

    /// Draw the CPU cost of one request from the class's seeded generator.
    pub fn draw_cost(&self) -> Duration {
        self.cost.sample(&mut *self.rng.lock())
    }

    fn matches(&self, path: &str, query: Option<&str>) -> bool {
        if !path.starts_with(&self.prefix) {
            return false;
        }
        self.query.iter().all(|(key, want)| {
            query_pairs(query.unwrap_or("")).any(|(k, v)| {
                k == *key
                    && match want {
                        QueryValue::Any => true,
                        QueryValue::Exact(exact) => v == *exact,
                    }
            })
        })
    }
}

/// Percent-decoded `key=value` pairs of a query string (`+` is not treated as a space).
fn query_pairs(query: &str) -> impl Iterator<Item = (String, String)> + '_ {
    query.split('&').filter(|p| !p.is_empty()).map(|pair| {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        (
            percent_decode_str(k).decode_utf8_lossy().into_owned(),
            percent_decode_str(v).decode_utf8_lossy().into_owned(),
        )
    })
}

/// The class table: the first class (in configuration order) whose pattern matches wins.
#[derive(Debug, Default)]
pub struct ClassTable {
    classes: Vec<DynamicClass>,
}

impl ClassTable {
    /// Build the table from configuration; each class gets its own generator seeded from
    /// `seed` and its position, so runs with the same seed draw the same costs.
    pub fn new(configs: &[ClassConfig], seed: u64) -> Result<ClassTable, ConfigError> {
        let mut classes = Vec::with_capacity(configs.len());
        for (i, c) in configs.iter().enumerate() {
            let bad = |why: String| ConfigError::Invalid(format!("class {:?}: {why}", c.name));
            if c.name.is_empty() || !c.name.bytes().all(|b| b.is_ascii_graphic()) {
                return Err(bad("name must be non-empty visible ASCII".into()));
            }
            if !c.prefix.starts_with('/') {
                return Err(bad(format!("prefix {:?} must start with '/'", c.prefix)));
            }
            c.cost.validate().map_err(bad)?;
            let query = c
                .query
                .iter()
                .map(|(k, v)| {
                    (k.clone(), if v == "*" { QueryValue::Any } else { QueryValue::Exact(v.clone()) })
                })
                .collect();
            let class_seed = seed ^ (i as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
            classes.push(DynamicClass {
                name: c.name.clone(),
                prefix: c.prefix.clone(),
                query,
                cost: c.cost,
                size: c.size.bytes(),
                rng: Mutex::new(SmallRng::seed_from_u64(class_seed)),
                header_line: Bytes::from(format!("X-Locus-Class: {}\r\n", c.name)),
            });
        }
        Ok(ClassTable { classes })
    }

    /// Whether the table has no class.
    pub fn is_empty(&self) -> bool {
        self.classes.is_empty()
    }

    /// The classes, in matching order.
    pub fn classes(&self) -> &[DynamicClass] {
        &self.classes
    }

    /// The class of a request target (`/path?query`), if any.
    pub fn classify(&self, target: &str) -> Option<&DynamicClass> {
        if self.classes.is_empty() {
            return None;
        }
        let (path, query) = match target.split_once('?') {
            Some((p, q)) => (p, Some(q)),
            None => (target, None),
        };
        self.classes.iter().find(|c| c.matches(path, query))
    }
}

const BODY_ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
const BODY_BLOCK: usize = 64;

/// The body of a dynamic response for request target `target` (path and query as sent) and
/// `size` bytes: a 64-byte block of URL-safe characters drawn from an xorshift generator
/// seeded by `locus_core::target_hash(target)`, repeated. Clients recompute it to verify.
pub fn dynamic_body(target: &str, size: usize) -> Bytes {
    let mut state = locus_core::target_hash(target) | 1;
    let mut block = [0u8; BODY_BLOCK];
    for b in block.iter_mut() {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        *b = BODY_ALPHABET[(state >> 58) as usize];
    }
    let mut body = Vec::with_capacity(size);
    while body.len() < size {
        let take = (size - body.len()).min(BODY_BLOCK);
        body.extend_from_slice(&block[..take]);
    }
    Bytes::from(body)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn class(name: &str, prefix: &str, query: &[(&str, &str)], cost: CostDistribution) -> ClassConfig {
        ClassConfig {
            name: name.into(),
            prefix: prefix.into(),
            query: query.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
            cost,
            size: ByteSize(100),
        }
    }

    const TEN: CostDistribution = CostDistribution::Const { ms: 10.0 };

    #[test]
    fn class_matching_uses_prefix_and_required_query_parameters_in_order() {
        let table = ClassTable::new(
            &[
                class("exact", "/search", &[("q", "*"), ("lang", "en")], TEN),
                class("any", "/search", &[("q", "*")], TEN),
                class("plain", "/cgi/", &[], TEN),
            ],
            1,
        )
        .unwrap();
        let name = |t: &str| table.classify(t).map(|c| c.name().to_string());
        assert_eq!(name("/search?q=x&lang=en").as_deref(), Some("exact"));
        assert_eq!(name("/search?lang=en&q=").as_deref(), Some("exact"));
        assert_eq!(name("/search?q=x&lang=fr").as_deref(), Some("any"));
        assert_eq!(name("/search?q=%41&lang=%65n").as_deref(), Some("exact"));
        assert_eq!(name("/search"), None);
        assert_eq!(name("/search?qq=1"), None);
        assert_eq!(name("/cgi/run?x=1").as_deref(), Some("plain"));
        assert_eq!(name("/cgi"), None);
        assert_eq!(name("/index.html"), None);
    }

    #[test]
    fn class_table_refuses_bad_prefixes_and_parameters() {
        assert!(ClassTable::new(&[class("a", "nolead", &[], TEN)], 0).is_err());
        assert!(ClassTable::new(&[class("a", "/x", &[], CostDistribution::Const { ms: -1.0 })], 0).is_err());
        assert!(
            ClassTable::new(
                &[class("a", "/x", &[], CostDistribution::Uniform { min_ms: 5.0, max_ms: 1.0 })],
                0
            )
            .is_err()
        );
        assert!(ClassTable::new(&[class("a b", "/x", &[], TEN)], 0).is_err());
    }

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

    #[test]
    fn seeded_cost_draws_repeat_across_tables_and_differ_across_seeds() {
        let cfg = [class("n", "/n", &[], CostDistribution::Normal { mean_ms: 10.0, stddev_ms: 2.0 })];
        let draws = |seed| {
            let t = ClassTable::new(&cfg, seed).unwrap();
            (0..5).map(|_| t.classes()[0].draw_cost()).collect::<Vec<_>>()
        };
        assert_eq!(draws(42), draws(42));
        assert_ne!(draws(42), draws(43));
    }

    #[test]
    fn dynamic_body_is_deterministic_per_target_and_exact_in_size() {
        let a = dynamic_body("/cgi/x?id=1", 1000);
        assert_eq!(a.len(), 1000);
        assert_eq!(a, dynamic_body("/cgi/x?id=1", 1000));
        assert_ne!(a, dynamic_body("/cgi/x?id=2", 1000));
        assert_eq!(&a[..64], &a[64..128]);
        assert!(a.iter().all(|b| BODY_ALPHABET.contains(b)));
        assert_eq!(dynamic_body("/", 0).len(), 0);
        assert_eq!(&dynamic_body("/cgi/x?id=1", 10)[..], &a[..10]);
    }

    #[test]
    fn cost_distribution_deserializes_by_dist_tag_and_refuses_unknown_fields() {
        #[derive(Deserialize)]
        struct W {
            cost: CostDistribution,
        }
        let w: W = toml::from_str("cost = { dist = \"normal\", mean_ms = 30, stddev_ms = 6 }").unwrap();
        assert_eq!(w.cost, CostDistribution::Normal { mean_ms: 30.0, stddev_ms: 6.0 });
        let w: W = toml::from_str("cost = { dist = \"const\", ms = 2.5 }").unwrap();
        assert_eq!(w.cost, CostDistribution::Const { ms: 2.5 });
        assert!(toml::from_str::<W>("cost = { dist = \"const\", ms = 1, extra = 2 }").is_err());
        assert!(toml::from_str::<W>("cost = { dist = \"pareto\", ms = 1 }").is_err());
    }
}
