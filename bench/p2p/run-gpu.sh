#!/bin/sh
# Runs `bardrive bench` and its GPU test on the lent GPU machine from binaries built elsewhere:
#   scripts: build here, copy into build-bench-carry/ (see docs/bench.md), carry that folder.
# Builds nothing. Full results go to $OUT; a short table prints last.
set -u
CARRY=${CARRY:-build-bench-carry}
OUT=${OUT:-/tmp/bench-out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH="$PWD/$CARRY/lib"
# libudev/libz only where the machine lacks them: the system's own copies come first otherwise.
if ldd "$CARRY/bardrive" | grep -q "not found"; then LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$PWD/$CARRY/lib-fallback"; fi
{
  date -u
  uname -r
  nvidia-smi --query-gpu=name,driver_version,pcie.link.gen.current,pcie.link.width.current,memory.total,memory.used --format=csv
  nvidia-smi topo -m
  ldd "$CARRY/bardrive"
} > "$OUT/machine.txt" 2>&1
"$CARRY/gpu-bench" > "$OUT/gpu-test.txt" 2>&1
echo "gpu-bench rc=$?" >> "$OUT/gpu-test.txt"
"$CARRY/bardrive" bench ${BENCH_ARGS:-} --json "$OUT/bench.json" --svg "$OUT/bench.svg" > "$OUT/bench.txt" 2> "$OUT/bench.err"
echo "bench rc=$?" >> "$OUT/bench.txt"
tail -3 "$OUT/gpu-test.txt"
grep -E "rc=|FAILED|unavailable" "$OUT/bench.txt" | head -20
sed -n '/unidirectional: peak\|bidirectional: peak/,/^$/p' "$OUT/bench.txt" | head -60
