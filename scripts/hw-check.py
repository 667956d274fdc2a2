#!/usr/bin/env python3
"""wattio hw-check: verify every hardware-facing claim of the meter on this machine, in one call.

Runs from a carried bundle (`make hw-bundle`: a stripped `wattio` and this script) and needs
nothing but Python 3's standard library. It writes
`<out>/<host>-<date>.md` (machine, kernel, driver, wattio commit, every command, every figure,
and the differences it computed) and `<out>/<host>-<date>.json` (the same figures), then prints
where. What the machine lacks is skipped with the reason. Steps:

1. `wattio probe` and `probe --json`, as found.
2. Every usable RAPL mechanism (perf, powercap, msr, ebpf) measuring the same window side by side,
   idle and under `wattio workload spin`, against each other and against
   `perf stat -a -e power/energy-pkg/` where `perf` exists; `record --freq 1000` pacing and
   wattio's own CPU time.
3. NVML: `record --domains gpu` over idle then `wattio workload gpu`, beside the same counter
   read by Python through the NVIDIA library (ctypes), beside nvidia-smi's
   `total_energy_consumption` where that field exists, and beside nvidia-smi's `power.draw`
   integrated (shown apart: a different figure).
4. GPU energy per process: two `workload gpu` processes at 30 % and 60 % under `top --json`,
   with the driver's raw `nvmlDeviceGetProcessUtilization` answer for the record.
5. `measure --json -- wattio workload gpu` (gpu_j, the command's share), and `calibrate` where
   RAPL exists.
6. The meters beside RAPL that probe finds (platform meters: the ACPI power meter, a BMC, psys;
   hwmon GPUs of AMD and Intel): `measure --json` over alternating idle and busy blocks, each
   at least five of the slowest meter's averaging periods plus its delay, with the machine's
   figure, the rest RAPL and the GPUs do not see and its uncertainty per block, and how much
   each meter rose from idle to busy.
7. Storage devices (`hw_storage.py`): each disk that reports power figures, `measure --json` over
   alternating idle and busy blocks (a direct read of the raw disk, read-only), its energy
   interval beside the platform meter's rest, and whether the rest's rise from idle to busy lies
   within the disk's own bounds.

--fixture runs it all end to end without hardware: a `wattio fixture` tree ticking at a known
power stands in for RAPL (WATTIO_ROOT), with an ACPI power meter and an amdgpu in its hwmon, the stand-in NVIDIA libraries (crates/nvidia-stub) for
NVML and CUDA, and a stand-in `nvidia-smi` reading the same NVML through ctypes. The known truth
is then compared too, which is what `make test-hw` checks.
"""

import argparse
import ctypes
import datetime
import json
import os
import platform
import re
import resource
import shutil
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hw_storage  # noqa: E402 (beside this script, in the repository and in the bundle)

MECHANISMS = ["perf", "powercap", "msr", "ebpf"]
# With --fixture: the power of the fixture's ACPI power meter and its AMD GPU (hwmon).
FIXTURE_PLATFORM_W = 200.0
FIXTURE_AMDGPU_W = 5.0


class Check:
    def __init__(self, wattio, env, budget_s):
        self.wattio = wattio
        self.env = env
        self.deadline = time.monotonic() + budget_s
        self.md = []
        self.results = {"skipped": {}}

    def left(self):
        return self.deadline - time.monotonic()

    def skip(self, what, why):
        self.results["skipped"][what] = why
        self.md.append(f"*Skipped: {why}.*\n")
        print(f"hw-check: skipping {what}: {why}", file=sys.stderr)

    def run(self, cmd, timeout=120, show=True):
        """Runs `cmd`; returns (rc, stdout, stderr, wall seconds, child CPU seconds)."""
        timeout = max(1, min(timeout, self.left()))
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t = time.monotonic()
        try:
            p = subprocess.run(cmd, env=self.env, capture_output=True, text=True, timeout=timeout)
            rc, out, err = p.returncode, p.stdout, p.stderr
        except subprocess.TimeoutExpired as e:
            rc, out, err = 124, e.stdout or "", (e.stderr or "") + f"\n(timed out after {timeout:.0f} s)"
            out = out if isinstance(out, str) else out.decode(errors="replace")
            err = err if isinstance(err, str) else err.decode(errors="replace")
        wall = time.monotonic() - t
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        if show:
            self.md.append(f"```\n$ {shown(cmd)}   # rc {rc}, {wall:.2f} s\n```\n")
        return rc, out, err, wall, cpu

    def spawn(self, cmd, stdout=subprocess.DEVNULL):
        self.md.append(f"```\n$ {shown(cmd)} &\n```\n")
        return subprocess.Popen(cmd, env=self.env, stdout=stdout, stderr=subprocess.PIPE, text=True)


# Paths of this machine that a report must not carry: (path, what the report says instead).
SCRUB = []


def scrub(text):
    """`text` without this machine's paths: wattio, Python, the stand-in, temporary files."""
    for path, name in SCRUB:
        text = text.replace(path, name)
    return re.sub(re.escape(tempfile.gettempdir()) + r"/[\w.-]+", "$TMPDIR", text)


def shown(cmd):
    return scrub(" ".join(c if c and " " not in c else repr(c) for c in cmd))


def rel(a, b):
    """Relative difference of a against b, in percent."""
    return None if not b else 100.0 * (a - b) / b


def fmt(x, unit=""):
    return "–" if x is None else f"{x:.4g}{unit}"


def machine_info(c, fixture):
    cpu = "unknown"
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    driver = None
    if shutil.which("nvidia-smi") and not fixture:
        rc, out, _, _, _ = c.run(["nvidia-smi", "--query-gpu=index,name,driver_version",
                                  "--format=csv,noheader"], 20, show=False)
        driver = out.strip() if rc == 0 else None
    here = os.path.dirname(os.path.abspath(__file__))
    commit = None
    for f in [os.path.join(here, "COMMIT")]:
        if os.path.exists(f):
            commit = open(f).read().strip()
    if commit is None:
        try:
            commit = subprocess.run(["git", "-C", here, "rev-parse", "--short", "HEAD"],
                                    capture_output=True, text=True).stdout.strip() or None
        except OSError:
            pass
    info = {
        "host": socket.gethostname(),
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "kernel": platform.release(),
        "cpu": cpu,
        "cpus": os.cpu_count(),
        "gpus_and_driver": driver,
        "wattio_commit": commit,
        "mode": "fixture (stand-ins at known power)" if fixture else "hardware",
    }
    c.results["machine"] = info
    c.md.append("## Machine\n")
    for k, v in info.items():
        c.md.append(f"- {k}: {v if v is not None else 'not found'}")
    c.md.append("")


def probe(c):
    c.md.append("## 1. probe\n")
    rc, out, err, _, _ = c.run([c.wattio, "probe"], 60)
    c.md.append("```\n" + scrub(out.strip()) + "\n```\n")
    rc, out, err, _, _ = c.run([c.wattio, "probe", "--json"], 60)
    try:
        p = json.loads(out)
    except ValueError:
        c.skip("probe --json", f"unreadable output (rc {rc}): {err.strip()[:200]}")
        return [], None
    usable = [m["mechanism"] for m in p.get("mechanisms", []) if m.get("usable") and m["mechanism"] in MECHANISMS]
    why_not = {m["mechanism"]: m.get("reason", "") for m in p.get("mechanisms", []) if not m.get("usable")}
    c.results["probe"] = {"usable": usable, "not_usable": why_not, "chosen": p.get("chosen"), "gpu": p.get("gpu")}
    c.md.append(f"Usable RAPL mechanisms: {', '.join(usable) or 'none'}.\n")
    for m, why in why_not.items():
        c.md.append(f"- {m}: not usable: {why}")
    c.md.append("")
    return usable, p.get("gpu")


def perf_stat_cmd(seconds):
    return ["perf", "stat", "-a", "-x", ",", "-e", "power/energy-pkg/", "sleep", str(seconds)]


def parse_perf_stat(err):
    for line in err.splitlines():
        f = line.split(",")
        if len(f) > 2 and "energy-pkg" in line:
            try:
                return float(f[0])
            except ValueError:
                return None
    return None


def parse_turbostat(out):
    """PkgWatt + RAMWatt of turbostat's summary line (header line, then values)."""
    lines = [l.split() for l in out.splitlines() if l.strip()]
    for head, values in zip(lines, lines[1:]):
        if "PkgWatt" in head and len(values) == len(head):
            try:
                return sum(float(values[head.index(k)]) for k in ("PkgWatt", "RAMWatt") if k in head)
            except ValueError:
                return None
    return None


def rapl(c, usable, truth_w):
    c.md.append("## 2. RAPL mechanisms side by side\n")
    if not usable:
        c.skip("rapl", "no RAPL mechanism is usable here (see probe)")
        return
    window = 3.0
    rows = {}
    for phase in ["idle", "load"]:
        if c.left() < 60:
            c.skip(f"rapl {phase}", "out of time")
            break
        load = None
        if phase == "load":
            load = c.spawn([c.wattio, "workload", "spin", "--load", "1", "--duration", f"{window + 2}s"])
            time.sleep(0.5)
        procs = {}
        for m in usable:
            procs[m] = c.spawn([c.wattio, "measure", "--source", m, "--json", "--", "sleep", str(window)],
                               stdout=subprocess.PIPE)
        perf = None
        if shutil.which("perf") and "perf" in usable:
            perf = c.spawn(perf_stat_cmd(window))
        # turbostat prints its summary on stderr, after --interval.
        turbostat = None
        if shutil.which("turbostat"):
            turbostat = c.spawn(["turbostat", "--quiet", "--Summary", "--show", "PkgWatt,RAMWatt",
                                 "--interval", str(window), "--num_iterations", "1"])
        phase_rows = {}
        for m, p in procs.items():
            out, err = p.communicate(timeout=window + 60)
            try:
                v = json.loads(out)
                phase_rows[m] = {"total_j": v["total_j"], "duration_s": v["duration_s"],
                                 "power_w": v["total_j"] / v["duration_s"], "label": v.get("label") or v.get("mechanism")}
            except (ValueError, KeyError):
                phase_rows[m] = {"error": err.strip()[-300:]}
        if perf is not None:
            _, err = perf.communicate(timeout=window + 60)
            j = parse_perf_stat(err)
            if j is not None:
                phase_rows["perf stat (package)"] = {"total_j": j, "duration_s": window, "power_w": j / window}
        if turbostat is not None:
            out, err = turbostat.communicate(timeout=window + 60)
            w = parse_turbostat(err) or parse_turbostat(out)
            if w is not None:
                phase_rows["turbostat (PkgWatt+RAMWatt)"] = {"total_j": w * window, "duration_s": window, "power_w": w}
        if load is not None:
            load.wait(timeout=window + 30)
        ref_name = next((m for m in usable if "power_w" in phase_rows.get(m, {})), None)
        ref = phase_rows[ref_name]["power_w"] if ref_name else None
        c.md.append(f"**{phase}** ({window:.0f} s windows started together; differences against {ref_name}"
                    + (f", and against the fixture's {truth_w:g} W" if truth_w else "") + ")\n")
        c.md.append("| mechanism | J | W | vs " + str(ref_name) + (" | vs truth |" if truth_w else " |"))
        c.md.append("|---|---|---|---|" + ("---|" if truth_w else ""))
        for m, r in phase_rows.items():
            if "power_w" not in r:
                c.md.append(f"| {m} | error: {r.get('error', '')[:120]} | | |" + (" |" if truth_w else ""))
                continue
            r["vs_reference_pct"] = rel(r["power_w"], ref)
            line = f"| {m} | {r['total_j']:.3f} | {r['power_w']:.3f} | {fmt(r['vs_reference_pct'], ' %')} |"
            if truth_w:
                r["vs_truth_pct"] = rel(r["power_w"], truth_w)
                line += f" {fmt(r['vs_truth_pct'], ' %')} |"
            c.md.append(line)
        c.md.append("")
        rows[phase] = phase_rows
    c.results["rapl"] = rows
    # Pacing at 1 kHz and wattio's own CPU, on the first usable mechanism.
    m = usable[0]
    if c.left() < 30:
        c.skip("pacing", "out of time")
        return
    with tempfile.TemporaryDirectory() as d:
        csv = os.path.join(d, "r.csv")
        rc, out, err, wall, cpu = c.run([c.wattio, "record", "--source", m, "--freq", "1000",
                                         "--duration", "3s", "-o", csv], 60)
        rows_n, counters = 0, set()
        if os.path.exists(csv):
            for line in open(csv).read().splitlines()[1:]:
                f = line.split(",")
                if len(f) > 3:
                    rows_n += 1
                    counters.add((f[2], f[3]))
        per_s = rows_n / max(1, len(counters)) / 3.0
        c.results["pacing"] = {"mechanism": m, "samples_per_s": per_s, "wattio_cpu_s": cpu,
                               "wattio_cpu_pct_of_core": 100.0 * cpu / max(wall, 1e-9), "rc": rc}
        c.md.append(f"**1 kHz pacing** ({m}): {per_s:.1f} samples/s per counter over 3 s; wattio used "
                    f"{cpu:.3f} CPU-s ({100.0 * cpu / max(wall, 1e-9):.2f} % of one core) for it.\n")


class NvidiaSmi:
    """Runs nvidia-smi beside wattio: power.draw, and its energy counter where this nvidia-smi
    has the total_energy_consumption field (`--help-query-gpu` says; not every version does)."""

    def __init__(self, c, cmd):
        rc, helptext, _, _, _ = c.run(cmd + ["--help-query-gpu"], 30, show=False)
        self.energy = rc == 0 and "total_energy_consumption" in helptext
        fields = "timestamp,index,power.draw" + (",total_energy_consumption" if self.energy else "")
        self.p = c.spawn(cmd + [f"--query-gpu={fields}", "--format=csv,noheader,nounits", "-lms", "100"],
                         stdout=subprocess.PIPE)

    def stop(self):
        """Rows of (unix time, GPU index, watts, millijoules or None)."""
        self.p.terminate()
        out, _ = self.p.communicate(timeout=10)
        rows = []
        for line in out.splitlines():
            f = [x.strip() for x in line.split(",")]
            if len(f) < 3:
                continue
            try:
                mj = float(f[3]) if self.energy and len(f) > 3 else None
                rows.append((parse_ts(f[0]), int(f[1]), float(f[2]), mj))
            except ValueError:
                continue
        return rows


class NvmlPoller:
    """Reads every GPU's energy counter (nvmlDeviceGetTotalEnergyConsumption, mJ) through the
    NVIDIA library itself, with ctypes, every 100 ms: a reader of the same counter independent
    of wattio's."""

    def __init__(self, lib):
        import threading
        self.rows, self.stop_flag = [], False
        try:
            self.nvml = ctypes.CDLL(lib)
            if self.nvml.nvmlInit_v2() != 0:
                raise OSError("nvmlInit_v2 failed")
            n = ctypes.c_uint()
            self.nvml.nvmlDeviceGetCount_v2(ctypes.byref(n))
            self.handles = []
            for i in range(n.value):
                h = ctypes.c_void_p()
                self.nvml.nvmlDeviceGetHandleByIndex_v2(i, ctypes.byref(h))
                self.handles.append((i, h))
        except (OSError, AttributeError) as e:
            self.error = str(e)
            self.thread = None
            return
        self.error = None
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        e = ctypes.c_ulonglong()
        while not self.stop_flag:
            for i, h in self.handles:
                if self.nvml.nvmlDeviceGetTotalEnergyConsumption(h, ctypes.byref(e)) == 0:
                    self.rows.append((time.time(), i, None, float(e.value)))
            time.sleep(0.1)

    def stop(self):
        """Rows of (unix time, GPU index, None, millijoules)."""
        self.stop_flag = True
        if self.thread:
            self.thread.join(timeout=5)
            self.nvml.nvmlShutdown()
        return self.rows


def counter_j(rows, t0, t1):
    """Joules of a millijoule counter (column 3) between t0 and t1, interpolated at both ends."""
    rows = [r for r in rows if r[3] is not None]
    if len(rows) < 2 or rows[0][0] > t0 or rows[-1][0] < t1:
        return None
    return (interpolate(rows, t1, 3) - interpolate(rows, t0, 3)) / 1000.0


def power_integral_j(rows, t0, t1):
    """The trapezoid integral of watts (column 2) from t0 to t1."""
    if len(rows) < 2 or rows[0][0] > t0 or rows[-1][0] < t1:
        return None
    pts = [(t0, interpolate(rows, t0, 2))] + [(r[0], r[2]) for r in rows if t0 < r[0] < t1] \
        + [(t1, interpolate(rows, t1, 2))]
    return sum((b[0] - a[0]) * (a[1] + b[1]) / 2 for a, b in zip(pts, pts[1:]))


def parse_ts(s):
    for form in ("%Y/%m/%d %H:%M:%S.%f", "%Y/%m/%d %H:%M:%S"):
        try:
            return datetime.datetime.strptime(s, form).timestamp()
        except ValueError:
            pass
    raise ValueError(s)


def interpolate(rows, t, col):
    """Column `col` of nvidia-smi's rows at time `t`, linear between the two rows around it."""
    for a, b in zip(rows, rows[1:]):
        if a[0] <= t <= b[0]:
            return a[col] if b[0] == a[0] else a[col] + (b[col] - a[col]) * (t - a[0]) / (b[0] - a[0])
    return rows[-1][col]


TORCH_LOAD = (
    "import sys, time, torch\n"
    "a = torch.randn(8192, 8192, device='cuda')\n"
    "end = time.time() + float(sys.argv[1])\n"
    "while time.time() < end:\n"
    "    b = a @ a\n"
    "    torch.cuda.synchronize()\n"
)


def gpu_load_cmd(c, seconds):
    """wattio's own GPU load, or PyTorch's where the driver refuses wattio's PTX."""
    if "gpu_load" not in c.results:
        rc, _, err, _, _ = c.run([c.wattio, "workload", "gpu", "--duration", "300ms"], 60)
        if rc == 0:
            c.results["gpu_load"] = "wattio workload gpu"
        else:
            c.md.append(f"`wattio workload gpu` failed: {err.strip()[-300:]}\n")
            rc2, _, _, _, _ = c.run([sys.executable, "-c", "import torch; assert torch.cuda.is_available()"], 60)
            c.results["gpu_load"] = "pytorch matmul" if rc2 == 0 else None
    if c.results["gpu_load"] == "wattio workload gpu":
        return [c.wattio, "workload", "gpu", "--duration", f"{seconds}s"]
    if c.results["gpu_load"] == "pytorch matmul":
        return [sys.executable, "-c", TORCH_LOAD, str(seconds)]
    return None


def gpu(c, gpu_probe, smi_cmd, idle_s=3.0, load_s=4.0):
    c.md.append("## 3. NVML beside nvidia-smi\n")
    if not gpu_probe or not gpu_probe.get("usable"):
        c.skip("nvml", "NVML is not usable here: " + ((gpu_probe or {}).get("reason") or "no GPU section in probe"))
        return False
    if c.left() < idle_s + load_s + 30:
        c.skip("nvml", "out of time")
        return True
    total = idle_s + load_s + 1.0
    # Chosen (and tried once) before the window opens, so the idle part stays idle.
    load = gpu_load_cmd(c, load_s)
    with tempfile.TemporaryDirectory() as d:
        csv = os.path.join(d, "gpu.csv")
        smi = NvidiaSmi(c, smi_cmd) if smi_cmd else None
        poller = NvmlPoller(c.env.get("WATTIO_NVML_LIB") or "libnvidia-ml.so.1")
        if poller.error:
            c.md.append(f"The NVML library could not be read with ctypes: {poller.error}.\n")
        # The other readers' rows must cover wattio's window on both sides.
        time.sleep(1.0)
        rec = c.spawn([c.wattio, "record", "--domains", "gpu", "--freq", "10", "--duration", f"{total}s", "-o", csv])
        time.sleep(idle_s)
        if load:
            c.run(load, load_s + 60)
        else:
            c.skip("gpu load", "neither wattio workload gpu nor PyTorch could load the GPU: idle only")
        rec.wait(timeout=total + 30)
        time.sleep(0.5)
        smi_rows = smi.stop() if smi else []
        nvml_rows = poller.stop()
        # wattio's rows: timestamp,mechanism,socket,domain,energy_j,...: per GPU, the energy and
        # the span of its rows.
        w = {}
        for line in open(csv).read().splitlines()[1:] if os.path.exists(csv) else []:
            f = line.split(",")
            if len(f) > 4 and f[3] == "gpu":
                g = w.setdefault(int(f[2]), {"j": 0.0, "t0": None, "t1": None})
                g["j"] += float(f[4])
                t = float(f[0])
                g["t0"] = t if g["t0"] is None else min(g["t0"], t)
                g["t1"] = t if g["t1"] is None else max(g["t1"], t)
    out = {}
    c.md.append("Over the same span, per GPU: wattio's joules against the energy counter read by "
                "Python through the NVIDIA library (ctypes), against nvidia-smi's "
                "total_energy_consumption where it has that field, and against nvidia-smi's "
                "power.draw integrated (a different figure: a mean or instantaneous power, "
                "sampled every 100 ms).\n")
    c.md.append("| GPU | wattio J | counter (ctypes) J | diff | nvidia-smi counter J | diff | nvidia-smi power.draw integrated J | diff |")
    c.md.append("|---|---|---|---|---|---|---|---|")
    for idx, g in sorted(w.items()):
        # The same window: wattio's first row covers the row period before it (10 Hz).
        t0, t1 = g["t0"] - 0.1, g["t1"]
        mine = [r for r in nvml_rows if r[1] == idx]
        theirs = [r for r in smi_rows if r[1] == idx]
        ct = counter_j(mine, t0, t1)
        sc = counter_j(theirs, t0, t1)
        pi = power_integral_j(theirs, t0, t1)
        r = out[idx] = {"wattio_j": g["j"], "nvml_counter_j": ct, "smi_counter_j": sc, "smi_power_integrated_j": pi,
                        "vs_nvml_counter_pct": rel(g["j"], ct) if ct else None,
                        "vs_smi_counter_pct": rel(g["j"], sc) if sc else None,
                        "vs_power_integrated_pct": rel(g["j"], pi) if pi else None}
        c.md.append(f"| {idx} | {g['j']:.3f} | {fmt(ct)} | {fmt(r['vs_nvml_counter_pct'], ' %')} | "
                    f"{fmt(sc)} | {fmt(r['vs_smi_counter_pct'], ' %')} | "
                    f"{fmt(pi)} | {fmt(r['vs_power_integrated_pct'], ' %')} |")
    c.md.append("")
    if smi and not smi.energy:
        c.md.append("This nvidia-smi has no total_energy_consumption field.\n")
    if not smi_rows:
        c.skip("nvidia-smi comparison", "nvidia-smi is not here" if not smi_cmd else "nvidia-smi printed no rows")
    c.results["nvml"] = out
    return True


def gpu_attribution(c, has_gpu):
    """Two GPU loads at 30 % and 60 % side by side under `top`, and what the driver itself
    returned for them (nvmlDeviceGetProcessUtilization through ctypes, raw)."""
    c.md.append("## 4. GPU energy per process\n")
    if not has_gpu:
        c.skip("gpu attribution", "no usable GPU")
        return
    if c.left() < 40 or gpu_load_cmd(c, 5) is None or c.results.get("gpu_load") != "wattio workload gpu":
        c.skip("gpu attribution", "needs wattio workload gpu and 40 s")
        return
    c.md.append("Two `wattio workload gpu` processes asked for 30 % and 60 % of the GPU. Without MPS "
                "the driver time-slices their kernels, so each one's launch-to-synchronise time can "
                "include the other's and the shares reached can be below the asked ones.\n")
    loads = [c.spawn([c.wattio, "workload", "gpu", "--util", u, "--duration", "6s", "--json"], stdout=subprocess.PIPE)
             for u in ("30", "60")]
    time.sleep(1.0)
    start_us = int(time.time() * 1e6)
    rc, out, err, _, _ = c.run([c.wattio, "top", "--json", "--once", "--interval", "3s"], 30)
    raw = raw_process_utilisation(c.env.get("WATTIO_NVML_LIB") or "libnvidia-ml.so.1", start_us)
    for p in loads:
        p.wait(timeout=30)
    try:
        v = json.loads(out.splitlines()[0])
    except (ValueError, IndexError):
        c.skip("gpu attribution", f"top --json: rc {rc}: {err.strip()[-300:]}")
        return
    pids = [p.pid for p in loads]
    g = (v.get("gpus") or [{}])[0]
    e = g.get("energy_j") or 0.0
    shares = {}
    for asked, pid in zip((0.3, 0.6), pids):
        entry = next((x for x in v.get("entries", []) if x.get("pid") == pid), {})
        j = entry.get("gpu_energy_j") or 0.0
        shares[str(asked)] = j / e if e else None
    c.results["gpu_attribution"] = {"label": g.get("label"), "gpu_energy_j": e, "idle_j": g.get("idle_j"),
                                    "shares": shares, "raw_samples": raw}
    c.md.append(f"GPU 0: {fmt(e)} J over {fmt(v.get('interval_s'))} s, {g.get('label')}; idle/unattributed "
                f"{fmt(g.get('idle_j'))} J. Shares of the GPU's energy: asked 30 % → {fmt(100 * (shares['0.3'] or 0), ' %')}, "
                f"asked 60 % → {fmt(100 * (shares['0.6'] or 0), ' %')}.\n")
    c.md.append(f"What nvmlDeviceGetProcessUtilization returned for the window (pid, timestamp µs, smUtil): {raw}\n")


def raw_process_utilisation(lib, since_us):
    """The driver's own answer, for the record: [(pid, timestamp, smUtil)] since `since_us`."""

    class Sample(ctypes.Structure):
        _fields_ = [("pid", ctypes.c_uint), ("ts", ctypes.c_ulonglong), ("sm", ctypes.c_uint),
                    ("mem", ctypes.c_uint), ("enc", ctypes.c_uint), ("dec", ctypes.c_uint)]

    try:
        nvml = ctypes.CDLL(lib)
        if nvml.nvmlInit_v2() != 0:
            return "nvmlInit_v2 failed"
        h = ctypes.c_void_p()
        nvml.nvmlDeviceGetHandleByIndex_v2(0, ctypes.byref(h))
        n = ctypes.c_uint(0)
        nvml.nvmlDeviceGetProcessUtilization(h, None, ctypes.byref(n), ctypes.c_ulonglong(since_us))
        buf = (Sample * max(1, n.value + 8))()
        n = ctypes.c_uint(len(buf))
        r = nvml.nvmlDeviceGetProcessUtilization(h, buf, ctypes.byref(n), ctypes.c_ulonglong(since_us))
        nvml.nvmlShutdown()
        if r != 0:
            return f"nvmlDeviceGetProcessUtilization returned {r}"
        return [(buf[i].pid, buf[i].ts, buf[i].sm) for i in range(n.value)]
    except (OSError, AttributeError) as e:
        return str(e)


def measure_gpu_and_calibrate(c, has_gpu, usable, fixture):
    c.md.append("## 5. measure a GPU load; calibrate\n")
    if has_gpu and c.left() > 40:
        load = gpu_load_cmd(c, 3)
        rc, out, err, _, _ = c.run([c.wattio, "measure", "--json", "--"] + (load or ["sleep", "3"]), 90)
        try:
            v = json.loads(out)
            c.results["measure_gpu"] = {k: v.get(k) for k in ["duration_s", "gpu_j", "gpu_label", "gpu_attributed_j",
                                                               "gpu_attributed_label", "total_j", "mechanism", "estimated"]}
            c.md.append(f"gpu_j {v.get('gpu_j')} J over {v.get('duration_s')} s ({v.get('gpu_label')}), of which the "
                        f"command's share {v.get('gpu_attributed_j')} J ({v.get('gpu_attributed_label')}); "
                        f"CPU total_j {v.get('total_j')} J.\n")
        except ValueError:
            c.skip("measure gpu", f"rc {rc}: {err.strip()[-300:]}")
    elif not has_gpu:
        c.skip("measure gpu", "no usable GPU")
    if fixture:
        c.skip("calibrate", "a fixture's /proc/stat does not move with the load, so there is no utilisation to fit")
    elif usable and c.left() > 90:
        with tempfile.TemporaryDirectory() as d:
            model = os.path.join(d, "model.json")
            rc, out, err, _, _ = c.run([c.wattio, "calibrate", "--source", usable[0], "--duration", "3s",
                                        "--settle", "1s", "--levels", "0,0.5,1", "-o", model], 120)
            c.results["calibrate"] = {"rc": rc, "output": (out + err).strip()[-2000:]}
            c.md.append("```\n" + (out + err).strip()[-2000:] + "\n```\n")
    elif not usable:
        c.skip("calibrate", "no RAPL mechanism")


# Beside-the-CPU mechanisms that are not RAPL, NVML or a VM's share.
BESIDE = {"hwmon", "ipmi", "redfish"}


def measure_block(c, cmd, seconds):
    """`measure --json` of `cmd`: the figures of the whole-machine view, or None."""
    rc, out, err, _, _ = c.run([c.wattio, "measure", "--json", "--"] + cmd, seconds * 3 + 150)
    try:
        v = json.loads(out)
    except ValueError:
        c.md.append(f"measure failed (rc {rc}): {scrub(err.strip()[-300:])}\n")
        return None
    gpus = [d for d in v.get("domains", []) if d.get("domain") == "gpu"]
    return {
        "duration_s": v.get("duration_s"), "total_j": v.get("total_j"), "gpu_j": v.get("gpu_j"),
        "gpus": [{"gpu": d.get("socket"), "energy_j": d.get("energy_j"), "label": d.get("label")} for d in gpus],
        "platforms": (v.get("machine") or {}).get("platforms", []),
        "parts_j": (v.get("machine") or {}).get("parts_j"),
    }


def add_fixture_meters(root):
    """An ACPI power meter (averaging over 1 s) and an AMD GPU in the fixture's hwmon, at known
    power: added for step 6 only, so the NVML steps before it see the stand-in GPU alone."""
    for n, name, attrs in [(0, "power_meter", {"power1_average": int(FIXTURE_PLATFORM_W * 1e6),
                                                "power1_average_interval": 1000}),
                           (1, "amdgpu", {"power1_average": int(FIXTURE_AMDGPU_W * 1e6), "power1_label": "PPT"})]:
        d = os.path.join(root, "sys", "class", "hwmon", f"hwmon{n}")
        os.makedirs(d, exist_ok=True)
        for attr, value in [("name", name)] + list(attrs.items()):
            with open(os.path.join(d, attr), "w") as f:
                f.write(f"{value}\n")


def platform_meters(c, fixture_truth):
    c.md.append("## 6. Platform meters and non-NVIDIA GPUs beside RAPL\n")
    rc, out, err, _, _ = c.run([c.wattio, "probe", "--json"], 60, show=False)
    try:
        p = json.loads(out)
    except ValueError:
        c.skip("platform meters", f"probe --json unreadable (rc {rc})")
        return
    found = [(m["mechanism"], cc["domain"], cc["socket"]) for m in p.get("mechanisms", [])
             if m.get("usable") and m["mechanism"] in BESIDE for cc in m.get("counters", [])]
    psys = any(cc["domain"] == "psys" for m in p.get("mechanisms", []) if m.get("mechanism") == p.get("chosen")
               for cc in m.get("counters", []))
    if not found and not psys:
        c.skip("platform meters", "no platform meter (ACPI power meter, BMC, psys) and no hwmon GPU here")
        return
    c.md.append("Found beside the CPU: " + ", ".join(f"{d} {n} ({m})" for m, d, n in found)
                + (", psys" if psys else "") + ".\n")
    first = measure_block(c, ["sleep", "1"], 1)
    slowest = max([5 * q.get("averaging_s", 0) + q.get("delay_s", 0) for q in (first or {}).get("platforms", [])] + [0])
    block = max(6.0, slowest + 2.0)
    if c.left() < 4 * block * 2 + 60:
        block = max(3.0, (c.left() - 60) / 8)
    blocks = []
    for kind in ["idle", "busy", "idle", "busy"]:
        cmd = ["sleep", f"{block:.0f}"] if kind == "idle" else \
            [c.wattio, "workload", "spin", "--load", "1", "--duration", f"{block:.0f}s"]
        r = measure_block(c, cmd, block)
        if r:
            r["kind"] = kind
            blocks.append(r)
    c.results["platform"] = {"found": [list(f) for f in found], "block_s": block, "blocks": blocks,
                             "fixture_truth": fixture_truth}
    c.md.append("| block | s | RAPL J | GPUs J | meter | machine J | rest J | ± J | note |\n|---|---|---|---|---|---|---|---|---|")
    for b in blocks:
        for q in b["platforms"] or [{}]:
            c.md.append(f"| {b['kind']} | {fmt(b['duration_s'])} | {fmt(b['total_j'])} | {fmt(b['gpu_j'])} | "
                        f"{q.get('meter', '–')} | {fmt(q.get('platform_j'))} | {fmt(q.get('rest_j'))} | "
                        f"{fmt(q.get('rest_uncertainty_j'))} | {q.get('note') or ''} |")
    c.md.append("")
    watts = lambda kind, f: [f(b) / b["duration_s"] for b in blocks if b["kind"] == kind and b["duration_s"]]
    mean = lambda xs: sum(xs) / len(xs) if xs else None
    rises = {}
    for name, f in [("rapl", lambda b: b["total_j"] or 0.0), ("gpus", lambda b: b["gpu_j"] or 0.0)] + \
            [(q["meter"], (lambda m: lambda b: next((x["platform_j"] for x in b["platforms"] if x["meter"] == m), 0.0))(q["meter"]))
             for q in (blocks[0]["platforms"] if blocks else [])]:
        idle, busy = mean(watts("idle", f)), mean(watts("busy", f))
        rises[name] = {"idle_w": idle, "busy_w": busy, "rise_w": None if idle is None or busy is None else busy - idle}
        c.md.append(f"- {name}: idle {fmt(idle, ' W')}, busy {fmt(busy, ' W')}, rise {fmt(rises[name]['rise_w'], ' W')}")
    c.results["platform"]["rises"] = rises
    c.md.append("\nA platform meter rises by more than RAPL and the GPUs under the same load where the rest of the "
                "machine (fans, power supply loss, memory outside DRAM) follows the load.\n")


STAND_IN_SMI = r'''#!/usr/bin/env python3
# Stand-in nvidia-smi for hw-check --fixture: `--query-gpu=timestamp,index,power.draw
# --format=csv,noheader,nounits -lms N`, read through NVML (ctypes).
import ctypes, datetime, os, sys, time
if "--help-query-gpu" in sys.argv:
    print('"timestamp"\n"index"\n"power.draw"')  # no total_energy_consumption, as some versions
    sys.exit(0)
lib = ctypes.CDLL(os.environ["WATTIO_NVML_LIB"])
assert lib.nvmlInit_v2() == 0
n = ctypes.c_uint(); lib.nvmlDeviceGetCount_v2(ctypes.byref(n))
period = int(sys.argv[sys.argv.index("-lms") + 1]) / 1000.0
while True:
    for i in range(n.value):
        h = ctypes.c_void_p(); lib.nvmlDeviceGetHandleByIndex_v2(i, ctypes.byref(h))
        e = ctypes.c_ulonglong(); p = ctypes.c_uint()
        lib.nvmlDeviceGetTotalEnergyConsumption(h, ctypes.byref(e)); lib.nvmlDeviceGetPowerUsage(h, ctypes.byref(p))
        ts = datetime.datetime.now().strftime("%Y/%m/%d %H:%M:%S.%f")[:-3]
        print(f"{ts}, {i}, {p.value / 1000:.2f}", flush=True)
    time.sleep(period)
'''


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    here = os.path.dirname(os.path.abspath(__file__))
    default_bin = os.path.join(here, "wattio")
    if not os.path.exists(default_bin):
        default_bin = os.path.join(here, "..", "target", "release", "wattio")
    ap.add_argument("--wattio", default=default_bin, help="the wattio binary (default: next to this script)")
    ap.add_argument("--out", default=os.path.join(here, "..", "docs", "results", "hardware"),
                    help="where to write HOST-DATE.md and .json")
    ap.add_argument("--budget", type=float, default=480, help="seconds of wall time at most (default 480)")
    ap.add_argument("--fixture", action="store_true", help="no hardware: a fixture ticking at --watts and the stand-in NVIDIA libraries")
    ap.add_argument("--stub-lib", help="with --fixture: the stand-in libnvidia_stub.so (crates/nvidia-stub)")
    ap.add_argument("--watts", type=float, default=10.0, help="with --fixture: each package's power")
    a = ap.parse_args()
    wattio = os.path.abspath(a.wattio)
    if not os.access(wattio, os.X_OK):
        sys.exit(f"hw-check: no wattio binary at {wattio}: build one (make hw-bundle) or pass --wattio")
    env = dict(os.environ)
    SCRUB.extend([(wattio, "wattio"), (sys.executable, "python3")])
    if a.stub_lib:
        SCRUB.append((os.path.abspath(a.stub_lib), "libnvidia_stub.so"))
        SCRUB.append((a.stub_lib, "libnvidia_stub.so"))
    # A bundle carries the shared libraries its wattio needs beyond libc (make hw-bundle).
    bundled = os.path.join(os.path.dirname(wattio), "lib")
    if os.path.isdir(bundled):
        env["LD_LIBRARY_PATH"] = bundled + (":" + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH") else "")
    ticker = None
    tmp = tempfile.mkdtemp(prefix="wattio-hw-check-")
    truth_w = None
    smi_cmd = ["nvidia-smi"] if shutil.which("nvidia-smi") else None
    try:
        if a.fixture:
            if not a.stub_lib or not os.path.exists(a.stub_lib):
                sys.exit("hw-check: --fixture needs --stub-lib PATH to libnvidia_stub.so (cargo build -p nvidia-stub)")
            root = os.path.join(tmp, "root")
            subprocess.run([wattio, "fixture", "intel-server", root], check=True, capture_output=True)
            ticker = subprocess.Popen([wattio, "fixture", "tick", root, "--watts", str(a.watts)],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            activity = os.path.join(tmp, "gpu-activity")
            os.mkdir(activity)
            env.update({"WATTIO_ROOT": root, "WATTIO_NVML_LIB": a.stub_lib, "WATTIO_CUDA_LIB": a.stub_lib,
                        "WATTIO_GPU_STUB_DIR": activity,
                        "WATTIO_NVML_STUB": "name=Stand-in H200,uuid=GPU-00000000-0000-0000-0000-000000000200,energy_w=70,busy_w=300"})
            smi = os.path.join(tmp, "nvidia-smi")
            with open(smi, "w") as f:
                f.write(STAND_IN_SMI)
            os.chmod(smi, 0o755)
            smi_cmd = [sys.executable, smi]
            # This process reads the stand-in NVML too (ctypes): it takes its GPUs from the same
            # environment.
            os.environ.update({k: env[k] for k in ("WATTIO_NVML_STUB", "WATTIO_GPU_STUB_DIR")})
            # Two packages tick at --watts each: the package + DRAM total is twice that.
            truth_w = 2 * a.watts
            time.sleep(0.3)
        c = Check(wattio, env, a.budget)
        machine_info(c, a.fixture)
        usable, gpu_probe = probe(c)
        rapl(c, usable, truth_w)
        has_gpu = gpu(c, gpu_probe, smi_cmd)
        gpu_attribution(c, has_gpu)
        measure_gpu_and_calibrate(c, has_gpu, usable, a.fixture)
        if a.fixture:
            add_fixture_meters(root)
            nvme_block = hw_storage.fixture_nvme(root)
        platform_meters(c, {"platform_w": FIXTURE_PLATFORM_W, "amdgpu_w": FIXTURE_AMDGPU_W,
                            "rapl_w": truth_w} if a.fixture else None)
        hw_storage.storage(c, fmt, (nvme_block, os.path.join(root, "sys", "class", "hwmon", "hwmon0", "power1_average"),
                                    FIXTURE_PLATFORM_W) if a.fixture else None)
    finally:
        if ticker:
            ticker.terminate()
            ticker.wait()
        shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(a.out, exist_ok=True)
    info = c.results["machine"]
    stem = f"{info['host']}-{datetime.date.today().isoformat()}" + ("-fixture" if a.fixture else "")
    md_path = os.path.join(a.out, stem + ".md")
    title = f"# wattio hw-check: {info['host']}, {info['date']}\n\nWritten by `scripts/hw-check.py`" \
            f"{' --fixture (no hardware: every figure below comes from stand-ins)' if a.fixture else ''}.\n"
    # The report names the programs, not where they lie on this machine.
    with open(md_path, "w") as f:
        f.write(scrub(title + "\n" + "\n".join(c.md) + "\n"))
    with open(os.path.join(a.out, stem + ".json"), "w") as f:
        f.write(scrub(json.dumps(c.results, indent=1)) + "\n")
    print(f"hw-check: wrote {md_path} (and .json beside it)")


if __name__ == "__main__":
    main()
