#!/usr/bin/env python3
"""Instructions per cached scrape, counted, not timed.

Runs the exporter and the floors (tools/floor: the same response bytes from a
server that does nothing else) under callgrind with instrumentation off, turns
it on around SCRAPES keep-alive GETs of a body that is already rendered
(`--collect.interval 1h`), and reads the user-space instructions (Ir) those
GETs cost, per scrape, the fewest of ROUNDS in each of PROCESSES processes. Counts are nearly deterministic
on one machine (glibc picks its memcpy by CPU, so they differ between
machines). The check holds the exporter's count as a ratio to the blocking
floor's, measured in the same run: the async-io floor's own count is
bimodal (about 280 or 1,800: whichever thread drives the reactor), so its
ratio is printed, not checked. Syscalls per scrape come from a run without valgrind, under
`strace -c`, so that work moved into the kernel does not pass for a gain.

    python3 benches/counts.py EXPORTER FLOOR              # print the table
    python3 benches/counts.py EXPORTER FLOOR --check FILE # and fail (exit 1)
        when a ratio rose past the baseline's tolerance
    python3 benches/counts.py EXPORTER FLOOR --bless FILE # write the baseline

EXPORTER is a release build (deploy/build.sh); FLOOR is
`cargo build --release -p gpu-exporter-floor`'s binary.

    python3 benches/counts.py --render TOOL [--check FILE | --bless FILE]

counts the work behind a scrape instead: one render of a new snapshot, ours
(text and OpenMetrics) and prometheus-client's encoding of the same families
and series, one alert evaluation round and one simulator collection. TOOL
(`cargo build --release -p gpu-exporter-counts`) runs each piece N times per
line on its stdin; callgrind's instrumentation is on around one line of N and
one of 0, and the difference over N is one piece's count. Single-threaded,
so exact up to hash seeds. The check holds ours over prometheus-client's, per
fleet, to the `render` section of FILE.
"""

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

SCRAPES = 60
WARMUP = 10
ROUNDS = 3
# The exporter's count is bimodal per process, about 1,200 instructions
# apart: whether async-io's reactor thread or ours ends up driving the
# reactor is settled once per process, so the fewest of ROUNDS in one
# process can be the high one. The fewest over two processes is not.
PROCESSES = 2
DEADLINE = 120  # seconds for one process to come up and serve its GPUs
# The fleet of tests/support/fleet.rs: H100s with a periodic Xid 79 and a
# power-cap clock event.
GPU = '{"xid":79,"xid_every":"60s","clock_events":["sw_power_cap"]}'
GPUS = (8, 64)
ENCODINGS = ("plain", "gzip")


def request(encoding):
    extra = "Accept-Encoding: gzip\r\n" if encoding == "gzip" else ""
    return f"GET /metrics HTTP/1.1\r\nHost: counts\r\n{extra}\r\n".encode()


def response(sock, req):
    """One GET on a keep-alive connection: the whole response's bytes."""
    sock.sendall(req)
    buf = b""
    while b"\r\n\r\n" not in buf:
        chunk = sock.recv(65536)
        if not chunk:
            raise RuntimeError("connection closed before a response head")
        buf += chunk
    head, body = buf.split(b"\r\n\r\n", 1)
    length = re.search(rb"(?im)^content-length:\s*(\d+)", head)
    if not length:
        raise RuntimeError(f"no Content-Length in {head[:200]!r}")
    n = int(length.group(1))
    while len(body) < n:
        chunk = sock.recv(65536)
        if not chunk:
            raise RuntimeError("connection closed inside a body")
        body += chunk
    return head + b"\r\n\r\n" + body[:n]


def wait_for(pattern, stream, deadline):
    """The first match of `pattern` in the lines of `stream`."""
    for line in stream:
        m = re.search(pattern, line)
        if m:
            return m.group(1)
        if time.monotonic() > deadline:
            break
    raise RuntimeError(f"never printed {pattern}")


def callgrind(out_dir, name, argv):
    cmd = [
        "valgrind", "--tool=callgrind", "--instr-atstart=no",
        f"--callgrind-out-file={out_dir}/{name}.%p.out",
    ] + argv
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def counted(proc, sock, req, out_dir, name):
    """Instructions the process spends on SCRAPES GETs, the fewest of
    ROUNDS: what a wake-up's timing adds (the reactor parks or does not)
    only ever adds, so the least is the scrape's own cost."""
    for _ in range(WARMUP):
        response(sock, req)
    return min(one_round(proc, sock, req, out_dir, name) for _ in range(ROUNDS))


def one_round(proc, sock, req, out_dir, name):
    """Instrumentation on around SCRAPES GETs only, then a dump whose
    totals are theirs."""
    idle(proc)
    control(proc, "--instr=on")
    for _ in range(SCRAPES):
        response(sock, req)
    control(proc, "--instr=off")
    return dumped(proc, out_dir, name) // SCRAPES


def dumped(proc, out_dir, name):
    """The instructions counted since the last dump: callgrind dumps them
    to a file of their own."""
    before = set(os.listdir(out_dir))
    control(proc, "--dump")
    for _ in range(100):
        new = [f for f in set(os.listdir(out_dir)) - before if f.startswith(name)]
        if new:
            break
        time.sleep(0.05)
    else:
        raise RuntimeError(f"callgrind wrote no dump for {name}")
    with open(os.path.join(out_dir, new[0])) as f:
        totals = re.search(r"(?m)^totals:\s*(\d+)", f.read())
    return int(totals.group(1))


def idle(proc):
    """Waits until the process has used no CPU for a while: the judge's
    replay of the past and the first collection run on threads of their
    own, and would be counted with the scrapes."""
    def cpu():
        with open(f"/proc/{proc.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return int(fields[11]) + int(fields[12])
    last, still, deadline = cpu(), 0, time.monotonic() + DEADLINE
    while still < 3:
        time.sleep(0.1)
        now = cpu()
        still = still + 1 if now == last else 0
        last = now
        if time.monotonic() > deadline:
            raise RuntimeError(f"process {proc.pid} never went idle")


def control(proc, arg):
    out = subprocess.run(["callgrind_control", arg, str(proc.pid)],
                         capture_output=True, text=True, timeout=60)
    if out.returncode != 0 or "OK" not in out.stdout:
        raise RuntimeError(f"callgrind_control {arg}: {out.stdout}{out.stderr}")


def stop(proc):
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def exporter_argv(exporter, fleet):
    return [exporter, "--web.listen-address", "127.0.0.1:0", "--sim.scenario", fleet,
            "--collect.interval", "1h"]


def serving(proc, gpus):
    """The exporter's address, once a scrape shows all `gpus` GPUs."""
    deadline = time.monotonic() + DEADLINE
    addr = wait_for(r"serving GPU metrics on http://([^/]+)/", proc.stderr, deadline)
    # What it logs from now on is read and dropped, so a full pipe never
    # stops it.
    threading.Thread(target=proc.stderr.read, daemon=True).start()
    host, port = addr.rsplit(":", 1)
    while True:
        with socket.create_connection((host, int(port)), timeout=30) as s:
            body = response(s, request("plain"))
        if body.count(b"\ngpu_up{") >= gpus:
            return host, int(port)
        if time.monotonic() > deadline:
            raise RuntimeError(f"the exporter never served {gpus} GPUs")
        time.sleep(0.2)


def syscalls(exporter, fleet, gpus, encoding, out_dir):
    """System calls per scrape, from `strace -c` attached to a run without
    valgrind around the same GETs."""
    proc = subprocess.Popen(exporter_argv(exporter, fleet), stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    try:
        addr = serving(proc, gpus)
        with socket.create_connection(addr, timeout=30) as s:
            req = request(encoding)
            for _ in range(WARMUP):
                response(s, req)
            log = os.path.join(out_dir, f"strace-{gpus}-{encoding}")
            # Every thread, each by its id: -p alone traces one.
            tids = [a for t in os.listdir(f"/proc/{proc.pid}/task") for a in ("-p", t)]
            tracer = subprocess.Popen(["strace", "-f", "-c", "-o", log] + tids,
                                      stderr=subprocess.PIPE, text=True)
            wait_for(r"(Process \d+ attached)", tracer.stderr, time.monotonic() + 30)
            time.sleep(0.5)
            for _ in range(SCRAPES):
                response(s, req)
            tracer.send_signal(signal.SIGINT)
            tracer.wait(timeout=30)
        with open(log) as f:
            total = re.search(r"(?m)^\s*[\d.]+\s+[\d.]+\s+\d+\s+(\d+)\s+(?:\d+\s+)?total$",
                              f.read())
        return int(total.group(1)) / SCRAPES if total else float("nan")
    finally:
        stop(proc)


def measure(exporter, floor, gpus, out_dir):
    fleet = os.path.join(out_dir, f"fleet-{gpus}.json")
    with open(fleet, "w") as f:
        f.write('{"gpus":[' + ",".join([GPU] * gpus) + "]}")
    rows = {}
    for _ in range(PROCESSES):
        proc = callgrind(out_dir, f"exporter{gpus}", exporter_argv(exporter, fleet))
        try:
            addr = serving(proc, gpus)
            with socket.create_connection(addr, timeout=60) as s:
                for encoding in ENCODINGS:
                    req = request(encoding)
                    body = response(s, req)
                    own = counted(proc, s, req, out_dir, f"exporter{gpus}")
                    row = rows.setdefault(f"{gpus}-{encoding}",
                                          {"exporter": own, "bytes": len(body), "body": body})
                    row["exporter"] = min(row["exporter"], own)
        finally:
            stop(proc)
    for key, row in rows.items():
        encoding = key.split("-")[1]
        for kind in ("async", "blocking"):
            path = os.path.join(out_dir, f"response-{key}")
            with open(path, "wb") as f:
                f.write(row["body"])
            proc = callgrind(out_dir, f"floor-{kind}-{key}", [floor, kind, path])
            try:
                line = wait_for(r"^(\S+:\d+)$", proc.stdout, time.monotonic() + DEADLINE)
                host, port = line.rsplit(":", 1)
                with socket.create_connection((host, int(port)), timeout=60) as s:
                    row[kind] = counted(proc, s, request(encoding), out_dir,
                                        f"floor-{kind}-{key}")
            finally:
                stop(proc)
        row["syscalls"] = syscalls(exporter, fleet, gpus, encoding, out_dir)
        del row["body"]
        row["ratio"] = round(row["exporter"] / row["blocking"], 2)
    return rows


def table(rows):
    print(f"user-space instructions per cached scrape (callgrind, {SCRAPES} keep-alive GETs)")
    print(f"{'fleet':<10}{'bytes':>9}{'exporter':>10}{'async-io floor':>16}"
          f"{'x async':>9}{'blocking floor':>16}{'x blocking':>12}{'syscalls':>10}")
    for key, r in rows.items():
        print(f"{key:<10}{r['bytes']:>9}{r['exporter']:>10}{r['async']:>16}"
              f"{r['exporter'] / r['async']:>8.1f}x{r['blocking']:>16}{r['ratio']:>11.1f}x"
              f"{r['syscalls']:>10.1f}")


def check(rows, path):
    """Exit 1 when a ratio rose past the baseline's tolerance."""
    with open(path) as f:
        base = json.load(f)
    tolerance = base["tolerance"]
    failed = []
    for key, b in base["ratios"].items():
        now = rows[key]["ratio"]
        if now > b * (1 + tolerance):
            failed.append(f"{key}: instructions per scrape over the blocking floor's "
                          f"{b:.2f}x -> {now:.2f}x "
                          f"(tolerance {tolerance:.0%}; update {path} with why, in the same "
                          f"commit, if the rise is meant)")
        elif now < b * (1 - tolerance):
            print(f"{key}: ratio fell {b:.2f}x -> {now:.2f}x: bless {path} to hold the gain")
    for line in failed:
        print(line, file=sys.stderr)
    return not failed


# The render part: fleets rendered, and how many of each piece per count.
RENDER_FLEETS = ("8", "64", "8x7mig")
RENDER_N = 10
RENDER_ROUNDS = 1
COLLECT_GPUS = (8, 64)


class Tool:
    """gpu-exporter-counts under callgrind, instrumentation off."""

    def __init__(self, tool, out_dir):
        self.out_dir = out_dir
        self.proc = subprocess.Popen(
            ["valgrind", "--tool=callgrind", "--instr-atstart=no",
             f"--callgrind-out-file={out_dir}/tool.%p.out", tool],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def line(self, piece, fleet, n):
        self.proc.stdin.write(f"{piece} {fleet} {n}\n")
        self.proc.stdin.flush()
        answer = self.proc.stdout.readline().split()
        if answer[:1] != ["done"]:
            raise RuntimeError(f"{piece} {fleet}: {self.proc.stderr.read()}")
        return int(answer[1])

    def count(self, piece, fleet):
        """One piece's instructions: warmed, then the fewest over
        RENDER_ROUNDS of (a line of RENDER_N) - (a line of none); and the
        bytes it renders."""
        size = self.line(piece, fleet, 3)
        counts = []
        for _ in range(RENDER_ROUNDS):
            # A dump starts the next count: on, N, dump, 0, dump, off.
            control(self.proc, "--instr=on")
            runs = []
            for n in (RENDER_N, 0):
                self.line(piece, fleet, n)
                runs.append(dumped(self.proc, self.out_dir, "tool"))
            control(self.proc, "--instr=off")
            counts.append((runs[0] - runs[1]) // RENDER_N)
        return min(counts), size


def render_rows(tool, out_dir):
    t = Tool(tool, out_dir)
    try:
        rows = {}
        for fleet in RENDER_FLEETS:
            r = rows[fleet] = {}
            for piece in ("text", "openmetrics", "prometheus-client"):
                r[piece], r[f"{piece} bytes"] = t.count(piece, fleet)
            r["ratio"] = round(r["text"] / r["prometheus-client"], 3)
        alerts = t.count("alerts", "default")[0]
        collect = {g: t.count("collect", g)[0] for g in COLLECT_GPUS}
    finally:
        t.proc.stdin.close()
        stop(t.proc)
    return rows, alerts, collect


def render_table(rows, alerts, collect):
    print(f"user-space instructions per render of a new snapshot (callgrind, "
          f"{RENDER_N} per count)")
    print(f"{'fleet':<8}{'ours 0.0.4':>12}{'ours OpenMetrics':>18}{'prometheus-client':>19}"
          f"{'ours / p-c':>12}{'p-c / ours':>12}{'bytes ours':>12}{'bytes p-c':>11}")
    for fleet, r in rows.items():
        print(f"{fleet:<8}{r['text']:>12}{r['openmetrics']:>18}{r['prometheus-client']:>19}"
              f"{r['ratio']:>12.3f}{r['prometheus-client'] / r['text']:>11.1f}x"
              f"{r['text bytes']:>12}{r['prometheus-client bytes']:>11}")
    print(f"one alert evaluation round (default rules, default fleet): {alerts}")
    for gpus, n in collect.items():
        print(f"one simulator collection of {gpus} GPUs: {n} ({n // gpus} per GPU)")


def render_main(args):
    if len(args) not in (1, 3) or (len(args) == 3 and args[1] not in ("--check", "--bless")):
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    for tool in ("valgrind", "callgrind_control"):
        if not shutil.which(tool):
            print(f"counts.py: {tool} is not installed", file=sys.stderr)
            sys.exit(2)
    out_dir = tempfile.mkdtemp(prefix="gpu-exporter-counts-")
    try:
        rows, alerts, collect = render_rows(args[0], out_dir)
    finally:
        shutil.rmtree(out_dir, ignore_errors=True)
    render_table(rows, alerts, collect)
    if len(args) == 1:
        return
    if args[1] == "--bless":
        with open(args[2]) as f:
            base = json.load(f)
        base["render"] = {"tolerance": 0.05,
                          "ratios": {k: r["ratio"] for k, r in rows.items()}}
        with open(args[2], "w") as f:
            json.dump(base, f, indent=2)
            f.write("\n")
        return
    with open(args[2]) as f:
        base = json.load(f)["render"]
    failed = [f"{fleet}: ours over prometheus-client's instructions per render "
              f"{b:.3f} -> {rows[fleet]['ratio']:.3f} (tolerance {base['tolerance']:.0%}; "
              f"update {args[2]} with why, in the same commit, if the rise is meant)"
              for fleet, b in base["ratios"].items()
              if rows[fleet]["ratio"] > b * (1 + base["tolerance"])]
    for line in failed:
        print(line, file=sys.stderr)
    if failed:
        sys.exit(1)


def main():
    args = sys.argv[1:]
    if args[:1] == ["--render"]:
        return render_main(args[1:])
    if len(args) not in (2, 4) or (len(args) == 4 and args[2] not in ("--check", "--bless")):
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    for tool in ("valgrind", "callgrind_control", "strace"):
        if not shutil.which(tool):
            print(f"counts.py: {tool} is not installed", file=sys.stderr)
            sys.exit(2)
    out_dir = tempfile.mkdtemp(prefix="gpu-exporter-counts-")
    rows = {}
    try:
        for gpus in GPUS:
            rows.update(measure(args[0], args[1], gpus, out_dir))
    finally:
        shutil.rmtree(out_dir, ignore_errors=True)
    table(rows)
    if len(args) == 4 and args[2] == "--bless":
        # The render section (--render) is kept as it is.
        with open(args[3]) as f:
            base = json.load(f)
        base.update(tolerance=0.15, ratios={k: r["ratio"] for k, r in rows.items()})
        with open(args[3], "w") as f:
            json.dump(base, f, indent=2)
            f.write("\n")
    if len(args) == 4 and args[2] == "--check" and not check(rows, args[3]):
        sys.exit(1)


if __name__ == "__main__":
    main()
