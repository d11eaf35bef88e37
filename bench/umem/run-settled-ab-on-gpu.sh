#!/usr/bin/env bash
# Runs on the lent GPU machine: builds carried under build-umem/<v>/ compared on hits of get(), the last pass over
# resident data at a pool that holds the array, against the same read of GPU memory, and on what the change costs
# the first pass: u64 elements (Zipf, near-uniform, runs of 4 and 8, four at a time) over 1 and 8 GiB. ROUNDS rounds
# with the builds alternating. Each process allocates in the same order, so a build's hits compare with another's.
# usage: [ROUNDS=2] [TEST="v1 m1"] bench/umem/run-settled-ab-on-gpu.sh v0 v1   ($OUT: settled.tgz, machine.txt)
set -uo pipefail
. "$(dirname "$0")/gpu-machine-env.sh"
# shellcheck disable=SC2086
test_builds ${TEST:-}
shown='^\| (elements|runs[0-9]+) \| (device memory|umem default|GPU memory: frames of umem default)'
for r in $(seq "${ROUNDS:-2}"); do
    for v in "$@"; do
        sb=build-umem/$v/umem-sparse-bench
        shown_step "e1g-$v-$r" 120 "$shown" "$sb" --no-uvm --only elements --elem-gib 1 --elem-n 32M --pools 100 \
            --runs 1,4,8 --pages 4096
        shown_step "u1g-$v-$r" 120 "$shown" "$sb" --no-uvm --only elements --alpha 0.01 --elem-gib 1 --elem-n 32M \
            --pools 100 --runs 1 --pages 4096
        shown_step "s1g-$v-$r" 120 "$shown" "$sb" --no-uvm --only elements --elem-gib 1 --elem-n 4M --pools 100 \
            --runs 1,4,8 --pages 128,4096
        shown_step "e8g-$v-$r" 150 "$shown" "$sb" --no-uvm --only elements --elem-gib 8 --elem-n 64M --pools 100 \
            --runs 1,4 --pages 4096
        shown_step "g8g-$v-$r" 150 "$shown" "$sb" --no-uvm --only elements --elem-gib 8 --elem-n 64M --pools 100 \
            --runs 1 --pages 4096 --get4
    done
done
pack_out settled
