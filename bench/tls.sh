#!/usr/bin/env bash
# Strata's listener security at four settings on this machine: PLAINTEXT, SSL
# (TLS), SASL_PLAINTEXT (SCRAM-SHA-512) and SASL_SSL (TLS and SCRAM-SHA-512),
# one fresh `strata server` each.
#
# For each setting, against that node:
#   1. strata bench produce: 1 KiB records, acks=all, for $DURATION;
#   2. strata bench consume: reads what 1. wrote (plaintext: sendfile(2);
#      TLS: read in large chunks, encrypted, the records of a response
#      written in few system calls);
#   3. strata bench connect: $CONNECTORS workers set up connections one after
#      another for $DURATION (dial, TLS handshake, SCRAM exchange, one
#      ApiVersions round trip), so connections/s is the setup rate.
#
# Each produce and consume run is charged the CPU seconds the node used during
# it (utime + stime from /proc) and those of the bench process (bash's time),
# per GB of record values: counts that depend far less on the machine's load
# than records/s. PIN_BROKER and PIN_CLIENT (taskset -c CPU lists, e.g. 0 and
# 1) pin the node and the bench to separate CPUs, to tell which side bounds a
# figure.
#
# A run that fails (the node does not start, a bench exits non-zero: records or
# connections failed) is reported and the script carries on, so every row is
# measured; it exits 1 at the end if any run failed. What a run says on stderr
# goes to bench/target/tls/<setting>-<mode>.err, its JSON result to
# <setting>-<mode>.json (its CPU seconds to <setting>-<mode>.cpu), and a
# summary table to stdout: the failed column sums
# the records and connections the runs counted as failed ("run failed" when a
# run gave no result). DURATION (default 20s) and CONNECTORS (default 4) are
# environment variables; about 4 x (2 x DURATION + the consume) in all: under
# 4 minutes at the defaults. Needs go, openssl and python3 on PATH (and
# taskset for the PIN_* variables).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
duration=${DURATION:-20s}
connectors=${CONNECTORS:-4}
pin_broker=() pin_client=()
if [ -n "${PIN_BROKER:-}" ]; then pin_broker=(taskset -c "$PIN_BROKER"); fi
if [ -n "${PIN_CLIENT:-}" ]; then pin_client=(taskset -c "$PIN_CLIENT"); fi
out="$root/bench/target/tls"
mkdir -p "$out"
go build -o bin/strata ./cmd/strata
work=$(mktemp -d)
pid=
cleanup() {
	if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
	rm -rf "$work"
}
trap cleanup EXIT

openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
	-subj "/CN=localhost" -addext "subjectAltName=IP:127.0.0.1,DNS:localhost" \
	-keyout "$work/key.pem" -out "$work/cert.pem" 2>/dev/null
tls_server=(--tls-cert-file "$work/cert.pem" --tls-key-file "$work/key.pem")
tls_client=(--tls-ca-file "$work/cert.pem")
sasl_server=(--sasl-mechanisms SCRAM-SHA-512 --add-scram 'SCRAM-SHA-512=[name=bench,password=bench-secret]')
sasl_client=(--sasl-mechanism SCRAM-SHA-512 --sasl-user bench)
export STRATA_SASL_PASSWORD=bench-secret

# free_port prints a port the kernel just handed out on 127.0.0.1.
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

settings=(plaintext ssl sasl_plaintext sasl_ssl)
modes=(produce consume connect)
failed=0

# cpu_seconds prints the user + system CPU seconds process $1 has used.
cpu_seconds() { python3 -c 'import os,sys; t=open(f"/proc/{sys.argv[1]}/stat").read().rsplit(")",1)[1].split(); print((int(t[11])+int(t[12]))/os.sysconf("SC_CLK_TCK"))' "$1"; }

# run_bench runs one bench mode, writing the node's and the bench's CPU
# seconds during it to <setting>-<mode>.cpu; a failure is reported, not fatal.
run_bench() {
	local setting=$1 mode=$2 rc=0 before client TIMEFORMAT='%U %S'
	shift 2
	before=$(cpu_seconds "$pid")
	client=$({ time "${pin_client[@]}" "${bench[@]}" "$mode" "$@" >"$out/$setting-$mode.json" 2>"$out/$setting-$mode.err"; } 2>&1) || rc=$?
	echo "$before $(cpu_seconds "$pid") $client" >"$out/$setting-$mode.cpu"
	if [ "$rc" -ne 0 ]; then
		echo "$setting $mode: failed (exit $rc): $(head -n 1 "$out/$setting-$mode.err")" >&2
		failed=1
	fi
}

echo "uptime before: $(uptime)${PIN_BROKER:+; node on CPUs $PIN_BROKER}${PIN_CLIENT:+, bench on CPUs $PIN_CLIENT}" >&2
for setting in "${settings[@]}"; do
	server=() client=()
	case $setting in
	ssl) server=("${tls_server[@]}") client=("${tls_client[@]}") ;;
	sasl_plaintext) server=("${sasl_server[@]}") client=("${sasl_client[@]}") ;;
	sasl_ssl) server=("${tls_server[@]}" "${sasl_server[@]}") client=("${tls_client[@]}" "${sasl_client[@]}") ;;
	esac
	for mode in "${modes[@]}"; do rm -f "$out/$setting-$mode.json" "$out/$setting-$mode.err" "$out/$setting-$mode.cpu"; done
	up=false
	# A port free when probed may be taken before the node binds it (other
	# processes on a shared machine): a node that exits for that is started
	# again on new ports, up to three times.
	for _ in 1 2 3; do
		kafka=127.0.0.1:$(free_port)
		"${pin_broker[@]}" bin/strata server --data-dir "$work/$setting" --kafka-addr "$kafka" --http-addr "127.0.0.1:$(free_port)" \
			--controller-addr "127.0.0.1:$(free_port)" "${server[@]}" >"$work/$setting.log" 2>&1 &
		pid=$!
		for _ in $(seq 1 120); do
			if bin/strata topic list --brokers "$kafka" --timeout 2s "${client[@]}" >/dev/null 2>&1; then
				up=true
				break
			fi
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.5
		done
		if $up || ! grep -q "address already in use" "$work/$setting.log"; then break; fi
		wait "$pid" 2>/dev/null || true
		echo "$setting: a port was taken before the node bound it; starting it again" >&2
	done
	if ! $up; then
		echo "$setting: the node did not answer; its log ends:" >&2
		tail -n 5 "$work/$setting.log" >&2 || true
		failed=1
	else
		bench=(bin/strata bench --brokers "$kafka" "${client[@]}" -o json)
		run_bench "$setting" produce --record-size 1024 --acks all --duration "$duration"
		run_bench "$setting" consume
		run_bench "$setting" connect --connectors "$connectors" --duration "$duration"
	fi
	kill "$pid" 2>/dev/null || true
	wait "$pid" 2>/dev/null || true
	pid=
done
echo "uptime after: $(uptime)" >&2

python3 - "$out" "${settings[@]}" <<'EOF'
import json, sys
out, settings = sys.argv[1], sys.argv[2:]
def load(s, m):
    try:
        with open(f"{out}/{s}-{m}.json") as f:
            return json.load(f)
    except (OSError, ValueError):
        return None
def cpu_per_gb(s, m, side):
    """The node's (side 0) or the bench's (side 1) CPU seconds per GB of values."""
    r = load(s, m)
    try:
        with open(f"{out}/{s}-{m}.cpu") as f:
            before, after, user, sys_ = map(float, f.read().split())
    except (OSError, ValueError):
        return None
    if r is None or not r.get("bytes"):
        return None
    return (after - before if side == 0 else user + sys_) / (r["bytes"] / 1e9)
def cell(r, width, prec, get):
    return f"{'run failed':>{width}}" if r is None else f"{get(r):>{width}.{prec}f}"
def cpu_cell(v, width):
    return f"{'-':>{width}}" if v is None else f"{v:>{width}.2f}"
print(f"{'setting':<15} {'produce rec/s':>14} {'consume rec/s':>14} {'connections/s':>14} {'connect p99 ms':>15}"
      f" {'CPU s/GB: produce node':>22} {'consume node':>12} {'consume bench':>13}  failed")
for s in settings:
    r = {m: load(s, m) for m in ("produce", "consume", "connect")}
    failed = [f"{m} run failed" if v is None else f"{v['failed']} {m}" for m, v in r.items() if v is None or v.get("failed", 0) > 0]
    print(f"{s:<15} {cell(r['produce'], 14, 0, lambda x: x['records_per_second'])} "
          f"{cell(r['consume'], 14, 0, lambda x: x['records_per_second'])} "
          f"{cell(r['connect'], 14, 1, lambda x: x['records_per_second'])} "
          f"{cell(r['connect'], 15, 2, lambda x: x['latency']['p99_ms'])} "
          f"{cpu_cell(cpu_per_gb(s, 'produce', 0), 22)} {cpu_cell(cpu_per_gb(s, 'consume', 0), 12)} "
          f"{cpu_cell(cpu_per_gb(s, 'consume', 1), 13)}  {', '.join(failed) or '-'}")
EOF
exit $failed
