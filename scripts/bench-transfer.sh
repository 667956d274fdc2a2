#!/usr/bin/env bash
# make bench-transfer: every transfer tool on every dataset through the emulated WAN, side by side.
#
# Each run is   wattio measure --json -- wattio testbed exec client --stats S.json -- TOOL ...
# so every tool gets the same system-wide meter (`measure`) and the same client-only estimate
# (`--stats`: the tool's own CPU time through the meter's linear model); nginx's CPU time over
# each run is recorded too. Results go to results/transfer/RUN/ (git-ignored);
# `wattio report bench-transfer RUN` turns them into tables (report.md), results.csv and SVG
# charts; rerun it on a finished RUN to redraw (`--charts-only --prefix NAME -o DIR` for docs).
#
# HTTPS rows (tools ending in -tls): the same nginx over TLS 1.3 on :8443 (HTTP/1.1, a P-256
# certificate from a CA the script makes with openssl), curl/wget2/aria2 and wattio's three SLAs
# with --cacert. No wattio server is involved: wattio walks nginx's `autoindex` pages (sizes by
# HEAD), or with NGINX_LISTING=1 reads a listing written beforehand with `wattio serve DIR
# --write-listing` and served by nginx as a file. wattio-me-ng and wattio-eemt-ng are the same
# over plain HTTP from nginx, for the TLS cost. wattio-me-tls-list and wattio-eemt-tls-list (not
# in the default TOOLS) are the same SLAs handed the URL list the other HTTPS tools get
# (`-i $OUT/$ds.tlsurls`), so they discover nothing: the like-for-like comparison.
# wattio-me-nosync and wattio-eemt-nosync (not in the default TOOLS) are wattio-me and
# wattio-eemt with `--fsync off`: beside them, what syncing costs (give DEST a directory on a
# disk: syncing is free on the default tmpfs).
#
# Knobs (environment): SCALE (dataset factor, default 0.02), PROFILE (testbed profile, default
# cloudlab), DATASETS, TOOLS (space-separated subsets), TARGETS (EETT targets in % of the link;
# TARGETS="" runs no EETT rows),
# DATA (dataset dir), OUT (result dir), DEST (download dir; tmpfs: the paper moved memory to memory),
# WATTIO_BIN (use this wattio binary instead of building one), NGINX_LISTING (1: wattio's rows
# against nginx read a wattio listing instead of the autoindex pages), REPEATS (runs per cell, default 3:
# the report shows medians and ranges; rounds are interleaved so slow drift in the host's load
# falls on every tool alike).
set -euo pipefail
cd "$(dirname "$0")/.."

SCALE=${SCALE:-0.02}
PROFILE=${PROFILE:-cloudlab}
DATASETS=${DATASETS:-"small medium large mixed"}
ALL_TOOLS="curl-seq curl-par wget wget2 aria2-default aria2-tuned nghttp-h2 wattio-me wattio-eemt
  wattio-me-ng wattio-eemt-ng curl-par-tls wget2-tls aria2-tuned-tls wattio-me-tls wattio-eemt-tls"
TOOLS=$(echo ${TOOLS:-$ALL_TOOLS})
TARGETS=${TARGETS-"80 60 40 20"}
REPEATS=${REPEATS:-3}
DATA=${DATA:-results/transfer/data-$SCALE}
OUT=${OUT:-results/transfer/run-$(date -u +%Y%m%dT%H%M%SZ)}
DEST=${DEST:-/dev/shm/wattio-bench-dest}
NAME=wbench
SERVER=10.77.0.2

for t in nginx curl wget wget2 aria2c nghttp ip tc openssl; do
  command -v "$t" >/dev/null || { echo "bench-transfer: $t is missing: run scripts/install-deps.sh" >&2; exit 1; }
done
[ "$(id -u)" -eq 0 ] || { echo "bench-transfer: needs root (network namespaces): run with sudo" >&2; exit 1; }

# WATTIO_BIN=path uses an already built binary instead of building one.
if [ -z "${WATTIO_BIN:-}" ]; then
  cargo build --release --bin wattio
  WATTIO_BIN=target/release/wattio
fi
mkdir -p "$OUT/runs" "$OUT/nginx"
OUT=$(realpath "$OUT")
# A private copy: others rebuilding target/release/wattio must not swap it mid-run.
cp "$WATTIO_BIN" "$OUT/wattio"
W="$OUT/wattio"

echo "== datasets (scale $SCALE) in $DATA"
"$W" dataset generate "$DATA" --scale "$SCALE" --only "$(echo $DATASETS | tr ' ' ,)"
DATA=$(realpath "$DATA")

if [ "${NGINX_LISTING:-0}" = 1 ]; then
  echo "== listings for nginx (wattio-*-ng and wattio-*-tls rows)"
  for ds in $DATASETS; do "$W" serve "$DATA/$ds" --write-listing; done
else
  # wattio's rows against nginx walk its autoindex pages: no listing may be there
  for ds in $DATASETS; do rm -rf "$DATA/$ds/.wattio"; done
fi

echo "== TLS: a test CA and a certificate for $SERVER (ECDSA P-256)"
mkdir -p "$OUT/tls"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj "/CN=wattio bench CA" \
  -keyout "$OUT/tls/ca.key" -out "$OUT/tls/ca.pem" 2>/dev/null
openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=$SERVER" \
  -keyout "$OUT/tls/server.key" -out "$OUT/tls/server.csr" 2>/dev/null
printf 'subjectAltName=IP:%s\n' "$SERVER" > "$OUT/tls/ext.cnf"
openssl x509 -req -in "$OUT/tls/server.csr" -CA "$OUT/tls/ca.pem" -CAkey "$OUT/tls/ca.key" -CAcreateserial \
  -days 2 -extfile "$OUT/tls/ext.cnf" -out "$OUT/tls/server.pem" 2>/dev/null
CA="$OUT/tls/ca.pem"

cleanup() {
  "$W" testbed --name $NAME down >/dev/null 2>&1 || true
  rm -rf "$DEST"
}
trap cleanup EXIT INT TERM

echo "== testbed ($PROFILE)"
"$W" testbed --name $NAME up --profile "$PROFILE" | tee "$OUT/testbed.txt"
RATE_BPS=$(python3 -c "import json;print(json.load(open('/run/wattio-testbed/$NAME/state.json'))['link']['rate_bps'])")
RTT_MS=$(python3 -c "import json;print(json.load(open('/run/wattio-testbed/$NAME/state.json'))['link']['rtt_us']/1000)")
"$W" testbed --name $NAME check --duration 3s | tee -a "$OUT/testbed.txt" || echo "WARNING: testbed check did not pass" | tee -a "$OUT/testbed.txt"

# nginx: HTTP/1.1 on :8080, HTTP/2 (cleartext, prior knowledge) on :8081, HTTP/1.1 over TLS on
# :8443 (no http2 there, so every HTTPS client speaks HTTP/1.1 as wattio does), sendfile, no logs.
cat > "$OUT/nginx/nginx.conf" <<EOF
worker_processes 2;
pid $OUT/nginx/nginx.pid;
error_log $OUT/nginx/error.log;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path $OUT/nginx; proxy_temp_path $OUT/nginx; fastcgi_temp_path $OUT/nginx;
  uwsgi_temp_path $OUT/nginx; scgi_temp_path $OUT/nginx;
  default_type application/octet-stream;
  sendfile on; tcp_nopush on;
  keepalive_requests 1000000; keepalive_timeout 120s;
  http2_max_concurrent_streams 128;
  server { listen $SERVER:8080; root $DATA; autoindex on; }
  server { listen $SERVER:8081 http2; root $DATA; }
  server { listen $SERVER:8443 ssl; root $DATA; autoindex on;
           ssl_certificate $OUT/tls/server.pem; ssl_certificate_key $OUT/tls/server.key;
           ssl_protocols TLSv1.2 TLSv1.3; ssl_session_cache shared:TLS:10m; }
}
EOF
"$W" testbed --name $NAME exec server -- nginx -c "$OUT/nginx/nginx.conf"

# wattio serve: one per dataset, so each root URL names exactly one dataset.
port=9090
declare -A WPORT
for ds in $DATASETS; do
  port=$((port + 1)); WPORT[$ds]=$port
  "$W" testbed --name $NAME exec server -- sh -c "exec '$W' serve '$DATA/$ds' --listen $SERVER:$port >'$OUT/serve-$ds.log' 2>&1 &"
done
sleep 1
for ds in $DATASETS; do
  # Warm the listing (checksums are computed on first request) so no transfer pays for it.
  "$W" testbed --name $NAME exec server -- curl -sSf -o /dev/null "http://$SERVER:${WPORT[$ds]}/.wattio/listing.json" \
    || echo "WARNING: wattio serve for $ds did not answer (see $OUT/serve-$ds.log)"
done
echo "== warming the page cache (server side reads from memory, as in the paper)"
cat "$DATA"/{small,medium,large}/* >/dev/null 2>&1 || true

# Lists of URLs per dataset.
curlcfg() { # base-url dataset -> curl config: one url/output pair per file
  awk -F'\t' -v d="$DEST" -v s="$1/$2/" \
    '{printf "url = \"%s%s\"\noutput = \"%s/%s\"\n", s, $1, d, $1}' "$DATA/$2.tsv"
}
for ds in $DATASETS; do
  cut -f1 "$DATA/$ds.tsv" | sed "s|^|http://$SERVER:8080/$ds/|" > "$OUT/$ds.urls"
  cut -f1 "$DATA/$ds.tsv" | sed "s|^|http://$SERVER:8081/$ds/|" > "$OUT/$ds.h2urls"
  cut -f1 "$DATA/$ds.tsv" | sed "s|^|https://$SERVER:8443/$ds/|" > "$OUT/$ds.tlsurls"
  curlcfg "http://$SERVER:8080" "$ds" > "$OUT/$ds.curlcfg"
  curlcfg "https://$SERVER:8443" "$ds" > "$OUT/$ds.tlscurlcfg"
done

tool_cmd() { # tool dataset -> the shell command the client runs
  local tool=$1 ds=$2 rate=$3
  local mbit=$(( RATE_BPS / 1000000 ))
  case $tool in
    curl-seq) echo "curl -sS --fail -K '$OUT/$ds.curlcfg'" ;;
    curl-par) echo "curl -sS --fail -Z -K '$OUT/$ds.curlcfg'" ;;
    wget) echo "wget -q -nd -P '$DEST' -i '$OUT/$ds.urls'" ;;
    wget2) echo "wget2 -q -nd -P '$DEST' -i '$OUT/$ds.urls'" ;;
    aria2-default) echo "aria2c -q -d '$DEST' -i '$OUT/$ds.urls'" ;;
    aria2-tuned) echo "aria2c -q -d '$DEST' -i '$OUT/$ds.urls' -j 16 -x 8 -s 8 -k 1M --file-allocation=none" ;;
    # nghttp cannot save files (-O is "not implemented yet" in 1.52): the bodies go, concatenated,
    # to one file on the same tmpfs. Connection window raised to 1 GiB (-W 30); stream windows stay
    # at the 64 KiB default: with -w 20 or -w 24 nghttp 1.52 against nginx 1.22 stopped after the
    # first batch of medium/large files ("Some requests were not processed", exit 0) on this host.
    nghttp-h2) echo "nghttp -W 30 \$(cat '$OUT/$ds.h2urls') > '$DEST/nghttp.out'" ;;
    curl-par-tls) echo "curl -sS --fail -Z --cacert '$CA' -K '$OUT/$ds.tlscurlcfg'" ;;
    wget2-tls) echo "wget2 -q -nd -P '$DEST' --ca-certificate='$CA' -i '$OUT/$ds.tlsurls'" ;;
    aria2-tuned-tls) echo "aria2c -q -d '$DEST' -i '$OUT/$ds.tlsurls' -j 16 -x 8 -s 8 -k 1M --file-allocation=none --ca-certificate='$CA'" ;;
    wattio-*) # wattio-{me,eemt}[-ng|-tls|-tls-list|-nosync], wattio-eett[-tls]-PCT
      local src="http://$SERVER:${WPORT[$ds]}/" sla extra=""
      case $tool in
        *-ng) src="http://$SERVER:8080/$ds/" ;;
        *-tls-list) src="-i '$OUT/$ds.tlsurls' --cacert '$CA'" ;;
        *-tls|wattio-eett-tls-*) src="https://$SERVER:8443/$ds/ --cacert '$CA'" ;;
      esac
      case $tool in
        wattio-me*) sla=min-energy ;;
        wattio-eemt*) sla=max-throughput ;;
        wattio-eett-*) sla=target:${rate}mbit ;;
      esac
      case $tool in *-nosync) extra=" --fsync off" ;; esac
      echo "'$W' transfer $src '$DEST' --sla $sla --json --no-progress --rtt ${RTT_MS}ms --bandwidth ${mbit}mbit$extra" ;;
    *) echo "bench-transfer: unknown tool $tool" >&2; return 1 ;;
  esac
}

nginx_cpu_s() { # CPU seconds (user + system) nginx's master and workers have used so far
  python3 - "$OUT/nginx/nginx.pid" <<'PY'
import os, sys
master = int(open(sys.argv[1]).read())
ticks = 0
for d in filter(str.isdigit, os.listdir("/proc")):
    try:
        st = open(f"/proc/{d}/stat").read()
    except OSError:
        continue
    f = st[st.rindex(")") + 2:].split()  # f[0] is field 3 (state) of proc(5)
    if int(d) == master or int(f[1]) == master:
        ticks += int(f[11]) + int(f[12])  # utime, stime
print(ticks / os.sysconf("SC_CLK_TCK"))
PY
}

run_one() { # round tool dataset [target-mbit]
  local rep=$1 tool=$2 ds=$3 rate=${4:-0}
  local id="$ds.$tool.r$rep" cmd
  cmd=$(tool_cmd "$tool" "$ds" "$rate")
  rm -rf "$DEST"; mkdir -p "$DEST"
  # the server's CPU time, where the server is nginx (not for the rows against wattio serve)
  local server=nginx
  case $tool in wattio-me|wattio-eemt|wattio-me-nosync|wattio-eemt-nosync|wattio-eett-[0-9]*) server=wattio-serve ;; esac
  local ncpu0; ncpu0=$(nginx_cpu_s)
  printf 'r%-2s %-8s %-16s ' "$rep" "$ds" "$tool"
  set +e
  "$W" measure --json -- "$W" testbed --name $NAME exec client --stats "$OUT/runs/$id.stats.json" -- \
    timeout "${RUN_TIMEOUT:-900}" sh -c "cd '$DEST' && { $cmd ; } >'$OUT/runs/$id.stdout' 2>'$OUT/runs/$id.stderr'" \
    >"$OUT/runs/$id.measure.json" 2>"$OUT/runs/$id.measure.err"
  local rc=$?
  set -e
  local server_cpu=null
  [ $server = nginx ] && server_cpu=$(python3 -c "print(round($(nginx_cpu_s) - $ncpu0, 3))")
  # What arrived: regular files and bytes under DEST (state/partial files excluded by name).
  local got
  got=$(find "$DEST" -type f ! -name '*.part' ! -name '*.tmp' ! -path '*/.wattio*' -printf '%s\n' | awk '{n++; s+=$1} END {print n+0, s+0}')
  local want_files want_bytes
  want_files=$(wc -l < "$DATA/$ds.tsv"); want_bytes=$(awk -F'\t' '{s+=$2} END {print s}' "$DATA/$ds.tsv")
  echo "{\"tool\":\"$tool\",\"rep\":$rep,\"dataset\":\"$ds\",\"target_mbit\":$rate,\"rc\":$rc,\"got_files\":${got% *},\"got_bytes\":${got#* },\"want_files\":$want_files,\"want_bytes\":$want_bytes,\"link_bps\":$RATE_BPS,\"server\":\"$server\",\"server_cpu_s\":$server_cpu,\"rtt_ms\":$RTT_MS,\"cmd\":$(python3 -c 'import json,sys;print(json.dumps(sys.argv[1]))' "$cmd")}" \
    > "$OUT/runs/$id.meta.json"
  python3 - "$OUT/runs/$id" <<'PY'
import json, sys
p = sys.argv[1]
m = json.load(open(p + ".meta.json")); s = json.load(open(p + ".stats.json"))
ok = m["rc"] == 0 and m["got_bytes"] == m["want_bytes"]
print(f"{m['got_bytes']*8/s['wall_s']/1e6:8.1f} Mbit/s {s['wall_s']:7.2f} s cpu {s['user_s']+s['sys_s']:6.2f} s "
      f"client {s['energy_j']:7.1f} J (estimated) {'ok' if ok else 'INCOMPLETE rc=%d %d/%d B' % (m['rc'], m['got_bytes'], m['want_bytes'])}")
PY
}

echo "== runs -> $OUT/runs ($REPEATS rounds)"
for rep in $(seq 1 "$REPEATS"); do
  for ds in $DATASETS; do
    for tool in $TOOLS; do
      run_one "$rep" "$tool" "$ds"
    done
  done
  if [[ " $DATASETS " == *" mixed "* ]]; then
    # EETT over wattio serve when the plain wattio rows run, over nginx TLS when the TLS ones do
    eett=""
    [[ " $TOOLS " =~ \ wattio-(me|eemt)\  ]] && eett="wattio-eett"
    [[ " $TOOLS " =~ \ wattio-(me|eemt)-tls\  ]] && eett="$eett wattio-eett-tls"
    for e in $eett; do
      for pct in $TARGETS; do
        run_one "$rep" "$e-$pct" mixed $(( RATE_BPS * pct / 100 / 1000000 ))
      done
    done
  fi
done

cat > "$OUT/machine.txt" <<EOF
date: $(date -u +%Y-%m-%dT%H:%M:%SZ)
cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //') (family $(grep -m1 'cpu family' /proc/cpuinfo | cut -d: -f2 | tr -d ' '), model $(grep -m1 '^model' /proc/cpuinfo | cut -d: -f2 | tr -d ' ')), $(nproc) vCPU
kernel: $(uname -r)
os: $(. /etc/os-release; echo "$PRETTY_NAME")
scale: $SCALE   profile: $PROFILE   repeats: $REPEATS   command: SCALE=$SCALE PROFILE=$PROFILE REPEATS=$REPEATS DATASETS="$DATASETS" TOOLS="$TOOLS" TARGETS="$TARGETS" NGINX_LISTING=${NGINX_LISTING:-0} make bench-transfer
https: nginx :8443, $(openssl version); negotiated with curl: $("$W" testbed --name $NAME exec client -- curl -sv -o /dev/null --cacert "$CA" "https://$SERVER:8443/" 2>&1 | grep -m1 'SSL connection using' | sed 's/^\* //')
tools: $(curl --version | head -1 | cut -d' ' -f1-2); $(wget --version | head -1 | cut -d' ' -f1-3); $(wget2 --version | head -1 | cut -d' ' -f1-3); $(aria2c --version | head -1); $(nghttp --version); $(nginx -v 2>&1)
EOF
"$W" report bench-transfer "$OUT"
echo "== report: $OUT/report.md"
