#!/usr/bin/env bash
# Runs on the lent GPU machine: builds carried under build-umem/<v>/ (umem-sparse-bench, umem-bench, and
# gpu-umem for builds to test) compared on hits, resident reads against GPU memory in one process each:
# warp_acquire of 256-byte rows over 8 GiB and get() of u64 over 8 GiB, ROUNDS rounds with the builds
# alternating; then, once per build, the first kernels at 1 GiB (elements, runs, lookups, scatter) and
# umem-bench's gathers, scan, hot set and BFS at 2 GiB, to see what a change to the hit path costs the fills.
# usage: [ROUNDS=2] [TEST="v4"] bench/umem/run-hits-ab-on-gpu.sh v3 v4 [v5]   ($OUT: hits.tgz, machine.txt)
set -uo pipefail
. "$(dirname "$0")/gpu-machine-env.sh"
# shellcheck disable=SC2086
test_builds ${TEST:-}
rows='^\| (lookups|scatter|elements|runs[0-9]+) \| '
for r in $(seq "${ROUNDS:-2}"); do
    for v in "$@"; do
        sb=build-umem/$v/umem-sparse-bench
        timeout 120 $sb --no-uvm --only lookups --replay --table-gib 8 --batch 1M --batches 4 --pools 100,25 --pages 256 \
            > "$out/rows-$v-$r.txt" 2>&1
        echo "== hits, 256-byte rows of 8 GiB, $v, round $r (rc=$?)"
        grep -E "$rows" "$out/rows-$v-$r.txt" | cut -c1-150
        timeout 120 $sb --no-uvm --only elements --elem-gib 8 --elem-n 64M --pools 100 --runs 1 --pages 4096 \
            > "$out/elem-$v-$r.txt" 2>&1
        echo "== hits, u64 of 8 GiB, $v, round $r (rc=$?)"
        grep -E "$rows" "$out/elem-$v-$r.txt" | cut -c1-150
        timeout 120 $sb --no-uvm --only elements --elem-gib 8 --elem-n 64M --pools 100 --runs 1 --pages 4096 --get4 \
            > "$out/get4-$v-$r.txt" 2>&1
        echo "== hits, u64 of 8 GiB four at a time, $v, round $r (rc=$?)"
        grep -E "$rows" "$out/get4-$v-$r.txt" | cut -c1-150
    done
done
for v in "$@"; do
    timeout 200 build-umem/$v/umem-sparse-bench --no-uvm --table-gib 1 --elem-gib 1 --batch 64K --batches 4 --elem-n 4M \
        --pools 100,25 --runs 1,4 --pages 128,256,4096 > "$out/small-$v.txt" 2>&1
    echo "== 1 GiB, $v (rc=$?)"
    grep -E "$rows" "$out/small-$v.txt" | cut -c1-150
    umem_bench_step "$v" 100,25
done
pack_out hits
