#!/usr/bin/env bash
# Runs a command where a wattio fixture tree stands in for the machine's RAPL interfaces: in a
# private mount namespace (nothing is mounted or changed outside it, and it vanishes with the
# command), the fixture's
#   sys/class/powercap            over /sys/class/powercap
#   sys/devices/virtual/powercap  over /sys/devices/virtual/powercap
#   dev/cpu                       over /dev/cpu            (the sparse MSR stand-ins)
#   proc/cpuinfo                  over /proc/cpuinfo       (--cpuinfo)
#   sys/bus/event_source/devices/power  over the perf PMU  (--perf-pmu)
#   proc/modules                  over /proc/modules       (--proc-modules)
# so any tool reads the fixture's counters at their real paths. Where a path does not exist on
# this machine (no RAPL: no /sys/class/powercap), its parent is shadowed by a tmpfs holding the
# parent's entries bound back, plus the new one. A kernel built without modules has no
# /proc/modules; --proc-modules then shadows /proc by a tmpfs of symlinks into a procfs mounted
# aside (/proc/self and every process that exists at the start resolve; processes started later
# are not listed). Pair with `wattio fixture tick` for live counters.
#
# usage: scripts/fake-rapl-ns.sh [--cpuinfo] [--perf-pmu] [--proc-modules] [--cgroup DIR] FIXTURE -- COMMAND [ARG...]
#   --cgroup DIR  move the command into this cgroup v2 directory just before it starts, so the
#                 cgroup's cpu.stat counts the command alone, not the mounting.
# Needs root (mounts). Exit status: the command's; 2 for a problem of this script.
set -euo pipefail

die() {
    echo "fake-rapl-ns: $*" >&2
    exit 2
}

inside=0 cpuinfo=0 perf_pmu=0 proc_modules=0 cgroup=""
while [ $# -gt 0 ]; do
    case "$1" in
    --inside) inside=1 ;;
    --cpuinfo) cpuinfo=1 ;;
    --perf-pmu) perf_pmu=1 ;;
    --proc-modules) proc_modules=1 ;;
    --cgroup)
        [ $# -ge 2 ] || die "--cgroup needs a directory"
        cgroup=$2
        shift
        ;;
    --) die "give the fixture directory before --" ;;
    -*) die "unknown option $1 (see the usage at the top of $0)" ;;
    *) break ;;
    esac
    shift
done
[ $# -ge 3 ] && [ "$2" = "--" ] || die "usage: $0 [--cpuinfo] [--perf-pmu] [--proc-modules] [--cgroup DIR] FIXTURE -- COMMAND [ARG...]"
fixture=$1
shift 2

if [ "$inside" = 0 ]; then
    [ "$(id -u)" = 0 ] || die "needs root to mount (run it with sudo)"
    command -v unshare >/dev/null || die "unshare not found: install util-linux"
    [ -d "$fixture/sys/class/powercap" ] || [ -d "$fixture/dev/cpu" ] ||
        die "$fixture holds no fixture tree: write one with \`wattio fixture amd-epyc $fixture\`"
    fixture=$(realpath "$fixture")
    [ -z "$cgroup" ] || [ -w "$cgroup/cgroup.procs" ] || die "$cgroup is not a cgroup v2 directory we can join"
    # The only trace outside the namespace: an empty directory in the fixture, where the
    # namespace mounts its scratch tmpfs.
    mkdir -p "$fixture/.fake-rapl-ns"
    opts=()
    [ "$cpuinfo" = 0 ] || opts+=(--cpuinfo)
    [ "$perf_pmu" = 0 ] || opts+=(--perf-pmu)
    [ "$proc_modules" = 0 ] || opts+=(--proc-modules)
    [ -z "$cgroup" ] || opts+=(--cgroup "$cgroup")
    exec unshare --mount --propagation private -- "$BASH" "$0" --inside "${opts[@]}" "$fixture" -- "$@"
fi

scratch=$fixture/.fake-rapl-ns
mount -t tmpfs -o mode=0700 fake-rapl-scratch "$scratch" || die "cannot mount a tmpfs on $scratch"

# Replaces directory $1 by a tmpfs that holds the same entries (each bound back to the original)
# so that a missing entry can be added to it.
shadow() {
    local dir=$1 stash
    stash=$scratch/$(echo "$dir" | tr / _)
    mkdir -p "$stash"
    mount --rbind "$dir" "$stash" || die "cannot bind $dir"
    mount -t tmpfs -o mode=0755 fake-rapl-shadow "$dir" || die "cannot mount a tmpfs over $dir"
    local e name
    shopt -s dotglob nullglob
    for e in "$stash"/*; do
        name=${e##*/}
        if [ -L "$e" ]; then
            ln -s "$(readlink "$e")" "$dir/$name"
        elif [ -d "$e" ]; then
            mkdir "$dir/$name" && mount --rbind "$e" "$dir/$name"
        else
            touch "$dir/$name" && mount --bind "$e" "$dir/$name"
        fi || die "cannot bind $dir/$name back into the shadow of $dir"
    done
    shopt -u dotglob nullglob
}

# Mounts $1 (in the fixture) over the system path $2, creating $2 in a shadow of its parent
# when this machine has no such path.
bind_over() {
    local src=$1 dst=$2
    if [ ! -e "$dst" ]; then
        local parent=${dst%/*}
        [ -d "$parent" ] || die "$parent does not exist on this machine"
        shadow "$parent"
        if [ -d "$src" ]; then mkdir "$dst"; else touch "$dst"; fi
    fi
    mount --bind "$src" "$dst" || die "cannot bind $src over $dst"
}

f=$fixture
[ ! -d "$f/sys/class/powercap" ] || bind_over "$f/sys/class/powercap" /sys/class/powercap
[ ! -d "$f/sys/devices/virtual/powercap" ] || bind_over "$f/sys/devices/virtual/powercap" /sys/devices/virtual/powercap
[ ! -d "$f/dev/cpu" ] || bind_over "$f/dev/cpu" /dev/cpu
if [ "$cpuinfo" = 1 ]; then
    [ -f "$f/proc/cpuinfo" ] || die "--cpuinfo: $f/proc/cpuinfo is missing"
    bind_over "$f/proc/cpuinfo" /proc/cpuinfo
fi
if [ "$perf_pmu" = 1 ]; then
    [ -d "$f/sys/bus/event_source/devices/power" ] || die "--perf-pmu: the fixture has no perf power PMU"
    bind_over "$f/sys/bus/event_source/devices/power" /sys/bus/event_source/devices/power
fi
if [ "$proc_modules" = 1 ]; then
    [ -f "$f/proc/modules" ] || die "--proc-modules: $f/proc/modules is missing"
    if [ ! -e /proc/modules ]; then
        mkdir "$scratch/proc"
        mount -t proc proc "$scratch/proc" || die "cannot mount a procfs at $scratch/proc"
        mount -t tmpfs -o mode=0555 fake-rapl-proc /proc || die "cannot mount a tmpfs over /proc"
        shopt -s dotglob nullglob
        for e in "$scratch/proc"/*; do ln -s "$e" "/proc/${e##*/}"; done
        shopt -u dotglob nullglob
        touch /proc/modules
    fi
    mount --bind "$f/proc/modules" /proc/modules || die "cannot bind $f/proc/modules over /proc/modules"
fi
if [ -n "$cgroup" ]; then
    echo $$ >"$cgroup/cgroup.procs" || die "cannot join the cgroup $cgroup"
fi
exec "$@"
