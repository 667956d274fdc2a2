#!/usr/bin/env bash
# make bench-top: what `wattio top` costs and what it misses.
#
# 1. Cost: CPU time of `wattio top --json` by process and by cgroup, and of procps `top -b`,
#    each refreshing every second for DURATION seconds with NPROC extra (sleeping) processes on
#    the machine; ROUNDS interleaved rounds, CPU time from wait4 rusage.
# 2. Misses: the share of the machine's busy time that no process entry explains (unseen_cpu_s /
#    busy_cpu_s) while a loop starts short-lived processes (~20 ms each), against a long-lived
#    spinner; and the same loop inside a cgroup, attributed by cgroup.
# Prints Markdown tables. Knobs: NPROC (500), DURATION (30), ROUNDS (3), WATTIO_BIN,
# PARTS ("cost misses": run one of them alone).
set -euo pipefail
cd "$(dirname "$0")/.."
PARTS=${PARTS:-"cost misses"}
NPROC=${NPROC:-500}
DURATION=${DURATION:-30}
ROUNDS=${ROUNDS:-3}
W=${WATTIO_BIN:-target/release/wattio}
[ -x "$W" ] || cargo build --release --bin wattio >&2
PIDS=()
CG=""
cleanup() {
  [ ${#PIDS[@]} -gt 0 ] && kill "${PIDS[@]}" 2>/dev/null || true
  wait 2>/dev/null || true
  [ -n "$CG" ] && rmdir "$CG" 2>/dev/null || true
}
trap cleanup EXIT

# CPU seconds (user+sys) of a command, from wait4.
cpu_of() {
  python3 - "$@" <<'PY'
import os, subprocess, sys
p = subprocess.Popen(sys.argv[1:], stdout=subprocess.DEVNULL)
_, status, ru = os.wait4(p.pid, 0)
if status != 0: sys.exit(f"{sys.argv[1:]} failed: {status}")
print(f"{ru.ru_utime + ru.ru_stime:.4f}")
PY
}

echo "machine: $(nproc) vCPU, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | xargs), kernel $(uname -r)" >&2
if [[ " $PARTS " == *" cost "* ]]; then
for _ in $(seq "$NPROC"); do sleep 100000 & PIDS+=($!); done
echo "processes on the machine: $(ls /proc | grep -c '^[0-9]')" >&2

declare -A SUM
TOOLS=("wattio-process" "wattio-cgroup" "top-b")
for r in $(seq "$ROUNDS"); do
  for t in "${TOOLS[@]}"; do
    case $t in
      wattio-process) c=$(cpu_of "$W" top --json --interval 1 -n "$DURATION") ;;
      wattio-cgroup) c=$(cpu_of "$W" top --by cgroup --json --interval 1 -n "$DURATION") ;;
      top-b) c=$(cpu_of top -b -d 1 -n "$DURATION") ;;
    esac
    echo "round $r $t: $c CPU-s over $DURATION s" >&2
    SUM[$t]="${SUM[$t]:-} $c"
  done
done
echo
echo "| tool (1 s refresh, $NPROC extra processes) | CPU-s per round of $DURATION s (each round) | % of one core (median) |"
echo "|---|---|---:|"
for t in "${TOOLS[@]}"; do
  python3 - "$t" "$DURATION" ${SUM[$t]} <<'PY'
import statistics, sys
t, d, xs = sys.argv[1], float(sys.argv[2]), [float(x) for x in sys.argv[3:]]
print(f"| {t} | {', '.join(f'{x:.3f}' for x in xs)} | {100*statistics.median(xs)/d:.2f} % |")
PY
done
kill "${PIDS[@]}" 2>/dev/null || true
wait 2>/dev/null || true
PIDS=()
fi

[[ " $PARTS " == *" misses "* ]] || exit 0
# Misses.
short_loop='end=$(( $(date +%s) + '"$((DURATION/3 + 2))"' )); while [ $(date +%s) -lt $end ]; do sh -c "i=0; while [ \$i -lt 3000 ]; do i=\$((i+1)); done"; done'
unseen() { # by, then what the JSON lines say: sum unseen / sum busy
  python3 -c '
import json, sys
rows = [json.loads(l) for l in sys.stdin if l.strip()]
b = sum(r["busy_cpu_s"] for r in rows); u = sum(r["unseen_cpu_s"] for r in rows)
o = sum(r.get("over_cpu_s", 0) for r in rows)
print(f"{u:.2f} of {b:.2f} CPU-s ({100*u/b if b else 0:.1f} %) | {o:.2f} CPU-s ({100*o/b if b else 0:.1f} %)")'
}
N=$((DURATION/3))
echo
echo "| load during $N s of \`wattio top --json --interval 1\` | by | busy time in no entry (unseen_cpu_s / busy_cpu_s) | entries above busy time (over_cpu_s) |"
echo "|---|---|---|---|"
"$W" workload spin --load 0.5 --duration $((N + 2))s 2>/dev/null & PIDS+=($!)
echo "| one long-lived process at 50 % | process | $("$W" top --json --interval 1 -n $N 2>/dev/null | unseen) |"
wait; PIDS=()
sh -c "$short_loop" & PIDS+=($!)
echo "| a loop of short-lived processes (~20 ms each) | process | $("$W" top --json --interval 1 -n $N 2>/dev/null | unseen) |"
wait; PIDS=()
V2=$(for p in /sys/fs/cgroup/unified /sys/fs/cgroup; do [ -e $p/cgroup.controllers ] && echo $p && break; done)
if [ -n "$V2" ] && CG=$V2/wattio-bench-$$ && mkdir "$CG" 2>/dev/null; then
  sh -c "echo \$\$ > $CG/cgroup.procs; $short_loop" & PIDS+=($!)
  echo "| the same loop inside a cgroup | cgroup | $("$W" top --by cgroup --json --interval 1 -n $N 2>/dev/null | unseen) |"
  wait; PIDS=()
else
  echo "| the same loop inside a cgroup | cgroup | not measured: no writable cgroup v2 hierarchy | |"
fi
