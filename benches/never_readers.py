#!/usr/bin/env python3
"""Clients that pipeline and never read, against one or more builds side by
side: how long the next scrape waits behind them, how long /healthz on the
probe listener takes while the metrics port is full of them, and how long
SIGTERM takes to exit; and /healthz beside SILENT connections that
connect to the metrics port and send nothing. Not a test: timings on shared machines are noise,
so each build runs interleaved with the others, RUNS times, and the
medians are printed.

    cargo build --release && python3 benches/never_readers.py \
        target/release/gpu-exporter [OTHER_BUILD ...]
"""
import json, os, signal, socket, statistics, subprocess, sys, tempfile, time

CLIENTS, SILENT, RUNS = 200, 700, 3
FLEET = os.path.join(tempfile.mkdtemp(), "fleet.json")
with open(FLEET, "w") as f:
    json.dump({"gpus": [{}] * 64}, f)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(port, path):
    t = time.monotonic()
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        s.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
        while s.recv(1 << 16):
            pass
    return time.monotonic() - t


def started(binary, *flags):
    """The simulated 64 GPUs on a metrics and a probe port, once /readyz
    answers: the process and both ports."""
    port, probes = free_port(), free_port()
    p = subprocess.Popen(
        [binary, "--source", "sim", "--sim.scenario", FLEET,
         "--web.listen-address", f"127.0.0.1:{port}",
         "--web.probe-address", f"127.0.0.1:{probes}", "--collect.interval", "1h", *flags],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(600):
        try:
            get(probes, "/readyz")
            break
        except OSError:
            time.sleep(0.05)
    return p, port, probes


def once(binary):
    p, port, probes = started(
        binary, "--web.max-connections", str(CLIENTS), "--web.max-requests", str(CLIENTS),
        "--web.write-timeout", "30s")
    try:
        time.sleep(1.5)
        stuck = []
        for _ in range(CLIENTS - 1):
            s = socket.create_connection(("127.0.0.1", port))
            s.setblocking(False)
            try:
                s.send(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n" * 600)
            except BlockingIOError:
                pass
            stuck.append(s)
        first = get(port, "/metrics")
        # The metrics port is full now: one more never-reader fills it.
        s = socket.create_connection(("127.0.0.1", port))
        s.setblocking(False)
        s.send(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n" * 600)
        stuck.append(s)
        time.sleep(0.5)
        probe = get(probes, "/healthz")
        t = time.monotonic()
        p.send_signal(signal.SIGTERM)
        p.wait(timeout=10)
        return first, probe, time.monotonic() - t
    finally:
        p.kill()
        p.wait()


def silent(binary):
    """/healthz on the probe listener, the median of 10, while SILENT
    connections sit on the metrics port (its default cap) sending nothing."""
    p, port, probes = started(binary)
    quiet = []
    try:
        for _ in range(SILENT):
            s = socket.socket()
            s.setblocking(False)
            s.connect_ex(("127.0.0.1", port))
            quiet.append(s)
        time.sleep(0.5)
        return statistics.median(get(probes, "/healthz") for _ in range(10))
    finally:
        for s in quiet:
            s.close()
        p.kill()
        p.wait()


def main():
    builds = sys.argv[1:]
    if not builds:
        sys.exit(__doc__)
    results = {b: [] for b in builds}
    for _ in range(RUNS):
        for b in builds:
            results[b].append(once(b) + (silent(b),))
    print(f"{CLIENTS} pipelining never-readers, 64 GPUs, medians of {RUNS} interleaved runs")
    print(f"build | first scrape behind them | /healthz on the probe port | SIGTERM to exit"
          f" | /healthz beside {SILENT} silent connections")
    for b, rs in results.items():
        med = [statistics.median(r[i] for r in rs) for i in range(4)]
        print(" | ".join([b] + [f"{m*1000:.0f} ms" for m in med]))


main()
