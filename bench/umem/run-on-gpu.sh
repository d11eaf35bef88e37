#!/usr/bin/env bash
# Runs on the lent GPU machine from the repository root, with build-umem's binaries carried
# there: the GPU tests, then umem-bench with the given arguments. Full output goes to $OUT.
# usage: bench/umem/run-on-gpu.sh BENCH-ARGS...
set -uo pipefail
. "$(dirname "$0")/gpu-machine-env.sh"
if [ -z "${SKIP_TESTS:-}" ]; then
    timeout ${TEST_TIMEOUT:-120} build-umem/tests/gpu/gpu-umem > "$out/gpu-tests.txt" 2>&1
    echo "gpu tests: rc=$? ($(tail -3 "$out/gpu-tests.txt" | tr '\n' ' '))"
fi
timeout ${BENCH_TIMEOUT:-420} build-umem/bench/umem/umem-bench --detail "$out/detail.md" "$@" > "$out/bench.txt" 2> "$out/bench.err"
rc=$?
echo "bench rc=$rc"
tail -5 "$out/bench.err"
sed -n '/^| workload/,$p' "$out/bench.txt"
