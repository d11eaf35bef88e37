#!/usr/bin/env bash
# The main job: this machine's PCIe topology, then the peer-to-peer demo in the QEMU lab.
set -euo pipefail
build=${1:-build}
"$build/tools/bardrive" version
