#!/usr/bin/env python3
"""How often the CI energy gate cries wolf, and how often it catches a real change.

Runs `wattio measure --max-increase LIMIT` on pairs of run sets of a CPU spinner of known
length (`wattio workload spin`): identical pairs, interleaved (two commands in one `measure`)
and against a baseline file measured just before (the `--baseline FILE` mode), then pairs whose
second command spins 10 % and 20 % longer. Prints a Markdown table: per condition the pairs,
how many failed the gate, that rate with its 95 % Wilson score interval, and the median
estimated change.

    PAIRS=100 RUNS=10 SPIN_S=0.1 LIMIT=5% python3 scripts/gate-calibration.py

Environment: WATTIO (the binary, default target/release/wattio), SOURCE (default auto).
"""

import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time

W = os.environ.get("WATTIO", "target/release/wattio")
PAIRS = int(os.environ.get("PAIRS", "100"))
RUNS = os.environ.get("RUNS", "10")
SPIN_S = float(os.environ.get("SPIN_S", "0.1"))
LIMIT = os.environ.get("LIMIT", "5%")
SOURCE = os.environ.get("SOURCE", "auto")


def spin(seconds):
    return f"{W} workload spin --duration {seconds:.4f}s"


def gate(args):
    """Runs one gated measure; returns (failed, estimated increase)."""
    cmd = [W, "measure", "--source", SOURCE, "--no-sync", "--runs", RUNS,
           "--max-increase", LIMIT, "--json"] + args
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode not in (0, 1):
        sys.exit(f"gate-calibration: {' '.join(cmd)} exited {p.returncode}: {p.stderr.strip()}")
    g = json.loads(p.stdout)["gate"]
    return p.returncode == 1, g["increase"]


def interleaved(factor):
    return gate([spin(SPIN_S), spin(SPIN_S * factor)])


def against_file(factor, scratch):
    base = os.path.join(scratch, "base.json")
    p = subprocess.run([W, "measure", "--source", SOURCE, "--no-sync", "--runs", RUNS,
                        "--export-json", base, spin(SPIN_S)], capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"gate-calibration: baseline run failed: {p.stderr.strip()}")
    return gate(["--baseline", base, spin(SPIN_S * factor)])


def wilson(k, n, z=1.959964):
    """95 % Wilson score interval of k successes in n trials."""
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def main():
    conditions = [
        ("identical, interleaved", lambda s: interleaved(1.0)),
        ("identical, against a baseline file", lambda s: against_file(1.0, s)),
        ("+10 % CPU work, interleaved", lambda s: interleaved(1.1)),
        ("+20 % CPU work, interleaved", lambda s: interleaved(1.2)),
    ]
    rows = []
    started = time.time()
    with tempfile.TemporaryDirectory() as scratch:
        for name, pair in conditions:
            fails, changes = 0, []
            for i in range(PAIRS):
                failed, change = pair(scratch)
                fails += failed
                changes.append(change)
                if (i + 1) % 10 == 0:
                    print(f"gate-calibration: {name}: {i + 1}/{PAIRS} pairs, {fails} failed "
                          f"({time.time() - started:.0f} s)", file=sys.stderr)
            lo, hi = wilson(fails, PAIRS)
            rows.append((name, fails, lo, hi, statistics.median(changes)))
    print(f"| condition (limit {LIMIT}, {RUNS} runs a side, spin {SPIN_S} s) | pairs | gate failed | "
          "rate (95 % CI) | median estimated change |")
    print("|---|---:|---:|---:|---:|")
    for name, fails, lo, hi, change in rows:
        print(f"| {name} | {PAIRS} | {fails} | {fails / PAIRS:.2f} ({lo:.2f}–{hi:.2f}) | "
              f"{change * 100:+.1f} % |")


if __name__ == "__main__":
    main()
