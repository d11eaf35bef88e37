#!/usr/bin/env bash
# Runs on the lent GPU machine: builds carried under build-umem/<v>/ (umem-sparse-bench, umem-bench; gpu-umem for
# TEST builds) compared on warp_acquire a row a warp: resident 256-byte rows of 8 GiB at p256 and auto, ROUNDS
# rounds with the builds alternating; then, once per build, the first batches of 1 GiB lookups and scatter (the
# miss path) and umem-bench's gathers, scan, hot set and BFS at 2 GiB.
# usage: [ROUNDS=2] [TEST="v4"] bench/umem/run-row-hits-ab-on-gpu.sh v3 v4 [v5 ...]   ($OUT: rowhits.tgz, machine.txt)
set -uo pipefail
. "$(dirname "$0")/gpu-machine-env.sh"
# shellcheck disable=SC2086
test_builds ${TEST:-}
rows='^\| (lookups|scatter) \| '
for r in $(seq "${ROUNDS:-2}"); do
    for v in "$@"; do
        shown_step "rows-$v-$r" 120 "$rows" "build-umem/$v/umem-sparse-bench" --no-uvm --only lookups --replay \
            --table-gib 8 --batch 1M --batches 3 --pools 100,25 --pages 256
    done
done
for v in "$@"; do
    shown_step "small-$v" 200 "$rows" "build-umem/$v/umem-sparse-bench" --no-uvm --only lookups,scatter --table-gib 1 \
        --batch 64K --batches 4 --pools 100,25 --pages 256,4096
    umem_bench_step "$v" 100,25
done
pack_out rowhits
