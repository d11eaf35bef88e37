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
    # The lab's guest kernels, once per machine (cached; docs/lab.md): Debian's (a download) and the
    # full one (a kernel build, ~8 min on 2 idle cores the first time). Where one cannot be prepared,
    # its lab tests report SKIPPED with the reason.
    lab/lab prepare || echo "quickstart: the debian lab kernel could not be prepared; its lab tests will be skipped" >&2
    lab/lab prepare --kernel full || echo "quickstart: the full lab kernel could not be built; its lab tests will be skipped" >&2
    exec meson test -C "$build" --print-errorlogs
fi
exec scripts/demo.sh "$build"
