//! `reproduce csld` and `reproduce cap` in their quick form: the files are written, parse,
//! and hold one result object per simulated point (whether the claims are met is not
//! checked here).

use std::collections::HashSet;

use locus_sim::reproduce::cap::{CAP_POLICIES, THRESHOLDS, mix_cases, reproduce_cap};
use locus_sim::reproduce::csld::{
    CsldOptions, FIG6_POLICIES, TABLE4, TABLE4_POLICIES, TABLE5, reproduce_csld,
};

fn read_json(dir: &std::path::Path, name: &str) -> serde_json::Value {
    let text = std::fs::read_to_string(dir.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{name} does not parse: {e}"))
}

fn check_outputs(dir: &std::path::Path, points: usize) {
    let results = read_json(dir, "results.json");
    let results = results.as_array().expect("results.json is an array");
    assert_eq!(results.len(), points, "one object per point");
    let mut seen = HashSet::new();
    for r in results {
        for key in ["case", "policy", "rate", "latency_s", "rejection_ratio"] {
            assert!(r.get(key).is_some(), "{key} missing in {r}");
        }
        let key =
            (r["case"].to_string(), r["policy"].to_string(), r["rate"].to_string(), r["params"].to_string());
        assert!(seen.insert(key), "duplicate point {r}");
        assert!(r["latency_s"].as_f64().unwrap() >= 0.0);
    }
    let claims = read_json(dir, "claims.json");
    for c in claims.as_array().expect("claims.json is an array") {
        for key in ["statement", "criterion", "met", "evidence", "by_construction", "slack"] {
            assert!(c.get(key).is_some(), "{key} missing in {c}");
        }
        assert!(c["by_construction"].is_boolean() && (c["slack"].is_null() || c["slack"].is_string()), "{c}");
    }
    let report = std::fs::read_to_string(dir.join("report.md")).unwrap();
    assert!(report.contains("## Claims"));
}

#[test]
fn quick_csld_and_cap_reproductions_write_one_result_per_point_and_parseable_claims() {
    let dir = tempfile::tempdir().unwrap();
    let csld_dir = dir.path().join("csld");
    let mut opts = CsldOptions::quick(&csld_dir);
    opts.progress = false;
    let out = reproduce_csld(&opts).unwrap();
    let csld_points = TABLE4.len() * TABLE4_POLICIES.len() + TABLE5.len() * FIG6_POLICIES.len();
    assert_eq!(out.points.len(), csld_points);
    check_outputs(&csld_dir, csld_points);
    for f in ["table4_ratio_to_rr.svg", "table5_rr_latency.svg", "fig6_ratio_to_rr.svg"] {
        assert!(csld_dir.join(f).is_file(), "{f}");
    }

    let cap_dir = dir.path().join("cap");
    let mut opts = CsldOptions::quick(&cap_dir);
    opts.progress = false;
    let out = reproduce_cap(&opts).unwrap();
    let cap_points = (1 + mix_cases().len()) * CAP_POLICIES.len() + (THRESHOLDS.len() - 1) * 2;
    assert_eq!(out.points.len(), cap_points);
    check_outputs(&cap_dir, cap_points);
    assert!(cap_dir.join("mix_latency.svg").is_file());
}

#[test]
fn reproduce_dc_quick_writes_report_results_and_claims_that_parse() {
    let dir = tempfile::tempdir().unwrap();
    let opts = locus_sim::reproduce::dc::DcOptions::quick(dir.path());
    let out = locus_sim::reproduce::dc::reproduce_dc(&opts).unwrap();
    let rows: Vec<serde_json::Value> =
        serde_json::from_slice(&std::fs::read(dir.path().join("results.json")).unwrap()).unwrap();
    assert_eq!(rows.len(), out.rows.len());
    for key in ["dataset", "servers", "method", "quota_bytes", "cps", "mean_ms"] {
        assert!(rows.iter().all(|r| r.get(key).is_some()), "{key} missing");
    }
    let sets: std::collections::BTreeSet<&str> = rows.iter().filter_map(|r| r["dataset"].as_str()).collect();
    assert_eq!(sets.len(), 4, "{sets:?}");
    assert!(rows.iter().all(|r| r["cps"].as_f64().unwrap() > 0.0));
    let claims: Vec<serde_json::Value> =
        serde_json::from_slice(&std::fs::read(dir.path().join("claims.json")).unwrap()).unwrap();
    assert!(claims.len() >= 6 && claims.iter().all(|c| c["met"].is_boolean() && c["evidence"].is_string()));
    let report = std::fs::read_to_string(dir.path().join("report.md")).unwrap();
    assert!(report.contains("Fig. 9") && report.contains("## Claims"));
    for svg in ["fig7_cps.svg", "fig8_response.svg", "fig9_specweb99.svg", "fig9_sequoia.svg"] {
        assert!(std::fs::read_to_string(dir.path().join(svg)).unwrap().starts_with("<svg"), "{svg}");
    }
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with(".dc-site"))
        .collect();
    assert!(left.is_empty(), "scratch sites left behind");
}
