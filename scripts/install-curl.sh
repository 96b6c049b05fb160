#!/usr/bin/env bash
# Installs curl (Debian package "curl"): internal/httpapi's TestReadmeWalkthrough runs
# the README's HTTP walkthrough with it. Safe to run again: it does nothing when curl
# is already there. Needs root (CI and the dev machines run as root).
set -euo pipefail
if command -v curl >/dev/null 2>&1; then
  echo "install-curl: $(curl --version | sed -n 1p) already installed"
  exit 0
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends curl ca-certificates >/dev/null
echo "install-curl: installed $(curl --version | sed -n 1p)"
