#!/usr/bin/env bash
# Runs on the lent GPU machine: builds carried under build-umem/<v>/ compared on lone threads' element
# reads (get() of u64: single elements, runs of 4 and 8) from a cold start, the automatic page size
# against fixed ones in each process: 1 GiB (4M reads a batch) at full and 25% pools, 4 GiB (32M) at a
# full pool, near-uniform reads of 4 GiB; then umem-bench at 2 GiB (its BFS reads rows by lone threads).
# ROUNDS rounds with the builds alternating.
# usage: [ROUNDS=1] [TEST="v2"] [NO_UMEM_BENCH=1] bench/umem/run-elements-ab-on-gpu.sh v1 v2   ($OUT: elements.tgz, machine.txt)
set -uo pipefail
. "$(dirname "$0")/gpu-machine-env.sh"
# shellcheck disable=SC2086
test_builds ${TEST:-}
rows='^\| (elements|runs[0-9]+) \| '
step() {  # name timeout command...
    local name=$1 t=$2
    shift 2
    timeout "$t" "$@" > "$out/$name.txt" 2>&1
    echo "== $name (rc=$?)"
    grep -E "$rows" "$out/$name.txt" | grep -v zero-copy | cut -c1-150
}
for r in $(seq "${ROUNDS:-1}"); do
    for v in "$@"; do
        sb=build-umem/$v/umem-sparse-bench
        step "e1g-$v-$r" 200 $sb --no-uvm --only elements --elem-gib 1 --elem-n 4M --pools 100,25 \
            --runs 1,4,8 --pages 128,256,4096
        step "e4g-$v-$r" 300 $sb --no-uvm --only elements --elem-gib 4 --elem-n 32M --pools 100 \
            --runs 1,4,8 --pages 128,1024,4096
        step "u4g-$v-$r" 200 $sb --no-uvm --only elements --alpha 0.01 --elem-gib 4 --elem-n 32M \
            --pools 100 --runs 1 --pages 128,4096
    done
done
for v in $([ -n "${NO_UMEM_BENCH:-}" ] || echo "$@"); do
    timeout 200 build-umem/$v/umem-bench --no-uvm --gib 2 --gathers 65536 --bfs-scale 20 --pools 100,25 \
        > "$out/umem-$v.txt" 2>&1
    echo "== umem-bench 2 GiB, $v (rc=$?)"
    grep -E '^\| ' "$out/umem-$v.txt" | grep -v -- '---' | cut -c1-150 | head -30
done
tar czf /tmp/elements.tgz -C "$out" --exclude machine.txt . && mv /tmp/elements.tgz "$out/" &&
    find "$out" -maxdepth 1 -type f ! -name elements.tgz ! -name machine.txt -delete
