#!/usr/bin/env python3
"""`make compare-vm-meters`: what real guests see from wattio's `vm publish` and from Scaphandre's
qemu exporter, on the same fake host counter, against the known truth.

The host: a `wattio fixture intel-server` tree ticking at a known power (two packages at --watts
each) stands in for RAPL at the real powercap paths in private mount namespaces
(scripts/fake-rapl-ns.sh). There, side by side, run `wattio vm publish --dir VMS` and
`scaphandre qemu` (which writes to the fixed /var/lib/libvirt/scaphandre, here a directory of
this run bound over it inside its namespace). The guests: two `qemu-system-x86_64 -name
guest=NAME` under TCG booting Debian's kernel with an initramfs of busybox and wattio
(scripts/vm-guest-initramfs.sh), each with two read-only 9p shares: VMS/NAME at /run/wattio-host
and Scaphandre's NAME directory at /run/scaph. g1 spins its vCPU for --seconds, g2 sleeps; each
prints both counters just before and just after (and measures with `wattio measure --source
host` in between). The host reads QEMU's CPU time at those console lines.

The truth for a guest: the fixture's power × its QEMU process's share of the host's CPU time
over the window (QEMU's CPU-seconds / the host's CPUs / the window's seconds): the CPU-time
share both tools say they apply, with idle time left to the host. The table goes into
docs/results/meters.md between its own markers (make compare-meters keeps it).

Scaphandre is installed once from crates.io into the peers' cache (as make compare-meters does,
with its qemu feature). Needs root, qemu-system-x86, linux-image-amd64, busybox-static and cpio
(make deps installs them) and a release build of wattio (make compare-vm-meters builds it).

The fixture's counters wrap after 9 999 999 µJ (see `wattio fixture tick`): every second at
10 W, as no real RAPL counter does (262 kJ at ESU 14 lasts 43 minutes at 100 W). Scaphandre
reads every 5 s and drops a step in which the counter went down, so the run is made at each
of several powers (--watts 10,0.1): at 0.1 W a package's counter wraps every 100 s, at most
once in a run, as rarely as real RAPL does for a 5 s reader.

usage: scripts/compare-vm-meters.py [--watts W[,W...]] [--seconds S] [--out FILE]
"""

import argparse
import glob
import importlib.util
import json
import os
import re
import shlex
import signal
import subprocess
import tempfile
import threading
import time

# The paths, the peers' installation and the machine line are compare-meters.py's.
_spec = importlib.util.spec_from_file_location(
    "compare_meters", os.path.join(os.path.dirname(os.path.abspath(__file__)), "compare-meters.py"))
cm = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(cm)
Fail, run, tail = cm.Fail, cm.run, cm.tail
REPO, NS, WATTIO = cm.REPO, cm.NS, cm.WATTIO
INITRAMFS = os.path.join(REPO, "scripts", "vm-guest-initramfs.sh")
BEGIN = "<!-- make compare-vm-meters writes from here to its end marker -->"
END = "<!-- end of what make compare-vm-meters writes -->"


def say(msg):
    print(f"compare-vm-meters: {msg}", flush=True)


def guest_kernel():
    """The newest (vmlinuz path, version) with its modules."""
    found = []
    for path in glob.glob("/boot/vmlinuz-*"):
        v = path[len("/boot/vmlinuz-"):]
        if os.path.isdir(f"/lib/modules/{v}"):
            found.append(([int(n) for n in re.findall(r"\d+", v)], path, v))
    if not found:
        raise Fail("no /boot/vmlinuz-* with its /lib/modules: apt-get install linux-image-amd64 (make deps)")
    _, path, v = max(found)
    return path, v


def cpu_s(pid):
    """User + system seconds of process pid."""
    try:
        rest = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
        return (int(rest[11]) + int(rest[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


class Guest:
    """A guest booting; its console read on a thread, QEMU's CPU time taken at its marks."""

    def __init__(self, work, kernel, kver, name, workload, seconds, shares):
        self.name, self.lines, self.marks, self.counters = name, [], {}, []
        initrd = os.path.join(work, f"{name}.gz")
        rc, out = run([INITRAMFS, initrd, WATTIO, kver, str(seconds), workload])
        if rc != 0:
            raise Fail(f"building {name}'s initramfs failed: {tail(out, 3)}")
        virtfs = []
        for tag, path in shares:
            os.makedirs(path, exist_ok=True)
            virtfs += ["-virtfs", f"local,path={path},mount_tag={tag},security_model=none,readonly=on"]
        self.proc = subprocess.Popen(
            ["qemu-system-x86_64", "-name", f"guest={name}", "-accel", "tcg", "-m", "512", "-smp", "1",
             "-nographic", "-no-reboot", "-nodefaults", "-serial", "stdio", "-kernel", kernel,
             "-initrd", initrd, "-append", "console=ttyS0 quiet panic=-1", *virtfs],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            errors="replace")
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self):
        for line in self.proc.stdout:
            line = line.rstrip()
            m = re.search(r"WATTIO-([A-Z]+)$", line)
            if m:
                self.marks[m.group(1)] = (cpu_s(self.proc.pid), time.monotonic())
            m = re.search(r"WATTIO-COUNTERS (\d*) (\d*)$", line)
            if m:
                self.counters.append(tuple(int(x) if x else None for x in m.groups()))
            self.lines.append(line)

    def wait_for(self, mark, limit_s):
        deadline = time.monotonic() + limit_s
        while mark not in self.marks:
            if time.monotonic() > deadline or self.proc.poll() is not None and not self.thread.is_alive():
                raise Fail(f"guest {self.name} never printed WATTIO-{mark}:\n" + "\n".join(self.lines[-15:]))
            time.sleep(0.05)

    def block(self, name):
        try:
            i, j = self.lines.index(f"WATTIO-{name}-BEGIN"), self.lines.index(f"WATTIO-{name}-END")
        except ValueError:
            return None
        return "\n".join(self.lines[i + 1:j])

    def stop(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


def grew(a, b, wrap):
    """Counter growth from a to b, through at most one wrap at `wrap` (None: never wraps)."""
    if a is None or b is None:
        return None
    if b >= a:
        return b - a
    return None if wrap is None else wrap - a + b + 1


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--watts", default="10,0.1", help="power of each of the two fake packages, one run per value")
    ap.add_argument("--seconds", type=int, default=60, help="length of each guest's workload")
    ap.add_argument("--out", default=os.path.join(REPO, "docs", "results", "meters.md"))
    ap.add_argument("--cache", default=os.environ.get("WATTIO_PEERS_CACHE", "/var/cache/wattio-peers"))
    a = ap.parse_args()
    if os.geteuid() != 0:
        raise Fail("needs root (mount namespaces): run it with sudo")
    if not os.access(WATTIO, os.X_OK):
        raise Fail(f"{WATTIO} is missing: run `make build` first (make compare-vm-meters does)")
    for tool, pkg in (("qemu-system-x86_64", "qemu-system-x86"), ("busybox", "busybox-static"), ("cpio", "cpio")):
        if not any(os.access(os.path.join(d, tool), os.X_OK) for d in os.environ["PATH"].split(":")):
            raise Fail(f"{tool} not found: apt-get install {pkg} (make deps)")
    if a.seconds < 20:
        raise Fail("--seconds must be at least 20: Scaphandre's qemu exporter adds to a VM's counter every 5 s")
    try:
        a.watts = [float(w) for w in a.watts.split(",")]
    except ValueError:
        raise Fail(f"--watts must be numbers separated by commas, not {a.watts!r}")
    if not all(0 < w <= 100 for w in a.watts):
        raise Fail("each --watts must be above 0 and at most 100")
    kernel, kver = guest_kernel()
    os.makedirs(a.cache, exist_ok=True)
    scaph, why = cm.install_scaphandre(a.cache)
    if why:
        raise Fail(why)
    started = time.time()
    rows, scaph_logs = [], []
    for watts in a.watts:
        r, log = one_run(a, watts, kernel, kver, scaph)
        rows += r
        scaph_logs.append(log)
    scaph_version = run([scaph, "--version"])[1].split()[-1]
    wattio_version = run([WATTIO, "--version"])[1].split()[-1]
    rev = run(["git", "-C", REPO, "describe", "--always", "--dirty"])[1].strip()
    write(a, rows, time.time() - started, f"wattio {wattio_version} (git {rev})",
          f"Scaphandre {scaph_version} (crates.io, features json, qemu)", scaph_logs[-1])
    say(f"wrote {a.out}")


def one_run(a, watts, kernel, kver, scaph):
    """Two guests on a fake host at `watts` per package: their rows, and Scaphandre's log."""
    host_w = 2 * watts
    work = tempfile.mkdtemp(prefix="wattio-compare-vm-")
    procs, guests = [], []
    try:
        fx = os.path.join(work, "fixture")
        rc, out = run([WATTIO, "fixture", "intel-server", fx])
        if rc != 0:
            raise Fail(f"wattio fixture failed: {tail(out, 2)}")
        procs.append(subprocess.Popen([WATTIO, "fixture", "tick", "--watts", f"{watts:g}", fx],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        vms, scaph_dir = os.path.join(work, "vms"), os.path.join(work, "scaphandre")
        for name, workload in (("g1", "spin"), ("g2", "idle")):
            say(f"{watts:g} W per package: booting {name} ({workload} for {a.seconds} s)")
            guests.append(Guest(work, kernel, kver, name, workload, a.seconds,
                                [("wattio", os.path.join(vms, name)), ("scaph", os.path.join(scaph_dir, name))]))
        for g in guests:
            g.wait_for("READY", 120)
        # Both publishers start once the QEMUs run: without /proc/modules, fake-rapl-ns.sh's
        # --proc-modules shows Scaphandre only the processes that exist when it starts.
        say("starting wattio vm publish and scaphandre qemu on the fake host")
        with open(os.path.join(work, "publish.log"), "w") as log:
            procs.append(subprocess.Popen([NS, fx, "--", WATTIO, "vm", "publish", "--source", "powercap",
                                           "--dir", vms], stdout=log, stderr=subprocess.STDOUT))
        bind = ("mount -t tmpfs wattio-var /var/lib && mkdir -p /var/lib/libvirt/scaphandre && "
                f"mount --bind {shlex.quote(scaph_dir)} /var/lib/libvirt/scaphandre && "
                f"exec {shlex.quote(scaph)} qemu")
        ns_opts = [] if os.path.exists("/proc/modules") else ["--proc-modules"]
        with open(os.path.join(work, "scaphandre.log"), "w") as log:
            procs.append(subprocess.Popen([NS, *ns_opts, fx, "--", "sh", "-c", bind],
                                          stdout=log, stderr=subprocess.STDOUT))
        for g in guests:
            say(f"waiting for {g.name} to measure")
            g.wait_for("END", a.seconds + 180)
        for g in guests:
            try:
                g.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                raise Fail(f"guest {g.name} did not power off within 60 s of its measurement")
        rows = [result(g, watts, os.path.join(vms, g.name)) for g in guests]
        scaph_log = open(os.path.join(work, "scaphandre.log")).read()
    finally:
        for g in guests:
            g.stop()
        for p in reversed(procs):
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
                try:
                    p.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
        subprocess.run(["rm", "-rf", work])
    return rows, scaph_log


def online_cpus():
    """The host's online CPUs (/sys/devices/system/cpu/online), as the publisher counts them."""
    n = 0
    for part in open("/sys/devices/system/cpu/online").read().strip().split(","):
        lo, _, hi = part.partition("-")
        n += int(hi or lo) - int(lo) + 1
    return n


def result(g, watts, vm_dir):
    """One guest's row: the truth, and what each counter grew by in the guest's window."""
    if len(g.counters) < 2 or "START" not in g.marks or "END" not in g.marks:
        raise Fail(f"guest {g.name} printed no counters:\n" + "\n".join(g.lines[-15:]))
    (q0, t0), (q1, t1) = g.marks["START"], g.marks["END"]
    window = t1 - t0
    truth = 2 * watts * (q1 - q0) / online_cpus()
    (w0, s0), (w1, s1) = g.counters[0], g.counters[-1]
    wrap = int(open(os.path.join(vm_dir, "intel-rapl:0", "max_energy_range_uj")).read())
    wattio_uj = grew(w0, w1, wrap)
    wattio_j = None if wattio_uj is None else wattio_uj / 1e6
    scaph_uj = grew(s0, s1, None)
    m = json.loads(g.block("JSON") or "{}")
    return {"watts": watts, "guest": g.name, "window": window, "qemu_cpu": q1 - q0, "truth": truth, "wattio": wattio_j,
            "measure": m.get("total_j"), "measure_s": m.get("duration_s"), "label": m.get("total_label"),
            "scaph": None if scaph_uj is None else scaph_uj / 1e6, "scaph_raw": (s0, s1)}


def pct(x, truth):
    return "—" if x is None or truth <= 0 else f"{100 * (x - truth) / truth:+.1f} %"


def write(a, rows, wall_s, wattio_v, scaph_v, scaph_log):
    f3 = lambda x: "—" if x is None else f"{x:.3f}"
    w = []
    w.append(BEGIN)
    w.append("")
    w.append("## Energy inside VMs: what a guest sees from wattio and from Scaphandre's qemu exporter")
    w.append("")
    w.append(f"**Command**: `make compare-vm-meters` (`scripts/compare-vm-meters.py --watts {','.join(f'{x:g}' for x in a.watts)} "
             f"--seconds {a.seconds}`), as root; {wall_s / 60:.1f} minutes. **Machine**: {cm.machine()}. "
             f"**Run**: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; {wattio_v}; {scaph_v}.")
    w.append("")
    w.append("The fake host: two RAPL packages ticking at W watts each (2 × W in all; their powercap counters "
             "wrap after 9 999 999 µJ, every 10 / W seconds), seen at the real powercap paths by both tools, "
             "each in its own mount namespace: `wattio vm publish --source powercap` (1 s interval) and "
             "`scaphandre qemu` (5 s step, its fixed `/var/lib/libvirt/scaphandre` bound to a directory "
             "of the run). Two guests (`qemu-system-x86_64 -name guest=gN`, TCG, 1 vCPU, Debian's kernel "
             "and an initramfs of busybox and wattio) each mount both trees over 9p and print both "
             f"counters just before and just after a {a.seconds} s workload: g1 spins its vCPU, g2 sleeps. "
             "**Truth**: the fixture's power × the guest's QEMU process's CPU-seconds over the window / "
             f"the host's {online_cpus()} CPUs, read by the script from `/proc` at the guest's console "
             "lines: the CPU-time share, idle left to the host, that both tools say they apply. wattio's counter moves once per interval (1 s), so either end of a window may be up to one interval's share off (1.6 % of a busy guest's 60 s).")
    w.append("")
    w.append("| W per package | guest | window (s) | QEMU CPU-s | truth (J) | wattio counter (J) | error | wattio measure in the guest (J, over s) | Scaphandre counter (J) | error |")
    w.append("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        meas = "—" if r["measure"] is None else f"{r['measure']:.3f} over {r['measure_s']:.2f}"
        w.append(f"| {r['watts']:g} | {r['guest']} | {r['window']:.2f} | {r['qemu_cpu']:.2f} | {r['truth']:.3f} | {f3(r['wattio'])} | "
                 f"{pct(r['wattio'], r['truth'])} | {meas} | {f3(r['scaph'])} | {pct(r['scaph'], r['truth'])} |")
    w.append("")
    labels = sorted({r["label"] for r in rows if r["label"]})
    if labels:
        w.append("wattio's label in the guests: " + "; ".join(f"`{l}`" for l in labels) + ".")
        w.append("")
    raw = ", ".join(f"{r['guest']} at {r['watts']:g} W {r['scaph_raw'][0]} → {r['scaph_raw'][1]} µJ" for r in rows)
    w.append(f"Scaphandre's counters as the guests read them: {raw}. Its log's last lines (last run):")
    w.append("")
    w.append("```")
    w.append(tail(scaph_log, 6) or "(empty)")
    w.append("```")
    w.append("")
    w.append(END)
    section = "\n".join(w) + "\n"
    old = open(a.out).read() if os.path.exists(a.out) else ""
    if BEGIN in old and END in old:
        text = old[:old.index(BEGIN)] + section + old[old.index(END) + len(END):].lstrip("\n")
    else:
        text = old.rstrip() + "\n\n" + section
    with open(a.out, "w") as f:
        f.write(text)


if __name__ == "__main__":
    cm.run_main("compare-vm-meters", main, "guests and publishers stopped")
