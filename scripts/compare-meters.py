#!/usr/bin/env python3
"""`make compare-meters`: wattio beside other RAPL meters on the same live, wrapping fake counters.

A wattio fixture tree (an AMD EPYC: powercap package zone and RAPL MSR stand-ins) is made live by
`wattio fixture tick`: its package counters advance at a known power and wrap every second or two
(max_energy_range_uj 9999999 µJ; the 32-bit MSR counter at a 2^-29 J unit). Each tool runs in a
private mount namespace where the fixture sits over /sys/class/powercap, /sys/devices/virtual/
powercap and /dev/cpu (scripts/fake-rapl-ns.sh), at 1, 10, 100 and 1000 Hz where it can, one after
the other, in one cgroup each. For each run: the energy the tool reports against the known energy
of the time it covered, and the CPU time of the tool (cgroup cpu.stat) in a steady window, beside
a bare timer loop at the same rate (the floor any sampler pays). The results and the failures
(quoted) go to docs/results/meters.md.

Peers are installed once into a cache outside the repository (WATTIO_PEERS_CACHE, default
/var/cache/wattio-peers): Scaphandre from crates.io (cargo install, nice 19, one job), CodeCarbon
and pyJoules from PyPI (a venv). perf and turbostat come from Debian (linux-perf,
linux-cpupower). Alumet's agent and EnergiBridge are looked up and reported when absent.

Why Python: one process that times each run, reads cgroups, parses four output formats and writes
the table, with cleanup on any exit; the standard library only.

usage: scripts/compare-meters.py [--watts W] [--measure S] [--rates 1,10,100,1000] [--out FILE]
Needs root (mount namespaces, cgroups). Ctrl-C stops and cleans up.
"""

import argparse
import json
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NS = os.path.join(REPO, "scripts", "fake-rapl-ns.sh")
FLOOR_SRC = os.path.join(REPO, "scripts", "compare-meters-floor.c")
WATTIO = os.path.join(REPO, "target", "release", "wattio")
SCAPHANDRE_VERSION = "1.0.0"
CODECARBON_VERSION = "3.3.2"
PYJOULES_VERSION = "0.5.1"
MAX_UJ = 9_999_999
MSR_ESU = 29  # 2^32 units of 2^-29 J: the MSR counter wraps every 8 J.
REAL_ESU = 16  # AMD's unit: 2^32 units of 2^-16 J, 65536 J (a second fixture, for cost at real ranges)
WARM_S = 1.0  # after a tool is ready, before the steady CPU window
TAIL_S = 1.0  # after the steady CPU window, before the tool stops

PY_CODECARBON = r"""
import json, sys, time
from codecarbon import OfflineEmissionsTracker
hz, secs, out = float(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
t = OfflineEmissionsTracker(country_iso_code="FRA", measure_power_secs=1.0 / hz,
    save_to_file=False, log_level="warning", tracking_mode="machine", allow_multiple_runs=True)
t.start()
a = time.time()
print("ready", flush=True)
time.sleep(secs)
b = time.time()
t.stop()
d = t.final_emissions_data
json.dump({"energy_j": d.cpu_energy * 3.6e6, "t0": a, "t1": b, "samples": t._measure_occurrence},
          open(out, "w"))
"""

PY_PYJOULES = r"""
import json, sys, time
from pyJoules.device import DeviceFactory
from pyJoules.device.rapl_device import RaplPackageDomain
from pyJoules.energy_meter import EnergyMeter
hz, secs, out = float(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
meter = EnergyMeter(DeviceFactory.create_devices([RaplPackageDomain(0)]))
meter.start(tag="s")
a = time.time()
print("ready", flush=True)
# pyJoules has no sampler: back-to-back regions of 1/hz s (record() ends one, starts the next).
period, start = 1.0 / hz, time.monotonic()
k = 1
while True:
    deadline = start + k * period
    if deadline > start + secs:
        break
    time.sleep(max(0.0, deadline - time.monotonic()))
    meter.record(tag="s")
    k += 1
time.sleep(max(0.0, start + secs - time.monotonic()))
b = time.time()
meter.stop()
trace = meter.get_trace()
energy_uj = sum(s.energy["package_0"] for s in trace)
json.dump({"energy_j": energy_uj * 1e-6, "t0": a, "t1": b, "samples": len(trace)}, open(out, "w"))
"""


class Fail(Exception):
    """A problem of this script or of the machine: one line, exit 2."""


def say(msg):
    print(f"compare-meters: {msg}", flush=True)


def run(cmd, timeout=None, env=None):
    """(exit status, stdout+stderr) of a command that must not hang."""
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           timeout=timeout, env=env)
        return p.returncode, p.stdout
    except FileNotFoundError:
        return 127, f"{cmd[0]}: command not found"
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        return 124, out + f"\n(timed out after {timeout} s)"


def tail(text, lines=12):
    return "\n".join(text.strip().splitlines()[-lines:])


def quote(text, head=3, last=8):
    """The first and last lines of a long output (a traceback's start and its error)."""
    lines = text.strip().splitlines()
    if len(lines) <= head + last + 1:
        return "\n".join(lines)
    return "\n".join(lines[:head] + [f"[{len(lines) - head - last} lines]"] + lines[-last:])


# ---------------------------------------------------------------- installing the peers, once


def install_scaphandre(cache):
    """Scaphandre with its json exporter (this script) and its qemu exporter (compare-vm-meters)."""
    exe = os.path.join(cache, "scaphandre", "bin", "scaphandre")
    if (os.access(exe, os.X_OK) and SCAPHANDRE_VERSION in run([exe, "--version"])[1]
            and "qemu" in run([exe, "--help"])[1]):
        return exe, None
    say(f"installing Scaphandre {SCAPHANDRE_VERSION} from crates.io into {cache} (once; minutes)")
    env = dict(os.environ, CARGO_BUILD_JOBS="1", CARGO_TARGET_DIR=os.path.join(cache, "cargo-target"))
    rc, out = run(["nice", "-n", "19", "cargo", "install", "scaphandre", "--version", SCAPHANDRE_VERSION,
                   "--locked", "--no-default-features", "--features", "json,qemu",
                   "--root", os.path.join(cache, "scaphandre")], env=env)
    if rc != 0:
        return None, f"`cargo install scaphandre --version {SCAPHANDRE_VERSION}` failed:\n{tail(out)}"
    return exe, None


def install_venv(cache):
    """The venv python with CodeCarbon and pyJoules, or (None, why)."""
    venv = os.path.join(cache, "venv")
    py = os.path.join(venv, "bin", "python")
    want = {"codecarbon": CODECARBON_VERSION, "pyJoules": PYJOULES_VERSION}
    probe = ("import importlib.metadata as m, json; print(json.dumps({n: m.version(n) for n in "
             + json.dumps(list(want)) + "}))")

    def have():
        rc, out = run([py, "-c", probe]) if os.access(py, os.X_OK) else (1, "")
        try:
            return rc == 0 and json.loads(out.strip().splitlines()[-1]) == want
        except (ValueError, IndexError):
            return False

    if have():
        return py, None
    say(f"installing CodeCarbon {CODECARBON_VERSION} and pyJoules {PYJOULES_VERSION} from PyPI into {venv} (once)")
    rc, out = run([sys.executable, "-m", "venv", venv])
    if rc != 0:
        return None, f"`python3 -m venv` failed (install python3-venv):\n{tail(out)}"
    rc, out = run(["nice", "-n", "19", os.path.join(venv, "bin", "pip"), "install", "--quiet",
                   f"codecarbon=={CODECARBON_VERSION}", f"pyjoules=={PYJOULES_VERSION}"])
    if rc != 0 or not have():
        return None, f"`pip install codecarbon pyjoules` failed:\n{tail(out)}"
    return py, None


def build_floor(cache):
    exe = os.path.join(cache, "compare-meters-floor")
    if os.path.exists(exe) and os.path.getmtime(exe) >= os.path.getmtime(FLOOR_SRC):
        return exe
    cc = shutil.which("cc") or shutil.which("gcc")
    if not cc:
        raise Fail("no C compiler for the timer-loop floor: apt-get install gcc")
    rc, out = run([cc, "-O2", "-o", exe, FLOOR_SRC])
    if rc != 0:
        raise Fail(f"compiling {FLOOR_SRC} failed: {tail(out, 3)}")
    return exe


def debian_tool(binary, package):
    if shutil.which(binary):
        return shutil.which(binary), None
    say(f"installing {package} from Debian (for {binary})")
    rc, out = run(["apt-get", "install", "-y", "--no-install-recommends", package])
    if rc != 0 or not shutil.which(binary):
        return None, f"`apt-get install {package}` failed:\n{tail(out)}"
    return shutil.which(binary), None


def unpublished(cache, py):
    """What the registries say about the peers that have no installable package."""
    found = {}
    rc, out = run(["cargo", "info", "alumet-agent"], timeout=120)
    rc2, out2 = run(["cargo", "install", "alumet", "--root", os.path.join(cache, "alumet-try")], timeout=300)
    found["Alumet"] = (
        "The agent, `alumet-agent`, and its RAPL plugin are not on crates.io; the crate that is, "
        "`alumet`, is the framework library, with no program to run.\n"
        f"`cargo info alumet-agent`:\n{tail(out, 2)}\n`cargo install alumet`:\n{tail(out2, 3)}")
    rc, out = run(["cargo", "info", "energibridge"], timeout=120)
    msg = f"`cargo info energibridge`:\n{tail(out, 2)}"
    if py:
        rc, out = run([os.path.join(os.path.dirname(py), "pip"), "download", "--no-deps", "-d",
                       os.path.join(cache, "pip-try"), "energibridge"], timeout=120)
        msg += f"\n`pip download energibridge`:\n{tail(out, 2)}"
    found["EnergiBridge"] = "Not published on crates.io or PyPI.\n" + msg
    return found


# ---------------------------------------------------------------- the live fixture


def cgroup2_root():
    with open("/proc/self/mounts") as f:
        for line in f:
            dev, mnt, fstype = line.split()[:3]
            if fstype == "cgroup2":
                return mnt
    raise Fail("no cgroup v2 hierarchy mounted (needed to count each tool's CPU time)")


def usage_usec(cg):
    with open(os.path.join(cg, "cpu.stat")) as f:
        for line in f:
            k, v = line.split()
            if k == "usage_usec":
                return int(v)
    raise Fail(f"{cg}/cpu.stat has no usage_usec")


def kill_cgroup(cg):
    if not os.path.isdir(cg):
        return
    try:
        with open(os.path.join(cg, "cgroup.kill"), "w") as f:
            f.write("1")
    except OSError:
        with open(os.path.join(cg, "cgroup.procs")) as f:
            for pid in f.read().split():
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except ProcessLookupError:
                    pass
    for _ in range(100):
        try:
            os.rmdir(cg)
            return
        except OSError:
            time.sleep(0.05)


def stop_group(p):
    """Kills the process group of a child still running (a tool caught while its namespace was set up)."""
    if p is not None and p.poll() is None:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        p.wait()


class Ticker:
    def __init__(self, fixture, log, watts, esu=MSR_ESU):
        self.log = log
        self.err = open(log + ".stderr", "w")
        self.proc = subprocess.Popen(
            [WATTIO, "fixture", "tick", fixture, "--watts", str(watts), "--interval", "1ms",
             "--max-energy-range-uj", str(MAX_UJ), "--msr-esu", str(esu), "--log", log],
            stdout=subprocess.DEVNULL, stderr=self.err, start_new_session=True)
        deadline = time.time() + 10
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise Fail(f"wattio fixture tick stopped: {tail(open(log + '.stderr').read(), 3)}")
            if os.path.exists(log) and open(log).read().count("\n") >= 3:
                return
            time.sleep(0.05)
        raise Fail("wattio fixture tick did not start within 10 s")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()

    def wraps(self, counter_prefix, t0, t1):
        """Wraps of the counter whose name starts with counter_prefix between unix times t0, t1."""
        rows = []
        with open(self.log) as f:
            next(f)
            for line in f:
                ns, _, name, _, _, wraps = line.rstrip("\n").split(",")
                if name.startswith(counter_prefix):
                    rows.append((int(ns) * 1e-9, int(wraps)))
        before = [w for t, w in rows if t <= t0]
        upto = [w for t, w in rows if t <= t1]
        return (upto[-1] if upto else 0) - (before[-1] if before else 0)


# ---------------------------------------------------------------- the tools


def parse_wattio(path):
    import csv
    rows = [(float(r["timestamp"]), float(r["energy_j"])) for r in csv.DictReader(open(path))
            if r["domain"] == "package"]
    if len(rows) < 2:
        raise ValueError(f"{len(rows)} package rows")
    # The first row holds the energy since the meter opened, before the window starts.
    return {"energy_j": sum(e for _, e in rows[1:]), "t0": rows[0][0], "t1": rows[-1][0],
            "samples": len(rows)}


def parse_scaphandre(path):
    text, dec, i, reports = open(path).read(), json.JSONDecoder(), 0, []
    while i < len(text):
        while i < len(text) and text[i].isspace():
            i += 1
        if i >= len(text):
            break
        obj, i = dec.raw_decode(text, i)
        host = obj.get("host")
        if host:
            reports.append((host["timestamp"], host["consumption"] * 1e-6))
    if len(reports) < 2:
        raise ValueError(f"{len(reports)} host reports")
    # Each report's power, over the time since the report before: what integrating Scaphandre's
    # power series gives. Where the counter went down, Scaphandre writes no report for that step
    # (its power is None), so that step's energy comes from the next report's power.
    energy = sum(watts * (tb - ta) for (ta, _), (tb, watts) in zip(reports, reports[1:]))
    return {"energy_j": energy, "t0": reports[0][0], "t1": reports[-1][0], "samples": len(reports)}


def parse_json(path):
    d = json.load(open(path))
    return d


def tools(a, peers):
    """(name, mechanism, counter, ns options, ready marker, command(rate, secs, out), parse(out))."""
    t = []
    t.append(("timer loop (floor)", "none", None, [], None,
              lambda hz, s, o: [peers["floor"], str(hz), str(s)], None, "wrapping"))
    for name, mech, fixture in (("wattio powercap", "powercap", "wrapping"),
                                ("wattio msr", "msr", "wrapping"),
                                (f"wattio msr, real unit (ESU {REAL_ESU})", "msr", "real-unit")):
        t.append((name, mech, mech, [], None,
                  lambda hz, s, o, mech=mech: [WATTIO, "record", "--source", mech, "--domains", "package",
                                               "--freq", str(hz), "--duration", str(s), "-o", o + ".csv"],
                  lambda o: parse_wattio(o + ".csv"), fixture))
    if peers.get("scaphandre"):
        def scaph(hz, s, o):
            step_ns = int(round(1e9 / hz))
            return [peers["scaphandre"], "json", "--step", str(step_ns // 10**9), "--step-nano",
                    str(step_ns % 10**9), "--timeout", str(int(round(s))), "--file", o + ".json"]
        t.append((f"Scaphandre {SCAPHANDRE_VERSION} (json)", "powercap", "powercap", ["--proc-modules"],
                  None, scaph, lambda o: parse_scaphandre(o + ".json"), "wrapping"))
    if peers.get("python"):
        for name, code in ((f"CodeCarbon {CODECARBON_VERSION}", PY_CODECARBON),
                           (f"pyJoules {PYJOULES_VERSION}", PY_PYJOULES)):
            script = os.path.join(a.work, "harness_" + name.split()[0].lower() + ".py")
            with open(script, "w") as f:
                f.write(code)
            t.append((name, "powercap", "powercap", [], "ready",
                      lambda hz, s, o, script=script: [peers["python"], script, str(hz), str(s), o + ".json"],
                      lambda o: parse_json(o + ".json"), "wrapping"))
    return t


def run_tool(a, cgroot, fixture, ns_opts, cmd, out, ready_marker, secs):
    """Runs one tool in the namespace and its own cgroup: (exit status, steady CPU s/s, total CPU s, output)."""
    cg = os.path.join(cgroot, f"run-{os.path.basename(out)}")
    os.mkdir(cg)
    a.live_cgroups.add(cg)
    log = open(out + ".out", "w")
    try:
        p = subprocess.Popen([NS, "--cgroup", cg, *ns_opts, fixture, "--", *cmd], stdout=log,
                             stderr=subprocess.STDOUT, start_new_session=True)
        a.current = p
        start, ready, snap = time.time(), None, {}
        limit = start + secs + 60
        while p.poll() is None:
            now = time.time()
            if ready is None and (ready_marker is None or ready_marker in open(out + ".out").read()):
                ready = now
            if ready is not None and "a" not in snap and now >= ready + WARM_S:
                snap["a"] = (now, usage_usec(cg))
            if "a" in snap and "b" not in snap and now >= snap["a"][0] + a.measure:
                snap["b"] = (now, usage_usec(cg))
            if now > limit:
                kill_cgroup(cg)
                p.wait()
                return None, None, None, f"(did not finish within {secs + 60:.0f} s; killed)"
            time.sleep(0.02)
        total = usage_usec(cg) * 1e-6
        steady = None
        if "b" in snap:
            steady = (snap["b"][1] - snap["a"][1]) * 1e-6 / (snap["b"][0] - snap["a"][0])
        return p.returncode, steady, total, open(out + ".out").read()
    finally:
        log.close()
        stop_group(a.current)
        a.current = None
        kill_cgroup(cg)
        a.live_cgroups.discard(cg)


# ---------------------------------------------------------------- the report


def machine():
    fields = {}
    for line in open("/proc/cpuinfo"):
        k, _, v = line.partition(":")
        fields.setdefault(k.strip(), v.strip())
    model = (f"{fields.get('model name', 'unknown CPU')} ({fields.get('vendor_id', '?')} family "
             f"{fields.get('cpu family', '?')} model {fields.get('model', '?')})")
    osname = platform.platform()
    try:
        for line in open("/etc/os-release"):
            if line.startswith("PRETTY_NAME="):
                osname = line.split("=", 1)[1].strip().strip('"')
    except OSError:
        pass
    virt = " (VM: cpuinfo flag `hypervisor`)" if " hypervisor" in open("/proc/cpuinfo").read() else ""
    return f"{model}{virt}, {os.cpu_count()} CPUs (nproc), {osname}, kernel {platform.release()}"


def loadavg():
    return open("/proc/loadavg").read().split()[0]


def fmt(x, digits=3):
    return "—" if x is None else f"{x:.{digits}f}"


def write_report(a, results, failures, versions, wall_s, notes):
    lines = []
    w = lines.append
    w("# wattio beside other RAPL meters, on the same wrapping counters")
    w("")
    w(f"**Command**: `make compare-meters` (`scripts/compare-meters.py --watts {a.watts:g} "
      f"--measure {a.measure:g} --rates {','.join(f'{r:g}' for r in a.rates)}`), as root; "
      f"{wall_s / 60:.1f} minutes with the peers already installed.")
    w(f"**Machine**: {machine()}.")
    w(f"**Run**: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; wattio {versions.pop('wattio')}; "
      f"load average (1 min) {a.load_start} at the start, {loadavg()} at the end (other work on the "
      "machine shares its 2 cores: CPU times are per tool, wall-clock rates suffer first).")
    w("**Versions**: " + "; ".join(f"{k} {v}" for k, v in versions.items()) + ".")
    w("")
    w("## How")
    w("")
    w(f"This machine has no RAPL. `wattio fixture amd-epyc` writes a fake one and `wattio fixture tick` "
      f"makes it live: its package counters advance at exactly {a.watts:g} W (the value written each "
      f"millisecond is {a.watts:g} W × the time since the start), the powercap `energy_uj` wraps to 0 "
      f"after `max_energy_range_uj` = {MAX_UJ} µJ (every {MAX_UJ * 1e-6 / a.watts:.2f} s) and the "
      f"package energy MSR stand-in after 2^32 units of 2^-{MSR_ESU} J (8 J, every {8 / a.watts:.2f} s). "
      "Each tool runs in a private mount namespace where the fixture sits over `/sys/class/powercap`, "
      "`/sys/devices/virtual/powercap` and `/dev/cpu` (`scripts/fake-rapl-ns.sh`), so it reads the "
      "fake counters at their real paths. The tools run one after the other, each rate in turn.")
    w("")
    w("- **Known energy**: the power times the time the tool's own report covers: from its first to "
      "its last sample (wattio's rows, Scaphandre's report timestamps), or the tracked region "
      "(CodeCarbon `start()` to `stop()`, pyJoules `start()` to `stop()`, timed by the harness). "
      "*Wraps* counts the wraps of the counter the tool reads inside that window (from the ticker's log).")
    w("- **Reported**: wattio, CodeCarbon and pyJoules report energy (their sum over the window; "
      "wattio's first row, the energy before the window, left out). Scaphandre reports power: its "
      "reports integrated over time (each report's watts × the time since the report before). "
      "Scaphandre writes no report for a step in which the counter went down (no power from a "
      "decreasing pair, `get_records_diff_power_microwatts` in its `src/sensors/mod.rs`), so its "
      "reports are fewer than its steps; integrating fills such a step with the next report's "
      "power, which is exact here only because the fake power is constant.")
    w(f"- **How often wattio reads**: at least every (range + 1 unit) / 500 W / 4 whatever the asked "
      f"rate (wrap safety, `crates/energy/src/wrap.rs`): {MAX_UJ * 1e-6 / 2000 * 1e3:.0f} ms for the "
      f"powercap zone and {8 / 2000 * 1e3:.0f} ms for the MSR here, so its rows at 1–100 Hz cost what "
      "200–250 reads a second cost. The rows *wattio msr, real unit* read a second fixture with "
      f"AMD's own MSR unit (ESU {REAL_ESU}: 65536 J, no wrap in a run, read period 32 s), where wattio "
      "reads at the asked rate, as it does on real counters.")
    w(f"- **CPU**: the tool's cgroup `cpu.stat` `usage_usec` (user + system, all its threads and "
      f"children) over a {a.measure:g} s window that starts {WARM_S:g} s after the tool is ready "
      "(after start-up and imports; % of one core), and over its whole run including start-up "
      "(*CPU s total*). The floor is a bare `timerfd` loop at the same rate "
      "(`scripts/compare-meters-floor.c`, as in wattio's pacing benchmark): what any sampler pays to wake up.")
    w("")
    w("## Results")
    w("")
    w("| tool | reads | rate asked (Hz) | samples | rate got (Hz) | wraps | reported (J) | known (J) | error (J) | error | CPU (% of a core) | CPU s total |")
    w("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in results:
        err = pct = None
        if r.get("energy_j") is not None:
            err = r["energy_j"] - r["known_j"]
            pct = 100 * err / r["known_j"] if r["known_j"] else None
        steady = None if r.get("steady") is None else 100 * r["steady"]
        w(f"| {r['tool']} | {r['mech']} | {r['rate']:g} | {r.get('samples', '—')} | {fmt(r.get('rate_got'), 1)} | "
          f"{r.get('wraps', '—')} | {fmt(r.get('energy_j'))} | {fmt(r.get('known_j'))} | "
          f"{fmt(err)} | {'—' if pct is None else f'{pct:+.2f} %'} | {fmt(steady)} | {fmt(r.get('total'), 2)} |")
    noted = [r for r in results if r.get("note")]
    if noted or notes:
        w("")
        for r in noted:
            w(f"- {r['tool']} at {r['rate']:g} Hz: {r['note']}.")
        for n in notes:
            first, _, rest = n.partition("\n")
            body, _, after = rest.rpartition("\n")
            w(f"- {first}")
            w("")
            w("  ```")
            for line in body.splitlines():
                w(f"  {line}")
            w("  ```")
            w("")
            w(f"  {after}")
    w("")
    w("## Failures, and tools that could not be installed or run")
    w("")
    for name, why in failures.items():
        first, _, rest = why.partition("\n")
        w(f"**{name}**: {first}")
        if rest.strip():
            w("")
            w("```")
            w(rest.strip())
            w("```")
        w("")
    marker = "<!-- Everything below is written by hand; make compare-meters keeps it. -->"
    kept = ""
    if os.path.exists(a.out):
        old = open(a.out).read()
        if marker in old:
            kept = old[old.index(marker) + len(marker):]
    text = "\n".join(lines).rstrip() + "\n\n" + marker + (kept if kept else "\n")
    os.makedirs(os.path.dirname(a.out), exist_ok=True)
    with open(a.out, "w") as f:
        f.write(text)


# ---------------------------------------------------------------- main


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--watts", type=float, default=6.0, help="power of the fake package counter")
    ap.add_argument("--measure", type=float, default=6.0, help="seconds of steady CPU window per run")
    ap.add_argument("--rates", default="1,10,100,1000", help="sampling rates, Hz")
    ap.add_argument("--only", default="", help="run only the tools whose name contains this (for a quick check)")
    ap.add_argument("--out", default=os.path.join(REPO, "docs", "results", "meters.md"))
    ap.add_argument("--cache", default=os.environ.get("WATTIO_PEERS_CACHE", "/var/cache/wattio-peers"))
    a = ap.parse_args()
    a.rates = [float(x) for x in a.rates.split(",")]
    if os.geteuid() != 0:
        raise Fail("needs root (mount namespaces and cgroups): run it with sudo")
    if not os.access(WATTIO, os.X_OK):
        raise Fail(f"{WATTIO} is missing: run `make build` first (make compare-meters does)")
    ceiling = min(MAX_UJ * 1e-6, 2.0 ** (32 - MSR_ESU)) * min(a.rates)
    if not 0 < a.watts < ceiling:
        raise Fail(f"--watts must be positive and below {ceiling:g}: at the slowest rate one sample must "
                   "advance the counters by less than their range, or no tool can see every wrap")
    os.makedirs(a.cache, exist_ok=True)
    a.live_cgroups, a.current = set(), None
    a.load_start = loadavg()
    started = time.time()

    peers, failures, versions = {}, {}, {}
    rc, out = run([WATTIO, "--version"])
    rev = run(["git", "-C", REPO, "describe", "--always", "--dirty"])[1].strip()
    versions["wattio"] = f"{out.split()[-1] if out.split() else '?'} (git {rev})"
    peers["floor"] = build_floor(a.cache)
    peers["scaphandre"], why = install_scaphandre(a.cache)
    if why:
        failures[f"Scaphandre {SCAPHANDRE_VERSION}"] = why
    else:
        versions["Scaphandre"] = run([peers["scaphandre"], "--version"])[1].split()[-1] + " (crates.io, features json, qemu)"
    peers["python"], why = install_venv(a.cache)
    if why:
        failures["CodeCarbon and pyJoules"] = why
    else:
        versions["CodeCarbon"] = f"{CODECARBON_VERSION} (PyPI)"
        versions["pyJoules"] = f"{PYJOULES_VERSION} (PyPI)"
        versions["Python"] = run([peers["python"], "--version"])[1].split()[-1]
    perf, why = debian_tool("perf", "linux-perf")
    if why:
        failures["perf"] = why
    else:
        versions["perf"] = run([perf, "--version"])[1].strip().split()[-1] + " (Debian linux-perf)"
    turbostat, why = debian_tool("turbostat", "linux-cpupower")
    if why:
        failures["turbostat"] = why
    else:
        versions["turbostat"] = run([turbostat, "--version"])[1].split()[2] + " (Debian linux-cpupower)"
    say("looking up Alumet and EnergiBridge in the registries")
    unpub = unpublished(a.cache, peers["python"])

    a.work = tempfile.mkdtemp(prefix="wattio-compare-")
    cgroot = os.path.join(cgroup2_root(), f"wattio-compare-{os.getpid()}")
    os.mkdir(cgroot)
    ticker = ticker_real = None
    try:
        fixture = os.path.join(a.work, "fixture")
        rc, out = run([WATTIO, "fixture", "amd-epyc", fixture])
        if rc != 0:
            raise Fail(f"wattio fixture failed: {tail(out, 2)}")
        # CodeCarbon refuses to start without the control type's `subsystem` link, which sysfs has
        # and the fixture builder leaves out (it makes the tree a cycle for naive walkers).
        os.symlink("../../../../class/powercap",
                   os.path.join(fixture, "sys/devices/virtual/powercap/intel-rapl/subsystem"))
        cpuinfo = open("/proc/cpuinfo").read()
        base_ns = [] if "AuthenticAMD" in cpuinfo else ["--cpuinfo"]
        ticker = Ticker(fixture, os.path.join(a.work, "tick.csv"), a.watts)
        # The same machine with AMD's real MSR unit: its counter does not wrap in a run, and wattio's
        # wrap-safe read period (range / 500 W / 4) is 32 s, so it reads at the asked rate.
        fixture_real = os.path.join(a.work, "fixture-real-unit")
        rc, out = run([WATTIO, "fixture", "amd-epyc", fixture_real])
        if rc != 0:
            raise Fail(f"wattio fixture failed: {tail(out, 2)}")
        ticker_real = Ticker(fixture_real, os.path.join(a.work, "tick-real.csv"), a.watts, esu=REAL_ESU)
        fixtures = {"wrapping": (fixture, ticker), "real-unit": (fixture_real, ticker_real)}
        say(f"fixture ticking at {a.watts:g} W in {fixture}")

        results, notes = [], []
        runs = [(hz, t) for hz in a.rates for t in tools(a, peers) if a.only.lower() in t[0].lower()]
        secs = WARM_S + a.measure + TAIL_S
        for i, (hz, (name, mech, counter, ns_opts, marker, cmd, parse, which)) in enumerate(runs, 1):
            fx, tk = fixtures[which]
            say(f"[{i}/{len(runs)}] {name} at {hz:g} Hz for {secs:g} s")
            out = os.path.join(a.work, f"{i:02d}")
            rc, steady, total, output = run_tool(a, cgroot, fx, base_ns + ns_opts,
                                                 cmd(hz, secs, out), out, marker, secs)
            r = {"tool": name, "mech": mech, "rate": hz, "steady": steady, "total": total}
            if rc != 0:
                r["note"] = f"exited {rc}: `{tail(output, 1)}`"
                failures.setdefault(f"{name} at {hz:g} Hz", f"exited with status {rc}; it printed:\n{quote(output)}")
            elif parse:
                try:
                    got = parse(out)
                    if isinstance(got.get("samples"), int) and got["t1"] > got["t0"]:
                        r["rate_got"] = (got["samples"] - 1) / (got["t1"] - got["t0"])
                    r.update(energy_j=got["energy_j"], samples=got.get("samples", "—"),
                             known_j=a.watts * (got["t1"] - got["t0"]),
                             wraps=tk.wraps(counter, got["t0"], got["t1"]))
                    if got.get("note"):
                        r["note"] = got["note"]
                except (OSError, ValueError, KeyError) as e:
                    r["note"] = f"no result: {e}"
                    failures.setdefault(f"{name} at {hz:g} Hz", f"wrote no usable result ({e}); it printed:\n{quote(output)}")
            else:
                r["samples"] = output.strip().splitlines()[-1] if output.strip() else "—"
                if r["samples"].isdigit():
                    r["rate_got"] = int(r["samples"]) / secs
            results.append(r)

        if peers.get("scaphandre") and not os.path.exists("/proc/modules"):
            rc, out = run([NS, *base_ns, fixture, "--", peers["scaphandre"], "json", "--step", "1",
                           "--timeout", "2"], timeout=60)
            notes.append(
                f"Scaphandre {SCAPHANDRE_VERSION} stops at once on this kernel, which has no "
                f"`/proc/modules` (built without loadable modules): exit {rc},\n{quote(out, 2, 2)}\n"
                "It looks for the RAPL drivers there (`check_module` in `src/sensors/powercap_rapl.rs`) "
                "before reading powercap. Its runs above therefore get a `/proc/modules` that lists them "
                "(`fake-rapl-ns.sh --proc-modules`), as a machine with RAPL has.")
        say("perf and turbostat")
        if perf:
            rc, out = run([perf, "stat", "-a", "-e", "power/energy-pkg/", "-I", "1000", "sleep", "2"], timeout=30)
            rc2, out2 = run([NS, "--perf-pmu", *base_ns, fixture, "--", perf, "stat", "-a", "-e",
                             "power/energy-pkg/", "-I", "1000", "sleep", "2"], timeout=30)
            out = "\n".join(out.strip().splitlines()[:3])
            failures[f"perf {versions.get('perf', '')}".strip()] = (
                "reads RAPL through the kernel's `power` PMU (perf_event_open), which no bind mount can "
                "fake: this kernel has no such PMU, and the fixture's PMU description (type "
                "4242, which no kernel assigns) gets perf as far as the system call.\n"
                f"`perf stat -a -e power/energy-pkg/ -I 1000 sleep 2` on this machine (exit {rc}; first lines):\n{out}\n"
                f"the same with the fixture's PMU over /sys/bus/event_source/devices/power (exit {rc2}):\n{tail(out2, 6)}")
        if turbostat:
            rc, out = run([NS, *base_ns, fixture, "--", turbostat, "--quiet", "--Joules", "--show",
                           "Pkg_J", "--interval", "1", "--num_iterations", "3"], timeout=30)
            failures[f"turbostat {versions.get('turbostat', '')}".strip()] = (
                f"the MSR peer: reads /dev/cpu/N/msr (here the fixture's stand-ins). Exit {rc}; it printed:\n{tail(out, 6)}")
        failures.update(unpub)
    finally:
        stop_group(a.current)
        for t in (ticker, ticker_real):
            if t:
                t.stop()
        for cg in list(a.live_cgroups):
            kill_cgroup(cg)
        kill_cgroup(cgroot)
        shutil.rmtree(a.work, ignore_errors=True)
    write_report(a, results, failures, versions, time.time() - started, notes)
    say(f"wrote {a.out}")


def run_main(prog, main, cleaned_up):
    """Runs `main`: a Fail is one line and exit 2; SIGINT or SIGTERM clean up and exit 130."""
    def interrupted(signum, _frame):
        raise KeyboardInterrupt
    # SIGINT too: a shell that starts this in the background leaves SIGINT ignored.
    signal.signal(signal.SIGTERM, interrupted)
    signal.signal(signal.SIGINT, interrupted)
    try:
        main()
    except Fail as e:
        print(f"{prog}: error: {e}", file=sys.stderr)
        sys.exit(2)
    except KeyboardInterrupt:
        print(f"{prog}: interrupted; {cleaned_up}", file=sys.stderr)
        sys.exit(130)


if __name__ == "__main__":
    run_main("compare-meters", main, "namespaces, ticker and tools cleaned up")
