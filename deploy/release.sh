#!/usr/bin/env bash
# Builds the release binary the way it ships, and prints its path:
#
#   deploy/release.sh [cargo build flags...]      e.g. --no-default-features
#
# It is `cargo build --release --locked` on the toolchain that
# rust-toolchain.toml pins: a stable compiler, no unstable flags, the
# standard library as the toolchain ships it, and panic locations kept, so
# that a crash report names the file and line. Cargo.toml's release
# profile says how it is optimised.
#
# CARGO_TARGET_DIR chooses where it builds (default target/); the binary is
# $CARGO_TARGET_DIR/release/gpu-exporter.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
cargo build --release --locked --bin gpu-exporter "$@" >&2
echo "${CARGO_TARGET_DIR:-$root/target}/release/gpu-exporter"
