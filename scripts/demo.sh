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
# umem paging through the NIC into the window, on the switch machine (igb A and the window below one PCIe
# switch): the topology ranks every NIC -> window pair and picks the best; 4 threads make random reads and
# writes through a pool a quarter of the array's size, each thread driving its own NIC queue pair, and
# check every value they read. Then the host checks what the guest says must be where: the frames still
# holding pages against the window's backing file (lab/lab), the store after flush() with cmp.
echo "== umem: an array paged into the window by NIC DMA that the faulting threads drive (lab/lab run switch)"
store_dir=$(mktemp -d)
trap 'rm -rf "$store_dir"' EXIT
lab/lab run switch --bind all --share "$store_dir" -- sh -c "set -e; \
  '$build/examples/umem-nic' --mib \${BARDRIVE_DEMO_UMEM_MIB:-8} --pool 25 --threads 4 --expect-dir \"\$BARDRIVE_LAB_OUT\" \
  --store-dir '$store_dir'"
if cmp -s "$store_dir/store.bin" "$store_dir/expect-store.bin"; then
    echo "host: the backing store ($(stat -c %s "$store_dir/store.bin") bytes) holds every write the guest made"
else
    echo "host: the backing store differs from what the guest says it must hold" >&2
    exit 1
fi
