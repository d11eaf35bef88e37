#!/usr/bin/env bash
# usage: fuzz/run.sh [SECONDS] [config|snapshot|lspci|nccl]
# Builds a fuzzer with Debian's clang (libFuzzer + ASan + UBSan; scripts/setup.sh installs clang and
# libclang-rt-14-dev) and runs it for SECONDS (default 60), adding new coverage to its corpus:
#   config    the capability walker (pci/config.cpp), corpus fuzz/corpus
#   snapshot  snapshot parser + topology reader + classes/verdicts, corpus fuzz/corpus-snapshot
#   lspci     the lspci -tv reader + classes, corpus fuzz/corpus-lspci
#   nccl      the NCCL topology XML reader (libxml2 not instrumented) + classes/NVLinks/verdicts,
#             corpus fuzz/corpus-nccl, with the element and attribute names in fuzz/nccl_xml.dict
# Crashes land in fuzz/crash-*; add such an input to the corpus once fixed, and the unit suite
# replays it from then on.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
target=${2:-config}
out=${BARDRIVE_FUZZ_BUILD:-build-fuzz}
cxx=$(command -v clang++-14 || command -v clang++ || true)
[ -n "$cxx" ] || { echo "fuzz: clang++ not found: run scripts/setup.sh (installs clang, libclang-rt-14-dev)" >&2; exit 1; }
mkdir -p "$out"
flags=(-std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -I.)
case $target in
config)
    "$cxx" "${flags[@]}" fuzz/fuzz_config.cpp pci/config.cpp core/log.cpp -o "$out/fuzz_config"
    "$out/fuzz_config" -max_total_time="$seconds" -max_len=4096 -artifact_prefix=fuzz/ -print_final_stats=1 fuzz/corpus ;;
snapshot)
    "$cxx" "${flags[@]}" fuzz/fuzz_snapshot.cpp pci/config.cpp pci/source.cpp pci/topology.cpp pci/p2p.cpp \
        pci/nvml.cpp pci/bdf.cpp core/log.cpp core/error.cpp core/file.cpp -o "$out/fuzz_snapshot"
    "$out/fuzz_snapshot" -max_total_time="$seconds" -max_len=65536 -artifact_prefix=fuzz/ -print_final_stats=1 \
        fuzz/corpus-snapshot ;;
lspci)
    "$cxx" "${flags[@]}" fuzz/fuzz_lspci_tree.cpp pci/lspci_tree.cpp pci/topology.cpp pci/p2p.cpp pci/config.cpp \
        pci/source.cpp pci/nvml.cpp pci/bdf.cpp core/log.cpp core/error.cpp core/file.cpp -o "$out/fuzz_lspci_tree"
    "$out/fuzz_lspci_tree" -max_total_time="$seconds" -max_len=16384 -artifact_prefix=fuzz/ -print_final_stats=1 \
        fuzz/corpus-lspci ;;
nccl)
    # shellcheck disable=SC2046  # pkg-config prints several words on purpose
    "$cxx" "${flags[@]}" $(pkg-config --cflags libxml-2.0) fuzz/fuzz_nccl_xml.cpp pci/nccl_xml.cpp pci/topology.cpp \
        pci/p2p.cpp pci/config.cpp pci/source.cpp pci/bdf.cpp core/log.cpp core/error.cpp core/file.cpp \
        $(pkg-config --libs libxml-2.0) -o "$out/fuzz_nccl_xml"
    "$out/fuzz_nccl_xml" -max_total_time="$seconds" -max_len=16384 -dict=fuzz/nccl_xml.dict -artifact_prefix=fuzz/ \
        -print_final_stats=1 fuzz/corpus-nccl ;;
*) echo "fuzz: unknown target '$target' (config, snapshot, lspci or nccl)" >&2; exit 2 ;;
esac
