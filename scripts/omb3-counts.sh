#!/usr/bin/env bash
# Counts what three Strata nodes on one core spend on the OMB-style workload
# (bench/compare/omb.go: 4 producers, 16 partitions, replication factor 3,
# 1 KiB, acks=all, linger 1 ms) at a fixed rate: per node the CPU seconds
# (/proc/PID/stat), context switches (every thread's /proc status), fsyncs,
# replica Fetch requests sent and served, Produce requests and the bytes it led
# (/metrics), and for the run the disk's bytes written and busy time
# (/proc/diskstats, device DISK, default vda). The nodes are pinned to CPU 0,
# the producer to CPU 1. With PERF set, `perf record -g` samples node 1 during
# the measured run into PERF (a file name).
#
#   scripts/omb3-counts.sh BIN RATE [DURATION]
#   TOPIC_CONFIG="-c flush.messages=1000000000" scripts/omb3-counts.sh bin/strata 200000
#
# The nodes listen on 127.0.77.1-3 (ports 19092/19093/18080, admin 18081);
# their data dir is a temp dir removed at exit, with the nodes killed.
set -euo pipefail
BIN=$1 RATE=$2 DUR=${3:-8s}
DISK=${DISK:-vda}
TOPIC_CONFIG=${TOPIC_CONFIG:-}
dir=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait "${pids[@]}" 2>/dev/null || true
  rm -rf "$dir"
}
trap cleanup EXIT
for i in 1 2 3; do
  taskset -c 0 "$BIN" server --node-id $i --data-dir "$dir/$i" \
    --kafka-addr 127.0.77.$i:19092 --http-addr 127.0.77.$i:18080 --controller-addr 127.0.77.$i:19093 \
    --admin-addr 127.0.77.$i:18081 \
    --controllers 1@127.0.77.1:19093,2@127.0.77.2:19093,3@127.0.77.3:19093 \
    --cluster-id omb3-counts > "$dir/node-$i.log" 2>&1 &
  pids+=($!)
done
for i in 1 2 3; do
  until curl -sf http://127.0.77.$i:18080/readyz > /dev/null; do sleep 0.5; kill -0 "${pids[$((i - 1))]}"; done
done
produce() { # $1: duration
  # shellcheck disable=SC2086 # TOPIC_CONFIG is a list of flags
  taskset -c 1 "$BIN" bench produce --brokers 127.0.77.1:19092,127.0.77.2:19092,127.0.77.3:19092 \
    -t omb -s 1024 -p 16 -r 3 --producers 4 --linger 1ms --acks all --rate "$RATE" -d "$1" --progress none $TOPIC_CONFIG
}
produce 4s > /dev/null # creates the topic and warms the connections
metric() { # $1: metrics text, $2: awk pattern; the sum of the matching series
  awk "$2 {s += \$NF} END {print s + 0}" <<< "$1"
}
counts() { # one line per node: cpu ticks, voluntary and involuntary switches, fsyncs, fetches sent, Produce, Fetch served, bytes led
  for i in 1 2 3; do
    local p=${pids[$((i - 1))]} m
    m=$(curl -s http://127.0.77.$i:18080/metrics)
    echo "$i $(awk '{print $14 + $15}' /proc/"$p"/stat)" \
      "$(cat /proc/"$p"/task/*/status 2> /dev/null | awk '/^voluntary_ctxt/ {v += $2} /^nonvoluntary_ctxt/ {n += $2} END {print v + 0, n + 0}')" \
      "$(metric "$m" '/^strata_log_fsync_seconds_count/')" \
      "$(metric "$m" '/^strata_replica_fetch_requests_total/')" \
      "$(metric "$m" '/^strata_request_duration_seconds_count/ && /api="Produce"/')" \
      "$(metric "$m" '/^strata_request_duration_seconds_count/ && /api="Fetch"/')" \
      "$(metric "$m" '/^strata_topic_bytes_in_total/ && /omb/')"
  done
}
disk() { awk -v d="$DISK" '$3 == d {print $10, $13}' /proc/diskstats; } # sectors written, ms busy
c0=$(counts) d0=$(disk) t0=$(date +%s.%N)
perf_pid=
if [ -n "${PERF:-}" ]; then
  perf record -F 499 -g -o "$PERF" -p "${pids[0]}" -- sleep 8 > /dev/null 2>&1 &
  perf_pid=$!
fi
produce "$DUR" | grep -E 'throughput|p50'
[ -z "$perf_pid" ] || wait "$perf_pid"
c1=$(counts) d1=$(disk) t1=$(date +%s.%N)
echo "load $(cut -d' ' -f1-3 /proc/loadavg)"
paste -d' ' <(echo "$c0") <(echo "$c1") | awk -v wall="$(echo "$t1 - $t0" | bc)" -v d0="$d0" -v d1="$d1" '
  { cpu = ($11 - $2) / 100; mb = ($18 - $9) / 1e6; tcpu += cpu; tmb += mb
    printf "node %s: %.2f CPU s, led %.0f MB, switches %d voluntary %d involuntary, fsyncs %d, replica fetches sent %d, Produce %d, Fetch served %d\n",
      $1, cpu, mb, $12 - $3, $13 - $4, $14 - $5, $15 - $6, $16 - $7, $17 - $8
    fs += $14 - $5; rf += $15 - $6; pr += $16 - $7 }
  END { split(d0, a); split(d1, b)
    printf "all: %.1f s wall, %.2f CPU s, %.0f MB produced, %.2f CPU s per GB, per MB: %.2f fsyncs, %.3f replica fetches, %.3f Produce; disk %.0f MB written, busy %.0f%%\n",
      wall, tcpu, tmb, tcpu / tmb * 1000, fs / tmb, rf / tmb, pr / tmb, (b[1] - a[1]) * 512 / 1e6, (b[2] - a[2]) / wall / 10 }'
