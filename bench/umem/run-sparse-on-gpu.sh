#!/usr/bin/env bash
# Runs on the lent GPU machine from the repository root, with build-umem's binaries carried
# there: umem-sparse-bench with the given arguments. Full output goes to $OUT (machine.txt,
# sparse.txt, sparse.err, sparse-detail.md); prints the notes and the markdown table last.
# usage: bench/umem/run-sparse-on-gpu.sh BENCH-ARGS...   (BIN=path overrides the binary)
#   quick:   bench/umem/run-sparse-on-gpu.sh --table-gib 1 --elem-gib 1 --batch 64K --batches 3 --elem-n 4M
#   default: bench/umem/run-sparse-on-gpu.sh   (all defaults; BENCH_TIMEOUT, default 540 s, bounds it)
set -uo pipefail
. "$(dirname "$0")/gpu-machine-env.sh"
bin=${BIN:-build-umem/bench/umem/umem-sparse-bench}
timeout "${BENCH_TIMEOUT:-540}" "$bin" --detail "$out/sparse-detail.md" "$@" \
    > "$out/sparse.txt" 2> "$out/sparse.err"
rc=$?
echo "sparse bench rc=$rc$([ $rc = 124 ] && echo ' (timed out)')"
tail -5 "$out/sparse.err"
# Progress lines when it did not finish; the notes and the table when it did.
if grep -q '^| workload' "$out/sparse.txt"; then
    awk '/^notes:$|^\| workload/ { on = 1 } on' "$out/sparse.txt"
else
    tail -40 "$out/sparse.txt"
fi
