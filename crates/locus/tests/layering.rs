//! The layering the build keeps: no product crate depends on a tool crate. Read from every
//! product crate's `Cargo.toml` (normal and build dependencies; dev-dependencies may use tools).

use std::path::Path;

/// The crates that serve or decide: what a production binary is built from.
const PRODUCT: &[&str] = &[
    "core",
    "classify",
    "policy",
    "cache",
    "dc",
    "node-config",
    "http",
    "io",
    "site",
    "tls",
    "handoff",
    "bpf",
    "switch",
    "node",
];
/// The tools: measurement, simulation, traces and the lab.
const TOOLS: &[&str] = &["trace", "sim", "load", "lab", "rig", "plot", "bench"];

fn dependencies(krate: &str) -> Vec<String> {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(krate).join("Cargo.toml");
    let text = std::fs::read_to_string(&manifest).unwrap_or_else(|e| panic!("{}: {e}", manifest.display()));
    let doc: toml::Table = text.parse().unwrap_or_else(|e| panic!("{}: {e}", manifest.display()));
    ["dependencies", "build-dependencies"]
        .iter()
        .filter_map(|section| doc.get(*section).and_then(|t| t.as_table()))
        .flat_map(|t| t.keys().cloned())
        .collect()
}

#[test]
fn no_product_crate_depends_on_a_tool_crate() {
    let mut wrong = Vec::new();
    for krate in PRODUCT {
        for dep in dependencies(krate) {
            if TOOLS.iter().any(|tool| dep == format!("locus-{tool}")) {
                wrong.push(format!("{krate} -> {dep}"));
            }
        }
    }
    assert!(wrong.is_empty(), "product crates depending on tools: {wrong:?}");
}

#[test]
fn every_workspace_crate_is_named_product_or_tool() {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let others = ["locus", "test-support"];
    for entry in std::fs::read_dir(&crates).expect("crates/ is readable") {
        let path = entry.expect("a crates/ entry").path();
        if !path.join("Cargo.toml").is_file() {
            continue;
        }
        let name = path.file_name().and_then(|n| n.to_str()).expect("a UTF-8 crate folder").to_string();
        assert!(
            PRODUCT.contains(&name.as_str())
                || TOOLS.contains(&name.as_str())
                || others.contains(&name.as_str()),
            "crates/{name} is neither a product nor a tool crate: add it to one list"
        );
    }
}
