#!/usr/bin/env python3
"""Where a 1000 Hz `wattio record` loses time between a tick's deadline and its reading.

Runs `wattio record --freq 1000` on a fixture tree (powercap or MSR) under `perf record` with the
kernel's timer and scheduler tracepoints, then splits each tick of the sampling thread into:

  timer interrupt late   hrtimer_expire_entry's `now` minus the deadline the timer was armed for
                         (hrtimer_start's `expires`): the interrupt's delivery, in a VM the
                         hypervisor's, plus leaving the idle state;
  wake-up to running     sched_switch onto the sampling thread minus its sched_wakeup: the
                         scheduler (another task on the CPU, or the context switch);
  running to reading     the sample's own timestamp (the CSV row) minus that sched_switch: the
                         return from read(2) to user space and the loop's clock read.

Prints percentiles of each part and which part was largest in each tick later than LATE_US.
Needs root, perf and a release build: WATTIO_BIN (default target/release/wattio).

Usage: scripts/trace-meter-wakeups.py [--source powercap|msr] [--seconds 10]
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

LATE_US = 50.0


def quantile(values, p):
    if not values:
        return float("nan")
    s = sorted(values)
    k = (len(s) - 1) * p
    lo = int(k)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


def parse_script(text, tid):
    """Per-tick (deadline, expire, wakeup, switch) from `perf script` lines, all in ns."""
    field = lambda line, name: re.search(name + r"=(\S+)", line)
    ticks = []
    busy = 0
    armed = {}  # hrtimer pointer -> expires (ns) of the sampling thread's timerfd
    pending = None
    for line in text.splitlines():
        m = re.match(r"\s*(\S+)\s+(\d+)\s+\[\d+\]\s+(\d+)\.(\d+):\s+(\S+):", line)
        if not m:
            continue
        pid, secs, frac, event = int(m.group(2)), m.group(3), m.group(4), m.group(5)
        t = int(secs) * 1_000_000_000 + int(frac.ljust(9, "0")[:9])
        if event == "timer:hrtimer_start" and pid == tid and "timerfd_tmrproc" in line:
            armed[field(line, "hrtimer").group(1)] = int(field(line, "expires").group(1))
        elif event == "timer:hrtimer_expire_entry" and "timerfd_tmrproc" in line:
            ptr = field(line, "hrtimer").group(1)
            if ptr in armed:
                if pending is not None:
                    # The last tick never woke the thread: it was still running (reading,
                    # or handing over rows) when its timer fired.
                    busy += 1
                now = int(field(line, "now").group(1))
                pending = {"deadline": armed.pop(ptr), "expire": now}
        elif event == "sched:sched_wakeup" and pending and "wakeup" not in pending:
            if int(field(line, "pid").group(1)) == tid:
                pending["wakeup"] = t
        elif event == "sched:sched_switch" and pending and "wakeup" in pending:
            if int(field(line, "next_pid").group(1)) == tid:
                pending["switch"] = t
                ticks.append(pending)
                pending = None
    return ticks, busy


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--source", default="powercap", choices=["powercap", "msr"])
    ap.add_argument("--seconds", type=float, default=10.0)
    args = ap.parse_args()
    wattio = os.environ.get("WATTIO_BIN", "target/release/wattio")
    with tempfile.TemporaryDirectory() as tmp:
        fx = os.path.join(tmp, "fx")
        subprocess.run([wattio, "fixture", "intel-laptop", fx], check=True, capture_output=True)
        rows = os.path.join(tmp, "rows.csv")
        data = os.path.join(tmp, "perf.data")
        env = dict(os.environ, WATTIO_ROOT=fx)
        cmd = [
            "perf", "record", "-q", "-a", "-m", "2048", "-k", "CLOCK_MONOTONIC", "-o", data,
            "-e", "timer:hrtimer_start", "-e", "timer:hrtimer_expire_entry",
            "-e", "sched:sched_wakeup", "-e", "sched:sched_switch", "--",
            wattio, "record", "--source", args.source, "--freq", "1000",
            "--duration", f"{args.seconds}s", "-o", rows,
        ]
        run = subprocess.run(cmd, env=env, capture_output=True, text=True)
        if run.returncode != 0:
            sys.exit(f"perf record failed (needs root and perf): {run.stderr.strip()}")
        script = subprocess.run(
            ["perf", "script", "-i", data, "-F", "comm,tid,cpu,time,event,trace", "--ns"],
            capture_output=True, text=True, check=True,
        ).stdout
        # The sampling thread is the process's main thread; the writer is `wattio-writer`.
        tids = {int(m.group(1)) for m in re.finditer(r"^\s*wattio\s+(\d+)\s", script, re.M)}
        tid = min(tids) if tids else sys.exit("no wattio thread in the trace")
        ticks, busy = parse_script(script, tid)
    # The timer's interrupt wakes the thread itself: a wake-up more than a period after the
    # expiry belongs to a later tick, its own events lost by perf (counted, left out).
    matched = [t for t in ticks if t["wakeup"] - t["expire"] < 1_000_000]
    lost = len(ticks) - len(matched)
    ticks = matched
    if not ticks:
        sys.exit("no timerfd ticks of the sampling thread in the trace")
    parts = {
        "timer interrupt late": [(t["expire"] - t["deadline"]) / 1e3 for t in ticks],
        "expiry to wake-up": [(t["wakeup"] - t["expire"]) / 1e3 for t in ticks],
        "wake-up to running": [(t["switch"] - t["wakeup"]) / 1e3 for t in ticks],
        "deadline to running (total)": [(t["switch"] - t["deadline"]) / 1e3 for t in ticks],
    }
    print(f"wattio record --source {args.source} --freq 1000, {args.seconds:g} s under perf "
          f"(tracepoints, CLOCK_MONOTONIC): {len(ticks)} of {args.seconds * 1000:.0f} ticks of the "
          f"sampling thread traced whole ({lost} more left out: some of their events lost)\n")
    print("| part of a tick's lateness | p50 (µs) | p99 (µs) | max (µs) |")
    print("|---|---:|---:|---:|")
    for name, v in parts.items():
        print(f"| {name} | {quantile(v, 0.5):.1f} | {quantile(v, 0.99):.1f} | {max(v):.0f} |")
    late = [t for t in ticks if (t["switch"] - t["deadline"]) / 1e3 > LATE_US]
    largest = {}
    for t in late:
        split = {
            "timer interrupt late": t["expire"] - t["deadline"],
            "expiry to wake-up": t["wakeup"] - t["expire"],
            "wake-up to running": t["switch"] - t["wakeup"],
        }
        name = max(split, key=split.get)
        largest[name] = largest.get(name, 0) + 1
    print(f"\n{busy} ticks fired while the sampling thread was still running (no wake-up).")
    print(f"{len(late)} ticks on the CPU more than {LATE_US:g} µs after their deadline; "
          "the largest part of each: "
          + (", ".join(f"{k} {v}" for k, v in sorted(largest.items())) or "none"))


if __name__ == "__main__":
    main()
