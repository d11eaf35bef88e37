#!/usr/bin/env bash
# The README's two commands:
#   scripts/quickstart.sh demo   set up, build, run the main job
#   scripts/quickstart.sh test   set up, build, run every test suite (unit, lab, gpu)
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
mode=${1:-}
case "$mode" in demo | test) ;; *) echo "usage: $0 demo|test" >&2; exit 2 ;; esac

scripts/setup.sh
build=${BARDRIVE_BUILD:-build}
[ -f "$build/build.ninja" ] || meson setup "$build" -Dwerror=true
meson compile -C "$build"

if [ "$mode" = test ]; then
    exec meson test -C "$build" --print-errorlogs
fi
exec scripts/demo.sh "$build"
