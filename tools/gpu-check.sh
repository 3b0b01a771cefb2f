#!/bin/sh
# The exporter against this host's real NVIDIA driver, in one command:
# builds the release binary and gpu-check (tools/gpu-check/), then runs
# the exporter on NVML and on nvidia-smi and prints a report (see
# tools/gpu-check/src/main.rs for what it checks). It only reads: nothing
# changes a GPU's state. Exit status 0 when nothing failed.
#
#   tools/gpu-check.sh [--nvml.library PATH] [--smi.path PATH] [--path.sysfs|procfs|devfs PATH]
set -eu
cd "$(dirname "$0")/.."
cargo build --release --locked --quiet -p gpu-exporter --bin gpu-exporter
cargo build --release --locked --quiet -p gpu-check
exec target/release/gpu-check target/release/gpu-exporter "$@"
