"""The guest's initramfs: busybox, the kernel entry's modules, and /init. Nothing else: the guest sees the host's
/usr and /etc (read-only) and the project tree (writable) through virtio-9p. /init reads the run's guest.env
(written by boot.py) and answers through the run directory (status, output)."""

import contextlib
import hashlib
import os
import subprocess

from .common import CannotRun

INIT = r'''#!/.lab/busybox sh
# bardrive lab guest: mount, load modules, bind devices, run the command, report, power off.
# Every fork costs milliseconds under TCG: shell builtins (read, test, echo) wherever they do.
export PATH=/.lab/bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
fail() { echo "lab-guest: $*" >&2; echo "lab-guest: $*" >>/.lab/run/output 2>/dev/null
         echo 125 >/.lab/run/status 2>/dev/null; sync; poweroff -f; }
trace() { [ -z "$LAB_TRACE" ] || { read up idle </proc/uptime; echo "lab-guest: $up s: $*" >/dev/console; }; }
for m in $(cat /.lab/modules-9p); do insmod /.lab/modules/$m.ko || fail "insmod $m"; done
MOUNT9P="trans=virtio,version=9p2000.L,msize=512000"
mount -t 9p -o $MOUNT9P,cache=none run /.lab/run || fail "cannot mount the run directory"
. /.lab/run/guest.env || fail "cannot read guest.env"
trace "9p up"
mount -t 9p -o $MOUNT9P,ro,cache=loose usr /usr || fail "cannot mount the host's /usr"
mount -t 9p -o $MOUNT9P,ro,cache=loose etc /etc || fail "cannot mount the host's /etc"
[ -z "$LAB_MODROOT" ] || mount -t 9p -o $MOUNT9P,ro,cache=loose modroot /.lab/kernel || fail "cannot mount the modules"
mount -t tmpfs tmp /tmp; mount -t tmpfs run /run; mkdir -p /dev/shm /dev/pts /dev/hugepages
mount -t tmpfs shm /dev/shm; mount -t devpts pts /dev/pts; mount -t hugetlbfs huge /dev/hugepages
i=0
for dir in $LAB_SHARES; do
    mkdir -p "$dir" && mount -t 9p -o $MOUNT9P,cache=mmap share$i "$dir" || fail "cannot mount $dir"
    i=$((i + 1))
done
mkdir -p "$LAB_RUN" && mount -o bind /.lab/run "$LAB_RUN" || fail "cannot bind $LAB_RUN"
echo $BARDRIVE_LAB_HUGEPAGES >/proc/sys/vm/nr_hugepages
trace "mounted"
for dev in $LAB_EXPECT; do
    bdf=${dev%=*}; want=${dev#*=}; d=/sys/bus/pci/devices/$bdf
    [ -e $d ] || fail "preset device $bdf ($want) is missing; the guest has: $(ls /sys/bus/pci/devices)"
    read vendor <$d/vendor; read device <$d/device
    [ "${vendor#0x}:${device#0x}" = "$want" ] || fail "preset device $bdf is ${vendor#0x}:${device#0x}, expected $want"
done
if [ -n "$LAB_BIND" ]; then
    for m in $LAB_MODULES_VFIO; do insmod /.lab/modules/$m.ko || fail "insmod $m"; done
    for bdf in $LAB_BIND; do
        d=/sys/bus/pci/devices/$bdf
        [ -e $d/driver ] && echo $bdf >$d/driver/unbind
        echo vfio-pci >$d/driver_override
        echo $bdf >/sys/bus/pci/drivers_probe
        [ -e /sys/bus/pci/drivers/vfio-pci/$bdf ] || fail "binding $bdf to vfio-pci failed"
    done
fi
for m in $LAB_MODULES_NIC; do insmod /.lab/modules/$m.ko || fail "insmod $m"; done
for m in $LAB_MODPROBE_NIC; do /usr/sbin/modprobe -d /.lab/kernel $m || fail "modprobe $m"; done
trace "devices ready"
export PATH=$LAB_PATH HOME=/tmp
cd "$LAB_CWD" || fail "cannot enter $LAB_CWD in the guest"
eval "set -- $LAB_CMD"
if command -v "$1" >/dev/null; then
    "$@" >>/.lab/run/output 2>&1 </dev/null
    rc=$?
else
    echo "lab: command not found in the guest: $1 (cwd $LAB_CWD, PATH $PATH)" >>/.lab/run/output
    rc=127
fi
trace "command exited $rc"
echo $rc >/.lab/run/status
sync
poweroff -f
'''


def cpio_newc(entries):
    """An uncompressed newc cpio archive (the kernel unpacks it without a decompressor)."""
    out = bytearray()
    ino = 1
    for name, mode, data in entries + [('TRAILER!!!', 0, b'')]:
        nb = name.encode() + b'\0'
        out += b'070701' + b''.join(b'%08X' % v for v in (ino, mode, 0, 0, 1, 0, len(data), 0, 0, 0, 0,
                                                           len(nb), 0))
        out += nb + b'\0' * (-(110 + len(nb)) % 4) + data + b'\0' * (-len(data) % 4)
        ino += 1
    return bytes(out)


def initramfs(entry, meta):
    """The initramfs for a cache entry, rebuilt (0.2 s) whenever /init, busybox or the modules change."""
    busybox = '/bin/busybox'
    try:
        with open(busybox, 'rb') as f:
            bb = f.read()
    except OSError:
        raise CannotRun('busybox not found at /bin/busybox (package busybox-static)', 'run scripts/setup.sh as root')
    if b'ld-linux' in bb[:65536]:
        raise CannotRun('/bin/busybox is dynamically linked; the guest needs busybox-static',
                        'run scripts/setup.sh as root (installs busybox-static)')
    mdir = os.path.join(entry, meta['modules_dir'])
    modules = []
    for name in sorted(os.listdir(mdir)):
        with open(os.path.join(mdir, name), 'rb') as f:
            modules.append((name, f.read()))
    h = hashlib.sha256(INIT.encode() + bb + ' '.join(meta['modules_9p']).encode())
    for name, data in modules:
        h.update(name.encode() + data)
    path = os.path.join(entry, f'initramfs-{h.hexdigest()[:16]}.cpio')
    if os.path.exists(path):
        return path
    DIR, FILE, EXE, LINK = 0o040755, 0o100644, 0o100755, 0o120777
    ents = [(d, DIR, b'') for d in ('.lab', '.lab/bin', '.lab/modules', '.lab/run', '.lab/kernel',
                                    'proc', 'sys', 'dev', 'tmp', 'run', 'usr', 'etc')]
    ents += [(n, LINK, ('usr/' + n).encode()) for n in ('bin', 'sbin', 'lib', 'lib64')]
    ents.append(('.lab/busybox', EXE, bb))
    applets = subprocess.run([busybox, '--list'], capture_output=True, text=True, check=True).stdout.split()
    ents += [(f'.lab/bin/{a}', LINK, b'../busybox') for a in applets]
    ents += [(f'.lab/modules/{name}', FILE, data) for name, data in modules]
    ents.append(('.lab/modules-9p', FILE, ' '.join(meta['modules_9p']).encode()))
    ents.append(('init', EXE, INIT.encode()))
    for old in os.listdir(entry):
        if old.startswith('initramfs-'):
            with contextlib.suppress(OSError):
                os.unlink(os.path.join(entry, old))
    tmp = f'{path}.{os.getpid()}'
    with open(tmp, 'wb') as f:
        f.write(cpio_newc(ents))
    os.replace(tmp, path)
    return path
