#!/usr/bin/env bash
# Runs on the lent GPU machine: builds carried under build-umem/<v>/ compared where pools are smaller than the
# array (and at full pools, for what the profile's notes cost): BFS over 2 and 8 GiB at 100/50/25% (ROUNDS rounds,
# builds alternating), then once per build the 1 GiB and 4 GiB umem-sparse-bench sets and umem-bench at 2 GiB.
# Prints each process's "auto against the best fixed size" rows.
# usage: [ROUNDS=2] [TEST="v2"] bench/umem/run-stays-ab-on-gpu.sh v1 v2   ($OUT: stays.tgz, machine.txt)
set -uo pipefail
. "$(dirname "$0")/gpu-machine-env.sh"
# shellcheck disable=SC2086
test_builds ${TEST:-}
shown='^\| ([a-z0-9]+ \| [0-9.]+% \||bfs \| 2 \| [0-9]+% \|)'
for r in $(seq "${ROUNDS:-2}"); do
    for v in "$@"; do
        for s in 20 22; do
            shown_step "bfs$s-$v-$r" 120 "$shown" "build-umem/$v/umem-bench" --no-uvm --gib 1 --only bfs --bfs-scale "$s" \
                --pools 100,50,25
        done
    done
done
for v in "$@"; do
    sb=build-umem/$v/umem-sparse-bench
    shown_step "sparse-$v" 200 "$shown" "$sb" --no-uvm --table-gib 1 --elem-gib 1 --batch 64K --batches 4 \
        --elem-n 4M --pools 100,25
    shown_step "sparse-large-$v" 300 "$shown" "$sb" --no-uvm --table-gib 4 --elem-gib 4 --batch 256K --batches 4 \
        --elem-n 32M --pools 100,25,6.25
    umem_bench_step "$v" 100,50,25 "auto|workload"
done
pack_out stays
