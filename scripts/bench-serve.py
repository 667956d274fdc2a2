#!/usr/bin/env python3
"""`make bench-serve`: `wattio serve` beside nginx on the same files, side by side in one run.

Both servers serve one directory from loopback: 500 files of 16 KiB (the page cache holds them)
and one large file (1 GiB; `--large-mib 4096` for issue 33's 4 GiB). h2load (HTTP/1.1, keep-alive) loads each server in turn, over HTTP and over
HTTPS, in interleaved rounds (round 1: nginx then wattio, round 2: wattio then nginx, ...), so
drift of the machine hits both alike. For every run it records requests per second, bytes, and the
CPU seconds the server's processes spent (user + system from /proc/PID/stat, nginx's master and
workers summed), and from those CPU seconds per GB served.

nginx runs as Debian ships it where it matters for speed (`sendfile on; tcp_nopush on;` two
worker processes, one per vCPU here), with the access log off (wattio serve keeps none) and
`keepalive_requests` raised so that neither server closes connections during a run.

Writes RUN_DIR/runs.csv (every run) and RUN_DIR/serve.md (medians and ratios, with the command and
the machine), then prints the markdown. Not part of `make test`.

Usage: scripts/bench-serve.py [--rounds 3] [--seconds 10] [--connections 64] [--large-mib 1024]
                              [--cases "small large"] [--out DIR]
"""

import argparse
import csv
import os
import platform
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
SMALL_FILES = 500
SMALL_SIZE = 16 * 1024
CLK_TCK = os.sysconf("SC_CLK_TCK")


def die(msg):
    sys.exit(f"bench-serve: {msg}")


def need(tool, package):
    if shutil.which(tool):
        return
    print(f"bench-serve: installing {package} for {tool}", file=sys.stderr)
    r = subprocess.run(["apt-get", "install", "-y", "-q", package], capture_output=True, text=True)
    if r.returncode != 0 or not shutil.which(tool):
        die(f"{tool} not found and `apt-get install {package}` failed: install it, then run again")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_listening(port, proc, what):
    deadline = time.time() + 20
    while time.time() < deadline:
        if proc.poll() is not None:
            die(f"{what} exited at start (status {proc.returncode})")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    die(f"{what} did not listen on port {port} within 20 s")


def cpu_seconds(pids):
    """User + system CPU seconds of the processes `pids`."""
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except FileNotFoundError:
            continue
        total += int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15)
    return total / CLK_TCK


def children(pid):
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(p) for p in f.read().split()]
    except FileNotFoundError:
        return []


def size_words(mib):
    return f"{mib >> 10} GiB" if mib % 1024 == 0 else f"{mib} MiB"


def make_data(root, large_mib):
    data = os.path.join(root, "data")
    os.makedirs(os.path.join(data, "small"))
    for i in range(SMALL_FILES):
        with open(os.path.join(data, "small", f"f{i:03d}.bin"), "wb") as f:
            f.write(os.urandom(SMALL_SIZE))
    with open(os.path.join(data, "large.bin"), "wb") as f:
        block = os.urandom(1 << 20)
        for _ in range(large_mib):
            f.write(block)
    # Both servers read from the page cache: read everything once.
    subprocess.run(["cat", os.path.join(data, "large.bin")], stdout=subprocess.DEVNULL, check=True)
    return data


def make_cert(root):
    key, cert = os.path.join(root, "key.pem"), os.path.join(root, "cert.pem")
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
         "-nodes", "-keyout", key, "-out", cert, "-days", "2", "-subj", "/CN=localhost"],
        check=True, capture_output=True)
    return cert, key


class Nginx:
    name = "nginx"

    def __init__(self, root, data, cert, key):
        self.http, self.https = free_port(), free_port()
        conf = os.path.join(root, "nginx.conf")
        with open(conf, "w") as f:
            f.write(f"""
worker_processes 2;
pid {root}/nginx.pid;
error_log {root}/nginx-error.log;
daemon off;
events {{ worker_connections 1024; }}
http {{
    sendfile on;
    tcp_nopush on;
    access_log off;
    keepalive_requests 10000000;
    keepalive_timeout 60s;
    default_type application/octet-stream;
    ssl_protocols TLSv1.3;
    server {{
        listen 127.0.0.1:{self.http};
        listen 127.0.0.1:{self.https} ssl;
        ssl_certificate {cert};
        ssl_certificate_key {key};
        root {data};
    }}
}}
""")
        self.proc = subprocess.Popen(["nginx", "-c", conf, "-p", root],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_listening(self.http, self.proc, "nginx")
        wait_listening(self.https, self.proc, "nginx")

    def pids(self):
        return [self.proc.pid] + children(self.proc.pid)

    def stop(self):
        self.proc.send_signal(signal.SIGQUIT)
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


class Wattio:
    name = "wattio serve"

    def __init__(self, exe, data, cert, key):
        self.http, self.https = free_port(), free_port()
        common = ["--max-connections", "1024", "--idle-timeout", "60s"]
        self.procs = [
            subprocess.Popen([exe, "serve", data, "--listen", f"127.0.0.1:{self.http}", *common],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL),
            subprocess.Popen([exe, "serve", data, "--listen", f"127.0.0.1:{self.https}",
                              "--tls-cert", cert, "--tls-key", key, *common],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL),
        ]
        wait_listening(self.http, self.procs[0], "wattio serve")
        wait_listening(self.https, self.procs[1], "wattio serve --tls-cert")

    def pids(self):
        return [p.pid for p in self.procs]

    def stop(self):
        for p in self.procs:
            p.terminate()
        for p in self.procs:
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()


def h2load(url_file, connections, seconds, requests=None):
    cmd = ["h2load", "--h1", "-t", "1", "-c", str(connections), "-i", url_file]
    if requests:
        cmd += ["-n", str(requests)]
    else:
        cmd += ["-D", str(seconds), "--warm-up-time", "1"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=seconds * 4 + 600)
    out = r.stdout
    m = re.search(r"finished in ([\d.]+)(m?s), ([\d.]+) req/s", out)
    done = re.search(r"requests: \d+ total, \d+ started, (\d+) done, (\d+) succeeded, (\d+) failed", out)
    traffic = re.search(r"traffic: .*?\((\d+)\) total", out)
    if r.returncode != 0 or not (m and done and traffic):
        die(f"h2load failed (status {r.returncode}): {out[-800:]}{r.stderr[-400:]}")
    secs = float(m.group(1)) / (1000 if m.group(2) == "ms" else 1)
    return {
        "seconds": secs,
        "req_s": float(m.group(3)),
        "succeeded": int(done.group(2)),
        "failed": int(done.group(3)),
        "bytes": int(traffic.group(1)),
    }


def run_one(server, proto, case, urls, args):
    port = server.http if proto == "http" else server.https
    url_file = urls[(case, proto, port)]
    pids = server.pids()
    c0 = cpu_seconds(pids)
    if case == "small":
        r = h2load(url_file, args.connections, args.seconds)
    else:
        r = h2load(url_file, 2, args.seconds, requests=args.large_requests)
    cpu = cpu_seconds(pids) - c0
    if r["failed"] or r["succeeded"] == 0:
        die(f"{server.name} {proto} {case}: {r['failed']} failed, {r['succeeded']} succeeded")
    gb = r["bytes"] / 1e9
    return {**r, "server": server.name, "proto": proto, "case": case,
            "server_cpu_s": round(cpu, 3), "cpu_s_per_gb": round(cpu / gb, 4) if gb else None,
            "gbit_s": round(r["bytes"] * 8 / r["seconds"] / 1e9, 3)}


def url_files(root, servers):
    files = {}
    for s in servers:
        for proto, port in (("http", s.http), ("https", s.https)):
            base = f"{proto}://127.0.0.1:{port}"
            small = os.path.join(root, f"urls-small-{port}.txt")
            with open(small, "w") as f:
                for i in range(SMALL_FILES):
                    f.write(f"{base}/small/f{i:03d}.bin\n")
            large = os.path.join(root, f"urls-large-{port}.txt")
            with open(large, "w") as f:
                f.write(f"{base}/large.bin\n")
            files[("small", proto, port)] = small
            files[("large", proto, port)] = large
    return files


def machine():
    model = "unknown CPU"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    return f"{os.cpu_count()} vCPU {model}, {platform.system()} {platform.release()}"


def summarise(rows, args, command):
    def med(server, proto, case, key):
        v = [r[key] for r in rows if (r["server"], r["proto"], r["case"]) == (server, proto, case)]
        return statistics.median(v) if v else None

    def spread(server, proto, case, key):
        v = [r[key] for r in rows if (r["server"], r["proto"], r["case"]) == (server, proto, case)]
        return f"{min(v):.1f}–{max(v):.1f}" if v else "-"

    git = subprocess.run(["git", "-C", REPO, "rev-parse", "--short", "HEAD"],
                         capture_output=True, text=True).stdout.strip()
    nginx_v = subprocess.run(["nginx", "-v"], capture_output=True, text=True).stderr.strip()
    md = [
        f"Command: `{command}` at wattio `{git}`; {nginx_v}; h2load --h1, one client thread.",
        f"Machine: {machine()}. {args.rounds} interleaved rounds, medians (min–max of the rounds).",
        "",
        "| case | protocol | wattio serve | nginx | ratio | wattio CPU s/GB | nginx CPU s/GB | ratio |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for case, unit, key in (("small", "req/s", "req_s"), ("large", "Gbit/s", "gbit_s")):
        if case not in args.cases.split():
            continue
        label = (f"{SMALL_FILES} files of 16 KiB, {args.connections} connections"
                 if case == "small" else f"{size_words(args.large_mib)} file, 2 connections")
        for proto in ("http", "https"):
            w, n = med("wattio serve", proto, case, key), med("nginx", proto, case, key)
            wc, nc = (med("wattio serve", proto, case, "cpu_s_per_gb"),
                      med("nginx", proto, case, "cpu_s_per_gb"))
            md.append(
                f"| {label} | {proto.upper()} | {w:,.1f} {unit} ({spread('wattio serve', proto, case, key)}) "
                f"| {n:,.1f} {unit} ({spread('nginx', proto, case, key)}) | **{w / n:.2f}×** "
                f"| {wc:.3f} | {nc:.3f} | {wc / nc:.2f}× |")
    md.append("")
    md.append("Ratios are wattio over nginx: above 1 is faster for req/s and Gbit/s; below 1 is "
              "cheaper for CPU s/GB (the server processes' user + system time over the run, per "
              "GB of responses including headers).")
    return "\n".join(md) + "\n"


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--seconds", type=int, default=10)
    p.add_argument("--connections", type=int, default=64)
    p.add_argument("--large-requests", type=int, default=16)
    p.add_argument("--large-mib", type=int, default=1024, help="size of the large file, MiB")
    p.add_argument("--cases", default="small large", help="which cases to run")
    p.add_argument("--exe", default=os.path.join(REPO, "target/release/wattio"))
    p.add_argument("--out", default=None)
    args = p.parse_args()
    if not os.access(args.exe, os.X_OK):
        die(f"{args.exe} not found: run `make build` first (make bench-serve does)")
    need("h2load", "nghttp2-client")
    need("nginx", "nginx-light")
    need("openssl", "openssl")
    out = args.out or os.path.join(REPO, "results", f"serve-{int(time.time())}")
    os.makedirs(out, exist_ok=True)
    root = tempfile.mkdtemp(prefix="wattio-bench-serve-")
    os.chmod(root, 0o755)  # nginx's workers run as nobody and must read the files
    servers = []
    try:
        data = make_data(root, args.large_mib)
        cert, key = make_cert(root)
        servers = [Nginx(root, data, cert, key), Wattio(args.exe, data, cert, key)]
        urls = url_files(root, servers)
        rows = []
        plan = [(case, proto) for case in ("small", "large") if case in args.cases.split()
                for proto in ("http", "https")]
        total = args.rounds * len(plan) * 2
        for rnd in range(args.rounds):
            order = servers if rnd % 2 == 0 else servers[::-1]
            for case, proto in plan:
                for s in order:
                    r = run_one(s, proto, case, urls, args)
                    r["round"] = rnd + 1
                    rows.append(r)
                    print(f"bench-serve: {len(rows)}/{total} round {rnd + 1} {s.name} {proto} {case}: "
                          f"{r['req_s']:.0f} req/s, {r['gbit_s']:.2f} Gbit/s, "
                          f"{r['cpu_s_per_gb']} CPU s/GB", file=sys.stderr)
        with open(os.path.join(out, "runs.csv"), "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0].keys()))
            w.writeheader()
            w.writerows(rows)
        command = "make bench-serve" if len(sys.argv) == 1 else \
            "scripts/bench-serve.py " + " ".join(sys.argv[1:])
        md = summarise(rows, args, command)
        with open(os.path.join(out, "serve.md"), "w") as f:
            f.write(md)
        print(md)
        print(f"bench-serve: wrote {out}/runs.csv and {out}/serve.md", file=sys.stderr)
    finally:
        for s in servers:
            s.stop()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
