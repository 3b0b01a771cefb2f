//! The README's generated tables, held to what the code declares: the
//! text between `<!-- NAME:start -->` and `<!-- NAME:end -->` is exactly
//! the table; `GPU_EXPORTER_BLESS=1` writes it there instead.

/// Asserts (or with `GPU_EXPORTER_BLESS=1`, writes) that the README holds
/// `table` between the markers of `name`.
pub fn holds(name: &str, table: &str) {
    // Tests run in parallel: one table's rewrite must not undo another's.
    static README: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one = README.lock().unwrap_or_else(|e| e.into_inner());
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/README.md");
    let readme = std::fs::read_to_string(path).expect("README.md reads");
    let (start, end) = (
        format!("<!-- {name}:start -->\n"),
        format!("<!-- {name}:end -->"),
    );
    let (before, rest) = readme
        .split_once(&start)
        .unwrap_or_else(|| panic!("README: no {start}"));
    let (held, after) = rest
        .split_once(&end)
        .unwrap_or_else(|| panic!("README: no {end}"));
    if std::env::var_os("GPU_EXPORTER_BLESS").is_some_and(|v| v == "1") {
        std::fs::write(path, format!("{before}{start}{table}{end}{after}"))
            .expect("README.md writes");
    } else {
        assert!(
            held == table,
            "README's {name} table is stale: run GPU_EXPORTER_BLESS=1 cargo test --lib readme"
        );
    }
}
