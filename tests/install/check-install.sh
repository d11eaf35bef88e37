#!/usr/bin/env bash
# Installs the build into a temporary root, then builds and runs tests/install/outside.cpp with
# nothing but `pkg-config --cflags --libs bardrive`, so the packaging cannot rot unnoticed.
set -euo pipefail
build_root=$1
source_dir=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
meson install -C "$build_root" --destdir "$work/root" --no-rebuild --quiet
pcdir=$(dirname "$(find "$work/root" -name bardrive.pc | head -n1)")
export PKG_CONFIG_PATH=$pcdir PKG_CONFIG_SYSROOT_DIR=$work/root
flags=$(pkg-config --cflags --libs bardrive)
echo "pkg-config: $flags"
# shellcheck disable=SC2086
c++ -std=c++20 -o "$work/outside" "$source_dir/outside.cpp" $flags
# Every installed header must compile on its own with nothing but those flags (.cuh needs nvcc).
incdir=$(pkg-config --cflags-only-I bardrive | sed 's/^ *-I//; s/ .*//')
count=0
while IFS= read -r h; do
    printf '#include <%s>\nint main() { return 0; }\n' "${h#"$incdir"/}" >"$work/one.cpp"
    # shellcheck disable=SC2086
    c++ -std=c++20 -fsyntax-only $flags "$work/one.cpp" || { echo "installed header ${h#"$incdir"/} does not compile alone"; exit 1; }
    count=$((count + 1))
done < <(find "$incdir/bardrive" -name '*.hpp' | sort)
echo "$count installed headers compile on their own"
[ "$count" -gt 0 ]
libdir=$(pkg-config --libs-only-L bardrive | sed 's/^ *-L//; s/ .*//')
out=$(LD_LIBRARY_PATH="$libdir" "$work/outside")
echo "outside program printed: $out"
[ "$out" = "0000:02:00.0 parse PCI address" ]
