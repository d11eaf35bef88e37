#!/usr/bin/env bash
# Runs the README's Quick-start commands (scripts/quickstart.sh demo, then test) as a new user would on the
# most minimal Debian 12 there is: a fresh `debootstrap --variant=minbase bookworm` root from Debian's
# archive, with the sources a Debian container image has (bookworm, bookworm-updates, bookworm-security).
# It catches a package that set-up forgets (a program the lab guest runs from the host's /usr, a build
# dependency) before a user does. Not part of .ci/run: it downloads ~1 GB and builds the project (tens of
# minutes on 2 cores; `test` boots every lab guest).
#
#   scripts/minbase-check.sh [--keep] [--no-lab-cache] [--rev REV] [demo|test]...   (default: demo test)
#
# --rev REV       the commit to check (default HEAD; uncommitted changes are not part of it): the root gets a
#                 git clone of this checkout at REV, as a user's clone.
# --no-lab-cache  start with an empty lab kernel cache. By default the host's /var/cache/bardrive/lab is
#                 copied into the root (a copy, never a bind mount: the root's `lab/lab prepare` may replace
#                 entries), which saves the full kernel's build (8-30 minutes) when the root's apt resolves
#                 the same kernel packages.
# --keep          keep the root (/var/tmp/bardrive-minbase.XXXXXX) for a look inside; its logs are in
#                 ROOT/root/minbase-*.log either way, and copied next to the root as minbase-*.log.
# The root gets /proc, /sys and /dev (with /dev/shm: the lab's windows) from the host; the lab runs QEMU
# under TCG, so /dev/kvm is not needed. Needs root and the debootstrap package (apt-get install debootstrap).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
say() { printf 'minbase-check: %s\n' "$*"; }
die() { printf 'minbase-check: error: %s\n' "$*" >&2; exit 1; }

keep=0 lab_cache=1 rev=HEAD modes=()
while [ $# -gt 0 ]; do
    case "$1" in
    --keep) keep=1 ;;
    --no-lab-cache) lab_cache=0 ;;
    --rev) rev=${2:?--rev needs a commit}; shift ;;
    demo | test) modes+=("$1") ;;
    *) echo "usage: $0 [--keep] [--no-lab-cache] [--rev REV] [demo|test]..." >&2; exit 2 ;;
    esac
    shift
done
[ ${#modes[@]} -gt 0 ] || modes=(demo test)
[ "$(id -u)" = 0 ] || die "must run as root (debootstrap, chroot and mounts need it)"
command -v debootstrap >/dev/null || die "debootstrap not found: apt-get install debootstrap"
commit=$(git -C "$here" rev-parse --verify "$rev^{commit}") || die "--rev $rev: not a commit of $here"
mirror=${BARDRIVE_MINBASE_MIRROR:-http://deb.debian.org/debian}

root=$(mktemp -d /var/tmp/bardrive-minbase.XXXXXX)
logdir=$(dirname "$root")
mounted=()
cleanup() {
    local m
    for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do
        m=${mounted[$i]}
        umount -R "$m" 2>/dev/null || umount -lR "$m" 2>/dev/null || true
    done
    if [ "$keep" = 1 ]; then
        say "root kept: $root"
    elif findmnt -rn -o TARGET | grep -q "^$root/"; then
        say "something is still mounted below $root: not removing it (umount -R it, then rm -rf $root)"
    else
        rm -rf --one-file-system "$root"
    fi
}
trap cleanup EXIT

t0=$(date +%s)
say "debootstrap --variant=minbase bookworm $root $mirror"
debootstrap --variant=minbase bookworm "$root" "$mirror" >"$logdir/$(basename "$root")-debootstrap.log" 2>&1 ||
    die "debootstrap failed: see $logdir/$(basename "$root")-debootstrap.log (is $mirror reachable?)"
say "root ready in $(($(date +%s) - t0)) s ($(du -sh --one-file-system "$root" | cut -f1))"
# The sources of Debian's container image (debian:bookworm); set-up adds bookworm-backports itself.
rm -f "$root/etc/apt/sources.list"
cat >"$root/etc/apt/sources.list.d/debian.sources" <<EOF
Types: deb
URIs: $mirror
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://deb.debian.org/debian-security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
cp -L /etc/resolv.conf "$root/etc/resolv.conf"

# A user's clone of the commit under test (git is not in minbase: the clone is made from outside).
git clone -q --no-hardlinks "$here" "$root/root/bardrive"
git -C "$root/root/bardrive" checkout -q --detach "$commit"
say "checking commit $(git -C "$here" log -1 --format='%h %s' "$commit" | cut -c1-100)"
if [ "$lab_cache" = 1 ] && [ -d /var/cache/bardrive/lab ]; then
    mkdir -p "$root/var/cache/bardrive"
    cp -a /var/cache/bardrive/lab "$root/var/cache/bardrive/"
    rm -rf "$root"/var/cache/bardrive/lab/*.partial "$root"/var/cache/bardrive/lab/.lock-*
    say "lab kernel cache copied from the host ($(du -sh "$root/var/cache/bardrive/lab" | cut -f1))"
fi

for fs in proc sys dev; do
    mkdir -p "$root/$fs"
done
mount -t proc proc "$root/proc" && mounted+=("$root/proc")
mount -t sysfs sys "$root/sys" && mounted+=("$root/sys")
mount --rbind /dev "$root/dev" && mount --make-rslave "$root/dev" && mounted+=("$root/dev")

status=0
for mode in "${modes[@]}"; do
    log="$root/root/minbase-$mode.log"
    say "scripts/quickstart.sh $mode in the root (log $log)"
    t=$(date +%s)
    set +e
    chroot "$root" /usr/bin/env -i HOME=/root LANG=C.UTF-8 TERM=dumb \
        PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
        bash -c 'cd /root/bardrive && scripts/quickstart.sh "$1"' quickstart "$mode" >"$log" 2>&1
    rc=$?
    set -e
    cp "$log" "$logdir/$(basename "$root")-$mode.log"
    say "quickstart.sh $mode: exit $rc after $(($(date +%s) - t)) s; last lines:"
    tail -n 15 "$log" | sed 's/^/    /'
    if [ "$mode" = test ] && [ -f "$root/root/bardrive/build/meson-logs/testlog.json" ]; then
        say "tests: $(chroot "$root" python3 /root/bardrive/scripts/test-summary.py /root/bardrive/build/meson-logs/testlog.json 2>&1 | tail -n 1)"
    fi
    [ "$rc" = 0 ] || status=1
    [ "$rc" = 0 ] || [ "$mode" != demo ] || break  # test builds on what demo set up
done
say "logs: $logdir/$(basename "$root")-*.log; total $(($(date +%s) - t0)) s"
[ "$status" = 0 ] && say "PASS: the Quick start works on a minbase root" || say "FAIL"
exit $status
