#!/usr/bin/env bash
# Runs on the lent GPU machine: lookups with a warp reading one row at a time against 32 at once, a row a
# lane (--lane-rows: Array::warp_acquire_each), zero-copy and GPU memory likewise, same process per setting:
# hits (replayed 256-byte rows of 8 GiB, pools 100 and 25%) ROUNDS rounds, then first passes (256-byte rows
# of 4 GiB; 64-byte and 1 KiB rows of 1 GiB), build <v> carried under build-umem/<v>/ (umem-sparse-bench
# and gpu-umem).
# usage: [ROUNDS=2] [HITS_ONLY=1] [SKIP_TESTS=1] bench/umem/run-rows-at-once-on-gpu.sh v   ($OUT: rows.tgz, machine.txt)
set -uo pipefail
. "$(dirname "$0")/gpu-machine-env.sh"
v=$1
[ -n "${SKIP_TESTS:-}" ] || test_builds "$v"
sb=build-umem/$v/umem-sparse-bench
rows='^\| (lookups) \| '
run() {  # name timeout args...
    local name=$1 t=$2
    shift 2
    timeout "$t" $sb --no-uvm --only lookups "$@" > "$out/$name.txt" 2>&1
    echo "== $name (rc=$?): $*"
    grep -E "$rows" "$out/$name.txt" | cut -c1-150
}
for r in $(seq "${ROUNDS:-2}"); do
    for m in one lanes; do
        flag=$([ $m = lanes ] && echo --lane-rows)
        run "hits-$m-$r" 120 --replay --table-gib 8 --batch 1M --batches 4 --pools 100,25 --pages 256 $flag
    done
done
for m in one lanes; do
    [ -n "${HITS_ONLY:-}" ] && break
    flag=$([ $m = lanes ] && echo --lane-rows)
    run "rows256-4g-$m" 200 --table-gib 4 --batch 1M --batches 4 --pools 100,25,6.25 --pages 256,4096 $flag
    run "rows64-$m" 60 --row 64 --alpha 1.2 --table-gib 1 --batch 64K --batches 4 --pools 100,25 --pages 128,4096 $flag
    run "rows1k-$m" 60 --row 1024 --alpha 0.8 --table-gib 1 --batch 64K --batches 4 --pools 100,25 --pages 1024,4096 \
        $flag
done
tar czf /tmp/rows.tgz -C "$out" --exclude machine.txt . && mv /tmp/rows.tgz "$out/" &&
    find "$out" -maxdepth 1 -type f ! -name machine.txt ! -name rows.tgz -delete
