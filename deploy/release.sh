#!/usr/bin/env bash
# Builds the release binary the way it ships, and prints its path:
#
#   deploy/release.sh [cargo build flags...]      e.g. --no-default-features
#
# It is `cargo build --release` plus a standard library rebuilt from this
# toolchain's own source (the rust-src component: `rustup component add
# rust-src`) without std's backtrace feature and with its
# optimize_for_size feature, and without unwind tables. Why: the prebuilt
# std carries the backtrace symbolizer (gimli, addr2line, an inflater,
# rustc-demangle: ~180 KB of code a panic=abort binary never needs) and
# unwind tables for every function, which nothing here reads: panic is
# abort, and without the symbolizer no backtrace is printed. A panic still
# prints its message, then aborts. Together they take 0.33 MB off the TLS
# build (README, Size).
#
# -Z location-detail=none leaves out the file, line and column of every
# place that can panic (73 KB of strings and relocations with attribution
# in): a panic says "panicked at <redacted>" with its message, which names
# the bug well enough to find it in the source. It keeps the default build
# under its 1.85 MiB ceiling.
#
# RUSTC_BOOTSTRAP=1 lets stable cargo take -Z build-std: it rebuilds the
# same release's std, from the same stable source, with its own features;
# no nightly compiler is involved. Developers' `cargo build --release` and
# `cargo run --release` are unchanged and work as before.
#
# CARGO_TARGET_DIR chooses where it builds (default target/); the binary is
# $CARGO_TARGET_DIR/x86_64-unknown-linux-gnu/release/gpu-exporter.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
target=x86_64-unknown-linux-gnu
cd "$root"
RUSTC_BOOTSTRAP=1 RUSTFLAGS="${RUSTFLAGS:-} -C force-unwind-tables=no -Z location-detail=none" \
  cargo build --release --locked --bin gpu-exporter --target "$target" \
  -Z build-std=std,panic_abort -Z build-std-features=optimize_for_size "$@" >&2
echo "${CARGO_TARGET_DIR:-$root/target}/$target/release/gpu-exporter"
