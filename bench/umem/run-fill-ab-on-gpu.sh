#!/usr/bin/env bash
# Runs on the lent GPU machine: builds carried under build-umem/<v>/ (gpu-umem, umem-sparse-bench,
# umem-bench, e.g. v3 the code before a change and v4 after) run one after another in one call:
# the GPU tests of every build but the first, lone threads' element reads at 1 GiB (the first kernel at
# 4 KiB pages; ROUNDS rounds, builds alternating), then run-auto-on-gpu.sh SIZE (small unless given) for each build.
# usage: [ROUNDS=2] [SIZE=small|hits|large|all] bench/umem/run-fill-ab-on-gpu.sh v3 v4 [v5]   ($OUT keeps elem.tgz, machine.txt and per build
#   <v>/all.tgz and <v>/machine.txt: three builds at most, the lent machine returns 8 files)
set -uo pipefail
top=${OUT:-/tmp/umem-out}
. "$(dirname "$0")/gpu-machine-env.sh"
test_builds "${@:2}"
for r in $(seq "${ROUNDS:-2}"); do
    for v in "$@"; do
        build-umem/$v/umem-sparse-bench --no-uvm --only elements --elem-gib 1 --elem-n 4M --pools 100,25 \
            --runs 1,4 --pages 128,4096 > "$top/elem-$v-$r.txt" 2>&1
        echo "== elements 1 GiB, $v, round $r (rc=$?)"
        grep -E '^\| (elements|runs[0-9]+) \| ' "$top/elem-$v-$r.txt" | cut -c1-110
    done
done
for v in "$@"; do
    echo "=== run-auto ${SIZE:-small}, $v"
    OUT=$top/$v SKIP_TESTS=1 SB=build-umem/$v/umem-sparse-bench UB=build-umem/$v/umem-bench \
        bash "$(dirname "$0")/run-auto-on-gpu.sh" "${SIZE:-small}" | grep -v '^[A-Z][a-z][a-z] \|^name\|^ \|Mem:\|^[0-9]*$'
done
tar czf "$top/elem.tgz" -C "$top" $(cd "$top" && ls elem-*.txt tests-*.txt) && rm -f "$top"/elem-*.txt "$top"/tests-*.txt
