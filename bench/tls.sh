#!/usr/bin/env bash
# Strata's listener security at three settings on this machine: PLAINTEXT, SSL
# (TLS) and SASL_SSL (TLS and SCRAM-SHA-512), one fresh `strata server` each.
#
# For each setting, against that node:
#   1. strata bench produce: 1 KiB records, acks=all, for $DURATION;
#   2. strata bench consume: reads what 1. wrote (plaintext: sendfile(2);
#      TLS: read into the connection's buffer and encrypted);
#   3. strata bench connect: $CONNECTORS workers set up connections one after
#      another for $DURATION (dial, TLS handshake, SCRAM exchange, one
#      ApiVersions round trip), so connections/s is the setup rate.
#
# Results (one JSON document per run) go to bench/target/tls/<setting>-<mode>.json,
# and a summary table to stdout. DURATION (default 20s) and CONNECTORS (default 4)
# are environment variables; about 3 x (2 x DURATION + the consume) in all: under
# 3 minutes at the defaults. Needs go, openssl and python3 on PATH.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
duration=${DURATION:-20s}
connectors=${CONNECTORS:-4}
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

echo "uptime before: $(uptime)" >&2
for setting in plaintext ssl sasl_ssl; do
	server=() client=()
	case $setting in
	ssl) server=("${tls_server[@]}") client=("${tls_client[@]}") ;;
	sasl_ssl) server=("${tls_server[@]}" "${sasl_server[@]}") client=("${tls_client[@]}" "${sasl_client[@]}") ;;
	esac
	kafka=127.0.0.1:$(free_port)
	bin/strata server --data-dir "$work/$setting" --kafka-addr "$kafka" --http-addr "127.0.0.1:$(free_port)" \
		--controller-addr "127.0.0.1:$(free_port)" "${server[@]}" >"$work/$setting.log" 2>&1 &
	pid=$!
	for _ in $(seq 1 120); do
		bin/strata topic list --brokers "$kafka" --timeout 2s "${client[@]}" >/dev/null 2>&1 && break
		sleep 0.5
	done
	bench=(bin/strata bench --brokers "$kafka" "${client[@]}" -o json)
	"${bench[@]}" produce --record-size 1024 --acks all --duration "$duration" >"$out/$setting-produce.json"
	"${bench[@]}" consume >"$out/$setting-consume.json"
	"${bench[@]}" connect --connectors "$connectors" --duration "$duration" >"$out/$setting-connect.json"
	kill "$pid"
	wait "$pid" 2>/dev/null || true
	pid=
done
echo "uptime after: $(uptime)" >&2

printf '%-10s %16s %16s %18s %16s\n' setting "produce rec/s" "consume rec/s" "connections/s" "connect p99 ms"
for setting in plaintext ssl sasl_ssl; do
	python3 - "$out" "$setting" <<'EOF'
import json, sys
out, s = sys.argv[1], sys.argv[2]
r = {m: json.load(open(f"{out}/{s}-{m}.json")) for m in ("produce", "consume", "connect")}
print(f"{s:<10} {r['produce']['records_per_second']:16.0f} {r['consume']['records_per_second']:16.0f} "
      f"{r['connect']['records_per_second']:18.1f} {r['connect']['latency']['p99_ms']:16.2f}")
EOF
done
