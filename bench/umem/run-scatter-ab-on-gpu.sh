#!/usr/bin/env bash
# Runs on the lent GPU machine: scatter updates (256-byte rows, pool 6.25%) over 1 GiB and 4 GiB with the
# automatic page size and p256/p4096, builds carried under build-umem/<v>/ alternating, ROUNDS rounds, the
# change's host time from BARDRIVE_LOG=debug; the GPU tests of every build but the first before.
# usage: [ROUNDS=3] bench/umem/run-scatter-ab-on-gpu.sh base2 new [new:VAR=1 ...]   ($OUT keeps scatter.tgz; v:VAR=1 runs
#   build v with VAR=1 in its environment)
set -uo pipefail
top=${OUT:-/tmp/umem-out}
. "$(dirname "$0")/gpu-machine-env.sh"
test_builds $(printf '%s\n' "${@:2}" | cut -d: -f1 | sort -u)
for r in $(seq "${ROUNDS:-3}"); do
    for size in 1 4; do
        batch=$([ $size = 1 ] && echo 64K || echo 256K)
        for spec in "$@"; do
            v=${spec%%:*} e=$([ "$spec" = "$v" ] || echo "${spec#*:}")
            f=$top/scatter-$v${e:+-${e%%=*}}-$size-$r
            env $e BARDRIVE_LOG=debug build-umem/$v/umem-sparse-bench --no-uvm --only scatter --table-gib $size --batch $batch \
                --batches 4 --pages 256,4096 --detail $f.md > $f.txt 2>&1
            echo "== scatter $size GiB, $spec, round $r (rc=$?): $(grep -o 'page size 4096 -> [0-9]* B in [0-9]* us' $f.txt)"
            awk '/### scatter, umem (default|adaptive p4096|adaptive p256)/{n=$0} /^\| [1-4] \|/{if(n!=""){split($0,a,"|"); s=s a[3]}} /^total/{if(n!=""){print substr(n,13,40) ":" s " |" $2; n=""; s=""}}' $f.md
        done
    done
done
tar czf "$top/scatter.tgz" -C "$top" $(cd "$top" && ls scatter-* tests-*) && rm -f "$top"/scatter-* "$top"/tests-*
