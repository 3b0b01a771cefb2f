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
        assert!(
            checks::TARGETS.iter().any(|&(t, _)| t == name),
            "fuzz/corpus/{name} has no check in fuzz/checks.rs"
        );
    }
}

/// The JSON targets feed nanoserde only strict JSON (`checks::strict_json`);
/// no JSON seed may be skipped by that filter.
#[test]
fn json_seeds_are_strict_json() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus");
    for target in ["scenario_json", "rules_json"] {
        for entry in std::fs::read_dir(root.join(target)).unwrap() {
            let path = entry.unwrap().path();
            let text = std::fs::read_to_string(&path).unwrap();
            assert!(checks::strict_json(&text), "{} is skipped", path.display());
        }
    }
}

#[test]
fn strict_json_takes_json_only() {
    for ok in [
        "{}",
        " [1, -0.5e+3, \"a\\u00e9\\n\", true, false, null, {\"k\": []}] ",
        "0",
    ] {
        assert!(checks::strict_json(ok), "{ok:?}");
    }
    for bad in [
        "",
        r#"{"x":["#,
        r#"{"x":}"#,
        r#"{"x":,}"#,
        "[1,]",
        "{\"a\":1}x",
        "\"a\u{1}\"",
        "01",
        "1.",
        "// c\n{}",
        "tru",
        &format!("{}{}", "[".repeat(65), "]".repeat(65)),
    ] {
        assert!(!checks::strict_json(bad), "{bad:?}");
    }
    assert!(checks::strict_json(&format!(
        "{}{}",
        "[".repeat(64),
        "]".repeat(64)
    )));
}
