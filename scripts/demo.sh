#!/usr/bin/env bash
# The main job: this machine's PCIe topology, then the peer-to-peer demo in the QEMU lab.
set -euo pipefail
build=${1:-build}
"$build/tools/bardrive" version
# This machine's PCIe topology first: tree, then the class matrix of its GPUs/NICs/NVMe (docs/topology.md).
echo "== PCIe topology of this machine (bardrive topo; without root, capabilities past 64 bytes are unknown)"
"$build/tools/bardrive" topo
"$build/tools/bardrive" topo --matrix --all
# The lab part: the basic machine (two igb NICs on one wire, a 64 MiB ivshmem window standing in for a
# GPU's BAR1). NIC A sends N frames; NIC B, driven by bardrive, receives them straight into the window;
# the guest prints packet rate and bandwidth and checks the bytes; then the host reads the window's
# backing file and compares it with what the guest said must be there (lab/lab: expect-window0@...).
echo "== Peer-to-peer receive into a BAR window, in the QEMU lab (lab/lab run basic; TCG, numbers are the emulator's)"
lab/lab run basic --bind all -- sh -c "set -e; \
  '$build/tools/bardrive' topo --matrix --all; \
  '$build/tools/bardrive' bind --list; \
  '$build/examples/p2p-rx' --count \${BARDRIVE_DEMO_FRAMES:-10000} --size 1024 --expect-dir \"\$BARDRIVE_LAB_OUT\""
