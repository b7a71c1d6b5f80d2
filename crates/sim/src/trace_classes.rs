//! The shared class table applied to a trace: `locus sim run|sweep --class-file FILE` reads
//! the same `[[classes]]` tables the node and the switch read, marks every request whose
//! target matches a class as dynamic, and gives the cost model each class's costs.

use std::path::Path;

use locus_classify::{ClassFile, CostDistribution, RequestClassifier};

use crate::cost_model::{ClassCost, CostModel};
use crate::error::SimError;
use crate::workload::Workload;

/// Read and check the class table at `path`.
pub fn read_class_file(path: &Path) -> Result<RequestClassifier, SimError> {
    let bad = |message: String| SimError::Config(format!("{}: {message}", path.display()));
    let text = std::fs::read_to_string(path).map_err(|e| bad(e.to_string()))?;
    let file: ClassFile = toml::from_str(&text).map_err(|e| bad(e.to_string()))?;
    RequestClassifier::new(&file.classes).map_err(|e| bad(e.to_string()))
}

/// The simulator's cost of each class, in class order: the CPU draw is normal with the
/// distribution's mean and standard deviation (the simulator draws every class that way).
pub fn class_costs(classifier: &RequestClassifier) -> Vec<ClassCost> {
    classifier
        .classes()
        .iter()
        .enumerate()
        .map(|(i, spec)| {
            let mean = spec.cost().mean_ms();
            let stddev = match *spec.cost() {
                CostDistribution::Const { .. } => 0.0,
                CostDistribution::Normal { stddev_ms, .. } => stddev_ms,
                CostDistribution::Exponential { mean_ms } => mean_ms,
                CostDistribution::Uniform { min_ms, max_ms } => (max_ms - min_ms) / 12f64.sqrt(),
            };
            ClassCost {
                class: i as u16,
                mean_ns: (mean * 1e6).round() as u64,
                stddev_ratio: if mean > 0.0 { stddev / mean } else { 0.0 },
                disk_ns: (spec.disk_ms() * 1e6).round() as u64,
            }
        })
        .collect()
}

/// Classify `workload`'s targets with `classifier` and put the class costs into `costs`
/// (replacing its classes); returns how many distinct targets became dynamic.
pub fn apply_class_table(
    workload: &mut Workload,
    costs: &mut CostModel,
    classifier: &RequestClassifier,
) -> usize {
    costs.classes = class_costs(classifier);
    workload
        .classify(|target| classifier.classify(target).map(|i| (i, classifier.classes()[i as usize].size())))
}

#[cfg(test)]
mod tests {
    use super::*;
    use locus_trace::TraceRecord;

    const CLASSES: &str = "[[classes]]\nname = \"search\"\nprefix = \"/cgi/search\"\n\
        cost = { dist = \"normal\", mean_ms = 30, stddev_ms = 6 }\nsize = \"2KiB\"\n\n\
        [[classes]]\nname = \"db\"\nprefix = \"/db\"\ncost = { dist = \"const\", ms = 0 }\n\
        disk_ms = 20\nsize = 100\n";

    #[test]
    fn a_trace_classified_by_the_shared_table_gets_dynamic_requests_and_their_costs() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("classes.toml");
        std::fs::write(&path, CLASSES).unwrap();
        let classifier = read_class_file(&path).unwrap();
        let records = [
            TraceRecord::get("/index.html", 500),
            TraceRecord::get("/cgi/search?q=a", 0),
            TraceRecord::get("/db/x", 0),
            TraceRecord::get("/cgi/search?q=a", 0),
        ];
        let mut w = Workload::from_records(&records);
        let mut costs = CostModel::csld03();
        assert_eq!(apply_class_table(&mut w, &mut costs, &classifier), 2);
        let classes: Vec<Option<u16>> = w.targets().iter().map(|t| t.class).collect();
        assert_eq!(classes, [None, Some(0), Some(1)]);
        assert_eq!(w.targets()[1].size, 2048);
        assert_eq!(w.kinds().iter().filter(|k| **k == crate::RequestKind::Dynamic).count(), 3);
        assert_eq!(
            costs.classes[0],
            ClassCost { class: 0, mean_ns: 30_000_000, stddev_ratio: 0.2, disk_ns: 0 }
        );
        assert_eq!(costs.classes[1].disk_ns, 20_000_000);
    }

    #[test]
    fn a_bad_class_file_is_refused_naming_the_file_and_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("classes.toml");
        std::fs::write(&path, CLASSES.replace("disk_ms = 20", "disk_ms = -1")).unwrap();
        let e = read_class_file(&path).unwrap_err().to_string();
        assert!(e.contains("classes.toml") && e.contains("line 11") && e.contains("disk_ms"), "{e}");
    }
}
