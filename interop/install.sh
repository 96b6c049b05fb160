#!/usr/bin/env bash
# Installs everything the real-client interop suite (interop/) needs on a fresh Debian
# machine, as root, without prompts. Safe to run again: each step is skipped when its
# result is already in place.
#
#   kcat            Debian package (apt-get)
#   confluent-kafka interop/python/.venv, from interop/python/requirements.txt (PyPI)
#   kafkajs         interop/node/node_modules, from package-lock.json (npm ci)
#   kafka-clients   interop/java/target/{classes,dependency} (Maven Central)
#   kafka-tools     interop/kafkatools/target/jars: Kafka's own command-line tools (Maven Central)
#   kafka-streams   interop/streams/target/{classes,dependency}: a Kafka Streams application (Maven Central)
#   kafka-connect   interop/connect/target/jars: Kafka Connect and MirrorMaker 2 (Maven Central)
#
# Java 17+, Maven 3.8+, Python 3.11 and Node 20 are expected on the machine already.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
export DEBIAN_FRONTEND=noninteractive

log() { printf 'interop/install.sh: %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

for tool in python3 node npm java mvn; do
	command -v "$tool" >/dev/null 2>&1 || die "$tool is not installed; the interop suite needs it"
done

# apt-get update runs at most once per invocation, and only when something is missing.
apt_updated=0
apt_install() {
	if [ "$apt_updated" = 0 ]; then
		apt-get update -qq
		apt_updated=1
	fi
	apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

# 1. kcat.
if ! command -v kcat >/dev/null 2>&1; then
	log "installing kcat"
	apt_install kcat
fi

# 2. confluent-kafka in a private virtualenv, reinstalled only when requirements change.
py_dir="$here/python"
venv="$py_dir/.venv"
stamp="$venv/.requirements.sha256"
want="$(sha256sum "$py_dir/requirements.txt" | cut -d' ' -f1)"
if [ ! -x "$venv/bin/python" ] || [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
	log "installing Python requirements into $venv"
	if ! python3 -m venv "$venv" 2>/dev/null; then
		apt_install python3-venv
		rm -rf "$venv"
		python3 -m venv "$venv"
	fi
	"$venv/bin/python" -m pip install -q --disable-pip-version-check -r "$py_dir/requirements.txt"
	echo "$want" >"$stamp"
fi

# 3. kafkajs, exactly as locked.
node_dir="$here/node"
if [ ! -f "$node_dir/node_modules/kafkajs/package.json" ] ||
	[ "$node_dir/package-lock.json" -nt "$node_dir/node_modules/.package-lock.json" ]; then
	log "installing Node packages (npm ci)"
	(cd "$node_dir" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error >/dev/null)
fi

# 4. The Java program and its runtime class path (target/classes + target/dependency/*.jar).
java_dir="$here/java"
if [ ! -d "$java_dir/target/dependency" ] || [ ! -d "$java_dir/target/classes/io" ] ||
	[ -n "$(find "$java_dir/pom.xml" "$java_dir/src" -newer "$java_dir/target/.built" 2>/dev/null | head -n1)" ] ||
	[ ! -f "$java_dir/target/.built" ]; then
	log "building the Java client (mvn)"
	(cd "$java_dir" && mvn -q -B -Dstyle.color=never compile dependency:copy-dependencies)
	touch "$java_dir/target/.built"
fi

# resolve_jars DIR WHAT copies the dependencies of DIR/pom.xml (resolved from Maven
# Central, nothing built) into DIR/target/jars, unless done since pom.xml last changed.
resolve_jars() {
	local dir="$1" what="$2"
	if [ ! -f "$dir/target/.resolved" ] || [ "$dir/pom.xml" -nt "$dir/target/.resolved" ]; then
		log "resolving $what (mvn)"
		rm -rf "$dir/target/jars"
		(cd "$dir" && mvn -q -B -Dstyle.color=never dependency:copy-dependencies -DoutputDirectory=target/jars)
		touch "$dir/target/.resolved"
	fi
}

# 5. Kafka's command-line tools (kafka-topics, kafka-configs, ...).
tools_dir="$here/kafkatools"
resolve_jars "$tools_dir" "Kafka's command-line tools"

# 6. The Kafka Streams application (interop/streams).
streams_dir="$here/streams"
if [ ! -f "$streams_dir/target/.built" ] ||
	[ -n "$(find "$streams_dir/pom.xml" "$streams_dir/src" -newer "$streams_dir/target/.built" 2>/dev/null | head -n1)" ]; then
	log "building the Kafka Streams application (mvn)"
	(cd "$streams_dir" && mvn -q -B -Dstyle.color=never compile dependency:copy-dependencies)
	touch "$streams_dir/target/.built"
fi

# 7. Kafka Connect with its file and MirrorMaker 2 connectors.
connect_dir="$here/connect"
resolve_jars "$connect_dir" "Kafka Connect and MirrorMaker 2"

log "ready: kcat $(kcat -V 2>/dev/null | sed -n 's/^Version \([^ ]*\).*/\1/p'), \
confluent-kafka $("$venv/bin/python" -c 'import confluent_kafka as c; print(c.__version__)'), \
kafkajs $(node -p "require('$node_dir/node_modules/kafkajs/package.json').version"), \
kafka-clients $(ls "$java_dir/target/dependency" | sed -n 's/^kafka-clients-\(.*\)\.jar$/\1/p'), \
kafka-tools $(ls "$tools_dir/target/jars" | sed -n 's/^kafka-tools-\([0-9.]*\)\.jar$/\1/p'), \
kafka-streams $(ls "$streams_dir/target/dependency" | sed -n 's/^kafka-streams-\([0-9.]*\)\.jar$/\1/p'), \
kafka-connect $(ls "$connect_dir/target/jars" | sed -n 's/^connect-runtime-\([0-9.]*\)\.jar$/\1/p')"
