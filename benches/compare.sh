#!/usr/bin/env bash
# Side-by-side scrape cost, measured in one run on this machine with public
# tools: gpu-exporter (release build, simulated 8-GPU fleet), node_exporter
# (default collectors), a Python prometheus_client exporter with the same
# families and series (benches/python_exporter.py), and the floor: a trivial
# blocking server sending our exact response as fixed bytes
# (benches/floor_server.py).
#
# Each target is started alone on a free 127.0.0.1 port, scraped once with
# curl for its body, loaded with `wrk -t1 -c1 -d5s --latency` (one
# keep-alive connection), its peak RSS (VmHWM) read right after, then
# stopped. Prints the machine, wrk's output, and a Markdown table with each
# p50's ratio to the floor's. Absolute times drift; read the ratios.
#
#   benches/compare.sh                      # about 30 s plus the build
#   NODE_EXPORTER=/path/to/node_exporter benches/compare.sh
#
# Needs: wrk, curl, python3 with prometheus_client, cargo, and node_exporter
# (Debian: apt-get install wrk curl prometheus-node-exporter;
# pip install prometheus_client==0.26.0).
set -euo pipefail
cd "$(dirname "$0")/.."

DURATION=5s
. benches/common.sh

need wrk "apt-get install wrk"
need curl "apt-get install curl"
need cargo "https://rustup.rs"
need python3 "apt-get install python3"
need_node_exporter
if command -v python3 >/dev/null 2>&1 && ! python3 -c 'import prometheus_client' 2>/dev/null; then
  missing+=("python3 module prometheus_client: pip install prometheus_client==0.26.0")
fi
check_tools compare.sh
setup_run

# wrk prints latencies as 123.45us, 1.23ms or 1.02s; this gives ms.
to_ms() {
  awk -v v="$1" 'BEGIN {
    n = v + 0
    if (v ~ /us$/) n /= 1000; else if (v ~ /ms$/) n += 0; else if (v ~ /m$/) n *= 60000; else if (v ~ /s$/) n *= 1000
    printf "%.3f", n
  }'
}

rows=()
notes=()
floor_p50=

# measure NAME PID URL: body, wrk, peak RSS; appends a row.
measure() {
  local name=$1 pid=$2 url=$3 out p50 p99 rps bytes series hwm
  curl -sf --max-time 5 -D "$tmp/$name.head" -o "$tmp/$name.body" "$url"
  bytes=$(wc -c <"$tmp/$name.body")
  series=$(grep -vc '^#' "$tmp/$name.body" || true)
  out=$tmp/$name.wrk
  timeout 30 wrk -t1 -c1 -d"$DURATION" --latency "$url" >"$out"
  hwm=$(awk '/^VmHWM:/ {print $2}' "/proc/$pid/status")
  echo "### $name" >&2
  sed 's/^/    /' "$out" >&2
  if ! grep -q '^ *50% ' "$out"; then
    echo "compare.sh: wrk measured no latency for $name; see its output above" >&2
    exit 1
  fi
  p50=$(to_ms "$(awk '$1 == "50%" {print $2}' "$out")")
  p99=$(to_ms "$(awk '$1 == "99%" {print $2}' "$out")")
  rps=$(awk '/^Requests\/sec:/ {printf "%.0f", $2}' "$out")
  if grep -qE 'Socket errors|Non-2xx' "$out"; then
    notes+=("$name: wrk reported $(grep -E 'Socket errors|Non-2xx' "$out" | sed 's/^ *//' | paste -sd ';' -)")
  fi
  rows+=("$name|$p50|$p99|$rps|$bytes|$series|$(awk -v k="$hwm" 'BEGIN {printf "%.1f", k / 1024}')")
}

echo "## gpu-exporter $(git rev-parse --short HEAD 2>/dev/null || echo '?') vs node_exporter vs prometheus_client vs the floor"
echo
machine_lines
echo "- tools: $(tool_versions), prometheus_client $(python3 -c 'import importlib.metadata as m; print(m.version("prometheus_client"))'), $(rustc --version | awk '{print $1, $2}')"
echo "- load: wrk -t1 -c1 -d$DURATION --latency, one target at a time, 127.0.0.1"
echo

# 1. gpu-exporter, rendering live from the simulated 8-GPU fleet.
serve_gpu_exporter
measure gpu-exporter "$pid" "http://127.0.0.1:$port/metrics"
stop "$pid"
cp "$tmp/gpu-exporter.body" "$tmp/floor.body"
ctype=$(sed -n 's/^[Cc]ontent-[Tt]ype: *//p' "$tmp/gpu-exporter.head" | tr -d '\r')

# 2. node_exporter, default collectors.
serve_node_exporter
measure node_exporter "$pid" "http://127.0.0.1:$port/metrics"
stop "$pid"

# 3. prometheus_client, the same families and series, static values.
port=$(free_port)
start python_exporter python3 benches/python_exporter.py "$port" 127.0.0.1
wait_ready "$pid" "http://127.0.0.1:$port/metrics"
measure prometheus_client "$pid" "http://127.0.0.1:$port/metrics"
stop "$pid"

# 4. The floor: our exact response as fixed bytes.
port=$(free_port)
start floor python3 benches/floor_server.py "$port" "$tmp/floor.body" "$ctype"
wait_ready "$pid" "http://127.0.0.1:$port/metrics"
measure "floor (fixed bytes)" "$pid" "http://127.0.0.1:$port/metrics"
stop "$pid"

floor_p50=$(printf '%s\n' "${rows[@]}" | awk -F'|' '$1 ~ /^floor/ {print $2}')
echo
echo "| target | p50 ms | p99 ms | req/s | body bytes | series | peak RSS MiB | p50 / floor |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|"
for row in "${rows[@]}"; do
  awk -F'|' -v f="$floor_p50" '{
    printf "| %s | %s | %s | %s | %s | %s | %s | %.2fx |\n", $1, $2, $3, $4, $5, $6, $7, $2 / f
  }' <<<"$row"
done
echo
ours=$(printf '%s\n' "${rows[@]}" | awk -F'|' -v f="$floor_p50" '$1 == "gpu-exporter" {printf "%.2f", $2 / f}')
if awk -v r="$ours" 'BEGIN {exit !(r <= 1.3)}'; then
  echo "Target p50 within 1.3x of the floor: met (${ours}x)."
else
  echo "Target p50 within 1.3x of the floor: NOT met (${ours}x)."
fi
if ((${#notes[@]})); then
  printf -- '- %s\n' "${notes[@]}"
fi
