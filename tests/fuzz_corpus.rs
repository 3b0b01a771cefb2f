//! Replays the fuzz targets' seed corpus (`fuzz/corpus/<target>/`) through
//! the very checks the fuzz targets run (`fuzz/checks.rs`), on stable Rust
//! and without cargo-fuzz, so a regression on any kept input fails CI.

#[allow(dead_code)]
#[path = "../fuzz/checks.rs"]
mod checks;

use std::path::Path;

#[test]
fn every_target_replays_its_corpus() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus");
    for &(target, check) in checks::TARGETS {
        let dir = root.join(target);
        let entries =
            std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("corpus {}: {e}", dir.display()));
        let mut files = 0;
        for entry in entries {
            let path = entry.unwrap().path();
            let data = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            eprintln!("{target}: {}", path.display());
            check(&data);
            files += 1;
        }
        assert!(files > 0, "corpus {} is empty", dir.display());
    }
}

/// Every corpus directory is a target's, so none is silently skipped.
#[test]
fn every_corpus_has_a_target() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus");
    for entry in std::fs::read_dir(&root).unwrap() {
        let name = entry.unwrap().file_name();
        let name = name.to_str().unwrap();
        // The kubelet client's corpora stay in a build without it.
        let built_out = !cfg!(feature = "kubernetes") && checks::KUBELET_TARGETS.contains(&name);
        assert!(
            built_out || checks::TARGETS.iter().any(|&(t, _)| t == name),
            "fuzz/corpus/{name} has no check in fuzz/checks.rs"
        );
    }
}
