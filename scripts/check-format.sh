#!/usr/bin/env bash
# Fails when a tracked C++/CUDA source differs from what clang-format (.clang-format) makes of it.
set -uo pipefail
cd "$1" || exit 2
command -v clang-format >/dev/null || { echo "SKIP: clang-format not installed (scripts/setup.sh installs it)"; exit 77; }
git rev-parse --git-dir >/dev/null 2>&1 || { echo "SKIP: not a git checkout: no list of tracked files"; exit 77; }
files=$(git ls-files '*.cpp' '*.hpp' '*.cu' '*.cuh')
# shellcheck disable=SC2086
if ! clang-format --dry-run -Werror $files; then
    echo "run: git ls-files '*.cpp' '*.hpp' '*.cu' '*.cuh' | xargs clang-format -i"
    exit 1
fi
echo "$(echo "$files" | wc -l) files formatted as .clang-format says"
