#!/bin/sh
# Instructions per packet of bardrive's igb data path (Igb::tx_burst + Igb::rx_burst and what they call),
# by callgrind, in the lab with both NICs bound, called directly (nic::Igb) and through nic::Port:
#   lab/lab run basic --bind all --timeout 1800 -- sh bench/nic/igb-cost.sh build/bench/nic/igb-cost [FRAMES] [BATCHES]
# igb-cost dumps callgrind's counts after the traffic, after 1000 polls of an idle ring (the empty polls
# seen during the traffic are charged at the idle poll's cost and taken out), and after 1000 rounds of an
# rx_burst and an empty tx_burst counted without the driver's functions (call_probe()). The interface's
# cost per burst is that third count through nic::Port minus the same direct, over 2000 bursts: no
# timing, no empty-poll noise.
set -eu
bin=$1
frames=${2:-5000}
batches=${3:-"1 8 32 64"}
out=$(mktemp -d)
incl() {  # inclusive Ir of a function in a callgrind dump, 0 when absent
    callgrind_annotate --inclusive=yes --threshold=100 "$1" 2>/dev/null |
        awk -v f="$2" 'index($0, f) { gsub(",", "", $1); print $1; found = 1; exit } END { if (!found) print 0 }'
}
run() {  # run BATCH MODE: prints "LINE|TX|RX|IDLE_RX|PROBE"
    rm -f "$out"/cg.out*
    line=$(valgrind --tool=callgrind --collect-atstart=no --toggle-collect='*Igb::rx_burst*' \
        --toggle-collect='*Igb::tx_burst*' --callgrind-out-file="$out/cg.out" \
        "$bin" "$frames" 60 "$1" "$2" 2>"$out/vg.log" | grep '^igb-cost:') || { cat "$out/vg.log" >&2; exit 1; }
    echo "$line" >&2
    echo "$line|$(incl "$out/cg.out.1" 'Igb::tx_burst')|$(incl "$out/cg.out.1" 'Igb::rx_burst')|$(incl "$out/cg.out.2" 'Igb::rx_burst')|$(awk '/^(summary|totals):/ { print $2; exit }' "$out/cg.out.3")"
}
echo "| batch | calls | TX Ir/pkt | RX Ir/pkt (empty polls out) | TX + RX Ir/pkt | empty polls | Ir per empty poll | TX + RX Ir/pkt with empty polls | interface Ir per burst | interface Ir/pkt (bursts that moved frames) | TX doorbells | RX doorbells |"
echo "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
for b in $batches; do
    direct=$(run "$b" direct)
    port=$(run "$b" port)
    probe_direct=${direct##*|}
    for r in "$direct" "$port"; do
        echo "$r" | awk -F'|' -v b="$b" -v pd="$probe_direct" '{
            split($1, w, " ")
            for (i = 2; i < length(w); i += 2) v[w[i]] = w[i + 1]
            tx = $2; rx = $3; idle = $4; probe = $5
            n = v["received"]; e = v["empty_polls"]; per = idle / v["idle_polls"]
            rxp = (rx - e * per) / n
            iface = (probe - pd) / (2 * v["idle_polls"])            # per burst, against the direct calls
            bursts = v["rx_polls"] - e + v["tx_bursts"]
            printf "| %d | %s | %.1f | %.1f | %.1f | %d | %.1f | %.1f | %.2f | %.3f | %d | %d |\n", b, v["mode"], tx / n,
                rxp, tx / n + rxp, e, per, (tx + rx) / n, iface, iface * bursts / n, v["tx_doorbells"], v["rx_doorbells"]
        }'
    done
done
rm -rf "$out"
