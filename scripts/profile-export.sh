#!/usr/bin/env bash
# Where `wattio export --by process` spends its CPU beside N sleeping processes on a fake RAPL
# (issue 33, goal 4; docs/results/scale.md): a `wattio fixture intel-server` tree ticking at
# 20 W, its package zones wrapping at RANGE_UJ (the ticker's default 9999999, or a real zone's
# 262143328850 with --allow-torn-reads), bound over /sys/class/powercap by fake-rapl-ns.sh. The
# exporter is scraped once a second for SECS seconds under `perf record -g`; prints each of its
# threads' CPU ticks and voluntary context switches (wake-ups) over those seconds, and the top
# symbols. Root; needs perf (make deps). Not part of make test.
#
# usage: N=1000 SECS=20 RANGE_UJ=9999999 scripts/profile-export.sh
set -euo pipefail
cd "$(dirname "$0")/.."
W=${WATTIO_BIN:-target/release/wattio}
N=${N:-1000} SECS=${SECS:-20} RANGE_UJ=${RANGE_UJ:-9999999} PORT=${PORT:-19555}
D=$(mktemp -d /tmp/wattio-profile-export-XXXXXX)
pids=()
cleanup() {
    kill "${pids[@]}" 2>/dev/null || true
    pkill -f "listen 127.0.0.1:$PORT" 2>/dev/null || true
    wait 2>/dev/null || true
    rm -rf "$D"
}
trap cleanup EXIT
"$W" fixture intel-server "$D/fx" >/dev/null
torn=()
[ "$RANGE_UJ" -gt 9999999 ] && torn=(--allow-torn-reads)
"$W" fixture tick "$D/fx" --watts 20 --max-energy-range-uj "$RANGE_UJ" "${torn[@]}" >/dev/null 2>&1 &
pids+=($!)
for _ in $(seq "$N"); do
    sleep 3600 &
    pids+=($!)
done
base=()
grep -q AuthenticAMD /proc/cpuinfo || base=(--cpuinfo)
WATTIO_KERNEL_IO=off scripts/fake-rapl-ns.sh "${base[@]}" "$D/fx" -- "$W" export --source powercap \
    --interval 1s --by process --max-series 20000 --listen "127.0.0.1:$PORT" >/dev/null 2>&1 &
pids+=($!)
for _ in $(seq 60); do
    curl -sf -o /dev/null "http://127.0.0.1:$PORT/metrics" && break
    sleep 0.5
done
P=$(pgrep -f "listen 127.0.0.1:$PORT" | while read -r p; do [ "$(cat /proc/$p/comm)" = wattio ] && echo "$p"; done | head -1)
threads() {
    for t in /proc/"$P"/task/*; do
        echo "$(cat "$t"/comm) $(awk '{print $14 + $15}' "$t"/stat) $(awk '/^voluntary_ctxt/ {print $2}' "$t"/status)"
    done
}
(for _ in $(seq "$SECS"); do curl -sf -o /dev/null "http://127.0.0.1:$PORT/metrics"; sleep 1; done) &
C=$!
threads >"$D/t0"
perf record -F 999 -g -o "$D/perf.data" -p "$P" -- sleep "$SECS" >/dev/null 2>&1
threads >"$D/t1"
wait $C
echo "N=$N processes, package zones wrapping at $RANGE_UJ µJ, $SECS s scraped once a second"
echo "thread | CPU ticks | wake-ups"
paste "$D/t0" "$D/t1" | awk '{print $1, "|", $5 - $2, "|", $6 - $3}'
perf report -i "$D/perf.data" --no-children --sort comm,sym --stdio -g none 2>/dev/null | grep -E '^ +[0-9]' | head -15 || true
