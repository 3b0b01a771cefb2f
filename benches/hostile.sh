#!/usr/bin/env bash
# A well-behaved scraper under hostile load, gpu-exporter and node_exporter
# side by side in one run (issue 13). Each target in turn, alone on a free
# 127.0.0.1 port, gets at once:
#
#   - 200 never-readers: connections that pipeline 200 GET /metrics each
#     with a 4 KiB receive buffer and never read, reopened when closed
#     (benches/hostile_clients.py never-readers);
#   - a 2,000-connection flood: wrk -t2 -c2000 --timeout 2s on /metrics
#     (keep-alive, each connection asking again as soon as it is answered);
#   - the scraper: one scrape a second with a 1 s timeout, COUNT times
#     (default 100), each on a new connection with Prometheus' Accept
#     header (benches/hostile_clients.py scrape).
#
# Prints the scraper's success rate and latency, the flood's throughput and
# errors, and the target's peak open descriptors and peak RSS (VmHWM), as a
# Markdown table. Takes about 2 x (COUNT + 15) s plus the build.
#
#   benches/hostile.sh                 # COUNT=100: about four minutes
#   COUNT=20 benches/hostile.sh        # a quick look
#   NODE_EXPORTER=/path/to/node_exporter benches/hostile.sh
#
# Needs wrk, curl, python3, cargo and node_exporter, installed by hand (not by
# CI): on Debian, apt-get install wrk curl prometheus-node-exporter (which puts
# node_exporter at /usr/bin/prometheus-node-exporter). It also raises its
# open-file limit to 8192 for wrk's 2,000 connections.
set -euo pipefail
cd "$(dirname "$0")/.."

COUNT=${COUNT:-100}
. benches/common.sh

need wrk "apt-get install wrk"
need curl "apt-get install curl"
need cargo "https://rustup.rs"
need python3 "apt-get install python3"
need_node_exporter
check_tools hostile.sh
ulimit -n 8192
setup_run

rows=()

# measure NAME PID PORT
measure() {
  local name=$1 target=$2 port=$3 sampler readers flood scraper
  # Open descriptors and RSS, twice a second.
  (while kill -0 "$target" 2>/dev/null; do
    echo "$(ls "/proc/$target/fd" 2>/dev/null | wc -l)"
    sleep 0.5
  done) >"$tmp/$name.fds" &
  sampler=$!
  python3 benches/hostile_clients.py never-readers "$port" 200 $((COUNT + 8)) >"$tmp/$name.readers" 2>&1 &
  readers=$!
  wrk -t2 -c2000 -d$((COUNT + 4))s --timeout 2s "http://127.0.0.1:$port/metrics" >"$tmp/$name.wrk" 2>&1 &
  flood=$!
  sleep 2
  python3 benches/hostile_clients.py scrape "$port" "$COUNT" 1 >"$tmp/$name.scrape"
  wait "$flood" "$readers" || true
  local hwm
  hwm=$(awk '/^VmHWM:/ {print $2}' "/proc/$target/status")
  kill "$sampler" 2>/dev/null || true
  wait "$sampler" 2>/dev/null || true
  echo "### $name" >&2
  sed 's/^/    /' "$tmp/$name.scrape" "$tmp/$name.readers" "$tmp/$name.wrk" >&2
  local s ok rate p50 p99 fails rps ok_rps errs non2xx opens fds
  s=$(cat "$tmp/$name.scrape")
  field() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<<" $s"; }
  ok=$(field ok)
  rate=$(field rate)
  p50=$(field p50_ms)
  p99=$(field p99_ms)
  fails=$(field failures)
  rps=$(awk '/^Requests\/sec:/ {printf "%.0f", $2}' "$tmp/$name.wrk")
  errs=$(sed -n 's/^ *Socket errors: //p' "$tmp/$name.wrk")
  non2xx=$(awk '/Non-2xx/ {print $NF}' "$tmp/$name.wrk")
  # 200s a second: wrk's "N requests in T s" less the non-2xx.
  ok_rps=$(awk -v bad="${non2xx:-0}" '/ requests in / {
    d = $4; sub(/,$/, "", d); k = 1
    if (d ~ /ms$/) { sub(/ms$/, "", d); k = 0.001 } else if (d ~ /m$/) { sub(/m$/, "", d); k = 60 } else sub(/s$/, "", d)
    printf "%.0f", ($1 - bad) / (d * k)
  }' "$tmp/$name.wrk")
  opens=$(sed -n 's/.*opens=//p' "$tmp/$name.readers")
  fds=$(sort -n "$tmp/$name.fds" | tail -1)
  rows+=("$name|$ok/$COUNT ($rate%)|$p50|$p99|${fails}|$rps|$ok_rps|${errs:-none}|$opens|$fds|$(awk -v k="$hwm" 'BEGIN {printf "%.1f", k / 1024}')")
}

echo "## A scraper under 200 never-readers and a 2,000-connection flood: gpu-exporter $(git rev-parse --short HEAD 2>/dev/null || echo '?') vs node_exporter"
echo
machine_lines
echo "- tools: $(tool_versions), $(rustc --version | awk '{print $1, $2}')"
echo "- scraper: $COUNT scrapes, one a second, 1 s timeout, new connection each"
echo

# 1. gpu-exporter, defaults (--web.max-connections 512, --web.max-requests 40).
serve_gpu_exporter
measure gpu-exporter "$pid" "$port"
stop "$pid"

# 2. node_exporter, defaults (--web.max-requests 40, no connection cap).
serve_node_exporter
measure node_exporter "$pid" "$port"
stop "$pid"

echo "| target | scrapes ok | p50 ms | p99 ms | failures | flood req/s | flood 200s/s | flood socket errors | never-reader connections | peak fds | peak RSS MiB |"
echo "|---|---:|---:|---:|---|---:|---:|---|---:|---:|---:|"
for row in "${rows[@]}"; do
  echo "| ${row//|/ | } |"
done
