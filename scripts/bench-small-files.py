#!/usr/bin/env python3
"""make bench-small-files: many small files from nginx's autoindex on loopback, wattio beside
wget2, rclone and aria2 (issue 33, goal 2), side by side in interleaved rounds.

Each tool copies FILES files of SIZE bytes in DIRS directories into an ext4 file system of its
own (a loop-mounted image, so that every run starts from the same state):

- mode `fresh`: the file system is made anew (mkfs) before the run;
- mode `deleted`: the previous run's copy was deleted just before (the case where ext4's
  inode allocator skips recently deleted inodes, which makes every create dearer).

Per run: wall time, the tool's own CPU-s (user + system, from wait4) and peak RSS (GNU time's
%M), the whole machine's busy CPU-s over the run (/proc/stat: nginx, kworkers and journal
threads included), and the time of the `sync` run after it (the writeback the tool left
behind: wattio syncs each file's data before renaming it into place, the others do not sync),
and the time to the first file: until a copied file first lies under its final name with all
its bytes (polled every 10 ms), which bounds the time to the first byte from above and shows
whether a tool streams the listing or builds it whole first.
Every copy is checked: file count and bytes. The tools run in turn, in reverse order every
other round.

Knobs (environment): FILES (20000), DIRS (100), SIZE (4096), ROUNDS (2), MODES ("fresh
deleted"), TOOLS ("wattio wget2 rclone aria2", and curl; `wattio-old` runs WATTIO_OLD, another
build), JOURNAL (1; 0 makes the image without a journal, as some cloud images' root file
systems), TLS (1: nginx over HTTPS with a CA the script makes), THREADS (16: the others'
parallel transfers; wattio tunes its own), WORK (a directory on a disk, default
/var/tmp/wattio-bench-small), WATTIO_BIN (default target/release/wattio), WATTIO_ARGS (extra
arguments for wattio). FILES=1 DIRS=1 SIZE=4294967296 MODES=fresh is the bulk-bytes benchmark
(`make bench-bulk`: one 4 GiB file, CPU-s per GB). Writes a Markdown table to stdout and the
raw rows as CSV to WORK/results.csv. Run as root (loop mounts).
"""

import csv
import os
import shutil
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FILES = int(os.environ.get("FILES", "20000"))
DIRS = int(os.environ.get("DIRS", "100"))
SIZE = int(os.environ.get("SIZE", "4096"))
ROUNDS = int(os.environ.get("ROUNDS", "2"))
MODES = os.environ.get("MODES", "fresh deleted").split()
TOOLS = os.environ.get("TOOLS", "wattio wget2 rclone aria2").split()
TLS = os.environ.get("TLS", "0") == "1"
THREADS = int(os.environ.get("THREADS", "16"))
WORK = Path(os.environ.get("WORK", "/var/tmp/wattio-bench-small"))
WATTIO = os.environ.get("WATTIO_BIN", str(ROOT / "target/release/wattio"))
WATTIO_ARGS = os.environ.get("WATTIO_ARGS", "").split()
# a second wattio build, run as the tool `wattio-old` (a before/after in one run)
WATTIO_OLD = os.environ.get("WATTIO_OLD", "")
JOURNAL = os.environ.get("JOURNAL", "1") == "1"
PORT = 18431
CLK = os.sysconf("SC_CLK_TCK")


def fail(msg):
    sys.exit(f"bench-small-files: {msg}")


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, **kw)


def dataset():
    """FILES files of SIZE random bytes in DIRS directories (made once per shape)."""
    data = WORK / f"data-{FILES}x{SIZE}-{DIRS}"
    if (data / ".complete").exists():
        return data
    shutil.rmtree(data, ignore_errors=True)
    # at most 64 MiB of random bytes, repeated in a larger file: the script itself stays small
    # (its children start with its peak RSS as theirs)
    piece = min(SIZE, 64 << 20)
    rnd = os.urandom(piece + 4096)
    for i in range(FILES):
        d = data / f"d{i % DIRS:03}"
        d.mkdir(parents=True, exist_ok=True)
        off = i % 4096
        with (d / f"f{i:07}.bin").open("wb") as f:
            f.write(i.to_bytes(8, "little"))
            left = SIZE - 8
            while left > 0:
                n = min(left, piece)
                f.write(rnd[off : off + n])
                left -= n
    (data / ".complete").touch()
    return data


def tls_files():
    """A CA and a certificate for 127.0.0.1 signed by it (openssl)."""
    t = WORK / "tls"
    if (t / "cert.pem").exists():
        return t
    t.mkdir(parents=True, exist_ok=True)
    q = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
         "-nodes", "-keyout", t / "ca.key", "-out", t / "ca.pem", "-days", "30",
         "-subj", "/CN=bench CA"], **q)
    run(["openssl", "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
         "-keyout", t / "key.pem", "-out", t / "req.csr", "-subj", "/CN=127.0.0.1"], **q)
    (t / "ext.cnf").write_text("subjectAltName=IP:127.0.0.1\n")
    run(["openssl", "x509", "-req", "-in", t / "req.csr", "-CA", t / "ca.pem", "-CAkey",
         t / "ca.key", "-CAcreateserial", "-out", t / "cert.pem", "-days", "30",
         "-extfile", t / "ext.cnf"], **q)
    return t


def start_nginx(data):
    conf = WORK / "nginx.conf"
    listen = f"127.0.0.1:{PORT}"
    tls = ""
    if TLS:
        t = tls_files()
        listen += " ssl"
        tls = (f"ssl_certificate {t / 'cert.pem'}; ssl_certificate_key {t / 'key.pem'};"
               " ssl_protocols TLSv1.3;")
    conf.write_text(f"""
worker_processes 1; daemon off; pid {WORK / 'nginx.pid'}; error_log {WORK / 'nginx.err'};
events {{ worker_connections 1024; }}
http {{ access_log off; sendfile on; keepalive_requests 100000;
  server {{ listen {listen}; {tls} root {data}; autoindex on; }} }}
""")
    p = subprocess.Popen(["nginx", "-c", str(conf), "-e", str(WORK / "nginx.err")])
    base = f"{'https' if TLS else 'http'}://127.0.0.1:{PORT}/"
    for _ in range(100):
        if p.poll() is not None:
            fail(f"nginx exited (port {PORT} taken?); see {WORK / 'nginx.err'}")
        if subprocess.run(["curl", "-sfk", "-o", "/dev/null", base]).returncode == 0:
            return p, base
        time.sleep(0.05)
    p.kill()
    fail(f"nginx did not answer on {base}; see {WORK / 'nginx.err'}")


def url_list(data, base):
    """aria2's input file: every URL with the directory it goes to."""
    lst = WORK / "aria2.txt"
    with lst.open("w") as f:
        for d in sorted(p for p in data.iterdir() if p.is_dir()):
            for x in sorted(d.iterdir()):
                f.write(f"{base}{d.name}/{x.name}\n  dir=DEST/{d.name}\n")
    return lst


def command(tool, base, dest, lst):
    ca = WORK / "tls" / "ca.pem"
    if tool in ("wattio", "wattio-old"):
        exe = WATTIO if tool == "wattio" else WATTIO_OLD
        cmd = [exe, "transfer", base, str(dest), "--sla", "max-throughput", *WATTIO_ARGS]
        return cmd + (["--cacert", str(ca)] if TLS else [])
    if tool == "wget2":
        cmd = ["wget2", "-q", "-r", "-np", "-nH", "-R", "index.html*", "--no-robots",
               f"--max-threads={THREADS}", "-P", str(dest), base]
        return cmd + ([f"--ca-certificate={ca}"] if TLS else [])
    if tool == "rclone":
        cmd = ["rclone", "copy", "--http-url", base, ":http:", str(dest), "-q",
               f"--transfers={THREADS}", f"--checkers={THREADS}"]
        return cmd + ([f"--ca-cert={ca}"] if TLS else [])
    if tool == "aria2":
        text = lst.read_text().replace("DEST", str(dest))
        mine = WORK / "aria2-run.txt"
        mine.write_text(text)
        cmd = ["aria2c", "-q", "-i", str(mine), f"-j{THREADS}", "-x1",
               "--file-allocation=none", "--auto-file-renaming=false", "--summary-interval=0",
               "--allow-overwrite=true"]
        return cmd + ([f"--ca-certificate={ca}"] if TLS else [])
    if tool == "curl":
        # every URL of the list, DIRS directories made as needed, THREADS at a time
        cfg = WORK / "curl-run.txt"
        with cfg.open("w") as f:
            for url, sub in zip(*[iter(lst.read_text().splitlines())] * 2):
                out = dest / sub.split("DEST/", 1)[1] / url.rsplit("/", 1)[1]
                f.write(f'url = "{url}"\noutput = "{out}"\n')
        cmd = ["curl", "-sS", "--fail", "--create-dirs", "-Z", "--parallel-max", str(THREADS),
               "-K", str(cfg)]
        return cmd + (["--cacert", str(ca)] if TLS else [])
    fail(f"unknown tool {tool}; pick from wattio wget2 rclone aria2 curl")


def busy_ticks():
    f = open("/proc/stat").readline().split()[1:]
    v = [int(x) for x in f]
    return sum(v) - v[3] - v[4]  # all but idle and iowait


class Fs:
    """The loop-mounted ext4 every run writes into."""

    def __init__(self):
        self.img = WORK / "dest.img"
        self.mnt = WORK / "mnt"
        self.mnt.mkdir(parents=True, exist_ok=True)

    def make(self):
        self.umount()
        with open(self.img, "wb") as f:
            f.truncate(0)
            f.truncate(max(4 << 30, FILES * SIZE * 4))
        features = [] if JOURNAL else ["-O", "^has_journal"]
        # mkfs's default (an inode per 16 KiB) leaves a million 4 KiB files short of inodes
        features += ["-N", str(max(FILES * 2, 65536))]
        run(["mkfs.ext4", "-q", "-F", "-E", "lazy_itable_init=0,lazy_journal_init=0",
             *features, str(self.img)])
        run(["mount", "-o", "loop", str(self.img), str(self.mnt)])

    def umount(self):
        subprocess.run(["umount", str(self.mnt)], stderr=subprocess.DEVNULL)

    def clear(self):
        for p in self.mnt.iterdir():
            if p.name != "lost+found":
                shutil.rmtree(p) if p.is_dir() else p.unlink()


def check(dest):
    n = total = 0
    for dirpath, _, names in os.walk(dest):
        for x in names:
            if x.endswith(".bin"):
                n += 1
                total += os.path.getsize(os.path.join(dirpath, x))
    if n != FILES or total != FILES * SIZE:
        return f"{n} files, {total} bytes"
    return ""


class FirstFile:
    """Watches DEST from a thread: seconds from the start until a file first lies there under its
    final name (`.bin`) with all SIZE bytes."""

    def __init__(self, dest, t0):
        self.dest, self.t0, self.at = dest, t0, None
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.watch, daemon=True)
        self.thread.start()

    def found(self):
        for dirpath, _, names in os.walk(self.dest):
            for x in names:
                if x.endswith(".bin"):
                    try:
                        if os.stat(os.path.join(dirpath, x)).st_size == SIZE:
                            return True
                    except OSError:
                        pass
        return False

    def watch(self):
        while not self.stop.is_set():
            if self.found():
                self.at = time.monotonic() - self.t0
                return
            self.stop.wait(0.01)

    def seconds(self):
        self.stop.set()
        self.thread.join()
        return self.at if self.at is not None else float("nan")


def one_run(tool, mode, fs, base, lst):
    if mode == "fresh":
        fs.make()
    else:
        fs.clear()
        run(["sync"])
    dest = fs.mnt / "copy"
    cmd = command(tool, base, dest, lst)
    env = dict(os.environ, RCLONE_CONFIG=str(WORK / "rclone.conf"))
    b0, t0 = busy_ticks(), time.monotonic()
    # peak RSS from GNU time: a child of this script would inherit the script's own peak as
    # its ru_maxrss floor
    rss_file = WORK / "maxrss.txt"
    cmd = ["/usr/bin/time", "-f", "%M", "-o", str(rss_file), *cmd]
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    first = FirstFile(dest, t0)
    _, status, ru = os.wait4(p.pid, 0)
    first_s = first.seconds()
    try:
        peak_kib = int(rss_file.read_text().split()[-1])
    except (OSError, ValueError, IndexError):
        peak_kib = 0
    wall = time.monotonic() - t0
    busy = (busy_ticks() - b0) / CLK
    err = p.stderr.read().decode(errors="replace").strip().splitlines()
    s0 = time.monotonic()
    run(["sync"])
    sync_s = time.monotonic() - s0
    code = os.waitstatus_to_exitcode(status)
    bad = check(dest)
    if code != 0 and tool != "wget2":  # wget2 exits 8 for the rejected index pages' 404s
        bad = bad or f"exit {code}: {err[-1] if err else ''}"
    return {"tool": tool, "mode": mode, "wall_s": wall, "cpu_s": ru.ru_utime + ru.ru_stime,
            "sys_cpu_s": ru.ru_stime, "machine_busy_s": busy, "sync_after_s": sync_s,
            "files_per_s": FILES / wall, "peak_rss_mib": peak_kib / 1024, "first_file_s": first_s,
            "problem": bad}


def main():
    if os.geteuid() != 0:
        fail("run as root (it loop-mounts an ext4 image)")
    if not os.access("/usr/bin/time", os.X_OK):
        fail("/usr/bin/time not found; run ./scripts/install-deps.sh (Debian's package time)")
    for t in TOOLS:
        exe = {"wattio": WATTIO, "wattio-old": WATTIO_OLD, "aria2": "aria2c"}.get(t, t)
        if not shutil.which(exe):
            fail(f"{exe} not found; run ./scripts/install-deps.sh (or make build for wattio)")
    WORK.mkdir(parents=True, exist_ok=True)
    (WORK / "rclone.conf").touch()
    data = dataset()
    nginx, base = start_nginx(data)
    fs = Fs()
    rows = []
    try:
        lst = url_list(data, base)
        if "deleted" in MODES:
            fs.make()
        for r in range(ROUNDS):
            for mode in MODES:
                for tool in TOOLS if r % 2 == 0 else TOOLS[::-1]:
                    row = one_run(tool, mode, fs, base, lst)
                    row["round"] = r + 1
                    rows.append(row)
                    print(f"round {r + 1} {mode:8} {tool:8} {row['wall_s']:7.2f} s "
                          f"{row['cpu_s']:6.2f} CPU-s (sys {row['sys_cpu_s']:.2f}) machine "
                          f"{row['machine_busy_s']:6.2f} CPU-s sync {row['sync_after_s']:.2f} s "
                          f"first file {row['first_file_s']:.2f} s "
                          f"RSS {row['peak_rss_mib']:.0f} MiB "
                          f"{row['problem']}", file=sys.stderr, flush=True)
    finally:
        nginx.terminate()
        nginx.wait()
        fs.umount()
    with (WORK / "results.csv").open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    scheme = "HTTPS" if TLS else "HTTP"
    fs_kind = "ext4" if JOURNAL else "ext4 without a journal"
    print(f"{FILES} files of {SIZE} B in {DIRS} directories, nginx autoindex over {scheme}, "
          f"into {fs_kind} (a loop-mounted image), medians of {ROUNDS}\n")
    print("| mode | tool | wall s | files/s | own CPU-s | of it kernel | CPU-s per 1,000 files "
          "| CPU-s per GB | machine CPU-s | sync after s | peak RSS MiB | first file s | problems |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for mode in MODES:
        for tool in TOOLS:
            rs = [x for x in rows if x["tool"] == tool and x["mode"] == mode]
            med = {k: statistics.median(x[k] for x in rs) for k in
                   ("wall_s", "cpu_s", "sys_cpu_s", "machine_busy_s", "sync_after_s",
                    "peak_rss_mib", "first_file_s")}
            probs = "; ".join(sorted({x["problem"] for x in rs if x["problem"]})) or "none"
            print(f"| {mode} | {tool} | {med['wall_s']:.2f} | {FILES / med['wall_s']:,.0f} | "
                  f"{med['cpu_s']:.2f} | {med['sys_cpu_s']:.2f} | "
                  f"{med['cpu_s'] * 1000 / FILES:.3f} | {med['cpu_s'] * 1e9 / (FILES * SIZE):.2f} | "
                  f"{med['machine_busy_s']:.2f} | "
                  f"{med['sync_after_s']:.2f} | {med['peak_rss_mib']:.0f} | "
                  f"{med['first_file_s']:.2f} | {probs} |")


if __name__ == "__main__":
    main()
