//! `RequestClassifier`: the class table ready to match request targets. The first class (in
//! configuration order) whose prefix and query requirements a target meets wins; a class that
//! an earlier one always shadows, or a repeated name, is refused when the table is built.

use locus_core::{ClassCost, ResourceKind};
use percent_encoding::percent_decode_str;

use crate::class_config::ClassConfig;
use crate::cost::CostDistribution;

/// Why a class table cannot be built.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ClassError {
    #[error("classes: name {0:?} is used by two classes")]
    DuplicateName(String),
    #[error(
        "classes: class {later:?} can never match: the earlier class {earlier:?} matches every \
         request it does (its prefix is a prefix of {later:?}'s and its query requirements are a \
         subset); put the more specific class first"
    )]
    Shadowed { earlier: String, later: String },
    #[error("classes: {0} classes is too many (at most 65536)")]
    TooMany(usize),
}

/// What a query parameter of a class pattern must be.
#[derive(Clone, Debug, PartialEq, Eq)]
enum QueryValue {
    Any,
    Exact(String),
}

/// One class of the table, ready to match.
#[derive(Clone, Debug)]
pub struct ClassSpec {
    name: String,
    prefix: String,
    query: Vec<(String, QueryValue)>,
    cost: CostDistribution,
    disk_ms: f64,
    size: u64,
    resource: ResourceKind,
}

impl ClassSpec {
    fn new(c: &ClassConfig) -> ClassSpec {
        let query = c
            .query
            .iter()
            .map(|(k, v)| (k.clone(), if v == "*" { QueryValue::Any } else { QueryValue::Exact(v.clone()) }))
            .collect();
        ClassSpec {
            name: c.name.clone(),
            prefix: c.prefix.clone(),
            query,
            cost: c.cost,
            disk_ms: c.disk_ms,
            size: c.size.bytes(),
            resource: c.resource_kind(),
        }
    }

    /// The class name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Response body size in bytes.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// The CPU-cost distribution.
    pub fn cost(&self) -> &CostDistribution {
        &self.cost
    }

    /// Disk time per request, ms.
    pub fn disk_ms(&self) -> f64 {
        self.disk_ms
    }

    /// The resource the class mostly uses.
    pub fn resource(&self) -> ResourceKind {
        self.resource
    }

    /// The class's mean costs, as a policy estimates with them.
    pub fn mean_cost(&self) -> ClassCost {
        ClassCost {
            cpu_ns: (self.cost.mean_ms() * 1e6).round() as u64,
            disk_ns: (self.disk_ms * 1e6).round() as u64,
            size: self.size,
            resource: self.resource,
        }
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

    /// Whether every target this class matches is matched by `self` as well.
    fn covers(&self, later: &ClassSpec) -> bool {
        later.prefix.starts_with(&self.prefix)
            && self.query.iter().all(|(key, want)| {
                later.query.iter().any(|(k, v)| k == key && (*want == QueryValue::Any || v == want))
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

/// The class table: request targets to class indexes.
#[derive(Clone, Debug, Default)]
pub struct RequestClassifier {
    classes: Vec<ClassSpec>,
}

impl RequestClassifier {
    /// Build the table from configuration, refusing repeated names and shadowed classes.
    pub fn new(configs: &[ClassConfig]) -> Result<RequestClassifier, ClassError> {
        if configs.len() > u16::MAX as usize + 1 {
            return Err(ClassError::TooMany(configs.len()));
        }
        let classes: Vec<ClassSpec> = configs.iter().map(ClassSpec::new).collect();
        for (j, later) in classes.iter().enumerate() {
            for earlier in &classes[..j] {
                if earlier.name == later.name {
                    return Err(ClassError::DuplicateName(later.name.clone()));
                }
                if earlier.covers(later) {
                    return Err(ClassError::Shadowed {
                        earlier: earlier.name.clone(),
                        later: later.name.clone(),
                    });
                }
            }
        }
        Ok(RequestClassifier { classes })
    }

    /// Whether the table has no class.
    pub fn is_empty(&self) -> bool {
        self.classes.is_empty()
    }

    /// The classes, in matching order; a class's index is its position here.
    pub fn classes(&self) -> &[ClassSpec] {
        &self.classes
    }

    /// The class with this index.
    pub fn class(&self, index: u16) -> Option<&ClassSpec> {
        self.classes.get(index as usize)
    }

    /// Every class's mean costs, indexed like `classes()` (what `RequestInfo::class` indexes).
    pub fn mean_costs(&self) -> Vec<ClassCost> {
        self.classes.iter().map(ClassSpec::mean_cost).collect()
    }

    /// The index of the class of a request target (`/path?query`), if any.
    pub fn classify(&self, target: &str) -> Option<u16> {
        if self.classes.is_empty() {
            return None;
        }
        let (path, query) = match target.split_once('?') {
            Some((p, q)) => (p, Some(q)),
            None => (target, None),
        };
        self.classes.iter().position(|c| c.matches(path, query)).map(|i| i as u16)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ByteSize;

    fn class(name: &str, prefix: &str, query: &[(&str, &str)]) -> ClassConfig {
        ClassConfig {
            name: name.into(),
            prefix: prefix.into(),
            query: query.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
            cost: CostDistribution::Const { ms: 10.0 },
            disk_ms: 0.0,
            size: ByteSize(100),
            resource: None,
        }
    }

    #[test]
    fn class_matching_uses_prefix_and_required_query_parameters_in_order() {
        let table = RequestClassifier::new(&[
            class("exact", "/search", &[("q", "*"), ("lang", "en")]),
            class("any", "/search", &[("q", "*")]),
            class("plain", "/cgi/", &[]),
        ])
        .unwrap();
        let name = |t: &str| table.classify(t).map(|i| table.class(i).unwrap().name().to_string());
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
    fn a_class_shadowed_by_an_earlier_one_or_a_repeated_name_is_refused() {
        let shadowed = RequestClassifier::new(&[
            class("wide", "/s", &[("q", "*")]),
            class("narrow", "/search", &[("q", "x"), ("l", "en")]),
        ]);
        assert_eq!(
            shadowed.unwrap_err(),
            ClassError::Shadowed { earlier: "wide".into(), later: "narrow".into() }
        );
        let same = RequestClassifier::new(&[class("a", "/a", &[]), class("a", "/b", &[])]);
        assert_eq!(same.unwrap_err(), ClassError::DuplicateName("a".into()));
        // Overlapping but not covering is fine: the first match wins.
        assert!(RequestClassifier::new(&[class("q", "/s", &[("q", "1")]), class("s", "/s", &[])]).is_ok());
        assert!(RequestClassifier::new(&[class("long", "/s/x", &[]), class("short", "/s", &[])]).is_ok());
    }

    #[test]
    fn mean_costs_carry_cpu_disk_size_and_resource_in_class_order() {
        let mut db = class("db", "/db", &[]);
        db.disk_ms = 20.0;
        db.cost = CostDistribution::Const { ms: 0.0 };
        let table = RequestClassifier::new(&[class("cgi", "/cgi", &[]), db]).unwrap();
        let costs = table.mean_costs();
        assert_eq!(
            costs[0],
            ClassCost { cpu_ns: 10_000_000, disk_ns: 0, size: 100, resource: ResourceKind::Cpu }
        );
        assert_eq!(
            costs[1],
            ClassCost { cpu_ns: 0, disk_ns: 20_000_000, size: 100, resource: ResourceKind::Disk }
        );
    }
}
