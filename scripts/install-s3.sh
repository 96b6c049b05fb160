#!/usr/bin/env bash
# Installs an S3-compatible server for the tiered-storage tests: moto's server
# (PyPI package "moto", extra "server"; command moto_server), which
# internal/remote's TestS3Conformance and internal/clustertest's TestTieredStorage
# start on a loopback port. Safe to run again: it does nothing when the pinned
# version is already there.
set -euo pipefail
want=5.2.5
if command -v moto_server >/dev/null 2>&1 && python3 -c "import moto, sys; sys.exit(moto.__version__ != '$want')" 2>/dev/null; then
  echo "install-s3: moto $want already installed"
  exit 0
fi
python3 -m pip install --quiet "moto[server]==$want"
command -v moto_server >/dev/null
echo "install-s3: installed moto $want (moto_server)"
