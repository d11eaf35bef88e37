#!/usr/bin/env bash
# Installs what bardrive needs on Debian 12 (bookworm), from bookworm and bookworm-backports only.
# Idempotent: installs only what is missing; says what failed and how to fix it.
set -uo pipefail

say() { printf 'setup: %s\n' "$*"; }
die() { printf 'setup: error: %s\n' "$*" >&2; exit 1; }

# Packages from bookworm-backports (bookworm's own are too old: meson 1.0, QEMU 7.2 without igb).
BACKPORTS_PKGS=(meson catch2 qemu-system-x86)
# Packages from bookworm.
PKGS=(g++ ninja-build pkg-config git python3 libpci-dev libhwloc-dev libxml2-dev hwloc libhwloc-plugins pciutils
      busybox-static cpio kmod xz-utils zstd procps clang clang-format libclang-rt-14-dev valgrind
      bc bison flex libelf-dev libssl-dev make nlohmann-json3-dev chromium
      xdp-tools libxdp-dev libbpf-dev  # bench/nic/nic-vs-xdp: xdp-bench, xdp-trafficgen, AF_XDP
      libglib2.0-dev  # lab/plugins/insn_count.c (qemu-plugin.h includes glib.h)
      libpcap-dev  # examples/capture writes pcap files (read back by tcpdump, a guest program below)
      ccache)  # meson finds it: rebuilds and .ci/run's three builds from a fresh clone reuse objects
# The packages of the programs lab guests run from this host's /usr (ip, tcpdump, ...): listed once, in
# lab/guest-programs, which `lab/lab run` checks before booting.
guest_programs="$(dirname "$0")/../lab/guest-programs"
[ -r "$guest_programs" ] || { printf 'setup: error: %s not found: run this script from a bardrive checkout\n' "$guest_programs" >&2; exit 1; }
# shellcheck disable=SC2207
PKGS+=($(awk '!/^#/ && NF { print $2 }' "$guest_programs" | sort -u))
MIN_MESON=1.7.0

[ "$(id -u)" = 0 ] || die "must run as root (apt-get needs it): run 'sudo $0' or as root"
command -v apt-get >/dev/null || die "apt-get not found: bardrive's set-up supports Debian 12 (bookworm) only"
if [ -r /etc/os-release ]; then
    . /etc/os-release
    [ "${VERSION_CODENAME:-}" = bookworm ] || say "warning: this is ${PRETTY_NAME:-an unknown system}, not Debian 12; trying anyway"
fi

missing() {  # prints the packages of "$@" that are not installed
    for p in "$@"; do
        dpkg-query -W -f='${db:Status-Status}\n' "$p" 2>/dev/null | grep -qx installed || printf '%s\n' "$p"
    done
}
version_ge() { [ "$(printf '%s\n%s\n' "$2" "$1" | sort -V | head -n1)" = "$2" ]; }

need_bp=$(missing "${BACKPORTS_PKGS[@]}")
need=$(missing "${PKGS[@]}" | sort -u)  # a package may serve several programs of lab/guest-programs
# iommufd and vfio cdev UAPI (linux/iommufd.h, VFIO_DEVICE_BIND_IOMMUFD) need Linux >= 6.6 headers.
if [ ! -f /usr/include/linux/iommufd.h ]; then
    need_bp=$(printf '%s\nlinux-libc-dev\n' "$need_bp" | sort -u)
fi
if command -v meson >/dev/null && ! version_ge "$(meson --version)" "$MIN_MESON"; then
    need_bp=$(printf '%s\nmeson\n' "$need_bp" | sort -u)
fi
if [ -z "$need_bp$need" ]; then
    say "all packages present"
    exit 0
fi

if ! grep -rqsE '^[^#]*bookworm-backports' /etc/apt/sources.list /etc/apt/sources.list.d/; then
    say "adding Debian's bookworm-backports suite (/etc/apt/sources.list.d/bookworm-backports.list)"
    echo 'deb http://deb.debian.org/debian bookworm-backports main' >/etc/apt/sources.list.d/bookworm-backports.list ||
        die "cannot write /etc/apt/sources.list.d/bookworm-backports.list"
fi

say "missing: $(echo $need_bp $need)"
say "apt-get update"
update_log=$(mktemp)
apt-get update >"$update_log" 2>&1
if ! grep -q 'bookworm-backports' "$update_log" || grep -qE '^(Err|E):.*deb\.debian\.org' "$update_log"; then
    cat "$update_log" >&2
    rm -f "$update_log"
    die "apt-get update could not reach Debian's archive (deb.debian.org): check the network or the proxy (http_proxy), then run this again"
fi
rm -f "$update_log"

install() {  # install [apt args...] -- packages
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "$@"
}
# bookworm's packages first: installed the other way round, -t bookworm-backports pulls backports
# versions of shared libraries (libelf1) that bookworm's -dev packages then cannot match.
if [ -n "$need" ]; then
    say "installing: $(echo $need)"
    # shellcheck disable=SC2086
    install $need || die "installing $(echo $need) failed (see above); check 'apt-cache policy $(echo $need)'"
fi
if [ -n "$need_bp" ]; then
    say "installing from bookworm-backports: $(echo $need_bp)"
    # shellcheck disable=SC2086
    install -t bookworm-backports $need_bp ||
        die "installing $(echo $need_bp) from bookworm-backports failed (see above); check 'apt-cache policy $(echo $need_bp)'"
fi

still=$(missing "${BACKPORTS_PKGS[@]}" "${PKGS[@]}")
[ -z "$still" ] || die "still missing after install: $(echo $still)"
[ -f /usr/include/linux/iommufd.h ] || die "linux/iommufd.h still missing: install it with 'apt-get install -t bookworm-backports linux-libc-dev'"
version_ge "$(meson --version)" "$MIN_MESON" || die "meson $(meson --version) is older than $MIN_MESON: install it with 'apt-get install -t bookworm-backports meson'"
say "done"
