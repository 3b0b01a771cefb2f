//! Instructions per cached scrape, counted with callgrind by
//! `benches/counts.py` and held to `benches/counts.json`: a count that rises
//! past the baseline's tolerance fails, with the before and after. Counts,
//! unlike timings, do not move with the machine's load. A scratch build
//! with 2,000 `black_box` iterations per request (about 18,000
//! instructions) failed all four rows, 8-plain 220.7x -> 320.7x.

use crate::common::have;
use crate::image::{output_within, release_binary, release_target_dir, root, toolchain_path};
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

/// `tools/floor` built as the exporter is, beside it: the servers that send
/// the same bytes and do nothing else.
fn floor_binary() -> PathBuf {
    let mut cmd = Command::new("nice");
    cmd.args([
        "-n19",
        "cargo",
        "build",
        "--release",
        "--locked",
        "--offline",
        "--quiet",
    ])
    .args(["-j1", "-p", "gpu-exporter-floor"])
    .env("CARGO_TARGET_DIR", release_target_dir())
    .env("PATH", toolchain_path())
    .current_dir(root());
    let out = output_within(cmd, Duration::from_secs(600));
    assert!(
        out.status.success(),
        "building the floor: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    release_target_dir().join("release/gpu-exporter-floor")
}

#[test]
fn a_cached_scrape_costs_no_more_instructions_than_its_baseline() {
    if !have("valgrind", &["--version"]) || !have("strace", &["-V"]) {
        eprintln!("skipped: valgrind and strace count the instructions and syscalls");
        return;
    }
    let (exporter, floor) = (release_binary(), floor_binary());
    let mut cmd = Command::new("python3");
    cmd.arg(root().join("benches/counts.py"))
        .args([exporter, floor.as_path()])
        .arg("--check")
        .arg(root().join("benches/counts.json"));
    let out = output_within(cmd, Duration::from_secs(300));
    let stdout = String::from_utf8_lossy(&out.stdout);
    println!("{stdout}");
    // For .ci/run to print: a passing test's output is captured.
    let table = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("counts.txt");
    std::fs::write(&table, stdout.as_bytes()).expect("the counts table is written");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The table has a row per fleet and encoding, each counted.
    for row in ["8-plain", "8-gzip", "64-plain", "64-gzip"] {
        assert!(stdout.contains(row), "no {row} row in:\n{stdout}");
    }
}
