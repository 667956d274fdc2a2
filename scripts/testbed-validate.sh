#!/usr/bin/env bash
# Validates the emulated WAN for docs/testbed.md: for each profile, ping RTT and `wattio testbed
# check` (RTT from TCP handshakes, one stream with a 4 MiB window clamp vs W/RTT, 8 parallel
# streams vs the rate); then a rate sweep at 36 ms to find the highest rate that holds on this
# host. Output: results/testbed/validate-<time>.txt. Needs root, iproute2, iputils-ping.
set -euo pipefail
cd "$(dirname "$0")/.."
W=${WATTIO_BIN:-target/release/wattio}
[ -x "$W" ] || { echo "testbed-validate: build first (cargo build --release --bin wattio) or set WATTIO_BIN" >&2; exit 1; }
command -v ping >/dev/null || { echo "testbed-validate: ping is missing: run scripts/install-deps.sh" >&2; exit 1; }
NAME=wvalid
OUT=results/testbed/validate-$(date -u +%Y%m%dT%H%M%SZ).txt
mkdir -p results/testbed
trap '"$W" testbed --name $NAME down >/dev/null 2>&1 || true' EXIT INT TERM
{
  echo "# $(date -u +%FT%TZ) $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2), $(nproc) vCPU, kernel $(uname -r)"
  echo "# load before: $(cut -d' ' -f1-3 /proc/loadavg)"
  for p in cloudlab didclab; do
    echo "## profile $p"
    "$W" testbed --name $NAME up --profile $p
    "$W" testbed --name $NAME exec client -- ping -q -c 20 -i 0.1 10.77.0.2 | tail -2
    "$W" testbed --name $NAME check --duration 4s || true
  done
  for r in 1gbit 2gbit 3gbit 4gbit 5gbit; do
    echo "## rate sweep $r, 36 ms, 16 streams"
    "$W" testbed --name $NAME up --rate $r --rtt 36ms >/dev/null
    "$W" testbed --name $NAME check --duration 4s --streams 16 | tail -3 || true
  done
  echo "# load after: $(cut -d' ' -f1-3 /proc/loadavg)"
} 2>&1 | tee "$OUT"
echo "testbed-validate: wrote $OUT"
