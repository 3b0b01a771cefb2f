#!/usr/bin/env python3
"""Peak RSS of an exporter binary at 64 simulated GPUs under clients that
never read and a flood of silent connections:

    python3 benches/never_readers.py BINARY [NEVER_READERS=100] [FLOOD=2000] [FLAGS...]

Bounded: one connection per never-reader and per flood member, held a few
seconds, then the process is killed. Loopback only."""
import re, socket, subprocess, sys, time, json, os
binary = sys.argv[1]
n_never = int(sys.argv[2]) if len(sys.argv) > 2 else 100
flood = int(sys.argv[3]) if len(sys.argv) > 3 else 2000
scen = "/tmp/gpu-exporter-bench-64.json"
open(scen, "w").write(json.dumps({"gpus": [{}] * 64}))
s = socket.socket(); s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]; s.close()
p = subprocess.Popen([binary, "--sim.scenario", scen, "--web.listen-address", f"127.0.0.1:{port}"] + sys.argv[4:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
def get():
    c = socket.create_connection(("127.0.0.1", port), timeout=10)
    c.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    data = b""
    while True:
        b = c.recv(1 << 20)
        if not b: break
        data += b
    c.close(); return data
for _ in range(100):
    try:
        if b"200 OK" in get()[:20]: break
    except OSError: pass
    time.sleep(0.1)
print("first scrape", len(get()))
never = []
for i in range(n_never):
    c = socket.create_connection(("127.0.0.1", port), timeout=10)
    c.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    c.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n" * 600)
    never.append(c)
time.sleep(1)
conns = []
for i in range(flood):
    try:
        conns.append(socket.create_connection(("127.0.0.1", port), timeout=10))
    except OSError as e:
        print("flood", i, e); break
time.sleep(3)
for c in conns: c.close()
body = get(); ok = len(body)
m = re.search(rb'evicted_total\{reason="stalled_write"\} (\S+)', body); print("stalled", m and m.group(1))

hwm = [l for l in open(f"/proc/{p.pid}/status") if l.startswith(("VmHWM", "VmRSS"))]
print("after: scrape", ok, " ".join(x.split()[0] + x.split()[1] for x in hwm))
p.kill()
