#!/usr/bin/env python3
"""make soak: `wattio serve` over HTTPS, for SOAK_SECONDS (default 600), under well-behaved
load (h2load, HTTP/1.1 keep-alive, from 127.0.0.1) while hostile clients run beside it from
other loopback addresses: slowloris connections trickling a request head, slow readers of a
large file through a 4 KiB receive window, and silent TCP connects that never start TLS.
A clean run of CLEAN_SECONDS (default 60) with the same load and nothing hostile comes first.

Reports the well-behaved throughput of both runs, their ratio, the server's peak RSS and
descriptors under attack, what the hostile clients got (503s, closes), and whether the server
still serves at the end. Results go to stdout as Markdown and to SOAK_JSON when set.

Environment: WATTIO_BIN (default target/release/wattio), SOAK_SECONDS, CLEAN_SECONDS,
SOAK_ROUNDS (1; more alternate clean and hostile runs that many times, so that the machine's
drift falls on both: the figures are the rounds' means),
H2LOAD_CONNECTIONS (32), SLOWLORIS (3 addresses x SLOWLORIS_PER_ADDRESS, 100),
SLOW_READERS (60), SILENT (300), PER_CLIENT (--max-connections-per-client; default off, as
`serve`'s own default), PIN (1: the attackers' threads on the last CPU, the server and h2load
on the others, in both runs, so that the ratio measures what the attack costs the server and
not the attackers' own CPU, which on a small machine shares the server's cores), PERF_DATA (a
path: `perf record -g` of the server for 30 s of the hostile run, then of 30 s of a clean run
after it, in PERF_DATA and PERF_DATA.clean).
"""

import json
import os
import re
import shutil
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time

BIN = os.environ.get("WATTIO_BIN", "target/release/wattio")
SOAK = int(os.environ.get("SOAK_SECONDS", "600"))
CLEAN = int(os.environ.get("CLEAN_SECONDS", "60"))
CONNS = int(os.environ.get("H2LOAD_CONNECTIONS", "32"))
PER_ADDRESS = int(os.environ.get("SLOWLORIS_PER_ADDRESS", "100"))
SLOW_READERS = int(os.environ.get("SLOW_READERS", "60"))
SILENT = int(os.environ.get("SILENT", "300"))
PER_CLIENT = os.environ.get("PER_CLIENT", "off")
ROUNDS = int(os.environ.get("SOAK_ROUNDS", "1"))
SLOWLORIS_ADDRS = ["127.0.0.2", "127.0.0.3", "127.0.0.4"]
READER_ADDR = "127.0.0.5"
SILENT_ADDR = "127.0.0.6"
CPUS = sorted(os.sched_getaffinity(0))
PIN = os.environ.get("PIN", "0") == "1" and len(CPUS) >= 2
ATTACKER_CPUS = set(CPUS[-1:]) if PIN else None
SERVER_CPUS = set(CPUS[:-1]) if PIN else None


def pinned(argv):
    """`argv` run on the server's CPUs when PIN is set."""
    if not PIN:
        return argv
    return ["taskset", "-c", ",".join(map(str, sorted(SERVER_CPUS)))] + argv


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def make_dataset(root):
    """500 files of 16 KiB (what h2load asks for) and one of 256 MiB (what slow readers ask for)."""
    os.makedirs(root, exist_ok=True)
    for i in range(500):
        with open(os.path.join(root, f"f{i:03}.bin"), "wb") as f:
            f.write(os.urandom(16 << 10))
    with open(os.path.join(root, "big.bin"), "wb") as f:
        for _ in range(256):
            f.write(os.urandom(1 << 20))


def make_cert(d):
    cert, key = os.path.join(d, "cert.pem"), os.path.join(d, "key.pem")
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
         "-nodes", "-days", "2", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
         "-keyout", key, "-out", cert],
        check=True, capture_output=True)
    return cert, key


class Server:
    def __init__(self, root, cert, key):
        self.port = free_port()
        self.proc = subprocess.Popen(
            pinned([BIN, "serve", root, "--listen", f"127.0.0.1:{self.port}", "--tls-cert", cert,
             "--tls-key", key]
            + ([] if PER_CLIENT == "off" else ["--max-connections-per-client", PER_CLIENT])),
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.time() + 10
        while time.time() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                time.sleep(0.05)
        raise SystemExit("wattio serve did not start")

    def sample(self):
        pid = self.proc.pid
        rss = 0
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    rss = int(line.split()[1]) * 1024
        fds = len(os.listdir(f"/proc/{pid}/fd"))
        return rss, fds

    def stop(self):
        self.proc.kill()
        self.proc.wait()


def profile(srv, path):
    """`perf record -g` of the server for 30 s into `path` (None: no profile)."""
    if not path:
        return None
    return subprocess.Popen(["perf", "record", "-g", "-o", path, "-p", str(srv.proc.pid), "--", "sleep", "30"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def h2load(port, seconds, urls):
    """Requests per second and bytes per second h2load reached, and its failure count."""
    out = subprocess.run(
        pinned(["h2load", "--h1", "-c", str(CONNS), "-t", "1", "-D", str(seconds), "-i", urls]),
        capture_output=True, text=True, timeout=seconds + 120).stdout
    m = re.search(r"finished in [\d.]+\w*, ([\d.]+) req/s, ([\d.]+)(\w+)/s", out)
    failed = re.search(r"requests: \d+ total, \d+ started, \d+ done, \d+ succeeded, (\d+) failed", out)
    if not m:
        raise SystemExit("h2load said:\n" + out)
    units = {"B": 1, "KB": 1 << 10, "MB": 1 << 20, "GB": 1 << 30}
    return float(m.group(1)), float(m.group(2)) * units.get(m.group(3), 1), int(failed.group(1)) if failed else -1


class Hostile:
    """The attackers, each a thread that reconnects a second after the server drops or refuses
    it (a flood of reconnects is a different attack: its cost is the machine's, not the
    server's), until stopped."""

    def __init__(self, port):
        self.port = port
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.counts = {"slowloris_503": 0, "slowloris_closed": 0, "reader_closed": 0,
                       "reader_503": 0, "silent_closed": 0, "refused_or_reset": 0}
        self.threads = []
        self.ctx = ssl.create_default_context()
        self.ctx.check_hostname = False
        self.ctx.verify_mode = ssl.CERT_NONE

    def count(self, k):
        with self.lock:
            self.counts[k] += 1

    def tcp(self, src, rcvbuf=None):
        s = socket.socket()
        if rcvbuf:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        s.bind((src, 0))
        s.settimeout(30)
        s.connect(("127.0.0.1", self.port))
        return s

    def slowloris(self, src):
        """A request head, one byte every 2 s, never finished."""
        while not self.stop.is_set():
            try:
                s = self.ctx.wrap_socket(self.tcp(src))
                s.sendall(b"GET /f000.bin HTTP/1.1\r\nHost: x\r\n")
                while not self.stop.is_set():
                    s.settimeout(2)
                    try:
                        got = s.recv(4096)
                        self.count("slowloris_503" if b" 503 " in got else "slowloris_closed")
                        break
                    except socket.timeout:
                        s.sendall(b"X")
                s.close()
            except (OSError, ssl.SSLError):
                self.count("refused_or_reset")
            self.stop.wait(1)

    def reader(self):
        """The 256 MiB file through a 4 KiB window, read at 1 KiB/s."""
        while not self.stop.is_set():
            try:
                s = self.ctx.wrap_socket(self.tcp(READER_ADDR, rcvbuf=4096))
                s.sendall(b"GET /big.bin HTTP/1.1\r\nHost: x\r\n\r\n")
                while not self.stop.is_set():
                    got = s.recv(1024)
                    if not got:
                        self.count("reader_closed")
                        break
                    if b" 503 " in got[:32]:
                        self.count("reader_503")
                        break
                    self.stop.wait(1)
                s.close()
            except (OSError, ssl.SSLError):
                self.count("refused_or_reset")
            self.stop.wait(1)

    def silent(self):
        """A TCP connection that never sends a ClientHello."""
        while not self.stop.is_set():
            try:
                s = self.tcp(SILENT_ADDR)
                s.settimeout(None)
                s.setblocking(True)
                # returns when the server gives up on the handshake
                s.recv(1)
                self.count("silent_closed")
                s.close()
            except OSError:
                self.count("refused_or_reset")
            self.stop.wait(1)

    def start(self):
        targets = [lambda a=a: self.slowloris(a) for a in SLOWLORIS_ADDRS for _ in range(PER_ADDRESS)]
        targets += [self.reader] * SLOW_READERS
        targets += [self.silent] * SILENT
        for t in targets:
            th = threading.Thread(target=self.on_attacker_cpus, args=(t,), daemon=True)
            th.start()
            self.threads.append(th)
            time.sleep(0.002)

    def end(self):
        self.stop.set()

    @staticmethod
    def on_attacker_cpus(target):
        if PIN:
            os.sched_setaffinity(0, ATTACKER_CPUS)  # this thread only
        target()


def main():
    if not shutil.which("h2load"):
        raise SystemExit("soak: h2load missing; make deps installs it (nghttp2-client)")
    work = tempfile.mkdtemp(prefix="wattio-soak-")
    try:
        root = os.path.join(work, "data")
        print(f"soak: dataset in {work}", file=sys.stderr)
        make_dataset(root)
        cert, key = make_cert(work)
        srv = Server(root, cert, key)
        urls = os.path.join(work, "urls.txt")
        with open(urls, "w") as f:
            for i in range(500):
                f.write(f"https://127.0.0.1:{srv.port}/f{i:03}.bin\n")
        # warm the page cache
        h2load(srv.port, 5, urls)
        peak = {"rss": 0, "fds": 0}
        sampling = threading.Event()

        def sample():
            while not sampling.is_set():
                rss, fds = srv.sample()
                peak["rss"] = max(peak["rss"], rss)
                peak["fds"] = max(peak["fds"], fds)
                sampling.wait(1)

        sampler = threading.Thread(target=sample, daemon=True)
        clean_runs, hostile_runs, counts = [], [], {}
        for r in range(ROUNDS):
            print(f"soak: round {r + 1} of {ROUNDS}: clean run, {CLEAN} s", file=sys.stderr)
            clean_runs.append(h2load(srv.port, CLEAN, urls))
            if r == 0:
                clean_rss, clean_fds = srv.sample()
            print(f"soak: round {r + 1} of {ROUNDS}: hostile run, {SOAK} s", file=sys.stderr)
            hostile = Hostile(srv.port)
            hostile.start()
            if r == 0:
                sampler.start()
            time.sleep(5)  # the attackers connect first
            perf = profile(srv, os.environ.get("PERF_DATA")) if r == 0 else None
            hostile_runs.append(h2load(srv.port, SOAK, urls))
            if perf:
                perf.wait()
            end_rss, end_fds = srv.sample()
            hostile.end()
            for k, v in hostile.counts.items():
                counts[k] = counts.get(k, 0) + v
            if r + 1 < ROUNDS:
                # the silent connects the server has not closed yet go at its 10 s handshake limit
                time.sleep(12)
        sampling.set()
        mean = lambda xs: sum(xs) / len(xs)
        clean_rps, clean_bps = mean([x[0] for x in clean_runs]), mean([x[1] for x in clean_runs])
        rps, bps = mean([x[0] for x in hostile_runs]), mean([x[1] for x in hostile_runs])
        clean_failed = sum(x[2] for x in clean_runs)
        failed = sum(x[2] for x in hostile_runs)
        if os.environ.get("PERF_DATA"):
            time.sleep(3)  # the attackers' connections close
            perf = profile(srv, os.environ["PERF_DATA"] + ".clean")
            h2load(srv.port, 35, urls)
            perf.wait()
        # still serving: one request from a fresh client
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        with ctx.wrap_socket(socket.create_connection(("127.0.0.1", srv.port), timeout=10)) as s:
            s.sendall(b"GET /f001.bin HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            answer = b""
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    break
                answer += chunk
        still = answer.startswith(b"HTTP/1.1 200")
        alive = srv.proc.poll() is None
        srv.stop()
        result = {
            "clean": {"seconds": CLEAN, "req_per_s": clean_rps, "bytes_per_s": clean_bps,
                      "failed": clean_failed, "rss_bytes": clean_rss, "fds": clean_fds},
            "hostile": {"seconds": SOAK, "req_per_s": rps, "bytes_per_s": bps, "failed": failed,
                        "peak_rss_bytes": peak["rss"], "peak_fds": peak["fds"],
                        "end_rss_bytes": end_rss, "end_fds": end_fds,
                        "attackers": {"slowloris": len(SLOWLORIS_ADDRS) * PER_ADDRESS,
                                      "slow_readers": SLOW_READERS, "silent_tls": SILENT},
                        "attacker_outcomes": counts},
            "ratio": rps / clean_rps if clean_rps else 0,
            "rounds": [{"clean_req_per_s": c[0], "hostile_req_per_s": h[0]}
                       for c, h in zip(clean_runs, hostile_runs)],
            "still_serving": still and alive,
            "config": {"h2load_connections": CONNS, "per_client": PER_CLIENT,
                       "pinned": {"server_and_h2load": sorted(SERVER_CPUS), "attackers": sorted(ATTACKER_CPUS)} if PIN else None,
                       "server": "wattio serve --tls-cert --tls-key"
                                 + ("" if PER_CLIENT == "off" else f" --max-connections-per-client {PER_CLIENT}")
                                 + " (defaults otherwise: 256 connections, 60 s idle, 10 s handshake)"},
        }
        if os.environ.get("SOAK_JSON"):
            with open(os.environ["SOAK_JSON"], "w") as f:
                json.dump(result, f, indent=2)
        mib = lambda b: f"{b / (1 << 20):.1f} MiB"
        print("| run | seconds | well-behaved req/s | MB/s | failed | server RSS | server descriptors |")
        print("|---|---|---|---|---|---|---|")
        print(f"| clean | {CLEAN} | {clean_rps:.0f} | {clean_bps / 1e6:.1f} | {clean_failed} | {mib(clean_rss)} | {clean_fds} |")
        print(f"| hostile | {SOAK} | {rps:.0f} | {bps / 1e6:.1f} | {failed} | peak {mib(peak['rss'])}, end {mib(end_rss)} | peak {peak['fds']}, end {end_fds} |")
        if ROUNDS > 1:
            print(f"\n{ROUNDS} rounds, clean then hostile, means above; by round (clean, hostile req/s): "
                  + "; ".join(f"{c[0]:.0f}, {h[0]:.0f}" for c, h in zip(clean_runs, hostile_runs)))
        print(f"\nratio hostile/clean: {result['ratio']:.3f}; still serving at the end: {result['still_serving']}")
        if PIN:
            print(f"pinned: server and h2load on CPUs {sorted(SERVER_CPUS)}, attackers on {sorted(ATTACKER_CPUS)}")
        print(f"attackers: {json.dumps(result['hostile']['attackers'])}; what they got: {json.dumps(counts)}")
        return 0 if result["still_serving"] else 1
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
