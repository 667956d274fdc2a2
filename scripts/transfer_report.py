#!/usr/bin/env python3
"""Tables and SVG plots from a `make bench-transfer` run directory (standard library only).

usage: transfer_report.py RUN_DIR   ->  RUN_DIR/results.csv, RUN_DIR/report.md, RUN_DIR/*.svg

Each cell (dataset, tool) may hold several runs (REPEATS): tables and plots show the median over
the complete runs, with the throughput range; results.csv keeps every run.

Throughput is payload bytes that arrived complete divided by the tool's wall time. "Client
energy" is the meter's linear model applied to the tool's own CPU time (every tool charged by the
same rule) and is an ESTIMATE; "system" is `wattio measure`'s system-wide figure (also an
estimate on this VM) and includes the server, the delay line and anything else on the host.
"""
import csv
import glob
import json
import os
import statistics
import sys
from html import escape

TOOL_ORDER = ["curl-seq", "curl-par", "wget", "wget2", "aria2-default", "aria2-tuned", "nghttp-h2",
              "wattio-me", "wattio-eemt", "wattio-me-ng", "wattio-eemt-ng",
              "curl-par-tls", "wget2-tls", "aria2-tuned-tls", "wattio-me-tls", "wattio-eemt-tls"]
# (plain, HTTPS) pairs against the same nginx: the difference is what TLS costs
TLS_PAIRS = [("curl-par", "curl-par-tls"), ("wget2", "wget2-tls"), ("aria2-tuned", "aria2-tuned-tls"),
             ("wattio-me-ng", "wattio-me-tls"), ("wattio-eemt-ng", "wattio-eemt-tls")]
DATASETS = ["small", "medium", "large", "mixed"]
COLORS = ["#8c564b", "#c49c94", "#7f7f7f", "#bcbd22", "#17becf", "#1f77b4", "#9467bd",
          "#2ca02c", "#d62728", "#ff7f0e"]


def load(run):
    rows = []
    for meta_path in sorted(glob.glob(os.path.join(run, "runs", "*.meta.json"))):
        base = meta_path[: -len(".meta.json")]
        m = json.load(open(meta_path))
        s = json.load(open(base + ".stats.json")) if os.path.exists(base + ".stats.json") else None
        try:
            meas = json.load(open(base + ".measure.json"))
        except (OSError, ValueError):
            meas = None
        tj = None
        if m["tool"].startswith("wattio-"):
            try:
                tj = json.load(open(base + ".stdout"))
            except (OSError, ValueError):
                tj = None
        if s is None:
            continue
        wall = s["wall_s"]
        cpu = s["user_s"] + s["sys_s"]
        complete = m["rc"] == 0 and m["got_bytes"] == m["want_bytes"]
        gb = m["got_bytes"] / 1e9
        rows.append({
            "dataset": m["dataset"],
            "tool": m["tool"],
            "rep": m.get("rep", 1),
            "target_mbit": m["target_mbit"],
            "complete": complete,
            "exit_code": m["rc"],
            "bytes": m["got_bytes"],
            "want_bytes": m["want_bytes"],
            "files": m["got_files"],
            "want_files": m["want_files"],
            "wall_s": wall,
            "throughput_mbit": m["got_bytes"] * 8 / wall / 1e6 if wall > 0 else 0.0,
            "link_mbit": m["link_bps"] / 1e6,
            "rtt_ms": m["rtt_ms"],
            "client_cpu_s": cpu,
            "client_cpu_s_per_gb": cpu / gb if gb > 0 else None,
            "server": m.get("server"),
            "server_cpu_s": m.get("server_cpu_s"),
            "server_cpu_s_per_gb": m["server_cpu_s"] / gb if gb > 0 and m.get("server_cpu_s") is not None else None,
            "client_energy_j_est": s["energy_j"],
            "client_j_per_gb_est": s["energy_j"] / gb if gb > 0 else None,
            "model": s["model"],
            "system_energy_j_est": meas.get("total_j") if meas else None,
            "system_mechanism": (meas.get("mechanism") if meas else None),
            "system_estimated": (meas.get("estimated") if meas else None),
            "wattio_reported_mbit": (tj or {}).get("throughput_mbps"),
            "cmd": m["cmd"],
        })
    return rows


MEDIAN_KEYS = ["wall_s", "throughput_mbit", "client_cpu_s", "client_energy_j_est", "client_j_per_gb_est",
               "system_energy_j_est", "client_cpu_s_per_gb", "server_cpu_s", "server_cpu_s_per_gb"]


def aggregate(rows):
    """One summary per (dataset, tool, target): medians over the complete runs (all runs when
    none completed, so an incomplete cell still shows what happened), the run counts and the
    throughput range."""
    cells = {}
    for r in rows:
        cells.setdefault((r["dataset"], r["tool"], r["target_mbit"]), []).append(r)
    out = []
    for runs in cells.values():
        done = [r for r in runs if r["complete"]]
        use = done or runs
        summary = dict(sorted(use, key=lambda r: r["wall_s"])[len(use) // 2])
        for k in MEDIAN_KEYS:
            vals = [r[k] for r in use if r[k] is not None]
            summary[k] = statistics.median(vals) if vals else None
        tputs = [r["throughput_mbit"] for r in use]
        summary.update(n=len(runs), n_complete=len(done), complete=len(done) == len(runs),
                       tput_min=min(tputs), tput_max=max(tputs))
        out.append(summary)
    return out


def tool_key(t):
    return (TOOL_ORDER.index(t) if t in TOOL_ORDER else len(TOOL_ORDER), t)


def nice_step(vmax, ticks=5):
    """A 1/2/2.5/5 × 10^k tick step so that `ticks` steps cover vmax."""
    import math
    raw = vmax / ticks
    k = 10 ** math.floor(math.log10(raw))
    for m in (1, 2, 2.5, 5, 10):
        if m * k >= raw:
            return m * k
    return 10 * k


def bar_chart(path, title, ylabel, groups, series, value, hline=None, hline_label=None, fmt="{:.0f}",
              colors=None, band=None):
    """Grouped bars: one group per entry of `groups`, one bar per entry of `series`, each bar
    labelled with its value. `band(g)` -> (lo, hi) shades a tolerance band behind a group."""
    colors = colors or COLORS
    W, H, L, R, T, B = 960, 460, 70, 20, 40, 110
    vals = [value(g, s) for g in groups for s in series]
    top = max([v for v in vals if v is not None] + ([hline] if hline else []) + [1e-9]) * 1.12
    step = nice_step(top)
    nt = max(1, int(-(-top // step)))
    vmax = step * nt
    pw, ph = W - L - R, H - T - B
    gw = pw / len(groups)
    bw = gw * 0.84 / max(1, len(series))
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="11">',
           f'<rect width="{W}" height="{H}" fill="white"/>',
           f'<text x="{W/2}" y="22" text-anchor="middle" font-size="14">{escape(title)}</text>']
    for i in range(nt + 1):  # grid and y ticks
        v = step * i
        y = T + ph - ph * i / nt
        out.append(f'<line x1="{L}" y1="{y:.1f}" x2="{W-R}" y2="{y:.1f}" stroke="#ddd"/>')
        out.append(f'<text x="{L-6}" y="{y+4:.1f}" text-anchor="end">{fmt.format(v)}</text>')
    out.append(f'<text transform="translate(16,{T+ph/2}) rotate(-90)" text-anchor="middle">{escape(ylabel)}</text>')
    if band:
        for gi, g in enumerate(groups):
            lo, hi = band(g)
            y0, y1 = T + ph - ph * hi / vmax, T + ph - ph * lo / vmax
            out.append(f'<rect x="{L+gi*gw+gw*0.04:.1f}" y="{y0:.1f}" width="{gw*0.92:.1f}" height="{y1-y0:.1f}" '
                       f'fill="#2ca02c" fill-opacity="0.15"><title>{escape(str(g))}: target ±10 %</title></rect>')
    for gi, g in enumerate(groups):
        x0 = L + gi * gw + gw * 0.08
        for si, s in enumerate(series):
            v = value(g, s)
            if v is None:
                continue
            h = ph * v / vmax
            x = x0 + si * bw
            out.append(f'<rect x="{x:.1f}" y="{T+ph-h:.1f}" width="{bw*0.92:.1f}" height="{h:.1f}" '
                       f'fill="{colors[si % len(colors)]}"><title>{escape(str(g))} / {escape(s)}: {fmt.format(v)}</title></rect>')
            cx, cy = x + bw * 0.46, T + ph - h - 3
            out.append(f'<text x="{cx:.1f}" y="{cy:.1f}" font-size="8" text-anchor="start" '
                       f'transform="rotate(-90 {cx:.1f} {cy:.1f})" dy="3">{fmt.format(v)}</text>')
        out.append(f'<text x="{L+gi*gw+gw/2:.1f}" y="{T+ph+16}" text-anchor="middle" font-size="12">{escape(str(g))}</text>')
    if hline:
        y = T + ph - ph * hline / vmax
        out.append(f'<line x1="{L}" y1="{y:.1f}" x2="{W-R}" y2="{y:.1f}" stroke="black" stroke-dasharray="5,4"/>')
        out.append(f'<text x="{W-R-4}" y="{y-4:.1f}" text-anchor="end">{escape(hline_label or "")}</text>')
    out.append(f'<line x1="{L}" y1="{T+ph}" x2="{W-R}" y2="{T+ph}" stroke="black"/>')
    per_row = 5
    for si, s in enumerate(series):  # legend
        lx = L + (si % per_row) * 170
        ly = T + ph + 38 + (si // per_row) * 18
        out.append(f'<rect x="{lx}" y="{ly-9}" width="12" height="12" fill="{colors[si % len(colors)]}"/>')
        out.append(f'<text x="{lx+16}" y="{ly+1}">{escape(s)}</text>')
    out.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")


def eett_variant(tool):
    return "nginx HTTPS" if tool.startswith("wattio-eett-tls") else "wattio serve"


def tls_cost(base, datasets):
    """Plain against HTTPS on the same nginx, per tool and dataset: client and server CPU
    seconds per GB and the client's estimated J per GB."""
    get = {(r["dataset"], r["tool"]): r for r in base}
    rows = []
    for d in datasets:
        for plain, tls in TLS_PAIRS:
            a, b = get.get((d, plain)), get.get((d, tls))
            if not a or not b or not a["complete"] or not b["complete"]:
                continue
            def f(r, k, fmt="{:.2f}"):
                return fmt.format(r[k]) if r[k] is not None else "-"
            dj = b["client_j_per_gb_est"] - a["client_j_per_gb_est"]
            dcpu = b["client_cpu_s_per_gb"] - a["client_cpu_s_per_gb"]
            dsrv = (b["server_cpu_s_per_gb"] - a["server_cpu_s_per_gb"]
                    if a["server_cpu_s_per_gb"] is not None and b["server_cpu_s_per_gb"] is not None else None)
            rows.append(f"| {d} | {plain} | {f(a, 'client_cpu_s_per_gb')} | {f(b, 'client_cpu_s_per_gb')} | {dcpu:+.2f} | "
                        f"{f(a, 'client_j_per_gb_est', '{:.1f}')} | {f(b, 'client_j_per_gb_est', '{:.1f}')} | {dj:+.1f} | "
                        f"{f(a, 'server_cpu_s_per_gb')} | {f(b, 'server_cpu_s_per_gb')} | "
                        f"{'-' if dsrv is None else f'{dsrv:+.2f}'} | {a['throughput_mbit']:.0f} / {b['throughput_mbit']:.0f} |")
    if not rows:
        return []
    return ["### What TLS costs: the same tool, plain HTTP and HTTPS from the same nginx", "",
            "CPU seconds per GB moved (medians); J/GB is the client's ESTIMATED energy (it charges idle "
            "power over the wall time too, so a slower run costs more whatever its CPU).", "",
            "| dataset | tool | client CPU s/GB plain | HTTPS | Δ | client J/GB (est.) plain | HTTPS | Δ | "
            "nginx CPU s/GB plain | HTTPS | Δ | Mbit/s plain / HTTPS |",
            "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"] + rows + [""]


def goals(base, summaries, datasets, link):
    """The issue's goals on the HTTPS rows: ME the least J/GB of all HTTPS tools, EEMT at or above
    the best other HTTPS tool's throughput, EETT within ±10 % of its target."""
    tls = [r for r in base if r["tool"].endswith("-tls")]
    if not tls:
        return []
    out = ["### Goals on the HTTPS rows (nginx over TLS, no wattio server)", "",
           "| dataset | least J/GB (est.): tool | ME J/GB | ME least? | best other Mbit/s: tool | EEMT Mbit/s | EEMT ≥ best? |",
           "|---|---|---:|---|---|---:|---|"]
    for d in datasets:
        rows = [r for r in tls if r["dataset"] == d and r["complete"]]
        me = next((r for r in rows if r["tool"] == "wattio-me-tls"), None)
        eemt = next((r for r in rows if r["tool"] == "wattio-eemt-tls"), None)
        if not rows or not me or not eemt:
            continue
        least = min(rows, key=lambda r: r["client_j_per_gb_est"])
        others = [r for r in rows if not r["tool"].startswith("wattio-")]
        best = max(others, key=lambda r: r["throughput_mbit"]) if others else None
        best_txt = f"{best['throughput_mbit']:.0f}: {best['tool']}" if best else "-"
        eemt_ok = best is None or eemt["throughput_mbit"] >= best["throughput_mbit"]
        out.append(f"| {d} | {least['client_j_per_gb_est']:.1f}: {least['tool']} | {me['client_j_per_gb_est']:.1f} | "
                   f"{'yes' if least is me else 'NO'} | {best_txt} | {eemt['throughput_mbit']:.0f} | "
                   f"{'yes' if eemt_ok else 'NO'} |")
    eett = [r for r in summaries if r["tool"].startswith("wattio-eett-tls")]
    for r in sorted(eett, key=lambda r: -r["target_mbit"]):
        err = 100 * (r["throughput_mbit"] / r["target_mbit"] - 1)
        out.append(f"| EETT {100*r['target_mbit']/link:.0f} % (mixed) | target {r['target_mbit']} Mbit/s | | | "
                   f"achieved {r['throughput_mbit']:.0f} | {err:+.1f} % | {'yes' if abs(err) <= 10 else 'NO'} (±10 %) |")
    out.append("")
    return out


def main(run):
    rows = load(run)
    if not rows:
        sys.exit(f"transfer_report: no runs under {run}/runs")
    fields = list(rows[0].keys())
    with open(os.path.join(run, "results.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields)
        w.writeheader()
        w.writerows(rows)
    link = rows[0]["link_mbit"]
    rtt = rows[0]["rtt_ms"]
    model = rows[0]["model"]
    summaries = aggregate(rows)
    reps = max(s["n"] for s in summaries)
    base = [r for r in summaries if not r["tool"].startswith("wattio-eett")]
    datasets = [d for d in DATASETS if any(r["dataset"] == d for r in base)]
    tools = sorted({r["tool"] for r in base}, key=tool_key)
    get = {(r["dataset"], r["tool"]): r for r in base}

    def val(key, need_complete=True):
        def f(d, t):
            r = get.get((d, t))
            if r is None or (need_complete and not r["complete"]):
                return None
            return r[key]
        return f

    bar_chart(os.path.join(run, "transfer-throughput.svg"),
              f"Throughput on the emulated WAN ({link:.0f} Mbit/s, RTT {rtt:.0f} ms)",
              "Mbit/s (payload / wall time)", datasets, tools, val("throughput_mbit"),
              hline=link, hline_label=f"link {link:.0f} Mbit/s")
    bar_chart(os.path.join(run, "transfer-energy.svg"),
              "Client energy per GB, ESTIMATED (" + model + " on the tool's CPU time)",
              "J per GB (estimated)", datasets, tools, val("client_j_per_gb_est"))
    bar_chart(os.path.join(run, "transfer-cpu.svg"),
              "Client CPU time (user + system, tool and its children)",
              "CPU seconds", datasets, tools, val("client_cpu_s"), fmt="{:.1f}")

    md = [f"Link {link:.0f} Mbit/s, RTT {rtt:.0f} ms. Client energy is ESTIMATED: {model} applied to the "
          "client tool's CPU time (idle share for the whole VM over the wall time); system-wide is "
          "`wattio measure` (also estimated here) and includes the server, the delay line and other load. "
          f"Up to {reps} runs per cell: every figure is the median over the complete runs; "
          "the Mbit/s column gives the range in brackets.", ""]
    for d in datasets:
        dr = sorted([r for r in base if r["dataset"] == d], key=lambda r: tool_key(r["tool"]))
        if not dr:
            continue
        r0 = dr[0]
        md.append(f"### {d} ({r0['want_files']} files, {r0['want_bytes']/1e6:.0f} MB)")
        md.append("")
        md.append("| tool | complete | time s | Mbit/s [range] | % link | client CPU s | client J (est.) | J/GB (est.) | nginx CPU s | system J (est.) |")
        md.append("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
        for r in dr:
            comp = f"{r['n_complete']}/{r['n']}" if r["complete"] else \
                f"NO: {r['n_complete']}/{r['n']} (exit {r['exit_code']}, {r['bytes']}/{r['want_bytes']} B)"
            jpg = f"{r['client_j_per_gb_est']:.1f}" if r["client_j_per_gb_est"] else "-"
            sysj = f"{r['system_energy_j_est']:.0f}" if r["system_energy_j_est"] is not None else "-"
            rng = f" [{r['tput_min']:.0f}–{r['tput_max']:.0f}]" if r["n"] > 1 else ""
            srv = f"{r['server_cpu_s']:.2f}" if r["server_cpu_s"] is not None else "-"
            md.append(f"| {r['tool']} | {comp} | {r['wall_s']:.1f} | {r['throughput_mbit']:.0f}{rng} | "
                      f"{100*r['throughput_mbit']/link:.0f} | {r['client_cpu_s']:.2f} | {r['client_energy_j_est']:.1f} | {jpg} | {srv} | {sysj} |")
        md.append("")
    md.extend(tls_cost(base, datasets))
    md.extend(goals(base, summaries, datasets, link))
    eett = sorted([r for r in summaries if r["tool"].startswith("wattio-eett")],
                  key=lambda r: (eett_variant(r["tool"]), -r["target_mbit"]))
    if eett:
        md.append("### EETT (wattio transfer --sla target:RATE), mixed dataset")
        md.append("")
        md.append("| server | target % of link | target Mbit/s | achieved Mbit/s [range] | error (median) | worst error | complete | client J (est.) |")
        md.append("|---|---:|---:|---:|---:|---:|---|---:|")
        for r in eett:
            err = 100 * (r["throughput_mbit"] / r["target_mbit"] - 1)
            worst = max((100 * (v / r["target_mbit"] - 1) for v in (r["tput_min"], r["tput_max"])), key=abs)
            md.append(f"| {eett_variant(r['tool'])} | {100*r['target_mbit']/link:.0f} % | {r['target_mbit']} | {r['throughput_mbit']:.0f} "
                      f"[{r['tput_min']:.0f}–{r['tput_max']:.0f}] | {err:+.1f} % | {worst:+.1f} % | "
                      f"{r['n_complete']}/{r['n']} | {r['client_energy_j_est']:.0f} |")
        md.append("")
        labels = [f"{100*r['target_mbit']/link:.0f} % {eett_variant(r['tool'])}" for r in eett]
        by = dict(zip(labels, eett))
        bar_chart(os.path.join(run, "transfer-eett.svg"),
                  "EETT: achieved throughput vs target (mixed dataset; green band: target ±10 %)", "Mbit/s", labels,
                  ["target", "achieved"],
                  lambda g, s: {"target": by[g]["target_mbit"], "achieved": by[g]["throughput_mbit"]}[s],
                  colors=["#7f7f7f", "#d62728"],
                  band=lambda g: (0.9 * by[g]["target_mbit"], 1.1 * by[g]["target_mbit"]))
    with open(os.path.join(run, "report.md"), "w") as f:
        f.write("\n".join(md) + "\n")
    print("\n".join(md))


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: transfer_report.py RUN_DIR")
    main(sys.argv[1])
