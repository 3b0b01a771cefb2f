#!/bin/bash
# same-output.sh BIN DIR: writes what a move commit must leave byte-identical
# (docs/maintainers.md): --print-rules, --help, the dcgm mode's --help, the
# --once table, and the families and series of a simulator scrape (text,
# OpenMetrics, the dcgm mode) with values and build info cut off. Run it on
# the binary before and after, then `diff -r` the two directories.
set -euo pipefail
bin=$1 out=$2 start=2026-12-01T00:00:00Z
mkdir -p "$out"
"$bin" --print-rules >"$out/rules.yml"
"$bin" --help >"$out/help.txt" 2>&1
"$bin" --compat.dcgm-exporter-cli --help >"$out/dcgm-help.txt" 2>&1 || true
"$bin" --once --sim.start "$start" >"$out/once.txt" 2>/dev/null
# Names and labels only: the values move with the clock.
names() { sed -E 's/ [^ ]+$//' | grep -v '^gpu_exporter_build_info' || true; }
scrape() { # FILE ACCEPT FLAGS...: serves, scrapes once, stops
  local file=$1 accept=$2 port=$((20000 + RANDOM % 20000))
  shift 2
  "$bin" "$@" "127.0.0.1:$port" --source sim --sim.start "$start" >/dev/null 2>&1 &
  local pid=$!
  for _ in $(seq 50); do curl -sf "http://127.0.0.1:$port/readyz" >/dev/null && break; sleep 0.2; done
  sleep 1
  curl -sf -H "Accept: $accept" "http://127.0.0.1:$port/metrics" | names >"$out/$file"
  kill "$pid"; wait "$pid" 2>/dev/null || true
}
scrape metrics.txt 'text/plain' --web.listen-address
scrape metrics-om.txt 'application/openmetrics-text; version=1.0.0' --web.listen-address
scrape metrics-dcgm.txt 'text/plain' --compat.dcgm-exporter-cli -a
wc -l "$out"/* | tail -n 1
