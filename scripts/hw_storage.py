"""hw-check step 7: each disk's energy interval beside what a platform meter sees.

For each disk that reports power figures (an NVMe drive's power-state descriptors, a SATA
drive's profile or class), `wattio measure --json` over alternating idle and busy blocks, each at
least five of the slowest platform meter's averaging periods plus its delay (10 s at least). A
busy block reads the raw disk with direct I/O (`dd … iflag=direct`): read-only, nothing on the
disk is written. Per block: the disk's interval (lower, central, upper), its busy time and bytes,
and where a platform meter exists the machine's figure and the rest RAPL and the GPUs do not
see. Then the rise from idle to busy: the disk's interval says its power rose by between
(busy lower − idle upper) and (busy upper − idle lower) W, its central estimate by (busy central
− idle central); the platform's rest rose by so much. The rest rising outside the disk's bounds
means the rest holds more than the disk (fans, other devices) or the disk's figures are wrong:
both are reported, never adjusted.

With --fixture: a stand-in NVMe drive (the format of crates/devices/src/nvme/mod.rs: Identify
Controller data, then the Power Management feature's dword) in the fixture tree, one operational
state at 8 W at most, 1.5 W idle, 6 W active, and a busy block that makes its `stat` file count
half the time busy and raises the fixture's ACPI power meter by the central estimate's rise, so
the known truth can be checked.
"""

import json
import os
import struct
import threading
import time

# The stand-in drive's figures (W) and the share of a busy block it reports busy.
FIXTURE_NVME = {"max_w": 8.0, "idle_w": 1.5, "active_w": 6.0, "busy_share": 0.5}


def fixture_nvme(root):
    """A stand-in NVMe controller nvme0 with namespace nvme0n1 in the fixture tree."""
    ident = bytearray(4096)
    ident[24:64] = b"wattio stand-in NVMe".ljust(40)
    ident[263] = 0  # NPSS: one state
    psd = bytearray(32)
    f = FIXTURE_NVME
    struct.pack_into("<H", psd, 0, round(f["max_w"] / 0.01))
    struct.pack_into("<I", psd, 4, 5)
    struct.pack_into("<I", psd, 8, 5)
    struct.pack_into("<H", psd, 16, round(f["idle_w"] / 0.01))
    psd[18] = 0b10 << 6  # IPS: 0.01 W
    struct.pack_into("<H", psd, 20, round(f["active_w"] / 0.01))
    psd[22] = 0b10 << 6  # APS: 0.01 W
    ident[2048:2080] = psd
    os.makedirs(os.path.join(root, "dev"), exist_ok=True)
    with open(os.path.join(root, "dev", "nvme0"), "wb") as out:
        out.write(bytes(ident) + struct.pack("<II", 0, 0) + bytes(256))
    block = os.path.join(root, "sys", "block", "nvme0n1")
    for rel, text in [("dev", "259:0"), ("queue/rotational", "0"), ("device/model", "wattio stand-in NVMe"),
                      ("stat", stat_line(0, 0))]:
        path = os.path.join(block, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as out:
            out.write(text + "\n")
    os.makedirs(os.path.join(root, "sys", "class", "nvme", "nvme0", "nvme0n1"), exist_ok=True)
    return block


def replace_file(path, text):
    """Writes `path` whole or not at all (a reader never sees it half written)."""
    tmp = path + ".tmp"
    with open(tmp, "w") as out:
        out.write(text)
    os.replace(tmp, path)


def stat_line(sectors_read, io_ticks_ms):
    """A /sys/block/NAME/stat line (kernel Documentation/block/stat.rst) with these counters."""
    fields = [sectors_read // 8, 0, sectors_read, 0, 0, 0, 0, 0, 0, io_ticks_ms, io_ticks_ms, 0, 0, 0, 0, 0, 0]
    return " ".join(str(x) for x in fields)


class FixtureBusy:
    """While a busy block runs: the stand-in's io_ticks grow at FIXTURE_NVME's busy share and 4 MiB
    read per second, and the fixture's ACPI power meter reads its base plus the central estimate's
    rise."""

    def __init__(self, block_dir, meter_file, base_w):
        self.block_dir, self.meter_file, self.base_w = block_dir, meter_file, base_w
        self.ticks = self.sectors = 0
        self.stop = threading.Event()

    def _run(self):
        f = FIXTURE_NVME
        rise_w = (f["active_w"] - f["idle_w"]) * f["busy_share"]
        self._meter(self.base_w + rise_w)
        last = time.monotonic()
        while not self.stop.wait(0.05):
            now = time.monotonic()
            self.ticks += (now - last) * 1000 * f["busy_share"]
            self.sectors += int((now - last) * 8192)
            last = now
            replace_file(os.path.join(self.block_dir, "stat"), stat_line(self.sectors, int(self.ticks)) + "\n")
        self._meter(self.base_w)

    def _meter(self, w):
        replace_file(self.meter_file, f"{int(w * 1e6)}\n")

    def __enter__(self):
        self.stop.clear()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join()


def disks_with_figures(c):
    rc, out, err, _, _ = c.run([c.wattio, "probe", "--json"], 60, show=False)
    try:
        storage = json.loads(out).get("storage", [])
    except ValueError:
        return None, f"probe --json unreadable (rc {rc})"
    found = [d["device"]["name"] for d in storage if d.get("figures") and not d["device"].get("holds_root")]
    on_root = [d["device"]["name"] for d in storage if d.get("figures") and d["device"].get("holds_root")]
    # The disk holding / is read too where it is the only one: reading is harmless.
    return (found or on_root)[:2], None


def disk_block(c, cmd, seconds, name):
    """`measure --json` of cmd: the disk's row and the machine view, or None."""
    rc, out, err, _, _ = c.run([c.wattio, "measure", "--json", "--"] + cmd, seconds * 3 + 150)
    try:
        v = json.loads(out)
    except ValueError:
        c.md.append(f"measure failed (rc {rc}): {err.strip()[-300:]}\n")
        return None
    row = next((d for d in v.get("disks") or [] if d.get("device") == name), None)
    machine = v.get("machine") or {}
    platform = (machine.get("platforms") or [{}])[0]
    slowest = max([5 * (q.get("averaging_s") or 0) + (q.get("delay_s") or 0) for q in machine.get("platforms") or []] + [0])
    return {"duration_s": v.get("duration_s"), "disk": row, "total_j": v.get("total_j"),
            "gpu_j": v.get("gpu_j"), "platform_j": platform.get("platform_j"),
            "rest_j": platform.get("rest_j"), "rest_uncertainty_j": platform.get("rest_uncertainty_j"),
            "meter": platform.get("meter"), "platform_window_s": slowest}


def watts(b, key):
    """The disk interval's bound (lower_j, central_j, upper_j) over the block, in W."""
    iv = (b.get("disk") or {}).get("interval") or {}
    v = iv.get(key)
    return None if v is None or not b.get("duration_s") else v / b["duration_s"]


def mean(xs):
    xs = [x for x in xs if x is not None]
    return sum(xs) / len(xs) if xs else None


def rises(blocks):
    """The disk's rise bounds and central rise, and the platform rest's rise, in W."""
    by = lambda kind, f: mean([f(b) for b in blocks if b["kind"] == kind])
    lo = lambda kind: by(kind, lambda b: watts(b, "lower_j"))
    up = lambda kind: by(kind, lambda b: watts(b, "upper_j"))
    ce = lambda kind: by(kind, lambda b: watts(b, "central_j"))
    rest = lambda kind: by(kind, lambda b: None if b.get("rest_j") is None or not b["duration_s"]
                           else b["rest_j"] / b["duration_s"])
    diff = lambda a, b: None if a is None or b is None else a - b
    r = {"disk_rise_lower_w": diff(lo("busy"), up("idle")), "disk_rise_upper_w": diff(up("busy"), lo("idle")),
         "disk_rise_central_w": diff(ce("busy"), ce("idle")), "rest_rise_w": diff(rest("busy"), rest("idle"))}
    if r["rest_rise_w"] is not None and r["disk_rise_lower_w"] is not None:
        inside = r["disk_rise_lower_w"] <= r["rest_rise_w"] <= r["disk_rise_upper_w"]
        r["verdict"] = "inside the disk's bounds" if inside else \
            "outside the disk's bounds: the rest holds more than this disk, or its figures are wrong"
    return r


def storage(c, fmt, fixture=None):
    """Step 7. `fixture`: (block dir of the stand-in, the ACPI meter's power file, its base W)."""
    c.md.append("## 7. Storage devices: each disk's interval beside the platform meter\n")
    names, why = disks_with_figures(c)
    if not names:
        c.skip("storage", why or "no disk here reports power figures (virtual disks are the host's)")
        return
    first = disk_block(c, ["sleep", "1"], 1, names[0]) or {}
    block = max(10.0, (first.get("platform_window_s") or 0) + 2)
    if c.left() < 4 * block * len(names) * 2 + 60:
        block = max(3.0, (c.left() - 60) / (8 * len(names)))
    c.results["storage"] = {"block_s": block, "disks": {}, "fixture_truth": FIXTURE_NVME if fixture else None}
    # One stand-in for all busy blocks: its counters only grow, as a disk's do.
    busy = FixtureBusy(*fixture) if fixture else None
    for name in names:
        blocks = []
        for kind in ["idle", "busy", "idle", "busy"]:
            if kind == "idle":
                cmd = ["sleep", f"{block:.0f}"]
            elif fixture:
                cmd = ["sleep", f"{block:.0f}"]
            else:
                cmd = ["timeout", f"{block:.0f}", "dd", f"if=/dev/{name}", "of=/dev/null", "bs=1M", "iflag=direct"]
            if kind == "busy" and busy:
                with busy:
                    b = disk_block(c, cmd, block, name)
            else:
                b = disk_block(c, cmd, block, name)
            if b:
                b["kind"] = kind
                blocks.append(b)
        r = rises(blocks)
        c.results["storage"]["disks"][name] = {"blocks": blocks, "rises": r}
        c.md.append(f"### {name}\n")
        label = next((b["disk"]["label"] for b in blocks if b.get("disk") and b["disk"].get("label")), None)
        c.md.append(f"Figures: {label or 'none'}.\n")
        c.md.append("| block | s | busy s | read MB | disk lower J | central J | upper J | meter | machine J | rest J | ± J |\n"
                    "|---|---|---|---|---|---|---|---|---|---|---|")
        for b in blocks:
            d = b.get("disk") or {}
            iv = d.get("interval") or {}
            c.md.append(f"| {b['kind']} | {fmt(b['duration_s'])} | {fmt(d.get('busy_s'))} | "
                        f"{fmt((d.get('read_bytes') or 0) / 1e6)} | {fmt(iv.get('lower_j'))} | {fmt(iv.get('central_j'))} | "
                        f"{fmt(iv.get('upper_j'))} | {b.get('meter') or '–'} | {fmt(b.get('platform_j'))} | "
                        f"{fmt(b.get('rest_j'))} | {fmt(b.get('rest_uncertainty_j'))} |")
        c.md.append("")
        c.md.append(f"- the disk's rise, idle to busy: between {fmt(r['disk_rise_lower_w'], ' W')} and "
                    f"{fmt(r['disk_rise_upper_w'], ' W')}, central {fmt(r['disk_rise_central_w'], ' W')}")
        c.md.append(f"- the platform's rest rose by {fmt(r['rest_rise_w'], ' W')}"
                    + (f": {r['verdict']}" if r.get("verdict") else " (no platform meter here)"))
        c.md.append("")
