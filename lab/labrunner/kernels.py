"""Guest kernels and the cache. Each kernel's cache entry is a directory named by its key (package version +
sha256, or config hash); a `complete.json` written last marks it usable (docs/lab.md, "The cache")."""

import contextlib
import fcntl
import hashlib
import json
import os
import re
import shlex
import shutil
import struct
import subprocess
import time

from .common import CannotRun, LabError, check_tools, run_tool, say

CACHE_LAYOUT = 1  # bump when the layout of a cache entry changes (the initramfs has its own hash)
DEFAULT_CACHE = '/var/cache/bardrive/lab'
# Modules the guest loads from its initramfs, in order (Debian's kernel builds them as modules).
MODULES_9P = ['netfs', '9pnet', '9pnet_virtio', '9p']
MODULES_VFIO = ['irqbypass', 'vfio', 'vfio_iommu_type1', 'vfio-pci-core', 'vfio-pci']
MODULES_NIC = {'igb': ['i2c-algo-bit', 'dca', 'igb'], 'e1000e': ['e1000e']}
# Kernel drivers loaded in the guest with the host's modprobe from the kernel's module tree (/.lab/kernel), for
# models whose modules the cache entry does not carry (adding them there would change every cache key).
MODPROBE_NIC = {'virtio-net-pci': ['virtio_net']}


def cache_root():
    root = os.environ.get('BARDRIVE_LAB_CACHE', DEFAULT_CACHE)
    try:
        os.makedirs(root, exist_ok=True)
    except OSError as e:
        raise CannotRun(f'cannot create the lab cache {root}: {e.strerror}',
                        'run as root, or point BARDRIVE_LAB_CACHE at a writable directory')
    if not os.access(root, os.W_OK):
        raise CannotRun(f'the lab cache {root} is not writable',
                        'run as root, or point BARDRIVE_LAB_CACHE at a writable directory')
    return root


@contextlib.contextmanager
def cache_lock(root, kernel_name):
    """One preparer per kernel at a time; parallel `lab run`s wait here instead of racing to download."""
    with open(os.path.join(root, f'.lock-{kernel_name}'), 'w') as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        yield


# apt's package lists: when they change (apt-get update), the kernel package is resolved again.
APT_STATE = ['/var/lib/apt/lists', '/var/cache/apt/pkgcache.bin']


class AptKernel:
    """A kernel made from one Debian package; subclasses say which package and how to make it."""
    name = ''
    slow = False  # a build of minutes: `run` uses it only when prepared beforehand
    noiommu = False  # has VFIO_NOIOMMU (--no-iommu)

    def package(self):
        """The package name apt should fetch, or None when apt cannot say."""
        raise NotImplementedError

    def resolve(self, root):
        """(package, version, sha256) that apt would fetch now, or None when apt cannot say.
        Asking apt costs seconds, so the answer is kept until apt's package lists change."""
        stamp = [os.environ.get('BARDRIVE_LAB_KERNEL_PKG', '')]
        for path in APT_STATE:
            with contextlib.suppress(OSError):
                stamp.append(os.stat(path).st_mtime_ns)
        memo = os.path.join(root, f'{self.name}.resolved.json')
        with contextlib.suppress(OSError, ValueError):
            with open(memo) as f:
                saved = json.load(f)
            if saved['stamp'] == stamp:
                return tuple(saved['resolved'])
        resolved = self.ask_apt()
        if resolved:
            tmp = f'{memo}.{os.getpid()}'
            with open(tmp, 'w') as f:
                json.dump({'stamp': stamp, 'resolved': resolved}, f)
            os.replace(tmp, memo)
        return resolved

    def ask_apt(self):
        pkg = self.package()
        if not pkg:
            return None
        try:
            show = subprocess.run(['apt-cache', 'show', '--no-all-versions', pkg],
                                  capture_output=True, text=True, timeout=60).stdout
        except (OSError, subprocess.TimeoutExpired):
            return None
        ver = re.search(r'^Version: (\S+)', show, re.M)
        sha = re.search(r'^SHA256: (\S+)', show, re.M)
        if not (ver and sha):
            return None
        return pkg, ver.group(1), sha.group(1)

    def download(self, entry, resolved):
        """Fetches the package into entry/root with dpkg -x (nothing is installed on the host)."""
        pkg, ver, sha = resolved
        say(f'downloading {pkg} {ver} (apt-get download)')
        dl = os.path.join(entry, 'download')
        os.makedirs(dl)
        argv = ['apt-get', 'download', f'{pkg}={ver}']
        if os.geteuid() == 0:
            argv[1:1] = ['-o', 'APT::Sandbox::User=root']  # the cache is not the _apt user's to write
        run_tool(argv, f'downloading {pkg}', 'check the network and that Debian\'s archive is reachable '
                 '(apt-get update), then run lab/lab prepare again', cwd=dl)
        deb = os.path.join(dl, os.listdir(dl)[0])
        got = sha256_file(deb)
        if got != sha:
            raise LabError(f'{deb}: sha256 {got} does not match the archive\'s {sha}',
                           'run apt-get update and lab/lab prepare again')
        say('unpacking (dpkg -x)')
        root = os.path.join(entry, 'root')
        run_tool(['dpkg', '-x', deb, root], f'unpacking {pkg}', 'check free disk space in the cache')
        shutil.rmtree(dl)
        return root


class DebianKernel(AptKernel):
    """Debian's linux-image-6.12 from bookworm-backports, unpacked (never installed on the host)."""
    name = 'debian'
    meta_package = 'linux-image-amd64'

    def package(self):
        if os.environ.get('BARDRIVE_LAB_KERNEL_PKG'):
            return os.environ['BARDRIVE_LAB_KERNEL_PKG']
        try:
            deps = subprocess.run(['apt-cache', 'depends', '-t', 'bookworm-backports', self.meta_package],
                                  capture_output=True, text=True, timeout=60).stdout
        except (OSError, subprocess.TimeoutExpired):
            return None
        m = re.search(r'Depends: (linux-image-6\.12\.\S+-amd64)\b', deps)
        return m.group(1) if m else None

    def key(self, resolved):
        pkg, ver, sha = resolved
        return f'debian-{pkg[len("linux-image-"):]}-{ver.replace("~", "_")}-{sha[:12]}-l{CACHE_LAYOUT}'

    def build(self, entry, resolved):
        pkg, ver, sha = resolved
        root = self.download(entry, resolved)
        kver = os.listdir(os.path.join(root, 'lib', 'modules'))[0]
        say(f'depmod {kver}')
        run_tool(['depmod', '-b', root, kver], 'depmod', 'install kmod (scripts/setup.sh)')
        vmlinuz = os.path.join(root, 'boot', f'vmlinuz-{kver}')
        extract_vmlinux(vmlinuz, os.path.join(entry, 'vmlinux'))
        mdir = os.path.join(entry, 'modules')
        os.makedirs(mdir)
        for mod in MODULES_9P + MODULES_VFIO + [m for ms in MODULES_NIC.values() for m in ms] + ['pktgen']:
            decompress_module(root, kver, mod, mdir)
        return {'package': pkg, 'version': ver, 'sha256': sha, 'kver': kver, 'kernel': 'vmlinux',
                'modules_dir': 'modules', 'modules_9p': MODULES_9P, 'modules_vfio': MODULES_VFIO,
                'modules_nic': MODULES_NIC, 'modroot': 'root'}


# The `full` kernel: what Debian's lacks (iommufd, the vfio cdev, no-IOMMU mode, P2PDMA), everything
# the lab uses built in (no modules), on top of x86_64_defconfig + kvm_guest.config. The cache key
# hashes this list with the source package's version: change a line and the kernel is rebuilt.
# Not INTEL_IOMMU_DEFAULT_ON: olddefconfig drops it, and the lab passes intel_iommu=on anyway.
FULL_CONFIG = [
    'PVH', 'NUMA', 'ACPI_NUMA', 'PCI', 'PCIEPORTBUS', 'HOTPLUG_PCI_PCIE', 'PCI_MSI', 'PCI_IOV', 'PCI_P2PDMA',
    'MEMORY_HOTPLUG', 'MEMORY_HOTREMOVE', 'ZONE_DEVICE', 'SPARSEMEM_VMEMMAP',
    'IOMMU_SUPPORT', 'INTEL_IOMMU', 'IRQ_REMAP', 'X86_X2APIC',
    'IOMMUFD', 'IOMMUFD_VFIO_CONTAINER', 'VFIO', 'VFIO_GROUP', 'VFIO_DEVICE_CDEV',
    'VFIO_NOIOMMU', 'VFIO_PCI', 'VFIO_PCI_MMAP', 'VFIO_PCI_INTX', 'IRQ_BYPASS_MANAGER',
    'DMA_SHARED_BUFFER', 'DMABUF_MOVE_NOTIFY', 'HUGETLBFS', 'HUGETLB_PAGE', 'TMPFS', 'DEVTMPFS',
    'NET_9P', 'NET_9P_VIRTIO', '9P_FS', '9P_FS_POSIX_ACL', 'VIRTIO_PCI', 'VIRTIO_CONSOLE',
    'SERIAL_8250', 'SERIAL_8250_CONSOLE', 'BLK_DEV_INITRD',
    'NETDEVICES', 'ETHERNET', 'NET_VENDOR_INTEL', 'IGB', 'E1000E', 'NET_PKTGEN',
]
# Off, so that /dev/vfio/vfio is iommufd's compatibility container (IOMMUFD_VFIO_CONTAINER depends on
# !VFIO_CONTAINER): this kernel then offers iommufd, the compat container and no-IOMMU mode, while the
# debian kernel offers the real type1 container. The compat container cannot map a peer's BAR
# (dma::PeerWindow): window tests run on the debian kernel.
FULL_CONFIG_OFF = ['VFIO_CONTAINER', 'VFIO_IOMMU_TYPE1',
                   # What defconfig builds and a lab guest never uses: a third fewer objects to compile.
                   'DRM', 'SOUND', 'USB_SUPPORT', 'WIRELESS', 'WLAN', 'CFG80211', 'BT', 'RFKILL', 'NFS_FS',
                   'EXT4_FS', 'ATA', 'SCSI', 'MD', 'NETFILTER', 'HID', 'AGP', 'FB', 'MEDIA_SUPPORT',
                   'SECURITY_SELINUX', 'AUDIT', 'NET_VENDOR_REALTEK', 'NET_VENDOR_BROADCOM',
                   'NET_VENDOR_MARVELL', 'NET_VENDOR_NVIDIA', 'NET_VENDOR_AMD', 'NET_VENDOR_DEC']


class FullKernel(AptKernel):
    """Built from Debian's linux-source-6.12 with FULL_CONFIG (nice -n 19, make -j2: minutes)."""
    name = 'full'
    slow = True
    noiommu = True

    def package(self):
        return 'linux-source-6.12'

    def key(self, resolved):
        pkg, ver, sha = resolved
        h = hashlib.sha256(('\n'.join(FULL_CONFIG + ['!' + c for c in FULL_CONFIG_OFF]) + ver + sha).encode()).hexdigest()[:12]
        return f'full-{ver.replace("~", "_")}-{h}-l{CACHE_LAYOUT}'

    def build(self, entry, resolved):
        check_tools(('make', 'make'), ('gcc', 'gcc'), ('bc', 'bc'), ('bison', 'bison'), ('flex', 'flex'),
                    ('tar', 'tar'), ('xz', 'xz-utils'))
        pkg, ver, sha = resolved
        root = self.download(entry, resolved)
        tarball = [os.path.join(dp, f) for dp, _, fs in os.walk(root) for f in fs if f.endswith('.tar.xz')][0]
        src = os.path.join(entry, 'src')
        os.makedirs(src)
        say('unpacking the source')
        run_tool(['tar', '-xf', tarball, '-C', src, '--strip-components=1'], 'unpacking the source', '')
        shutil.rmtree(root)
        log_path = os.path.join(entry, 'build.log')
        say(f'building the kernel with nice -n 19 make -j2 (about 8 minutes on 2 idle cores; log {log_path})')
        t0 = time.monotonic()
        nice = ['nice', '-n', '19']
        with open(log_path, 'w') as log:
            def step(*argv):
                if subprocess.run(argv, cwd=src, stdout=log, stderr=subprocess.STDOUT).returncode != 0:
                    raise LabError(f'kernel build step failed: {shlex.join(argv)}',
                                   f'see {log_path}; the build tools come from scripts/setup.sh')
            step(*nice, 'make', 'x86_64_defconfig')
            step(*nice, 'make', 'kvm_guest.config')
            step('scripts/config', *[a for c in FULL_CONFIG for a in ('--enable', c)],
                 *[a for c in FULL_CONFIG_OFF for a in ('--disable', c)])
            step(*nice, 'make', 'olddefconfig')
            with open(os.path.join(src, '.config')) as f:
                config = f.read()
            missing = [c for c in FULL_CONFIG if f'CONFIG_{c}=y' not in config]
            missing += [f'!{c}' for c in FULL_CONFIG_OFF if f'CONFIG_{c}=y' in config]
            if missing:
                raise LabError('the full kernel config lost options after olddefconfig: ' + ' '.join(missing),
                               'a dependency is missing; fix FULL_CONFIG in lab/labrunner/kernels.py')
            step(*nice, 'make', '-j2', 'vmlinux')
        kver = subprocess.run(['make', '-s', 'kernelrelease'], cwd=src, capture_output=True, text=True).stdout.strip()
        shutil.copy(os.path.join(src, '.config'), os.path.join(entry, 'config'))
        run_tool(['objcopy', '--strip-all', os.path.join(src, 'vmlinux'), os.path.join(entry, 'vmlinux')],
                 'stripping vmlinux', 'install binutils')
        os.makedirs(os.path.join(entry, 'modules'))
        return {'package': pkg, 'version': ver, 'sha256': sha, 'kver': kver, 'kernel': 'vmlinux',
                'build_seconds': round(time.monotonic() - t0), 'modules_dir': 'modules', 'modules_9p': [],
                'modules_vfio': [], 'modules_nic': {}, 'modroot': None, 'scratch': ['src']}


KERNELS = {'debian': DebianKernel(), 'full': FullKernel()}


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, 'rb') as f:
        for block in iter(lambda: f.read(1 << 20), b''):
            h.update(block)
    return h.hexdigest()


def extract_vmlinux(bzimage, out):
    """The uncompressed ELF inside a bzImage: QEMU boots it directly through its PVH entry point,
    about a second faster under TCG than letting the guest decompress (docs/lab.md)."""
    with open(bzimage, 'rb') as f:
        data = f.read()
    setup_sects = data[0x1f1] or 4
    payload_offset, payload_length = struct.unpack_from('<II', data, 0x248)  # boot protocol 2.08+
    start = (setup_sects + 1) * 512 + payload_offset
    payload = data[start:start + payload_length]
    if payload[:4] != b'\x28\xb5\x2f\xfd':
        raise LabError(f'{bzimage}: payload is not zstd (magic {payload[:4].hex()})',
                       'the lab expects Debian\'s zstd-compressed kernel; report the kernel version')
    # The kernel appends the uncompressed size (4 bytes) after the zstd frame.
    proc = subprocess.run(['zstd', '-q', '-d', '--long=31', '-f', '-o', out], input=payload[:-4],
                          capture_output=True)
    if proc.returncode != 0:
        raise LabError('decompressing the kernel with zstd failed: ' + proc.stderr.decode(errors='replace').strip(),
                       'install zstd (scripts/setup.sh)')


def decompress_module(root, kver, mod, outdir):
    import lzma
    out = subprocess.run(['modprobe', '-d', root, '-S', kver, '--show-depends', '--ignore-install', mod],
                         capture_output=True, text=True)
    lines = [ln.split()[1] for ln in out.stdout.splitlines() if ln.startswith('insmod ')]
    if out.returncode != 0 or not lines:
        raise LabError(f'module {mod} not found in kernel {kver}: {out.stderr.strip()}',
                       'the guest kernel lacks a module the lab loads; pick another kernel')
    path = lines[-1]
    name = mod + '.ko'
    with open(path, 'rb') as f:
        data = f.read()
    if path.endswith('.xz'):
        data = lzma.decompress(data)
    with open(os.path.join(outdir, name), 'wb') as f:
        f.write(data)
    return name


def prepare(kernel_name, quiet=False, build=True):
    """Returns (entry dir, metadata) of a complete cache entry for the kernel, building it if needed
    (build=False: a kernel with a slow build is only used when already built)."""
    kernel = KERNELS[kernel_name]
    root = cache_root()
    check_tools(('apt-cache', 'apt'), ('dpkg', 'dpkg'), ('depmod', 'kmod'), ('modprobe', 'kmod'),
                ('zstd', 'zstd'))
    resolved = kernel.resolve(root)
    current = os.path.join(root, f'{kernel_name}.current')
    if resolved is None:
        # apt cannot tell (no lists, no backports): a complete entry still serves, with a warning.
        if os.path.exists(os.path.join(current, 'complete.json')):
            say(f'warning: apt cannot resolve the {kernel_name} kernel\'s package; using the cached '
                f'{os.path.basename(os.path.realpath(current))}')
            return finish_entry(current)
        raise CannotRun(f'apt cannot resolve the package of the {kernel_name} guest kernel (bookworm-backports)',
                        'run scripts/setup.sh as root (adds bookworm-backports and runs apt-get update)')
    entry = os.path.join(root, kernel.key(resolved))
    if os.path.exists(os.path.join(entry, 'complete.json')):
        return finish_entry(entry)
    if not build and kernel.slow:
        raise CannotRun(f'the {kernel_name} guest kernel is not built (or is stale: {resolved[0]} {resolved[1]})',
                        f'run lab/lab prepare --kernel {kernel_name} (a kernel build: minutes)')
    with cache_lock(root, kernel_name):
        if os.path.exists(os.path.join(entry, 'complete.json')):  # another run built it while we waited
            return finish_entry(entry)
        if os.path.exists(current):
            say(f'cache {os.path.basename(os.path.realpath(current))} is stale (apt now offers '
                f'{resolved[0]} {resolved[1]}): rebuilding')
        t0 = time.monotonic()
        shutil.rmtree(entry, ignore_errors=True)
        tmp = entry + '.partial'
        shutil.rmtree(tmp, ignore_errors=True)
        os.makedirs(tmp)
        try:
            meta = kernel.build(tmp, resolved)
            meta['seconds'] = round(time.monotonic() - t0, 1)
            with open(os.path.join(tmp, 'complete.json'), 'w') as f:
                json.dump(meta, f, indent=1)
        except BaseException:
            with contextlib.suppress(OSError):  # a failed kernel build's log outlives the attempt
                os.replace(os.path.join(tmp, 'build.log'), os.path.join(root, f'{kernel_name}-build-failed.log'))
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        os.rename(tmp, entry)
        for scratch in meta.get('scratch', []):  # usable already: deleting a source tree takes minutes
            shutil.rmtree(os.path.join(entry, scratch), ignore_errors=True)
        old = os.path.realpath(current) if os.path.islink(current) else None
        tmp_link = current + '.new'
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp_link)
        os.symlink(os.path.basename(entry), tmp_link)
        os.replace(tmp_link, current)
        if old and old != entry:
            shutil.rmtree(old, ignore_errors=True)
        if not quiet:
            say(f'prepared {entry} in {meta["seconds"]} s')
        return finish_entry(entry)


def finish_entry(entry):
    entry = os.path.realpath(entry)
    with open(os.path.join(entry, 'complete.json')) as f:
        return entry, json.load(f)
