#!/usr/bin/env python3
"""The meter's pacing gate: the pacing benchmark of an earlier build beside today's, side by side.

    python3 scripts/bench-gate.py OLD_REV [ROUNDS]      (make bench-gate OLD=rev [ROUNDS=3])

Builds `benches/pacing.rs` of OLD_REV (in a temporary git worktree, with its own target folder)
and of the work tree, both with the eBPF feature where the work tree's `make build` would use
it, then runs the two builds' pacing part (`WATTIO_BENCH_PARTS=pacing`, one round of 20 s per
loop and 10 s per CPU figure each time) ROUNDS times, alternating which goes first, so the
machine's drift falls on both. Prints one Markdown table: per loop both builds have, each
round's samples/s, p99 lateness, late ticks and CPU above the floor, with medians. Run it as
root on an otherwise idle machine; docs/benchmarks/meter.md holds runs.
"""

import os
import re
import statistics
import subprocess
import sys
import tempfile

LOOPS = [
    "bare timerfd loop (floor: no read, no writer)",
    "wattio, powercap fixture (1 counter)",
    "wattio, MSR fixture (4 counters)",
]
ENV = {
    "WATTIO_BENCH_PARTS": "pacing",
    "WATTIO_BENCH_ROUNDS": "1",
    "WATTIO_BENCH_SECONDS": "20",
    "WATTIO_BENCH_CPU_SECONDS": "10",
}


def features():
    has = subprocess.run("command -v clang >/dev/null && pkg-config --exists libelf",
                         shell=True).returncode == 0
    return ["--features", "wattio-energy/ebpf"] if has else []


def build(tree, target):
    """The pacing bench executable of the checkout at `tree`."""
    out = subprocess.run(
        ["cargo", "bench", "-p", "wattio-meter", "--bench", "pacing", "--no-run",
         "--message-format=json"] + features(),
        cwd=tree, env=dict(os.environ, CARGO_TARGET_DIR=target),
        capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"bench-gate: building the pacing bench in {tree} failed:\n{out.stderr[-2000:]}")
    for line in out.stdout.splitlines():
        m = re.search(r'"executable":"([^"]+/pacing-[0-9a-f]+)"', line)
        if m:
            return m.group(1)
    raise SystemExit(f"bench-gate: cargo named no pacing executable for {tree}")


def run(binary, tree):
    out = subprocess.run([binary, "--bench"], cwd=os.path.join(tree, "crates/meter"),
                         env=dict(os.environ, **ENV), capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"bench-gate: {binary} failed:\n{out.stderr[-2000:]}")
    return out.stdout


def parse(text):
    """{loop: (samples/s, p99 µs, late ticks)} and {loop: CPU above the floor}."""
    pacing, cpu, section = {}, {}, None
    for line in text.splitlines():
        if line.startswith("## Pacing"):
            section = "pacing"
        elif line.startswith("## CPU"):
            section = "cpu"
        if not line.startswith("| ") or line.startswith("| loop"):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if section == "pacing" and "/" in cells[2]:
            pacing[cells[0]] = (float(cells[1]), float(cells[2].split("/")[1]), cells[4])
        elif section == "cpu":
            above = cells[3].split(" ")[0]
            cpu[cells[0]] = None if above in ("—", "") else float(above)
    return pacing, cpu


def median(xs):
    xs = [x for x in xs if x is not None]
    return f"{statistics.median(xs):.3g}" if xs else "—"


def main():
    if len(sys.argv) not in (2, 3):
        raise SystemExit(__doc__)
    old_rev, rounds = sys.argv[1], int(sys.argv[2]) if len(sys.argv) == 3 else 3
    here = subprocess.run(["git", "rev-parse", "--show-toplevel"], capture_output=True,
                          text=True, check=True).stdout.strip()
    new_rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                             text=True, check=True).stdout.strip()
    with tempfile.TemporaryDirectory(prefix="wattio-bench-gate-") as work:
        old_tree = os.path.join(work, "old")
        subprocess.run(["git", "worktree", "add", "--detach", old_tree, old_rev], check=True,
                       capture_output=True)
        try:
            print(f"bench-gate: building {old_rev} and the work tree", file=sys.stderr)
            builds = {"old": (build(old_tree, os.path.join(work, "target")), old_tree),
                      "new": (build(here, os.path.join(here, "target")), here)}
            results = {"old": [], "new": []}
            for r in range(rounds):
                for which in (("old", "new") if r % 2 == 0 else ("new", "old")):
                    print(f"bench-gate: round {r + 1} of {rounds}, {which}", file=sys.stderr)
                    results[which].append(parse(run(*builds[which])))
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", old_tree])
    names = {"old": old_rev, "new": f"{new_rev} (work tree)"}
    print("| loop | build | samples/s per round | lateness p99 per round (µs) | median p99 |"
          " late ticks per round | CPU above the floor per round (% of a core) | median |")
    print("|---|---|---|---|---:|---|---|---:|")
    for loop in LOOPS:
        for which in ("old", "new"):
            runs = [(p.get(loop), c.get(loop)) for p, c in results[which]]
            pacing = [p for p, _ in runs if p]
            above = [c for _, c in runs]
            print(f"| {loop} | {names[which]} | {', '.join(f'{p[0]:.1f}' for p in pacing)} | "
                  f"{', '.join(f'{p[1]:.1f}' for p in pacing)} | {median([p[1] for p in pacing])} | "
                  f"{', '.join(p[2] for p in pacing)} | "
                  f"{', '.join('—' if c is None else f'{c:.3f}' for c in above)} | {median(above)} |")


if __name__ == "__main__":
    main()
