#!/usr/bin/env python3
"""Interleaved rounds of the render bench (divan's ours_text), base vs HEAD:
the two `cargo bench --bench render --no-run` executables, alternated.
Usage: ratio.py BASE_BIN HEAD_BIN [ROUNDS]"""
import re, statistics, subprocess, sys
base, head = sys.argv[1], sys.argv[2]
rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 20
unit = {'ns': 1e-3, 'µs': 1.0, 'ms': 1e3}
row = re.compile(r'[├╰]─ (\S+)\s+([\d.]+) (\S+)\s+│ ([\d.]+) (\S+)\s+│ ([\d.]+) (\S+)')
med = {}
for i in range(rounds):
    for which, bin in (('base', base), ('head', head)):
        out = subprocess.run([bin, '--bench', 'ours_text', '--sample-count', '200', '--sample-size', '20'],
                             capture_output=True, text=True).stdout
        for m in row.finditer(out):
            med.setdefault((m.group(1), which), []).append(float(m.group(6)) * unit[m.group(7)])
for fleet in ['1', '8', '64', '8x7mig']:
    b, h = med[(fleet, 'base')], med[(fleet, 'head')]
    r = [y / x for x, y in zip(b, h)]
    print(f"{fleet}: base {statistics.median(b):.2f} µs, HEAD {statistics.median(h):.2f} µs, "
          f"median of {len(r)} interleaved round ratios HEAD/base = {statistics.median(r):.3f}")
