//! The crate's layering, checked on its source. The scenario schema parses and validates
//! with the workloads and the schedulers, and `model` compiles a scenario for the engine,
//! so none of the workloads, the schedulers or the engine may import the schema back (an
//! import cycle, and an engine that reads the scenario after construction). The words
//! they share live in `vocab`, a leaf that imports nothing of the crate.

use std::path::{Path, PathBuf};

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// Every `.rs` file at `path` (a file, or a directory searched recursively).
fn rust_files(path: &Path) -> Vec<PathBuf> {
    if path.is_file() {
        return vec![path.to_path_buf()];
    }
    let mut files = Vec::new();
    for entry in std::fs::read_dir(path).unwrap_or_else(|e| panic!("{}: {e}", path.display())) {
        let p = entry.unwrap().path();
        if p.is_dir() {
            files.extend(rust_files(&p));
        } else if p.extension().is_some_and(|x| x == "rs") {
            files.push(p);
        }
    }
    files
}

/// The places in `paths` (under src/) whose text contains any of `needles`.
fn mentions(paths: &[&str], needles: &[&str]) -> Vec<String> {
    let mut found = Vec::new();
    for p in paths {
        for file in rust_files(&src().join(p)) {
            let text = std::fs::read_to_string(&file).unwrap();
            for (i, line) in text.lines().enumerate() {
                if needles.iter().any(|n| line.contains(n)) {
                    found.push(format!("{}:{}: {}", file.display(), i + 1, line.trim()));
                }
            }
        }
    }
    found
}

#[test]
fn workloads_schedulers_and_the_engine_do_not_import_the_scenario_schema() {
    let found = mentions(
        &["workload", "sched", "engine"],
        &["crate::scenario", "crate::Scenario", "super::scenario"],
    );
    assert!(found.is_empty(), "{found:#?}");
    let found = mentions(&["engine"], &["Scenario"]);
    assert!(
        found.is_empty(),
        "the engine is built from a Model: {found:#?}"
    );
}

#[test]
fn vocab_is_a_leaf() {
    let found = mentions(&["vocab.rs"], &["crate::", "super::"]);
    assert!(found.is_empty(), "{found:#?}");
}
