#!/usr/bin/env bash
# Builds the config-space fuzzer with Debian's clang (libFuzzer + ASan + UBSan) and runs it on
# fuzz/corpus for SECONDS (default 60), adding new coverage to the corpus (scripts/setup.sh installs
# clang and libclang-rt-14-dev). Crashes land in fuzz/crash-*; add such an input to fuzz/corpus once
# fixed, and the unit suite replays it from then on.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
out=${BARDRIVE_FUZZ_BUILD:-build-fuzz}
cxx=$(command -v clang++-14 || command -v clang++ || true)
[ -n "$cxx" ] || { echo "fuzz: clang++ not found: run scripts/setup.sh (installs clang, libclang-rt-14-dev)" >&2; exit 1; }
mkdir -p "$out"
"$cxx" -std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -I. \
    fuzz/fuzz_config.cpp pci/config.cpp core/log.cpp -o "$out/fuzz_config"
"$out/fuzz_config" -max_total_time="$seconds" -max_len=4096 -artifact_prefix=fuzz/ -print_final_stats=1 fuzz/corpus
