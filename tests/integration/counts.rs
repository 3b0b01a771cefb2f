//! Instructions per cached scrape, counted with callgrind by
//! `benches/counts.py` and held to `benches/counts.json`: a count that rises
//! past the baseline's tolerance fails, with the before and after. Counts,
//! unlike timings, do not move with the machine's load. A scratch build
//! with 2,000 `black_box` iterations per request (about 18,000
//! instructions) failed all four rows, 8-plain 220.7x -> 320.7x.
//!
//! The render is counted the same way (`benches/counts.py --render`, the
//! work in `tools/counts`) and held as ours over `prometheus-client`'s
//! instructions for the same series, measured in the same run, within the
//! baseline's tolerance (5%: one machine repeats a count within 0.01%, but
//! glibc's `memcpy` differs by CPU). About 17 seconds of callgrind, after
//! building the tool beside the exporter's release build (14 s of CPU).
//! A scratch build with 10,000 `black_box` iterations per render (about
//! 40,000 instructions) failed the 8-GPU and MIG rows, 8: 0.242 -> 0.273.

use crate::common::have;
use crate::image::{output_within, release_binary, release_target_dir, root, toolchain_path};
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

/// A tool of the workspace built as the exporter is, beside it:
/// `gpu-exporter-floor`, the servers that send the same bytes and do
/// nothing else, or `gpu-exporter-counts`, the work a render count runs.
fn tool_binary(package: &str) -> PathBuf {
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
    .args(["-j1", "-p", package])
    .env("CARGO_TARGET_DIR", release_target_dir())
    .env("PATH", toolchain_path())
    .current_dir(root());
    let out = output_within(cmd, Duration::from_secs(600));
    assert!(
        out.status.success(),
        "building {package}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    release_target_dir().join("release").join(package)
}

/// `benches/counts.py ARGS --check benches/counts.json`, its table kept in
/// `table` under the test's temporary directory for .ci/run to print (a
/// passing test's output is captured); fails with what it said unless the
/// counts are within their baseline.
fn checked(args: &[&std::ffi::OsStr], table: &str) -> String {
    let mut cmd = Command::new("python3");
    cmd.arg(root().join("benches/counts.py"))
        .args(args)
        .arg("--check")
        .arg(root().join("benches/counts.json"));
    let out = output_within(cmd, Duration::from_secs(300));
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    println!("{stdout}");
    let path = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(table);
    std::fs::write(&path, stdout.as_bytes()).expect("the counts table is written");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

#[test]
fn a_cached_scrape_costs_no_more_instructions_than_its_baseline() {
    if !have("valgrind", &["--version"]) || !have("strace", &["-V"]) {
        eprintln!("skipped: valgrind and strace count the instructions and syscalls");
        return;
    }
    let (exporter, floor) = (release_binary(), tool_binary("gpu-exporter-floor"));
    let stdout = checked(&[exporter.as_os_str(), floor.as_os_str()], "counts.txt");
    // The table has a row per fleet and encoding, each counted.
    for row in ["8-plain", "8-gzip", "64-plain", "64-gzip"] {
        assert!(stdout.contains(row), "no {row} row in:\n{stdout}");
    }
}

#[test]
fn a_render_costs_no_more_instructions_over_prometheus_client_than_its_baseline() {
    if !have("valgrind", &["--version"]) {
        eprintln!("skipped: valgrind counts the instructions");
        return;
    }
    let tool = tool_binary("gpu-exporter-counts");
    let stdout = checked(
        &["--render".as_ref(), tool.as_os_str()],
        "render-counts.txt",
    );
    // A row per fleet, each counted for ours and prometheus-client.
    for fleet in ["8 ", "64 ", "8x7mig "] {
        let row = stdout.lines().find(|l| l.starts_with(fleet));
        let counts = row.map(|r| {
            r.split_whitespace()
                .filter(|w| w.parse::<u64>().is_ok_and(|n| n > 1000))
                .count()
        });
        assert_eq!(counts, Some(5), "no counted {fleet}row in:\n{stdout}");
    }
}
