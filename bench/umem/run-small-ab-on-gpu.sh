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
shown='^\| [a-z0-9]+ \| [0-9.]+% \| '
for r in $(seq "${ROUNDS:-2}"); do
    for v in "$@"; do
        sb=build-umem/$v/umem-sparse-bench
        shown_step "sparse-$v-$r" 200 "$shown" "$sb" --no-uvm --table-gib 1 --elem-gib 1 --batch 64K --batches 4 \
            --elem-n 4M --pools 100,25 --pages 128,256,1024,4096
        shown_step "rows64-$v-$r" 60 "$shown" "$sb" --no-uvm --only lookups --row 64 --alpha 1.2 --table-gib 1 \
            --batch 64K --batches 4 --pools 100,25 --pages 128,256,4096
        shown_step "rows1k-$v-$r" 60 "$shown" "$sb" --no-uvm --only lookups --row 1024 --alpha 0.8 --table-gib 1 \
            --batch 64K --batches 4 --pools 100,25 --pages 1024,4096
    done
done
for v in "$@"; do
    umem_bench_step "$v" 100,50,25 "auto|workload"
done
pack_out small
