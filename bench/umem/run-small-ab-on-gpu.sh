#!/usr/bin/env bash
# Runs on the lent GPU machine: builds carried under build-umem/<v>/ compared on the small set of
# run-auto-on-gpu.sh (1 GiB: lookups of 256-byte rows, scatter, elements and runs; 64-byte and 1 KiB rows),
# the automatic page size against fixed ones in each process, ROUNDS rounds with the builds alternating;
# then umem-bench at 2 GiB once per build. Prints each process's "auto against the best fixed size" rows.
# usage: [ROUNDS=2] [TEST="v2"] bench/umem/run-small-ab-on-gpu.sh v1 v2   ($OUT: small.tgz, machine.txt)
set -uo pipefail
. "$(dirname "$0")/gpu-machine-env.sh"
# shellcheck disable=SC2086
test_builds ${TEST:-}
summary='^\| [a-z0-9]+ \| [0-9.]+% \| '
step() {  # name timeout command...
    local name=$1 t=$2
    shift 2
    timeout "$t" "$@" > "$out/$name.txt" 2>&1
    echo "== $name (rc=$?)"
    grep -E "$summary" "$out/$name.txt" | cut -c1-170
}
for r in $(seq "${ROUNDS:-2}"); do
    for v in "$@"; do
        sb=build-umem/$v/umem-sparse-bench
        step "sparse-$v-$r" 200 $sb --no-uvm --table-gib 1 --elem-gib 1 --batch 64K --batches 4 --elem-n 4M \
            --pools 100,25 --pages 128,256,1024,4096
        step "rows64-$v-$r" 60 $sb --no-uvm --only lookups --row 64 --alpha 1.2 --table-gib 1 --batch 64K --batches 4 \
            --pools 100,25 --pages 128,256,4096
        step "rows1k-$v-$r" 60 $sb --no-uvm --only lookups --row 1024 --alpha 0.8 --table-gib 1 --batch 64K \
            --batches 4 --pools 100,25 --pages 1024,4096
    done
done
for v in "$@"; do
    timeout 200 build-umem/$v/umem-bench --no-uvm --gib 2 --gathers 65536 --bfs-scale 20 --pools 100,50,25 \
        > "$out/umem-$v.txt" 2>&1
    echo "== umem-bench 2 GiB, $v (rc=$?)"
    grep -E '^\| ' "$out/umem-$v.txt" | grep -E 'auto|workload' | cut -c1-170 | head -30
done
tar czf /tmp/small.tgz -C "$out" --exclude machine.txt . && mv /tmp/small.tgz "$out/" &&
    find "$out" -maxdepth 1 -type f ! -name small.tgz ! -name machine.txt -delete
