#!/usr/bin/env bash
# wattio transfer on the emulated CloudLab path (1 Gbit/s, 36 ms): every SLA with the wattio
# tuners and the Alan baselines, on the large and mixed datasets (Table II shapes, scaled), then
# EETT at 80/60/40/20 % of the link on the mixed dataset.
# Prints a markdown table; JSON summaries go to results/transfer-demo/. Needs root (namespaces).
# The full comparison with other tools is `make bench-transfer` (docs/results/transfer.md).
set -euo pipefail
W=${WATTIO:-target/release/wattio}
NAME=${NAME:-wdemo}
OUT=${OUT:-results/transfer-demo}
DATA=${DATA:-$OUT/data}
SCALE=${SCALE:-0.02}
PORT=9200
mkdir -p "$OUT"
cleanup() {
  "$W" testbed --name "$NAME" down >/dev/null 2>&1 || true  # also ends the server inside
  rm -rf "$OUT/dst"
}
trap cleanup EXIT
[ -f "$DATA/mixed.tsv" ] || "$W" dataset generate "$DATA" --scale "$SCALE" >/dev/null
"$W" testbed --name "$NAME" up --profile cloudlab >/dev/null
"$W" testbed --name "$NAME" exec server -- "$W" serve "$DATA" --listen 10.77.0.2:$PORT 2>/dev/null &
for _ in $(seq 50); do
  "$W" testbed --name "$NAME" exec client -- bash -c "exec 3<>/dev/tcp/10.77.0.2/$PORT" 2>/dev/null && break
  sleep 0.1
done
echo "| dataset | SLA | tuner | MB | s | Mbit/s | channels (last) | process J/GB (estimated) |"
echo "|---|---|---|---|---|---|---|---|"
run() { # dataset sla tuner [extra...]
  local ds=$1 sla=$2 tuner=$3; shift 3
  local f="$OUT/$ds-${sla//:/_}-$tuner.json"
  rm -rf "$OUT/dst"
  "$W" testbed --name "$NAME" exec client -- "$W" transfer "http://10.77.0.2:$PORT/$ds/" "$OUT/dst" \
    --sla "$sla" --tuner "$tuner" --rtt 36ms --bandwidth 1gbit --json --no-progress "$@" > "$f"
  python3 - "$f" "$ds" "$*" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
last = d["intervals"][-2]["num_ch"] if len(d["intervals"]) > 1 else d["params_initial"]["num_ch"]
pe = d["energy_process"]
tuner = d["tuner"] + (f" ({sys.argv[3]})" if sys.argv[3] else "")  # fixed: show its flags
print(f"| {sys.argv[2]} | {d['sla']} | {tuner} | {d['bytes']/1e6:.0f} | {d['seconds']:.2f} "
      f"| {d['throughput_mbps']:.0f} | {last} | {pe['joules_per_gb']:.1f} |")
PY
}
for ds in large mixed; do
  # warm the listing (the server hashes the files on first request)
  "$W" testbed --name "$NAME" exec client -- "$W" transfer "http://10.77.0.2:$PORT/$ds/" "$OUT/dst" \
    --sla max-throughput --json --rtt 36ms --bandwidth 1gbit >/dev/null
  for sla in max-throughput min-energy target:400mbit; do run "$ds" "$sla" wattio; done
  for sla in max-throughput min-energy target:400mbit; do run "$ds" "$sla" alan; done
  run "$ds" max-throughput fixed --cc 1 -p 1 --pipelining 1
done
echo
echo "| EETT target (% of link) | target Mbit/s | achieved Mbit/s | error | s |"
echo "|---|---|---|---|---|"
for pct in 80 60 40 20; do
  rate=$((pct * 10))
  f="$OUT/eett-mixed-$pct.json"
  rm -rf "$OUT/dst"
  "$W" testbed --name "$NAME" exec client -- "$W" transfer "http://10.77.0.2:$PORT/mixed/" "$OUT/dst" \
    --sla "target:${rate}mbit" --rtt 36ms --bandwidth 1gbit --json --no-progress > "$f"
  python3 - "$f" "$pct" "$rate" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
t = float(sys.argv[3])
print(f"| {sys.argv[2]} % | {t:.0f} | {d['throughput_mbps']:.0f} | {(d['throughput_mbps'] / t - 1) * 100:+.1f} % | {d['seconds']:.1f} |")
PY
done
echo
echo "energy: $(python3 -c "import json,glob;print(json.load(open(sorted(glob.glob('$OUT/*.json'))[0]))['energy_process']['provenance'])") — this process only"
