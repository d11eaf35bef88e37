#!/usr/bin/env bash
# Runs on the lent GPU machine: what a fill costs by its size and the array's, and lone threads' first fills under the
# automatic page size against every fixed size, for builds carried under build-umem/<v>/ (umem-sparse-bench): Zipf
# and near-uniform u64 reads, single and in runs of 4, at a pool that holds the array, over 1 GiB (1M, 4M and 32M reads
# a pass), 2 GiB (8M, 16M) and 4 GiB (8M, 32M). Prints each process's "auto against the best fixed size" rows, then
# ns a fill for each fixed page size and array size (a first pass over its fills: at such a pool nothing else is
# slow), the range over every stream. umem::lone_fill_shift_for's and lone_rest_blocks_for's sizes rest on this table
# and on a sweep of them (bench/results/umem-h200-2026-11-28b.md, its patch of knobs): rerun both on another machine
# to check them. ROUNDS rounds with the builds alternating.
# usage: [ROUNDS=1] bench/umem/run-lone-fills-on-gpu.sh v1 [v2 ...]   ($OUT: lone-fills.tgz, machine.txt)
set -uo pipefail
. "$(dirname "$0")/gpu-machine-env.sh"
shown='^\| (elements|runs[0-9]+) \| [0-9.]+% \| [0-9.]+ /'
streams="1:1M:0.99 1:4M:0.99 1:32M:0.99 1:1M:0.01 1:4M:0.01 1:32M:0.01 2:8M:0.99 2:16M:0.01 4:8M:0.99 4:32M:0.01"
for r in $(seq "${ROUNDS:-1}"); do
    for v in "$@"; do
        for s in $streams; do
            IFS=: read -r gib n alpha <<< "$s"
            name="$v-$r-${gib}g-$n-$alpha"
            shown_step "$name" 300 "$shown" "build-umem/$v/umem-sparse-bench" --detail "$out/d-$name.md" --no-uvm \
                --only elements --alpha "$alpha" --elem-gib "$gib" --elem-n "$n" --pools 100 --runs 1,4 \
                --pages 128,256,512,1024,2048,4096
            grep -o 'lone fills [0-9]*' "$out/$name.txt" | sort -u
        done
    done
done
echo
echo "ns a fill, first pass over its fills, at a pool that holds the array (every stream above):"
for f in "$out"/d-*.md; do
    gib=$(basename "$f" | sed -E 's/^d-.*-([0-9]+)g-.*/\1/')
    awk -v gib="$gib" '/^### .*umem adaptive p[0-9]+, pool 100%/ { split($0, a, "adaptive p"); split(a[2], b, ","); p = b[1] }
        /^\| 1 \|/ && p != "" { split($0, c, "|"); if (match($0, /fills [0-9]+/)) {
            fills = substr($0, RSTART + 6, RLENGTH - 6); if (fills > 0) printf "%s %s %.1f\n", gib, p, c[3] * 1e6 / fills }
            p = "" }' "$f"
done | sort -k1,1n -k2,2n | awk '{ k = $1 " GiB, p" $2; if (!(k in lo) || $3 < lo[k]) lo[k] = $3; if ($3 > hi[k]) hi[k] = $3;
        if (!(k in seen)) { seen[k] = 1; order[++n] = k } }
    END { for (i = 1; i <= n; ++i) printf "  %-16s %6.1f - %6.1f ns\n", order[i], lo[order[i]], hi[order[i]] }'
pack_out lone-fills
