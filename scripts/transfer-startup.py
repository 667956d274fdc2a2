#!/usr/bin/env python3
"""Start-up of `wattio transfer` in a bench-transfer run: per tool and dataset, the median over
repeats of the process's wall time (the bench's --stats), wattio's own transfer time (`seconds`
in its JSON summary: from the first planned request to the end) and their difference, the
start-up before the first request (process start, TLS, reading the index, sizing, planning).
Other tools' rows show their wall time only.

usage: scripts/transfer-startup.py RESULTS_DIR [RESULTS_DIR ...]
"""
import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path


def rows(run: Path):
    cells = defaultdict(list)
    for meta in sorted((run / "runs").glob("*.meta.json")):
        stem = str(meta)[: -len(".meta.json")]
        m = json.loads(meta.read_text())
        s = json.loads(Path(stem + ".stats.json").read_text())
        seconds = None
        if m["tool"].startswith("wattio"):
            try:
                seconds = json.loads(Path(stem + ".stdout").read_text())["seconds"]
            except (OSError, ValueError, KeyError):
                pass
        cells[(m["dataset"], m["tool"])].append((s["wall_s"], seconds))
    return cells


def main(dirs):
    print("| run | dataset | tool | n | wall s (median) | transfer s | start-up s (wall − transfer) |")
    print("|---|---|---|---:|---:|---:|---:|")
    for d in dirs:
        run = Path(d)
        for (ds, tool), v in sorted(rows(run).items()):
            wall = statistics.median(w for w, _ in v)
            secs = [s for _, s in v if s is not None]
            tr = f"{statistics.median(secs):.2f}" if secs else "–"
            su = f"{statistics.median(w - s for w, s in v if s is not None):.2f}" if secs else "–"
            print(f"| {run.name} | {ds} | {tool} | {len(v)} | {wall:.2f} | {tr} | {su} |")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1:])
