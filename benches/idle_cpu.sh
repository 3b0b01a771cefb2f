#!/usr/bin/env bash
# Idle CPU of the release binary: no scrapes, collecting every second from
# the simulated 8-GPU fleet. Starts it on a free 127.0.0.1 port, waits 2 s
# for start-up (the simulator replays its history then), samples utime +
# stime from /proc/PID/stat, sleeps IDLE_SECONDS (default 60), samples
# again and prints the share of one core. Target: under 0.1%.
# The ticks are 10 ms at 100 Hz, so where the kernel has schedstat the
# on-CPU nanoseconds of every thread (/proc/PID/task/*/schedstat) are
# printed as well, for a finer figure.
#
#   benches/idle_cpu.sh                   # 60 s
#   IDLE_SECONDS=10 benches/idle_cpu.sh   # a quick try (coarser: one tick is 10 ms)
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=${IDLE_SECONDS:-60}
[[ $seconds =~ ^[1-9][0-9]*$ ]] || {
  echo "idle_cpu.sh: IDLE_SECONDS must be a whole number of seconds, got '$seconds'" >&2
  exit 2
}
for tool in cargo python3 getconf; do
  command -v "$tool" >/dev/null 2>&1 || {
    echo "idle_cpu.sh: missing $tool" >&2
    exit 1
  }
done

tmp=$(mktemp -d)
pid=
cleanup() {
  if [[ -n $pid ]]; then
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  fi
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

echo "Building the release binary..." >&2
cargo build --release --quiet
printf '{"gpus":[{},{},{},{},{},{},{},{}]}\n' >"$tmp/8gpus.json"
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
target/release/gpu-exporter --source sim --sim.scenario "$tmp/8gpus.json" \
  --collect.interval 1s --web.listen-address "127.0.0.1:$port" >"$tmp/log" 2>&1 &
pid=$!

# utime + stime (fields 14 and 15) of the whole process, in clock ticks.
# Fields are counted after the ')' that closes the command name.
ticks() {
  sed 's/^.*) //' "/proc/$pid/stat" | awk '{print $12 + $13}'
}

# Sum of every thread's on-CPU time in ns; empty without schedstat.
nanos() {
  cat /proc/"$pid"/task/*/schedstat 2>/dev/null | awk '{n += $1} END {if (NR) printf "%d", n}'
}

sleep 2
kill -0 "$pid" 2>/dev/null || {
  echo "idle_cpu.sh: gpu-exporter exited; its log:" >&2
  cat "$tmp/log" >&2
  exit 1
}
hz=$(getconf CLK_TCK)
start_ticks=$(ticks)
start_run=$(nanos)
start_ns=$(date +%s%N)
echo "Sampling for ${seconds} s..." >&2
sleep "$seconds"
end_ticks=$(ticks)
end_run=$(nanos)
end_ns=$(date +%s%N)
rss=$(awk '/^VmRSS:/ {print $2}' "/proc/$pid/status")

awk -v t0="$start_ticks" -v t1="$end_ticks" -v n0="$start_ns" -v n1="$end_ns" -v hz="$hz" \
  -v r0="$start_run" -v r1="$end_run" -v rss="$rss" -v machine="$(nproc) CPUs, $(lscpu | sed -n 's/^Model name: *//p' | head -1), kernel $(uname -r)" '
BEGIN {
  wall = (n1 - n0) / 1e9
  cpu = (t1 - t0) / hz
  pct = 100 * cpu / wall
  printf "machine: %s\n", machine
  printf "gpu-exporter idle, 8 simulated GPUs, --collect.interval 1s, no scrapes\n"
  printf "CPU %.2f s (%d ticks at %d Hz) over %.1f s wall: %.3f%% of one core (target < 0.1%%: %s); RSS %.1f MiB\n",
    cpu, t1 - t0, hz, wall, pct, pct < 0.1 ? "met" : "NOT met", rss / 1024
  if (r0 != "" && r1 != "")
    printf "schedstat: %.1f ms on CPU over %.1f s wall: %.4f%% of one core\n", (r1 - r0) / 1e6, wall, 100 * (r1 - r0) / 1e9 / wall
}'
