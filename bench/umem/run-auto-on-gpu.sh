#!/usr/bin/env bash
# Runs on the lent GPU machine from the repository root, with build-umem's binaries carried there:
# the GPU tests, then umem-sparse-bench and umem-bench with the automatic page size against every
# fixed page size (128 B .. 4 KiB) in the same process. Full output goes to $OUT; the tables of
# "auto against the best fixed size" are printed last.
# usage: bench/umem/run-auto-on-gpu.sh [small|hits|large|all]   (all: small, hits and large, about 2 minutes
#   on an H200); $OUT keeps all.tgz and machine.txt (the lent machine returns at most 8 files)
set -uo pipefail
. "$(dirname "$0")/gpu-machine-env.sh"
size=${1:-small}
sb=${SB:-build-umem/bench/umem/umem-sparse-bench}  # SB, UB, GT: other builds of the three binaries
ub=${UB:-build-umem/bench/umem/umem-bench}
gt=${GT:-build-umem/tests/gpu/gpu-umem}
step() {  # name timeout command...
    local name=$1 t=$2
    shift 2
    local t0=$SECONDS
    timeout "$t" "$@" > "$out/$name.txt" 2> "$out/$name.err"
    echo "$name: rc=$? in $((SECONDS - t0)) s: $*" | tee -a "$out/steps.txt"
    tail -3 "$out/$name.err"
}
if [ -z "${SKIP_TESTS:-}" ]; then
    step gpu-tests 180 $gt
    tail -3 "$out/gpu-tests.txt"
fi
if [ "$size" = small ] || [ "$size" = all ]; then
    step sparse 200 $sb --detail $out/sparse-detail.md --no-uvm --table-gib 1 --elem-gib 1 --batch 64K --batches 4 --elem-n 4M --pools 100,25
    step rows64 60 $sb --no-uvm --only lookups --row 64 --alpha 1.2 --table-gib 1 --batch 64K --batches 4 --pools 100,25
    step rows1k 60 $sb --no-uvm --only lookups --row 1024 --alpha 0.8 --table-gib 1 --batch 64K --batches 4 --pools 100,25
    step hits-rows 60 $sb --no-uvm --only lookups --replay --table-gib 1 --batch 64K --batches 4 --pools 100
    step hits-uniform 60 $sb --no-uvm --only elements --alpha 0.01 --elem-gib 1 --elem-n 4M --pools 100 --runs 1
    step umem 200 $ub --no-uvm --gib 2 --gathers 65536 --bfs-scale 20 --pools 100,50,25
fi
if [ "$size" = hits ] || [ "$size" = all ]; then  # resident reads against GPU memory, kernels long enough to time
    step hits8g-zipf 200 $sb --no-uvm --only elements --elem-gib 8 --elem-n 64M --pools 100 --runs 1,4 --pages 128,4096
    step hits8g-uniform 200 $sb --no-uvm --only elements --alpha 0.01 --elem-gib 8 --elem-n 64M --pools 100 --runs 1 --pages 128,4096
    step hits8g-get4 200 $sb --no-uvm --only elements --elem-gib 8 --elem-n 64M --pools 100 --runs 1 --pages 4096 --get4
    step hits8g-rows 120 $sb --no-uvm --only lookups --replay --table-gib 8 --batch 1M --batches 4 --pools 100 --pages 256,4096
fi
if [ "$size" = large ] || [ "$size" = all ]; then
    step sparse-large 300 $sb --detail $out/sparse-large-detail.md --no-uvm --table-gib 4 --elem-gib 4 --batch 256K \
        --batches 4 --elem-n 32M --pools 100,25,6.25
    step umem-large 200 $ub --no-uvm --gib 8 --gathers 131072 --bfs-scale 22 --pools 100,50,25
fi
tar czf "$out/all.tgz" -C "$out" --exclude all.tgz . 2>/dev/null
echo
for f in "$out"/*.txt; do
    case $f in */machine.txt|*/steps.txt|*/gpu-tests.txt) continue ;; esac
    echo "== $(basename "$f" .txt)"
    grep -E '^\| (workload \| (pool|pass) \| .*auto|[a-z0-9]+ \| [0-9.]+% \||[a-z0-9]+ \| [0-9] \| [0-9]+% \|)' "$f" \
        | grep -v ' umem \| zero-copy' | cut -c1-230
    grep -E 'results, ' "$f"
done
# A wrong result anywhere is said last and fails the run: one line among the tables went unseen for a session
# (umem-bench's BFS over RMAT 22 at a full pool, bench/results/umem-h200-2026-11-28c.md).
wrong=$(grep -lE 'SOME WRONG|FAILED' "$out"/*.txt 2>/dev/null | xargs -r -n1 basename | tr '\n' ' ')
# Only the archive and the machine's facts come back.
find "$out" -maxdepth 1 -type f ! -name all.tgz ! -name machine.txt -delete
if [ -n "$wrong" ]; then
    echo "!! WRONG RESULTS in: $wrong(see all.tgz)"
    exit 1
fi
