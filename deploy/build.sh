#!/usr/bin/env bash
# Builds the binary the way it ships, and prints its path:
#
#   deploy/build.sh [--auditable] [--target TRIPLE] [cargo build flags...]
#   deploy/build.sh --target aarch64-unknown-linux-gnu   # 64-bit Arm
#
# It is `cargo build --release --locked` on the toolchain that
# rust-toolchain.toml pins: a stable compiler, no unstable flags, the
# standard library as the toolchain ships it, and panic locations kept, so
# that a crash report names the file and line. Cargo.toml's release
# profile says how it is optimised. aarch64 links with Debian's
# gcc-aarch64-linux-gnu (.cargo/config.toml).
#
# --auditable builds with `cargo auditable build` (cargo install --locked
# cargo-auditable): the dependency tree is embedded in the binary's
# .dep-v0 section, readable with rust-audit-info or `syft`/`trivy`. The
# release (deploy/release.sh) always does.
#
# CARGO_TARGET_DIR chooses where it builds (default target/); the binary is
# $CARGO_TARGET_DIR[/TRIPLE]/release/gpu-exporter.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
build=(build)
triple=
args=()
while (($#)); do
  case "$1" in
    --auditable) build=(auditable build) ;;
    --target) triple="$2"; args+=(--target "$2"); shift ;;
    --target=*) triple="${1#--target=}"; args+=("$1") ;;
    *) args+=("$1") ;;
  esac
  shift
done
cargo "${build[@]}" --release --locked --bin gpu-exporter "${args[@]}" >&2
echo "${CARGO_TARGET_DIR:-$root/target}/${triple:+$triple/}release/gpu-exporter"
