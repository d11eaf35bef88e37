#!/usr/bin/env bash
# Runs on the lent GPU machine: builds carried under build-umem/<v>/ compared on lone threads' element
# reads (get() of u64: single elements, runs of 4 and 8) from a cold start, the automatic page size
# against fixed ones in each process: 1 GiB (4M reads a batch) at full and 25% pools, 4 GiB (32M) at a
# full pool, near-uniform reads of 4 GiB; then umem-bench at 2 GiB (its BFS reads rows by lone threads).
# ROUNDS rounds with the builds alternating.
# usage: [ROUNDS=1] [TEST="v2"] [NO_UMEM_BENCH=1] bench/umem/run-elements-ab-on-gpu.sh v1 v2
#   ($OUT: elements.tgz, machine.txt)
set -uo pipefail
. "$(dirname "$0")/gpu-machine-env.sh"
# shellcheck disable=SC2086
test_builds ${TEST:-}
shown='^\| (elements|runs[0-9]+) \| '
for r in $(seq "${ROUNDS:-1}"); do
    for v in "$@"; do
        sb=build-umem/$v/umem-sparse-bench
        shown_step "e1g-$v-$r" 200 "$shown" "$sb" --no-uvm --only elements --elem-gib 1 --elem-n 4M \
            --pools 100,25 --runs 1,4,8 --pages 128,256,4096
        shown_step "e4g-$v-$r" 300 "$shown" "$sb" --no-uvm --only elements --elem-gib 4 --elem-n 32M \
            --pools 100 --runs 1,4,8 --pages 128,1024,4096
        shown_step "u4g-$v-$r" 200 "$shown" "$sb" --no-uvm --only elements --alpha 0.01 --elem-gib 4 \
            --elem-n 32M --pools 100 --runs 1 --pages 128,4096
    done
done
for v in $([ -n "${NO_UMEM_BENCH:-}" ] || echo "$@"); do
    umem_bench_step "$v" 100,25
done
pack_out elements
