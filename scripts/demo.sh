#!/usr/bin/env bash
# The main job: this machine's PCIe topology, then the peer-to-peer demo in the QEMU lab.
set -euo pipefail
build=${1:-build}
"$build/tools/bardrive" version
# This machine's PCIe topology first: tree, then the class matrix of its GPUs/NICs/NVMe (docs/topology.md).
echo "== PCIe topology of this machine (bardrive topo; without root, capabilities past 64 bytes are unknown)"
"$build/tools/bardrive" topo
"$build/tools/bardrive" topo --matrix --all
