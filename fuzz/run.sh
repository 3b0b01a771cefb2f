#!/bin/sh
# Runs one fuzz target 10 million times, one process: fuzz/run.sh TARGET [libFuzzer args]
# The working corpus grows in fuzz/work/TARGET (not in git); the seed
# corpus fuzz/corpus/TARGET is read, never written. SANITIZER=none builds
# without AddressSanitizer (about 2.5x faster on these safe-Rust targets).
set -eu
cd "$(dirname "$0")/.."
t=$1; shift
mkdir -p "fuzz/work/$t" fuzz/logs
RUSTC_BOOTSTRAP=1 exec cargo fuzz run -O -a -s "${SANITIZER:-address}" "$t" "$PWD/fuzz/work/$t" "$PWD/fuzz/corpus/$t" -- \
    -runs=10000000 -jobs=1 -workers=1 -print_final_stats=1 "$@"
