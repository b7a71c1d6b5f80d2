//! Every experiment file in the repository's `experiments/` folder parses and validates, and
//! expands into points (no root needed: nothing runs).

use locus_lab::Experiment;

#[test]
fn every_experiment_file_parses_and_expands_into_points() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../experiments");
    let mut checked = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "toml") {
            let e = Experiment::from_file(&path).unwrap_or_else(|err| panic!("{}: {err}", path.display()));
            assert!(!e.points().is_empty(), "{}: no points", path.display());
            checked += 1;
        }
    }
    assert!(checked >= 3, "only {checked} experiment files in {}", dir.display());
}
