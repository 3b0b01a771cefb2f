# What benches/compare.sh and benches/hostile.sh share, sourced by both
# from the repository root: checking for tools, a temporary folder and the
# processes started (both gone on exit), the release build, free ports.
#
#   need TOOL HOW; ...; check_tools NAME   # NAME: the script, for the message
#   setup_run                              # $tmp, cleanup on exit, the build
#   start NAME CMD...; stop PID            # $pid: the process just started

NODE_EXPORTER=${NODE_EXPORTER:-/usr/bin/prometheus-node-exporter}
missing=()

# need TOOL HOW: TOOL must be on PATH; HOW says how to get it.
need() { command -v "$1" >/dev/null 2>&1 || missing+=("$1: $2"); }

need_node_exporter() {
  [[ -x $NODE_EXPORTER ]] ||
    missing+=("$NODE_EXPORTER: apt-get install prometheus-node-exporter, or set NODE_EXPORTER")
}

# check_tools NAME: stops with the list of what is missing, if anything.
check_tools() {
  if ((${#missing[@]})); then
    echo "$1: missing tools, nothing measured:" >&2
    printf '  - %s\n' "${missing[@]}" >&2
    exit 1
  fi
}

pids=()
cleanup() {
  local pid
  for pid in "${pids[@]}"; do
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  rm -rf "$tmp"
}

# setup_run: $tmp, cleaned up on exit with every process started; the
# release binary in $exporter; the 8-GPU scenario in $tmp/8gpus.json.
setup_run() {
  tmp=$(mktemp -d)
  trap cleanup EXIT
  trap 'exit 130' INT TERM
  echo "Building the release binary..." >&2
  cargo build --release --quiet
  exporter=target/release/gpu-exporter
  printf '{"gpus":[{},{},{},{},{},{},{},{}]}\n' >"$tmp/8gpus.json"
}

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# start NAME CMD...: runs CMD in the background, its output in
# $tmp/NAME.log; sets $pid.
start() {
  local name=$1
  shift
  "$@" >"$tmp/$name.log" 2>&1 &
  pid=$!
  pids+=("$pid")
}

stop() {
  kill "$1" 2>/dev/null || true
  wait "$1" 2>/dev/null || true
}

# wait_ready PID URL: up to 15 s for a 200 from URL while PID lives.
wait_ready() {
  local i
  for ((i = 0; i < 150; i++)); do
    if ! kill -0 "$1" 2>/dev/null; then
      echo "$0: process $1 exited before serving $2; its log:" >&2
      cat "$tmp"/*.log >&2
      exit 1
    fi
    curl -sf --max-time 2 -o /dev/null "$2" && return 0
    sleep 0.1
  done
  echo "$0: no answer from $2 within 15 s" >&2
  exit 1
}

# machine_lines: the date, machine and load lines a results table starts with.
machine_lines() {
  echo "- date: $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo "- machine: $(nproc) CPUs, $(lscpu | sed -n 's/^Model name: *//p' | head -1), kernel $(uname -r)"
  echo "- load average before the run: $(cut -d' ' -f1-3 /proc/loadavg)"
}

# tool_versions: wrk's, node_exporter's and Python's versions, one line.
tool_versions() {
  echo "$(wrk -v 2>&1 | head -1 | awk '{print $1, $2}'), node_exporter $("$NODE_EXPORTER" --version 2>&1 | sed -n 's/^node_exporter, version \([^ ]*\).*/\1/p'), $(python3 --version)"
}

# serve_gpu_exporter, serve_node_exporter: one of them on a free port
# ($port), answering; sets $pid. gpu-exporter serves the 8-GPU scenario.
serve_gpu_exporter() {
  port=$(free_port)
  start gpu-exporter "$exporter" --source sim --sim.scenario "$tmp/8gpus.json" \
    --web.listen-address "127.0.0.1:$port"
  wait_ready "$pid" "http://127.0.0.1:$port/metrics"
}

serve_node_exporter() {
  port=$(free_port)
  start node_exporter "$NODE_EXPORTER" --web.listen-address="127.0.0.1:$port"
  wait_ready "$pid" "http://127.0.0.1:$port/metrics"
}
