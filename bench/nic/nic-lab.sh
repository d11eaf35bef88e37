#!/bin/sh
# One lab boot for bench/nic's comparisons on the basic preset's igb NICs: nic-vs-xdp (RX and TX alone against
# XDP, AF_XDP, xdp-trafficgen, pktgen) on NIC B, then on a VF of it (--vf: bardrive's igbvf against the kernel's
# igbvf), then nic-rss (RSS over 1, 2, 4 queues). Run from the project root:
#   lab/lab run basic --bind 0000:03:00.0 --timeout 1500 --count-instructions -- bench/nic/nic-lab.sh build/bench/nic/nic-vs-xdp build/bench/nic/nic-rss
# (--count-instructions adds guest instructions per frame: nic-vs-xdp's columns, nic-rss's counted rows; without it they say "-" or are left out).
# FRAMES (default 10000 per row) and RSS-FRAMES (default 40000 per queue count) may follow.
# Exit: 0 when all pass, 77 when one could not run and nothing failed, 1 otherwise.
usage="usage: nic-lab.sh NIC-VS-XDP NIC-RSS [FRAMES] [RSS-FRAMES]"
vs_xdp=${1:?$usage}
rss=${2:?$usage}
echo "nic-lab: $(uname -r), $(nproc) CPUs, $(date -u +%Y-%m-%dT%H:%MZ)"
"$vs_xdp" "${3:-10000}"
a=$?
"$vs_xdp" --vf "${3:-10000}"
v=$?
"$rss" "${4:-40000}"
b=$?
echo "nic-lab: nic-vs-xdp exit $a, nic-vs-xdp --vf exit $v, nic-rss exit $b"
for rc in $a $v $b; do
    [ "$rc" -eq 0 ] || [ "$rc" -eq 77 ] || exit 1
done
[ "$a" -eq 0 ] && [ "$v" -eq 0 ] && [ "$b" -eq 0 ] && exit 0
exit 77
