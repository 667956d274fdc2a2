#!/usr/bin/env python3
"""make bench-agent: what the node agent costs as the number of processes grows (issue 33, goal 4).

For each process count (NPROCS, default "1000 5000 10000" live processes on the machine, sleepers
spread over 200 cgroups where a cgroup v2 hierarchy is writable, 20 of them busy at 2 % of a CPU
each), in ROUNDS interleaved rounds of DURATION seconds:

* `wattio top --by process --json --interval 1`, reading CPU times through the BPF task iterator
  and through /proc (WATTIO_CPU_TIMES=bpf / proc), and `--by cgroup`;
* procps `top -b -d 1`;
* `wattio export --by process --max-series 20000`, scraped once a second by this script, through
  both readers: the exporter's CPU, the scrape latency (p50, p99) and the series per scrape.

CPU time is the tool's own (wait4 rusage, user + system: the kernel's work in a read counts), RSS
its peak (GNU time's %M; the exporter's VmHWM). Whole-system cost: the task iterator runs only inside the agent's own read,
with no program attached to a scheduler event, so nothing else changes; `perf bench sched pipe`
with and without `top` running shows it (where perf is installed).

Then churn: `wattio top --by process` (task iterator) for CHURN_S seconds while processes are
born and reaped at CHURN_RATE per second, its RSS sampled every CHURN_S / 10 seconds.

Then the kernel I/O program (PARTS "kio", attribution/kernel_io.rs): what it costs the machine's
own work, in ROUNDS interleaved rounds of three agents (none, `wattio top` with
WATTIO_KERNEL_IO=off, and with =bpf): `perf bench sched pipe` ops/s (its sched_switch hook),
a 1 GiB buffered write with fdatasync (its per-folio hook) and 1 GiB over loopback TCP (its
per-send, per-segment hooks), each as throughput, and `top`'s own CPU-s over the three loads.
The cost and churn parts run with WATTIO_KERNEL_IO=off unless it is set: their figures are the
agent's reading of CPU times.

Then Scaphandre (PARTS "scaph"): on the same fake RAPL (a `wattio fixture` tree ticking at a
known power, its package zones wrapping at a real Intel package zone's 262143328850 µJ,
SCAPH_RANGE_UJ, bound over /sys/class/powercap in a private mount namespace by
scripts/fake-rapl-ns.sh), in ROUNDS interleaved rounds of DURATION seconds at each NPROCS,
Scaphandre's Prometheus exporter (per-process metrics, its default) and `wattio export --by
process --source powercap`, each in a cgroup of its own (cpu.stat: the whole tool, threads and
children), each scraped once a second by this script: CPU-s per round, scrape p99, and the
per-process series per scrape (Scaphandre's: one `scaph_process_cpu_usage_percentage` per
process it lists; wattio's: one `wattio_process_energy_joules_total` per process with CPU time
in the window). SCAPHANDRE_BIN names Scaphandre's binary (built with its
`prometheus` feature: `cargo install scaphandre --version 1.0.0 --features prometheus`).

Prints Markdown tables. Knobs: NPROCS, ROUNDS (3), DURATION (20), CHURN_S (3600; 0 skips it),
CHURN_RATE (200), PARTS ("cost churn kio"; "series" alone: only the 10,000-series scrapes of
the cost part, ROUNDS times, through SERIES_READERS, default "bpf", beside BASELINE_BIN's
exporter when set), COST_TOOLS (the cost part's tools, default all six; when set, the
10,000-series rows and `perf bench sched` are skipped; keep top-b among them, the ratios'
base), WATTIO_BIN, SCAPHANDRE_BIN, SCAPH_RANGE_UJ. PARTS "switch" (not in the default): `perf
bench sched pipe` (both its tasks on the last CPU) beside no agent, `wattio top` (task
iterator) and a `sched_switch` accounting program run by bpftrace, in ROUNDS interleaved rounds.
"""
import os
import resource
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
W = os.environ.get("WATTIO_BIN", os.path.join(ROOT, "target/release/wattio"))
NPROCS = [int(x) for x in os.environ.get("NPROCS", "1000 5000 10000").split()]
ROUNDS = int(os.environ.get("ROUNDS", "3"))
DURATION = int(os.environ.get("DURATION", "20"))
CHURN_S = int(os.environ.get("CHURN_S", "3600"))
CHURN_RATE = int(os.environ.get("CHURN_RATE", "200"))
PARTS = os.environ.get("PARTS", "cost churn kio").split()
COST_TOOLS = os.environ.get(
    "COST_TOOLS", "wattio-bpf wattio-proc wattio-cgroup top-b export-bpf export-proc").split()
BUSY = 20
CGROUPS = 200


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def live_processes():
    return sum(1 for d in os.listdir("/proc") if d.isdigit())


def cgroup_parent():
    """A fresh cgroup v2 directory to hold the sleepers' cgroups, or None."""
    for mount in ("/sys/fs/cgroup/unified", "/sys/fs/cgroup"):
        if os.path.exists(os.path.join(mount, "cgroup.controllers")):
            d = os.path.join(mount, f"wattio-bench-agent-{os.getpid()}")
            try:
                os.mkdir(d)
                return d
            except OSError:
                return None
    return None


class Population:
    """Sleepers up to a target count of live processes, spread over cgroups, plus busy ones."""

    def __init__(self):
        self.procs = []
        self.parent = cgroup_parent()
        self.groups = []
        if self.parent:
            for i in range(CGROUPS):
                g = os.path.join(self.parent, f"g{i:03}")
                os.mkdir(g)
                self.groups.append(g)
        for _ in range(BUSY):
            self.spawn([W, "workload", "spin", "--load", "0.02", "--duration", "100000s"])

    def spawn(self, argv):
        p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if self.groups:
            with open(os.path.join(self.groups[len(self.procs) % len(self.groups)], "cgroup.procs"), "w") as f:
                f.write(str(p.pid))
        self.procs.append(p)

    def grow_to(self, n):
        while live_processes() < n:
            for _ in range(min(500, n - live_processes())):
                self.spawn(["sleep", "100000"])
        log(f"processes on the machine: {live_processes()}")

    def end(self):
        for p in self.procs:
            p.kill()
        for p in self.procs:
            p.wait()
        for g in self.groups:
            os.rmdir(g)
        if self.parent:
            os.rmdir(self.parent)


def run_measured(argv, env=None):
    """CPU seconds and peak RSS (KiB) of a command run to its end. The RSS is GNU time's: a child
    of this script would count the script's own pages copied at fork."""
    out = f"/tmp/bench-agent-time-{os.getpid()}"
    p = subprocess.Popen(["/usr/bin/time", "-f", "%M", "-o", out] + argv, stdout=subprocess.DEVNULL,
                         env=env)
    _, status, ru = os.wait4(p.pid, 0)
    if status != 0:
        sys.exit(f"{argv} failed: {status}")
    with open(out) as f:
        rss = int(f.read().split()[-1])
    os.unlink(out)
    return ru.ru_utime + ru.ru_stime, rss


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def exporter(reader, fresh=0, binary=W):
    """The exporter's CPU seconds, peak RSS, scrape latencies (s) and series per scrape; with
    `fresh`, that many sleepers start after the exporter (each with CPU time of its own, so each
    gets a series) and end with it."""
    port = free_port()
    env = dict(os.environ, WATTIO_CPU_TIMES=reader)
    # Sampled every second, as it was scraped every second before it had its own clock.
    p = subprocess.Popen([binary, "export", "--interval", "1s", "--by", "process", "--max-series", "20000", "--listen",
                          f"127.0.0.1:{port}"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                         env=env)
    url = f"http://127.0.0.1:{port}/metrics"
    deadline = time.monotonic() + 30
    while True:
        try:
            urllib.request.urlopen(url, timeout=5).read()
            break
        except OSError:
            if time.monotonic() > deadline or p.poll() is not None:
                p.kill()
                sys.exit("the exporter did not answer within 30 s")
            time.sleep(0.2)
    extra = [subprocess.Popen(["sleep", "100000"]) for _ in range(fresh)]
    first = None
    if fresh:
        # The first scrape after they started reads each new process's cgroup once: timed
        # apart from the steady scrapes.
        time.sleep(2)
        t = time.monotonic()
        urllib.request.urlopen(url, timeout=30).read()
        first = time.monotonic() - t
    lat, series = [], []
    start = time.monotonic()
    for i in range(DURATION):
        time.sleep(max(0.0, start + i + 1 - time.monotonic()))
        t = time.monotonic()
        body = urllib.request.urlopen(url, timeout=10).read()
        lat.append(time.monotonic() - t)
        series.append(body.count(b"\nwattio_process_energy_joules_total{"))
    with open(f"/proc/{p.pid}/status") as f:
        rss = next(int(l.split()[1]) for l in f if l.startswith("VmHWM:"))
    p.send_signal(signal.SIGTERM)
    _, _, ru = os.wait4(p.pid, 0)
    for x in extra:
        x.kill()
        x.wait()
    return ru.ru_utime + ru.ru_stime, rss, lat, series, first


def q(xs, f):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(f * (len(xs) - 1))))]


# The per-switch work of a `sched_switch` CPU-time accounting program (Kepler's old probe, the
# candidate the issue names): the outgoing task's runtime added up, the incoming one's start
# noted, in hash maps keyed by thread id.
SWITCH_ACCOUNTING = """
tracepoint:sched:sched_switch {
  $now = nsecs;
  $start = @start[args->prev_pid];
  if ($start != 0) { @cpu_ns[args->prev_pid] += $now - $start; }
  @start[args->next_pid] = $now;
}
"""


def perf_sched_beside(agent):
    """`perf bench sched pipe` ops/s with nothing beside it (None), `wattio top` reading CPU
    times through the task iterator ("iterator"), or a `sched_switch` accounting program
    ("sched_switch", run by bpftrace)."""
    if agent == "iterator":
        return perf_sched(True, pinned=True)
    if agent is None:
        return perf_sched(False, pinned=True)
    bt = subprocess.Popen(["bpftrace", "-e", SWITCH_ACCOUNTING], stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True)
    # bpftrace prints "Attaching 1 probe..." once the program is attached (after warnings,
    # such as one about RLIMIT_MEMLOCK, which kernels since 5.11 no longer use for BPF)
    said = []
    while not any("Attaching" in l for l in said):
        line = bt.stdout.readline()
        if not line or len(said) > 20:
            bt.kill()
            bt.wait()
            sys.exit("bpftrace did not attach its program: " + " / ".join(l.strip() for l in said))
        said.append(line)
    try:
        return perf_sched(False, pinned=True)
    finally:
        bt.send_signal(signal.SIGINT)
        try:
            bt.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            bt.kill()
            bt.wait()


def switch():
    """PARTS "switch": the whole-system cost of the CPU-time candidates that run outside the
    agent's own reads, as `perf bench sched pipe` throughput in ROUNDS interleaved rounds."""
    if not shutil.which("perf") or not shutil.which("bpftrace"):
        sys.exit("PARTS=switch needs perf and bpftrace (apt-get install linux-perf bpftrace)")
    agents = [None, "iterator", "sched_switch"]
    ops = {a: [] for a in agents}
    for r in range(ROUNDS):
        for a in agents if r % 2 == 0 else agents[::-1]:
            ops[a].append(perf_sched_beside(a))
            log(f"switch round {r + 1} {a or 'no agent'}: {ops[a][-1]:.0f} ops/s")
    names = {None: "no agent", "iterator": "`wattio top` (task iterator, read once a second)",
             "sched_switch": "a `sched_switch` accounting program (bpftrace)"}
    print(f"\n| beside `taskset -c LAST perf bench sched pipe -l 300000` | ops/s ({ROUNDS} rounds) | median |")
    print("|---|---|---:|")
    for a in agents:
        print(f"| {names[a]} | {', '.join(f'{x:.0f}' for x in ops[a])} | {statistics.median(ops[a]):.0f} |")


def perf_sched(with_top, pinned=False):
    """`perf bench sched pipe` ops/s, with `wattio top` (task iterator) beside it or not;
    `pinned`: both of its tasks on the last CPU, so that every operation is two context
    switches on one CPU (less spread between runs than when they migrate)."""
    top = None
    if with_top:
        top = subprocess.Popen([W, "top", "--json", "--interval", "1", "-n", "1000"],
                               stdout=subprocess.DEVNULL, env=dict(os.environ, WATTIO_CPU_TIMES="bpf"))
        time.sleep(2)
    argv = ["perf", "bench", "sched", "pipe", "-l", "200000"]
    if pinned:
        argv = ["taskset", "-c", str(sorted(os.sched_getaffinity(0))[-1])] + argv[:-1] + ["300000"]
    out = subprocess.run(argv, capture_output=True, text=True).stdout
    if top:
        top.kill()
        top.wait()
    for line in out.splitlines():
        if "ops/sec" in line:
            return float(line.split()[0])
    return float("nan")


def churn():
    """RSS samples (s, KiB) of `wattio top` while processes are born and reaped at CHURN_RATE/s,
    and the rate reached."""
    top = subprocess.Popen([W, "top", "--json", "--interval", "1", "-n", str(CHURN_S + 5)],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                           env=dict(os.environ, WATTIO_CPU_TIMES="bpf"))
    samples, born = [], 0
    start = time.monotonic()
    every = max(1, CHURN_S // 10)
    next_sample = start + 2
    while time.monotonic() - start < CHURN_S:
        t = time.monotonic()
        batch = [subprocess.Popen(["true"]) for _ in range(max(1, CHURN_RATE // 10))]
        for b in batch:
            b.wait()
        born += len(batch)
        if time.monotonic() >= next_sample:
            with open(f"/proc/{top.pid}/status") as f:
                rss = next(int(l.split()[1]) for l in f if l.startswith("VmRSS:"))
            samples.append((time.monotonic() - start, rss))
            next_sample += every
        time.sleep(max(0.0, t + 0.1 - time.monotonic()))
    top.kill()
    top.wait()
    return samples, born / (time.monotonic() - start)


LOOPBACK_SERVER = """
import socket, sys
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(1)
print(s.getsockname()[1], flush=True)
c, _ = s.accept()
while c.recv(1 << 20):
    pass
"""
LOOPBACK_CLIENT = """
import socket, sys
c = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
b = b"x" * (1 << 20)
for _ in range(1024):
    c.sendall(b)
c.close()
"""


def kio_loads():
    """(sched pipe ops/s, buffered write MB/s, loopback MB/s) on the machine as it is."""
    ops = float("nan")
    if shutil.which("perf"):
        out = subprocess.run(["perf", "bench", "sched", "pipe", "-l", "200000"],
                             capture_output=True, text=True).stdout
        ops = next((float(l.split()[0]) for l in out.splitlines() if "ops/sec" in l), ops)
    path = f"/var/tmp/wattio-bench-kio-{os.getpid()}"
    t = time.monotonic()
    subprocess.run(["dd", "if=/dev/zero", f"of={path}", "bs=1M", "count=1024", "conv=fdatasync",
                    "status=none"], check=True)
    write = 1024 / (time.monotonic() - t)
    os.unlink(path)
    server = subprocess.Popen([sys.executable, "-c", LOOPBACK_SERVER], stdout=subprocess.PIPE, text=True)
    port = server.stdout.readline().strip()
    t = time.monotonic()
    subprocess.run([sys.executable, "-c", LOOPBACK_CLIENT, port], check=True)
    server.wait()
    loop = 1024 / (time.monotonic() - t)
    return ops, write, loop


def kio():
    modes = [("no agent", None), ("`wattio top`, WATTIO_KERNEL_IO=off", "off"),
             ("`wattio top`, WATTIO_KERNEL_IO=bpf", "bpf")]
    res = {m: [] for m, _ in modes}
    for r in range(ROUNDS):
        for name, mode in modes:
            top = None
            if mode:
                top = subprocess.Popen([W, "top", "--json", "--interval", "1", "-n", "100000"],
                                       stdout=subprocess.DEVNULL,
                                       env=dict(os.environ, WATTIO_KERNEL_IO=mode))
                time.sleep(2)
            ops, write, loop = kio_loads()
            cpu = float("nan")
            if top:
                top.send_signal(signal.SIGINT)
                _, status, ru = os.wait4(top.pid, 0)
                cpu = ru.ru_utime + ru.ru_stime
            res[name].append((ops, write, loop, cpu))
            log(f"kio round {r + 1}: {name}: {ops:.0f} ops/s, write {write:.0f} MB/s, loopback {loop:.0f} MB/s, top {cpu:.2f} CPU-s")
    print("\n| agent | sched pipe ops/s (median) | 1 GiB write + fdatasync MB/s (median) | 1 GiB loopback TCP MB/s (median) | top's CPU-s over the loads (median) |")
    print("|---|---:|---:|---:|---:|")
    for name, _ in modes:
        cols = list(zip(*res[name]))
        med = [statistics.median(c) for c in cols]
        top_cpu = "—" if med[3] != med[3] else f"{med[3]:.2f}"
        print(f"| {name} | {med[0]:.0f} | {med[1]:.0f} | {med[2]:.0f} | {top_cpu} |")


def cgroup_usage_usec(cg):
    with open(os.path.join(cg, "cpu.stat")) as f:
        return next(int(l.split()[1]) for l in f if l.startswith("usage_usec "))


def scraped_in_cgroup(name, argv, url, fixture, parent, series_prefix, ns_opts):
    """Runs `argv` in the fake-RAPL namespace in a cgroup of its own under `parent`, scrapes `url`
    once a second for DURATION seconds: (CPU s over those seconds, scrape latencies, series)."""
    cg = os.path.join(parent, name)
    os.mkdir(cg)
    ns = os.path.join(ROOT, "scripts", "fake-rapl-ns.sh")
    p = subprocess.Popen([ns, "--cgroup", cg, *ns_opts, fixture, "--", *argv], stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(url, timeout=10).read()
                break
            except OSError:
                if time.monotonic() > deadline or p.poll() is not None:
                    sys.exit(f"{name} did not answer at {url} within 60 s")
                time.sleep(0.5)
        lat, series = [], []
        u0 = cgroup_usage_usec(cg)
        start = time.monotonic()
        for i in range(DURATION):
            time.sleep(max(0.0, start + i + 1 - time.monotonic()))
            t = time.monotonic()
            body = urllib.request.urlopen(url, timeout=30).read()
            lat.append(time.monotonic() - t)
            series.append(body.count(series_prefix))
        cpu = (cgroup_usage_usec(cg) - u0) / 1e6
    finally:
        with open(os.path.join(cg, "cgroup.kill"), "w") as f:
            f.write("1")
        try:
            p.wait(10)
        except subprocess.TimeoutExpired:
            # seen once when the tool had not answered yet: the cgroup's kill left it running
            p.kill()
            p.wait()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                os.rmdir(cg)
                break
            except OSError:
                time.sleep(0.1)
    return cpu, lat, series


def scaph():
    """Scaphandre's exporter beside wattio's on one fake RAPL, at each NPROCS."""
    exe = os.environ.get("SCAPHANDRE_BIN") or shutil.which("scaphandre")
    parent = cgroup_parent()
    if not exe or not parent:
        log("scaph: skipped: " + ("no Scaphandre (SCAPHANDRE_BIN)" if not exe else "no writable cgroup v2"))
        return
    fixture = f"/tmp/bench-agent-rapl-{os.getpid()}"
    subprocess.run([W, "fixture", "intel-server", fixture], check=True, stdout=subprocess.DEVNULL)
    # The package zones wrap where a real Intel package zone does (262143328850 µJ, after hours),
    # not at the ticker's default 10 J: a reader that sees every wrap must read a 10 J counter
    # every 5 ms (a quarter of its wrap time at 500 W), a real one once a second. Values that long
    # can, rarely, be read torn, which costs the readers nothing.
    tick = subprocess.Popen([W, "fixture", "tick", fixture, "--watts", "20", "--max-energy-range-uj",
                             os.environ.get("SCAPH_RANGE_UJ", "262143328850"), "--allow-torn-reads"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    # The fixture's CPU is Intel's: on an Intel host its cpuinfo is bound over the host's too.
    with open("/proc/cpuinfo") as f:
        base = [] if "AuthenticAMD" in f.read() else ["--cpuinfo"]
    pop = Population()
    rows = []
    try:
        for n in NPROCS:
            pop.grow_to(n)
            got = {}
            for r in range(ROUNDS):
                for tool in ("scaphandre", "wattio"):
                    port = free_port()
                    if tool == "scaphandre":
                        argv = [exe, "prometheus", "--address", "127.0.0.1", "--port", str(port)]
                        # Its per-process series: one per process it lists (CPU use; its power
                        # series, scaph_process_power_consumption_microwatts, follow once it
                        # has enough records of the socket).
                        prefix = b"\nscaph_process_cpu_usage_percentage{"
                        # Scaphandre looks for the intel_rapl modules in /proc/modules.
                        opts = base + ["--proc-modules"]
                    else:
                        argv = [W, "export", "--source", "powercap", "--interval", "1s", "--by", "process",
                                "--max-series", "20000", "--listen", f"127.0.0.1:{port}"]
                        prefix = b"\nwattio_process_energy_joules_total{"
                        opts = base
                    cpu, lat, series = scraped_in_cgroup(f"{tool}-{r}", argv, f"http://127.0.0.1:{port}/metrics",
                                                         fixture, parent, prefix, opts)
                    g = got.setdefault(tool, {"cpu": [], "lat": [], "series": []})
                    g["cpu"].append(cpu)
                    g["lat"] += lat
                    g["series"] += series
                    log(f"{n} round {r + 1} {tool}: {cpu:.3f} CPU-s, p99 scrape {q(lat, 0.99) * 1e3:.1f} ms")
            ref = statistics.median(got["scaphandre"]["cpu"])
            for tool, g in got.items():
                rows.append((n, tool, g, statistics.median(g["cpu"]) / ref if ref > 0 else float("nan")))
    finally:
        pop.end()
        tick.terminate()
        tick.wait()
        shutil.rmtree(fixture, ignore_errors=True)
        os.rmdir(parent)
    print(f"\n| live processes | exporter on the fake RAPL, scraped every second ({DURATION} s, {ROUNDS} rounds) "
          "| CPU-s per round | median / Scaphandre's | scrape p99 | per-process series per scrape |")
    print("|---:|---|---|---:|---:|---:|")
    for n, tool, g, ratio in rows:
        print(f"| {n} | {tool} | {', '.join(f'{x:.3f}' for x in g['cpu'])} | {ratio:.3f} | "
              f"{q(g['lat'], 0.99) * 1e3:.1f} ms | {min(g['series'])}-{max(g['series'])} |")


def main():
    os.environ.setdefault("WATTIO_KERNEL_IO", "off")
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    log(f"machine: {os.cpu_count()} vCPU, kernel {os.uname().release}")
    if "cost" in PARTS:
        cost()
    elif "series" in PARTS:
        series()
    if "kio" in PARTS:
        kio()
    if "switch" in PARTS:
        switch()
    if "scaph" in PARTS:
        scaph()
    if "churn" in PARTS and CHURN_S > 0:
        samples, rate = churn()
        print(f"\n| `wattio top --by process` (task iterator) under churn, {rate:.0f} processes born and reaped per second | RSS |")
        print("|---|---:|")
        for t, kib in samples:
            print(f"| after {t:.0f} s | {kib / 1024:.1f} MiB |")


def ten_thousand_series(readers, binary=W, name=""):
    """The exporter with 10,000 fresh processes each holding a series, beside the population:
    one row per reader (`DURATION` scrapes each)."""
    rows = []
    for reader in readers:
        c, m, lat, series, first = exporter(reader, fresh=10000, binary=binary)
        rows.append((f"{live_processes()} + 10000 fresh", f"{name}export-{reader} (first scrape after they started: {first * 1e3:.0f} ms)",
                     {"cpu": [c], "rss": [m], "lat": lat, "series": series},
                     float("nan")))
        log(f"10000 fresh {reader}: p99 scrape {q(lat, 0.99) * 1e3:.1f} ms, {max(series)} series")
    return rows


def print_export_rows(export_rows):
    print(f"\n| live processes | exporter, scraped every second | CPU-s per round | median / procps top -b | scrape p50 | scrape p99 | series per scrape | peak RSS |")
    print("|---:|---|---|---:|---:|---:|---:|---:|")
    for n, tool, e, ratio in export_rows:
        print(f"| {n} | {tool} | {', '.join(f'{x:.3f}' for x in e['cpu'])} | {ratio:.3f} | "
              f"{q(e['lat'], 0.5) * 1e3:.1f} ms | {q(e['lat'], 0.99) * 1e3:.1f} ms | "
              f"{min(e['series'])}-{max(e['series'])} | {max(e['rss']) / 1024:.1f} MiB |")


def series():
    """PARTS "series" alone: the 10,000-series scrape beside each NPROCS, ROUNDS times
    (each round a row), through the readers in SERIES_READERS ("bpf"); with BASELINE_BIN, that
    build's exporter too, interleaved round by round."""
    pop = Population()
    rows = []
    readers = os.environ.get("SERIES_READERS", "bpf").split()
    baseline = os.environ.get("BASELINE_BIN")
    try:
        for n in NPROCS:
            pop.grow_to(n)
            for _ in range(ROUNDS):
                rows += ten_thousand_series(readers)
                if baseline:
                    rows += ten_thousand_series(readers, baseline, "baseline ")
    finally:
        pop.end()
    print_export_rows(rows)


def cost():
    pop = Population()
    rows, export_rows = [], []
    try:
        for n in NPROCS:
            pop.grow_to(n)
            cpu = {}
            rss = {}
            exp = {}
            for r in range(ROUNDS):
                for tool in COST_TOOLS:
                    if tool.startswith("export"):
                        c, m, lat, series, _ = exporter(tool.split("-")[1])
                        e = exp.setdefault(tool, {"cpu": [], "rss": [], "lat": [], "series": []})
                        e["cpu"].append(c)
                        e["rss"].append(m)
                        e["lat"] += lat
                        e["series"] += series
                        log(f"{n} round {r + 1} {tool}: {c:.3f} CPU-s, p99 scrape {q(lat, 0.99) * 1e3:.1f} ms")
                        continue
                    if tool == "top-b":
                        argv, env = ["top", "-b", "-d", "1", "-n", str(DURATION)], None
                    else:
                        by = "cgroup" if tool == "wattio-cgroup" else "process"
                        reader = "proc" if tool == "wattio-proc" else "bpf"
                        argv = [W, "top", "--by", by, "--json", "--interval", "1", "-n", str(DURATION)]
                        env = dict(os.environ, WATTIO_CPU_TIMES=reader)
                    c, m = run_measured(argv, env)
                    cpu.setdefault(tool, []).append(c)
                    rss.setdefault(tool, []).append(m)
                    log(f"{n} round {r + 1} {tool}: {c:.3f} CPU-s")
            top_b = statistics.median(cpu["top-b"])
            for tool, xs in cpu.items():
                rows.append((n, tool, xs, statistics.median(xs) / top_b, max(rss[tool])))
            for tool, e in exp.items():
                export_rows.append((n, tool, e, statistics.median(e["cpu"]) / top_b))
        if not os.environ.get("COST_TOOLS"):
            export_rows += ten_thousand_series(("bpf", "proc"))
    finally:
        pop.end()
    print(f"\n| live processes | tool (1 s refresh, {DURATION} s, {ROUNDS} rounds) | CPU-s per round | median / procps top -b | peak RSS |")
    print("|---:|---|---|---:|---:|")
    for n, tool, xs, ratio, m in rows:
        print(f"| {n} | {tool} | {', '.join(f'{x:.3f}' for x in xs)} | {ratio:.3f} | {m / 1024:.1f} MiB |")
    print_export_rows(export_rows)
    if shutil.which("perf") and not os.environ.get("COST_TOOLS"):
        off = [perf_sched(False) for _ in range(3)]
        on = [perf_sched(True) for _ in range(3)]
        print("\n| `perf bench sched pipe -l 200000` | ops/s (each run) | median |")
        print("|---|---|---:|")
        print(f"| agent off | {', '.join(f'{x:.0f}' for x in off)} | {statistics.median(off):.0f} |")
        print(f"| `wattio top` (task iterator) running | {', '.join(f'{x:.0f}' for x in on)} | {statistics.median(on):.0f} |")


if __name__ == "__main__":
    main()
