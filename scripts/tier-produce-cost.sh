#!/bin/bash
# What uploads cost produce, in counts that do not depend on the machine's load
# (docs/benchmarks.md, "Tiered produce: links instead of copies").
#
# Usage: scripts/tier-produce-cost.sh STRATA-BINARY LABEL
#
# Starts one node with a file:// store on the same disk (uploads every 1 s,
# cleaner every 5 s), then produces 100,000 records of 1 KiB with acks=all to a
# plain topic and then to a tiered one (1 MiB segments, 8 MiB local retention),
# each followed by 7 s for uploads and retention. Per phase it prints the
# broker's write_bytes (/proc/PID/io) and CPU seconds, and, unless STRACE=0,
# its syscall counts (strace -f -c: fsync, rename, link, copy_file_range, ...).
# strace slows the broker: take CPU from a run with STRACE=0. Work files go to
# ${WORK:-/tmp/tier-produce-cost}/run-LABEL. STORE=URL uploads there instead
# (an s3:// URL, AWS_* credentials in the environment); the broker's read_bytes
# and rchar then show what the uploads read back.
set -u
BIN=$1; LABEL=$2; W=${WORK:-/tmp/tier-produce-cost}/run-$LABEL; rm -rf $W; mkdir -p $W
STORE=${STORE:-file://$W/remote}
PORT=$((19000 + RANDOM % 1000)); HTTP=$((PORT+1000))
$BIN server --data-dir $W/data --remote-storage $STORE --remote-upload-interval 1s --log-cleanup-interval 5s \
  --kafka-addr 127.0.0.1:$PORT --http-addr 127.0.0.1:$HTTP --controller-addr 127.0.0.1:$((PORT+2000)) >$W/server.log 2>&1 &
SPID=$!
for i in $(seq 100); do $BIN --brokers 127.0.0.1:$PORT topic list >/dev/null 2>&1 && break; sleep 0.3; done
snap() { # the broker's write_bytes, CPU ticks, read_bytes and rchar
  local io=$(awk '/^write_bytes/{print $2}' /proc/$SPID/io)
  local cpu=$(awk "{print \$14+\$15}" /proc/$SPID/stat)
  local rd=$(awk '/^read_bytes/{print $2}' /proc/$SPID/io) rc=$(awk '/^rchar/{print $2}' /proc/$SPID/io)
  echo "$io $cpu $rd $rc"
}
phase() { # name, topic, extra configs...
  local name=$1 topic=$2; shift 2
  $BIN --brokers 127.0.0.1:$PORT topic create $topic -p 1 -r 1 -c segment.bytes=1048576 "$@" >/dev/null
  read io0 cpu0 rd0 rc0 < <(snap)
  [ "${STRACE:-1}" = 1 ] && { timeout 60 strace -f -c -e trace=fsync,fdatasync,syncfs,rename,renameat,renameat2,openat,link,linkat,copy_file_range,pwrite64,write -p $SPID -o $W/strace-$name.txt 2>/dev/null &
  ST=$!; sleep 1; }
  $BIN --brokers 127.0.0.1:$PORT bench produce -t $topic -s 1024 -n 100000 > $W/bench-$name.txt 2>&1
  sleep 7
  read io1 cpu1 rd1 rc1 < <(snap)
  [ "${STRACE:-1}" = 1 ] && { kill -INT $ST; wait $ST 2>/dev/null; }
  local hz=$(getconf CLK_TCK)
  echo "$LABEL $name write_bytes=$((io1-io0)) read_bytes=$((rd1-rd0)) rchar=$((rc1-rc0)) cpu_s=$(python3 -c "print(($cpu1-$cpu0)/$hz)")"
  awk -v n=$name '$NF ~ /^(fsync|fdatasync|syncfs|rename|renameat|openat|link|linkat|copy_file_range|pwrite64|write)$/ {print "  " n, $NF, $4}' $W/strace-$name.txt
  grep -E "records/s|MiB/s" $W/bench-$name.txt | head -2 | sed 's/^/  /'
}
phase plain plain1
phase tiered tiered1 -c remote.storage.enable=true -c local.retention.bytes=8388608
kill $SPID; wait $SPID 2>/dev/null
du -sh $W/data; [ -d $W/remote ] && du -sh $W/remote
