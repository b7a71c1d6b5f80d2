//! The node's class table of dynamic endpoints: the shared request classifier
//! (`locus_classify`) plus, per class, a seeded generator for its CPU-cost draws and the
//! pre-rendered `X-Locus-Class` header; and the deterministic body a dynamic response carries.

use std::time::Duration;

use bytes::Bytes;
use locus_classify::{ClassConfig, ClassSpec, RequestClassifier};
use parking_lot::Mutex;
use rand::SeedableRng;
use rand::rngs::SmallRng;

use crate::config::ConfigError;

/// One class of the table, ready to serve.
#[derive(Debug)]
pub struct DynamicClass {
    spec: ClassSpec,
    rng: Mutex<SmallRng>,
    header_line: Bytes,
}

impl DynamicClass {
    /// The class name.
    pub fn name(&self) -> &str {
        self.spec.name()
    }

    /// Response body size in bytes.
    pub fn size(&self) -> u64 {
        self.spec.size()
    }

    /// The class as the classifier knows it (costs, resource kind).
    pub fn spec(&self) -> &ClassSpec {
        &self.spec
    }

    /// `X-Locus-Class: <name>\r\n`, pre-rendered.
    pub fn header_line(&self) -> &Bytes {
        &self.header_line
    }

    /// Draw the CPU cost of one request from the class's seeded generator.
    pub fn draw_cost(&self) -> Duration {
        self.spec.cost().sample(&mut *self.rng.lock())
    }

    /// The disk time one request of the class costs.
    pub fn disk_time(&self) -> Duration {
        Duration::from_secs_f64(self.spec.disk_ms() / 1000.0)
    }
}

/// The class table: the first class (in configuration order) whose pattern matches wins.
#[derive(Debug, Default)]
pub struct ClassTable {
    classifier: RequestClassifier,
    classes: Vec<DynamicClass>,
}

impl ClassTable {
    /// Build the table from configuration; each class gets its own generator seeded from
    /// `seed` and its position, so runs with the same seed draw the same costs.
    pub fn new(configs: &[ClassConfig], seed: u64) -> Result<ClassTable, ConfigError> {
        let classifier = RequestClassifier::new(configs).map_err(|e| ConfigError::Invalid(e.to_string()))?;
        let classes = classifier
            .classes()
            .iter()
            .enumerate()
            .map(|(i, spec)| {
                let class_seed = seed ^ (i as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
                DynamicClass {
                    spec: spec.clone(),
                    rng: Mutex::new(SmallRng::seed_from_u64(class_seed)),
                    header_line: Bytes::from(format!("X-Locus-Class: {}\r\n", spec.name())),
                }
            })
            .collect();
        Ok(ClassTable { classifier, classes })
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
        self.classifier.classify(target).map(|i| &self.classes[i as usize])
    }
}

/// The body of a dynamic response for request target `target` and `size` bytes (see
/// `locus_classify::dynamic_body`, which clients use to verify it).
pub fn dynamic_body(target: &str, size: usize) -> Bytes {
    Bytes::from(locus_classify::dynamic_body(target, size))
}

#[cfg(test)]
mod tests {
    use super::*;
    use locus_classify::{ByteSize, CostDistribution};

    fn class(name: &str, prefix: &str, cost: CostDistribution) -> ClassConfig {
        ClassConfig {
            name: name.into(),
            prefix: prefix.into(),
            query: Default::default(),
            cost,
            disk_ms: 0.0,
            size: ByteSize(100),
            resource: None,
        }
    }

    #[test]
    fn class_table_serves_the_first_matching_class_and_refuses_shadowed_ones() {
        let ten = CostDistribution::Const { ms: 10.0 };
        let t = ClassTable::new(&[class("x", "/cgi/x", ten), class("cgi", "/cgi/", ten)], 1).unwrap();
        assert_eq!(t.classify("/cgi/x?a=1").map(|c| c.name()), Some("x"));
        assert_eq!(t.classify("/cgi/y").map(|c| c.name()), Some("cgi"));
        assert!(t.classify("/index.html").is_none());
        assert!(ClassTable::new(&[class("cgi", "/cgi/", ten), class("x", "/cgi/x", ten)], 1).is_err());
    }

    #[test]
    fn seeded_cost_draws_repeat_across_tables_and_differ_across_seeds() {
        let cfg = [class("n", "/n", CostDistribution::Normal { mean_ms: 10.0, stddev_ms: 2.0 })];
        let draws = |seed| {
            let t = ClassTable::new(&cfg, seed).unwrap();
            (0..5).map(|_| t.classes()[0].draw_cost()).collect::<Vec<_>>()
        };
        assert_eq!(draws(42), draws(42));
        assert_ne!(draws(42), draws(43));
    }
}
