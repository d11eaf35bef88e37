#!/bin/sh
# Instructions per packet of bardrive's igb data path (Igb::tx_burst + Igb::rx_burst and what they call),
# by callgrind, in the lab with both NICs bound:
#   lab/lab run basic --bind all --timeout 1200 -- sh bench/nic/igb-cost.sh build/bench/nic/igb-cost [FRAMES] [BATCHES]
# igb-cost dumps callgrind's counts after the traffic and again after 1000 polls of an idle ring; the
# empty polls seen during the traffic are charged at the idle poll's cost and taken out.
set -eu
bin=$1
frames=${2:-5000}
batches=${3:-"1 8 32 64"}
out=$(mktemp -d)
incl() {  # inclusive Ir of a function in a callgrind dump, 0 when absent
    callgrind_annotate --inclusive=yes --threshold=100 "$1" 2>/dev/null |
        awk -v f="$2" 'index($0, f) { gsub(",", "", $1); print $1; found = 1; exit } END { if (!found) print 0 }'
}
echo "| batch | TX Ir/pkt | RX Ir/pkt (empty polls out) | TX + RX Ir/pkt | empty polls | Ir per empty poll | TX + RX Ir/pkt with empty polls | TX doorbells | RX doorbells |"
echo "|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
for b in $batches; do
    rm -f "$out"/cg.out*
    line=$(valgrind --tool=callgrind --collect-atstart=no --toggle-collect='*Igb::rx_burst*' \
        --toggle-collect='*Igb::tx_burst*' --callgrind-out-file="$out/cg.out" "$bin" "$frames" 60 "$b" 2>"$out/vg.log" |
        grep '^igb-cost:') || { cat "$out/vg.log" >&2; exit 1; }
    echo "$line" >&2
    tx=$(incl "$out/cg.out.1" 'Igb::tx_burst')
    rx=$(incl "$out/cg.out.1" 'Igb::rx_burst')
    idle=$(incl "$out/cg.out.2" 'Igb::rx_burst')
    echo "$line" | awk -v tx="$tx" -v rx="$rx" -v idle="$idle" -v b="$b" '{
        for (i = 2; i < NF; i += 2) v[$i] = $(i + 1)
        n = v["received"]; e = v["empty_polls"]; per = idle / v["idle_polls"]
        rxp = (rx - e * per) / n
        printf "| %d | %.1f | %.1f | %.1f | %d | %.1f | %.1f | %d | %d |\n", b, tx / n, rxp, tx / n + rxp, e, per,
            (tx + rx) / n, v["tx_doorbells"], v["rx_doorbells"]
    }'
done
rm -rf "$out"
