#!/usr/bin/env python3
"""The exporter's memory under load: anonymous (RssAnon, what the process
allocates and touches), file-backed (RssFile: the binary's and libc's
pages) and the peak of both (VmHWM), from /proc/PID/status, in KiB.

  - 8 GPUs after 64 keep-alive connections scraped for LOAD seconds;
  - 64 GPUs under 100 never-readers and a 2,000-connection flood at once
    for LOAD seconds (benches/hostile_clients.py), RssAnon sampled every
    50 ms; and after the clients are gone.

    python3 benches/memory.py EXPORTER [FLAG...]
        # EXPORTER a release build (deploy/build.sh); FLAGs passed to it

Loopback only; every load is bounded in time. Not a test: how many
connections are open at a sample moves with scheduling.
"""
import os
import re
import resource
import subprocess
import sys
import tempfile
import time

LOAD = 15
HERE = os.path.dirname(os.path.abspath(__file__))
GPU = '{"xid":79,"xid_every":"60s","clock_events":["sw_power_cap"]}'


def status(pid):
    with open(f"/proc/{pid}/status") as f:
        text = f.read()
    return {k: int(re.search(rf"(?m)^{k}:\s*(\d+) kB", text).group(1))
            for k in ("RssAnon", "RssFile", "VmHWM")}


def started(exporter, flags, gpus, out_dir):
    fleet = os.path.join(out_dir, f"fleet-{gpus}.json")
    with open(fleet, "w") as f:
        f.write('{"gpus":[' + ",".join([GPU] * gpus) + "]}")
    proc = subprocess.Popen([exporter, "--web.listen-address", "127.0.0.1:0",
                             "--sim.scenario", fleet] + flags,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    for line in proc.stderr:
        m = re.search(r"serving GPU metrics on http://127\.0\.0\.1:(\d+)/", line)
        if m:
            # Its later log lines are left unread: it logs little at this level.
            time.sleep(2)  # the first collection
            return proc, m.group(1)
        if time.monotonic() > deadline:
            break
    proc.kill()
    sys.exit(f"memory.py: {exporter} never said where it serves")


def clients(kind, port, count):
    return subprocess.Popen([sys.executable, os.path.join(HERE, "hostile_clients.py"),
                             kind, port, str(count), str(LOAD)],
                            stdout=subprocess.PIPE, text=True)


def under(proc, loads):
    """The highest RssAnon while `loads` run, and what they printed."""
    peak = 0
    while any(c.poll() is None for c in loads):
        peak = max(peak, status(proc.pid)["RssAnon"])
        time.sleep(0.05)
    return peak, " ".join(c.stdout.read().strip() for c in loads)


def row(name, flags, peak, after, said):
    print(f"| {name} | {flags} | {peak:,} | {after['RssAnon']:,} | {after['RssFile']:,} "
          f"| {after['VmHWM']:,} | {said} |")


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(8192, hard), hard))
    out_dir = tempfile.mkdtemp(prefix="gpu-exporter-memory-")
    flags = " ".join(f"`{f}`" for f in sys.argv[2:])
    print("| load | flags | RssAnon peak | RssAnon after | RssFile | VmHWM | clients |")
    print("|---|---|---:|---:|---:|---:|---|")
    for gpus, loads in ((8, [("flood", 64)]), (64, [("never-readers", 100), ("flood", 2000)])):
        proc, port = started(sys.argv[1], sys.argv[2:], gpus, out_dir)
        try:
            idle = status(proc.pid)
            peak, said = under(proc, [clients(k, port, n) for k, n in loads])
            time.sleep(1)
            after = status(proc.pid)
            row(f"{gpus} GPUs, idle", flags, idle["RssAnon"], idle, "")
            name = " + ".join(f"{n} {k}" for k, n in loads)
            row(f"{gpus} GPUs, {name}, {LOAD} s", flags, peak, after, said)
        finally:
            proc.terminate()
            proc.wait(timeout=20)


if __name__ == "__main__":
    main()
