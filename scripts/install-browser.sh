#!/usr/bin/env bash
# Installs headless Chromium (Debian package "chromium") for the console's browser
# tests in internal/console. Safe to run again: it does nothing when the browser is
# already there. Needs root (CI and the dev machines run as root).
set -euo pipefail
if command -v chromium >/dev/null 2>&1; then
  echo "install-browser: $(chromium --version 2>/dev/null || echo chromium) already installed"
  exit 0
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core >/dev/null
echo "install-browser: installed $(chromium --version 2>/dev/null || echo chromium)"
