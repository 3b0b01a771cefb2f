//! The documentation's generated tables, held to what the code declares:
//! the text between `<!-- NAME:start -->` and `<!-- NAME:end -->` is
//! exactly the table; `GPU_EXPORTER_BLESS=1` writes it there instead. The
//! markers may stand in README.md or in any page of docs/ (`docs/*.md`),
//! in exactly one of them.

use std::path::{Path, PathBuf};

/// README.md and the pages of docs/, where generated tables may stand.
fn pages() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut pages = vec![root.join("README.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .expect("docs/ reads")
        .map(|e| e.expect("docs/ reads").path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    docs.sort();
    pages.extend(docs);
    pages
}

/// The one page that holds `start`: a panic naming them when none or
/// several do.
fn page_with(start: &str) -> (PathBuf, String) {
    let mut found: Vec<(PathBuf, String)> = pages()
        .into_iter()
        .map(|p| {
            let text =
                std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
            (p, text)
        })
        .filter(|(_, text)| text.contains(start))
        .collect();
    match found.len() {
        1 => found.remove(0),
        0 => panic!("no {start:?} in README.md or docs/*.md"),
        _ => panic!(
            "{start:?} in more than one page: {:?}",
            found.iter().map(|(p, _)| p).collect::<Vec<_>>()
        ),
    }
}

/// Asserts (or with `GPU_EXPORTER_BLESS=1`, writes) that the one page
/// with the markers of `name` holds `table` between them.
pub fn holds(name: &str, table: &str) {
    // Tests run in parallel: one table's rewrite must not undo another's.
    static PAGES: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one = PAGES.lock().unwrap_or_else(|e| e.into_inner());
    let (start, end) = (
        format!("<!-- {name}:start -->\n"),
        format!("<!-- {name}:end -->"),
    );
    let (path, text) = page_with(&start);
    let (before, rest) = text.split_once(&start).expect("found above");
    let (held, after) = rest
        .split_once(&end)
        .unwrap_or_else(|| panic!("{}: no {end}", path.display()));
    if std::env::var_os("GPU_EXPORTER_BLESS").is_some_and(|v| v == "1") {
        std::fs::write(&path, format!("{before}{start}{table}{end}{after}"))
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    } else {
        assert!(
            held == table,
            "{}: the {name} table is stale: run GPU_EXPORTER_BLESS=1 cargo test --lib readme",
            path.display()
        );
    }
}

/// Asserts (or with `GPU_EXPORTER_BLESS=1`, writes) that the file at
/// `path` is `text`, whole: a generated file that is committed.
pub fn holds_file(path: &str, text: &str) {
    if std::env::var_os("GPU_EXPORTER_BLESS").is_some_and(|v| v == "1") {
        std::fs::write(path, text).unwrap_or_else(|e| panic!("{path}: {e}"));
    } else {
        let held = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
        assert!(
            held == text,
            "{path} is stale: run GPU_EXPORTER_BLESS=1 cargo test --lib readme"
        );
    }
}
