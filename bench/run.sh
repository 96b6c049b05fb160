#!/usr/bin/env bash
# Strata vs Apache Kafka on this machine (`make bench-kafka`).
#
# 1. Resolves Kafka's broker and tools jars from Maven Central with bench/pom.xml
#    into bench/target/kafka-jars (cached: delete the directory to re-resolve).
# 2. Builds bin/strata.
# 3. Runs bench/compare, which starts both brokers on loopback, alternates the
#    workloads between them and prints the Markdown report (also written to
#    bench/target/report.md, every sample to bench/target/report.json).
#
# Extra arguments go to bench/compare (e.g. -rounds 7 -duration 5s, or -nodes 3);
# `make bench-kafka BENCH_ARGS="-nodes 3"` passes them. Needs java 17+, mvn and go
# on PATH.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
jars="$root/bench/target/kafka-jars"
if [ ! -f "$jars/.complete" ]; then
	rm -rf "$jars"
	mvn -q -B -f bench/pom.xml dependency:copy-dependencies \
		-DincludeScope=runtime -DoutputDirectory="$jars"
	touch "$jars/.complete"
fi
go build -o bin/strata ./cmd/strata
go build -o bench/target/compare ./bench/compare
echo "uptime before: $(uptime)" >&2
bench/target/compare -strata bin/strata -kafka-jars "$jars" \
	-out bench/target/report.md -json bench/target/report.json "$@"
echo "uptime after: $(uptime)" >&2
