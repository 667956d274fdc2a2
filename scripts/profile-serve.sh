#!/usr/bin/env bash
# Where `wattio serve` and nginx spend the CPU of serving one large file over plain HTTP
# (issue 33, goal 5; docs/results/scale.md): each server in turn, h2load fetching the file 16
# times on 2 keep-alive connections, first under `perf record -g` (top symbols, and the share in
# the kernel and in each binary), then under `perf trace -s` (system calls: sendfile calls, how
# many would have blocked, epoll waits). nginx as bench-serve.py runs it (sendfile, tcp_nopush,
# two workers). Root; needs perf, h2load and nginx (make deps). Not part of make test.
#
# usage: scripts/profile-serve.sh [MIB]   (the file's size, default 1024)
set -euo pipefail
W=${WATTIO_BIN:-$(dirname "$0")/../target/release/wattio}
MIB=${1:-1024}
D=$(mktemp -d /var/tmp/wattio-profile-serve-XXXXXX)
trap 'kill $WP $NP 2>/dev/null; wait 2>/dev/null; rm -rf "$D"' EXIT
mkdir -p "$D/data"
chmod 755 "$D" "$D/data"
python3 -c "
import os, sys
b = os.urandom(1 << 20)
with open(sys.argv[1], 'wb') as f:
    for _ in range(int(sys.argv[2])): f.write(b)
" "$D/data/large.bin" "$MIB"
"$W" serve "$D/data" --listen 127.0.0.1:19601 --max-connections 1024 --idle-timeout 60s >/dev/null 2>&1 &
WP=$!
cat >"$D/nginx.conf" <<NG
worker_processes 2; daemon off; pid $D/nginx.pid; error_log $D/nginx.err;
events { worker_connections 1024; }
http { access_log off; sendfile on; tcp_nopush on; keepalive_requests 100000;
  server { listen 127.0.0.1:19602; root $D/data; } }
NG
nginx -c "$D/nginx.conf" -e "$D/nginx.err" &
NP=$!
sleep 1
for srv in wattio:19601 nginx:19602; do
    name=${srv%%:*} port=${srv##*:}
    if [ "$name" = wattio ]; then pids=$WP; else pids="$NP,$(pgrep -d, -P $NP)"; fi
    url=http://127.0.0.1:$port/large.bin
    h2load --h1 -t 1 -c 2 -n 4 "$url" >/dev/null # warm both the page cache and the server
    perf record -F 2000 -g -o "$D/perf-$name.data" -p "$pids" -- sleep 600 >/dev/null 2>&1 &
    PR=$!
    sleep 0.5
    echo "== $name: h2load under perf record"
    h2load --h1 -t 1 -c 2 -n 16 "$url" | grep -E "finished|traffic"
    kill -INT $PR
    wait $PR || true
    echo "== $name: CPU by binary"
    perf report -i "$D/perf-$name.data" --no-children --sort dso --stdio 2>/dev/null | grep -E '^ +[0-9]' | head -4 || true
    echo "== $name: top symbols"
    perf report -i "$D/perf-$name.data" --no-children --sort dso,sym --stdio -g none 2>/dev/null | grep -E '^ +[0-9]' | head -15 || true
    echo "== $name: system calls under perf trace -s (calls, errors, total ms, ...)"
    perf trace -s -p "$pids" -o "$D/trace-$name.txt" -- sleep 600 >/dev/null 2>&1 &
    TR=$!
    sleep 1
    h2load --h1 -t 1 -c 2 -n 16 "$url" | grep -E "finished"
    kill -INT $TR
    wait $TR || true
    grep -E "^ +(sendfile|epoll_wait|writev|setsockopt) " "$D/trace-$name.txt" || true
done
