//! A class table that makes no sense is refused when the node's configuration is read or
//! the node starts, with an error that says where: the file, key and line for a bad value
//! (negative cost, unknown resource kind), both class names for a class shadowed by an
//! earlier one.

use std::path::Path;

use locus_node::{NodeConfig, NodeServer};

const GOOD: &str = "[[classes]]\nname = \"search\"\nprefix = \"/search\"\n\
                    cost = { dist = \"const\", ms = 5 }\nsize = 100\n";

/// The error of reading `text` as the node file `node.toml`.
fn node_file_error(dir: &Path, text: &str) -> String {
    let path = dir.join("node.toml");
    std::fs::write(&path, text).unwrap();
    NodeConfig::from_file(&path).unwrap_err().to_string()
}

/// The error of starting a node whose `class_file` holds `text`.
fn class_file_error(dir: &Path, text: &str) -> String {
    let path = dir.join("classes.toml");
    std::fs::write(&path, text).unwrap();
    let config = NodeConfig {
        root: dir.to_path_buf(),
        listen: "127.0.0.1:0".parse().unwrap(),
        class_file: Some(path),
        workers: 1,
        cpu_threads: 1,
        ..NodeConfig::default()
    };
    match NodeServer::start(config) {
        Ok(_) => panic!("a node started with the classes\n{text}"),
        Err(e) => e.to_string(),
    }
}

fn assert_names(e: &str, parts: &[&str]) {
    for p in parts {
        assert!(e.contains(p), "expected {p:?} in: {e}");
    }
}

#[test]
fn a_negative_cost_is_refused_naming_the_file_key_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let text = GOOD.replace("ms = 5", "ms = -5");
    assert_names(
        &node_file_error(dir.path(), &text),
        &["node.toml", "line 4", "ms must be a finite number >= 0"],
    );
    assert_names(&class_file_error(dir.path(), &text), &["classes.toml", "line 4", "ms must be"]);
    let text = format!("{GOOD}disk_ms = -1\n");
    assert_names(&node_file_error(dir.path(), &text), &["node.toml", "line 6", "disk_ms must be"]);
}

#[test]
fn an_unknown_resource_kind_is_refused_naming_the_file_key_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let text = format!("{GOOD}resource = \"gpu\"\n");
    assert_names(&node_file_error(dir.path(), &text), &["node.toml", "line 6", "unknown variant `gpu`"]);
    assert_names(&class_file_error(dir.path(), &text), &["classes.toml", "line 6", "gpu"]);
    let ok = format!("{GOOD}resource = \"cpu+disk\"\n");
    let path = dir.path().join("node.toml");
    std::fs::write(&path, ok).unwrap();
    assert_eq!(NodeConfig::from_file(&path).unwrap().classes.len(), 1);
}

#[test]
fn a_class_shadowed_by_an_earlier_one_is_refused_naming_both() {
    let dir = tempfile::tempdir().unwrap();
    let specific = "[[classes]]\nname = \"search-en\"\nprefix = \"/search/en\"\n\
                    cost = { dist = \"const\", ms = 5 }\nsize = 100\n";
    let text = format!("{GOOD}{specific}");
    let e = node_file_error(dir.path(), &text);
    assert_names(&e, &["node.toml", "\"search-en\"", "\"search\"", "never match"]);
    let e = class_file_error(dir.path(), &text);
    assert_names(&e, &["classes.toml", "\"search-en\"", "\"search\"", "never match"]);
    // The specific class first is a table that makes sense.
    let path = dir.path().join("node.toml");
    std::fs::write(&path, format!("{specific}{GOOD}")).unwrap();
    assert_eq!(NodeConfig::from_file(&path).unwrap().classes.len(), 2);
    let e = node_file_error(dir.path(), &format!("{GOOD}{}", GOOD.replace("/search", "/other")));
    assert_names(&e, &["node.toml", "\"search\"", "two classes"]);
}
