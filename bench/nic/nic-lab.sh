#!/bin/sh
# One lab boot for bench/nic's comparisons: nic-vs-xdp (RX and TX alone against XDP, AF_XDP,
# xdp-trafficgen, pktgen), then nic-rss (RSS over 1, 2, 4 queues). Run from the project root:
#   lab/lab run basic --bind 0000:03:00.0 --timeout 900 -- bench/nic/nic-lab.sh build/bench/nic/nic-vs-xdp build/bench/nic/nic-rss
# FRAMES (default 10000 per row, 40000 per RSS run) may follow as a third and fourth argument.
vs_xdp=${1:?usage: nic-lab.sh NIC-VS-XDP NIC-RSS [FRAMES] [RSS-FRAMES]}
rss=${2:?usage: nic-lab.sh NIC-VS-XDP NIC-RSS [FRAMES] [RSS-FRAMES]}
echo "nic-lab: $(uname -r), $(nproc) CPUs, $(date -u +%Y-%m-%dT%H:%MZ)"
"$vs_xdp" "${3:-10000}"
a=$?
"$rss" "${4:-40000}"
b=$?
echo "nic-lab: nic-vs-xdp exit $a, nic-rss exit $b"
[ $a -eq 0 ] && [ $b -eq 0 ]
