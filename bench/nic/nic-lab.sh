#!/bin/sh
# One lab boot for bench/nic's comparisons: nic-vs-xdp (RX and TX alone against XDP, AF_XDP,
# xdp-trafficgen, pktgen), then nic-rss (RSS over 1, 2, 4 queues). Run from the project root:
#   lab/lab run basic --bind 0000:03:00.0 --timeout 900 --count-instructions -- bench/nic/nic-lab.sh build/bench/nic/nic-vs-xdp build/bench/nic/nic-rss
# (--count-instructions adds nic-vs-xdp's guest instructions per frame; without it those columns say "-").
# FRAMES (default 10000 per row) and RSS-FRAMES (default 40000 per queue count) may follow.
# Exit: 0 when both pass, 77 when one could not run and nothing failed, 1 otherwise.
usage="usage: nic-lab.sh NIC-VS-XDP NIC-RSS [FRAMES] [RSS-FRAMES]"
vs_xdp=${1:?$usage}
rss=${2:?$usage}
echo "nic-lab: $(uname -r), $(nproc) CPUs, $(date -u +%Y-%m-%dT%H:%MZ)"
"$vs_xdp" "${3:-10000}"
a=$?
"$rss" "${4:-40000}"
b=$?
echo "nic-lab: nic-vs-xdp exit $a, nic-rss exit $b"
for rc in $a $b; do
    [ "$rc" -eq 0 ] || [ "$rc" -eq 77 ] || exit 1
done
[ "$a" -eq 0 ] && [ "$b" -eq 0 ] && exit 0
exit 77
