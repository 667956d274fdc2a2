#!/usr/bin/env python3
"""Compares the outputs of two wattio builds that a refactor must leave as they were.

    python3 scripts/compare-builds.py OLD_WATTIO NEW_WATTIO

On the static intel-server fixture (its counters do not move, so every figure is the same in
both runs): `record` CSV rows, `measure --json` and the exporter's body (each also with
`--region FRA`, their CO2e beside the energy), and the report page that
each build writes from the same result files (written once, by OLD). What depends on the wall
clock or the machine's load (timestamps, durations, CPU times, their ratios, the exporter's own
memory and the sampler's lateness, with the body's length) is masked before comparing, and
`measure` runs with --no-sync (the sync phase measures the machine's dirty data, not the
command); everything else must be equal byte for byte. The fixture's energy is zero, so the
`--region FRA` outputs check the CO2e fields' presence and shape, not their values (the CLI
tests in crates/cli/tests/meter_cli.rs pin those). Prints one line per output and exits 1 on any difference.
"""

import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import time

# Fields of `measure --json` that depend on the wall clock or the machine's load.
CLOCK_FIELDS = {"duration_s", "child_cpu_s", "wall_s", "timestamp", "started", "unix_s",
                "mean_power_w", "attributed_j", "attributed_co2e_g"}


def env(root):
    e = dict(os.environ, WATTIO_ROOT=root, WATTIO_NVML_LIB="/nonexistent/libnvidia-ml.so.1",
             WATTIO_DEFAULT_MODEL="ccf-linear")
    e.pop("WATTIO_IPMITOOL", None)
    return e


def run(binary, args, root):
    out = subprocess.run([binary] + args, env=env(root), capture_output=True, timeout=120)
    if out.returncode != 0:
        raise SystemExit(f"{binary} {' '.join(args)}: {out.stderr.decode(errors='replace')}")
    return out.stdout


def masked_json(data):
    def walk(v):
        if isinstance(v, dict):
            return {k: ("<clock>" if k in CLOCK_FIELDS else walk(x)) for k, x in v.items()}
        if isinstance(v, list):
            return [walk(x) for x in v]
        return v
    return json.dumps(walk(json.loads(data)), indent=1, sort_keys=True)


def record_rows(binary, root, out):
    run(binary, ["record", "--duration", "1s", "--freq", "5", "-o", out], root)
    with open(out) as f:
        lines = f.read().splitlines()
    # the timestamp column masked; the rows' set (a run may take one row more or less)
    return "\n".join([lines[0]] + sorted({re.sub(r"^[0-9.]+,", "<t>,", l) for l in lines[1:]}))


def scrape(binary, root, extra=()):
    p = subprocess.Popen([binary, "export", "--listen", "127.0.0.1:0", *extra], env=env(root),
                         stderr=subprocess.PIPE, stdout=subprocess.DEVNULL)
    try:
        addr = None
        deadline = time.time() + 20
        while addr is None and time.time() < deadline:
            line = p.stderr.readline().decode()
            m = re.search(r"(127\.0\.0\.1:\d+)", line)
            if m:
                addr = m.group(1)
        if addr is None:
            raise SystemExit(f"{binary} export did not say where it listens")
        host, port = addr.split(":")
        time.sleep(0.5)
        with socket.create_connection((host, int(port)), timeout=10) as s:
            s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            body = b""
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    break
                body += chunk
        head, _, text = body.decode().partition("\r\n\r\n")
        head = re.sub(r"(?m)^(Date|Content-Length): .*$", r"\1: <masked>", head)
        # The process's own figures (memory, start time, CPU) and the sampler's lateness depend
        # on the machine's load, not on the build.
        text = re.sub(r"(?m)^((?:process_|wattio_sample_lateness)\S*) .*$", r"\1 <machine>", text)
        return head + "\n\n" + text
    finally:
        p.kill()
        p.wait()


def main():
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    old, new = sys.argv[1:]
    differ = 0
    with tempfile.TemporaryDirectory() as work:
        root = os.path.join(work, "fx")
        run(new, ["fixture", "intel-server", root], work)
        results = os.path.join(work, "results")
        os.makedirs(results)
        outputs = {}
        for name, binary in [("old", old), ("new", new)]:
            o = {}
            o["record CSV"] = record_rows(binary, root, os.path.join(work, f"{name}.csv"))
            o["measure --json"] = masked_json(run(binary, ["measure", "--no-sync", "--json", "--", "true"], root))
            o["exporter body"] = scrape(binary, root)
            # The CO2e transform's outputs: the same figures with their CO2e beside them.
            o["measure --json --region FRA"] = masked_json(
                run(binary, ["measure", "--no-sync", "--json", "--region", "FRA", "--", "true"], root))
            o["exporter body --region FRA"] = scrape(binary, root, ["--region", "FRA"])
            outputs[name] = o
        # the report page of the same result files, written once by the old build
        run(old, ["record", "--duration", "1s", "--freq", "5", "-o",
                  os.path.join(results, "r.csv")], root)
        with open(os.path.join(results, "m.json"), "wb") as f:
            f.write(run(old, ["measure", "--no-sync", "--json", "--", "true"], root))
        for name, binary in [("old", old), ("new", new)]:
            page = os.path.join(work, f"{name}.html")
            run(binary, ["report", results, "-o", page], root)
            with open(page) as f:
                outputs[name]["report page"] = f.read()
        for what in outputs["old"]:
            same = outputs["old"][what] == outputs["new"][what]
            print(f"{what}: {'identical' if same else 'DIFFERENT'}")
            if not same:
                differ += 1
                for path, text in [(f"{work}.{what}.old", outputs["old"][what]),
                                   (f"{work}.{what}.new", outputs["new"][what])]:
                    with open(path.replace(" ", "_"), "w") as f:
                        f.write(text)
                print(f"  diff {work}.{what.replace(' ', '_')}.old {work}.{what.replace(' ', '_')}.new")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
