"""One run: a per-run directory (guest.env, output, status, console.log, out/) shared with the guest, per-run
/dev/shm window files, QEMU in its own session that dies with this process; the exit code back
(docs/lab.md, "Runs, cleanup, parallelism")."""

import contextlib
import ctypes
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from .common import (EXIT_GUEST_LOST, EXIT_MISMATCH, EXIT_SKIP, EXIT_TIMEOUT, EXIT_USAGE, MIB, PROJECT_ROOT,
                     CannotRun, LabError, say)
from . import insn_count
from . import network
from .doorbell import DOORBELL_BDF, DoorbellServer
from .guest_requests import GuestRequests
from .initramfs import initramfs
from .kernels import MODPROBE_NIC, cache_root, prepare
from .presets import IVSHMEM, Nic, Window, preset_qemu_args
from .programs import GUEST_PATH, check_guest_programs, locate_command
from .windows import check_windows

# no_timer_check: a slow TCG vCPU on a busy host otherwise fails the IO-APIC timer check and panics.
KERNEL_ARGS = 'console=ttyS0 panic=-1 no_timer_check quiet'
IOMMU_KERNEL_ARGS = 'intel_iommu=on'
# --no-iommu: no emulated IOMMU, and VFIO's unsafe no-IOMMU mode on (the full kernel has VFIO built in).
NOIOMMU_KERNEL_ARGS = 'vfio.enable_unsafe_noiommu_mode=1'
HUGEPAGES = 64  # 2 MiB pages reserved in every guest (128 MiB of its 1 GiB)
# Host variables that reach the guest's command unchanged (besides the BARDRIVE_LAB_* the lab sets).
PASS_ENV = re.compile(r'^(BARDRIVE_.*|MALLOC_PERTURB_|ASAN_OPTIONS|UBSAN_OPTIONS|LSAN_OPTIONS|TSAN_OPTIONS|'
                      r'LD_LIBRARY_PATH|MESON_TEST_ITERATION|TERM)$')
SHM_DIR = '/dev/shm'
# QEMU warnings that every run prints and that say nothing about this one: the NICs' hub has no
# host-side port on purpose (the NICs only talk to each other).
QEMU_QUIET = re.compile(rb'hub \d+ is not connected to host network')
RUN_PREFIX = 'bardrive-lab-'


def pid_alive(pid):
    """True while the process runs (a zombie that nobody reaped yet counts as gone)."""
    try:
        with open(f'/proc/{pid}/stat') as f:
            return f.read().rsplit(')', 1)[1].split()[0] != 'Z'
    except (OSError, IndexError):
        return False


def sweep_orphans(tmpdir):
    """Removes window files and run directories of lab runs whose runner died (SIGKILL); failed
    runs' kept directories stay."""
    for base, is_dir in ((SHM_DIR, False), (tmpdir, True)):
        with contextlib.suppress(OSError):
            for name in os.listdir(base):
                m = re.match(re.escape(RUN_PREFIX) + r'(\d+)-', name)
                if not m or pid_alive(int(m.group(1))):
                    continue
                path = os.path.join(base, name)
                if is_dir:
                    if not os.path.exists(os.path.join(path, 'kept')):
                        shutil.rmtree(path, ignore_errors=True)
                else:
                    with contextlib.suppress(OSError):
                        os.unlink(path)


def parse_bind(preset, values):
    devices = {d.bdf: d for d in preset.devices if isinstance(d, (Nic, Window))}
    words = [w for v in (values or ['all']) for w in re.split(r'[,\s]+', v) if w]
    if words == ['all']:
        return list(devices)
    if words == ['none']:
        return []
    out = []
    for w in words:
        bdf = w if w.count(':') == 2 else '0000:' + w
        if bdf not in devices:
            raise LabError(f'--bind {w}: not a NIC or window of preset {preset.name} '
                           f'(it has {" ".join(devices)})', 'pick one of those, or all, or none', EXIT_USAGE)
        out.append(bdf)
    return out


def share_roots(candidates):
    """Directories to share writable at their host paths: no nesting, never /, /usr or /etc."""
    roots = []
    for c in sorted({os.path.realpath(c) for c in candidates}, key=len):
        if c == '/' or any(c == s or c.startswith(s + '/') for s in ['/usr', '/etc'] + roots):
            continue
        if re.search(r'[\s\'"\\$`]', c):
            raise LabError(f'cannot share {c!r} with the guest: white space or quotes in the path',
                           'move the project or the build to a plain path', EXIT_USAGE)
        roots.append(c)
    return roots


class Tail:
    """Copies what a file gains to a stream while the guest runs (with a prefix: line by line,
    dropping lines that match `quiet`)."""

    def __init__(self, path, stream, prefix=b'', quiet=None):
        self.path, self.stream, self.prefix, self.pos, self.partial = path, stream, prefix, 0, b''
        self.quiet = quiet

    def pump(self, final=False):
        try:
            with open(self.path, 'rb') as f:
                f.seek(self.pos)
                data = f.read()
        except FileNotFoundError:
            return
        self.pos += len(data)
        if self.prefix:
            data = self.partial + data
            lines = data.split(b'\n')
            self.partial = b'' if final else lines.pop()
            data = b''.join(self.prefix + ln + b'\n' for ln in lines
                            if ln and not (self.quiet and self.quiet.search(ln)))
        if data:
            self.stream.write(data)
            self.stream.flush()


def die_with_parent():
    os.setsid()
    PR_SET_PDEATHSIG = 1
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def qemu_binary():
    qemu = os.environ.get('BARDRIVE_LAB_QEMU', 'qemu-system-x86_64')
    path = shutil.which(qemu)
    if not path:
        raise CannotRun(f'{qemu} not found (package qemu-system-x86 from bookworm-backports)',
                        'run scripts/setup.sh as root')
    return path


def kvm_probe_file():
    return os.path.join(cache_root(), 'kvm-probe.json')


def pick_accel(requested):
    if requested != 'auto':
        return requested
    with contextlib.suppress(OSError, ValueError):
        with open(kvm_probe_file()) as f:
            if json.load(f).get('ok'):
                return 'kvm'
    return 'tcg'


def boot(preset, kernel_name, cmd, *, bind, accel='tcg', timeout=120, shares=(), checks=(), keep_windows=None,
         keep=False, env_extra=(), stdout=None, stderr=None, no_iommu=False, hugepages_1g=0, doorbell=False,
         virtio_net='', count_instructions=False, queues=1):
    """Boots preset, runs cmd in the guest and returns the exit code (see the module doc)."""
    stdout = stdout or sys.stdout.buffer
    stderr = stderr or sys.stderr.buffer
    cwd = os.getcwd()
    cmd_path = locate_command(cmd[0], cwd)
    qemu = qemu_binary()
    check_guest_programs()
    # --count-instructions: the insn_count TCG plugin, built for this QEMU into the cache (insn_count.py)
    plugin = insn_count.prepare(cache_root(), qemu, say) if count_instructions else None
    try:
        entry, meta = prepare(kernel_name, quiet=True, build=False)
    except CannotRun:
        raise
    except LabError as e:
        raise CannotRun(f'the guest kernel cannot be prepared: {e}', e.fix)
    initrd = initramfs(entry, meta)
    candidates = [PROJECT_ROOT, *shares]
    if cwd != '/':
        candidates.append(cwd)
    if cmd_path and not cmd_path.startswith('/usr/'):
        candidates.append(os.path.dirname(cmd_path))
    roots = share_roots(candidates)

    tmpdir = tempfile.gettempdir()
    rundir = tempfile.mkdtemp(prefix=f'{RUN_PREFIX}{os.getpid()}-', dir=tmpdir)
    outdir = os.path.join(rundir, 'out')
    os.mkdir(outdir)
    run_id = os.path.basename(rundir)
    window_fds, shm_paths, proc, doorbell_server = [], [], None, None
    failed = True
    if doorbell:
        bind = [*bind, DOORBELL_BDF]
    try:
        if doorbell:
            doorbell_server = DoorbellServer(os.path.join(rundir, 'doorbell.sock'))
        for i, w in enumerate(preset.windows):
            path = os.path.join(SHM_DIR, f'{run_id}-win{i}')
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
            shm_paths.append(path)
            window_fds.append(fd)
            os.ftruncate(fd, w.size_mib * MIB)

        nic_models = {n.model[0] for n in preset.nics if n.bdf not in bind}
        env = {k: v for k, v in os.environ.items() if PASS_ENV.match(k) and not k.startswith('BARDRIVE_LAB_')}
        env.update({
            'BARDRIVE_LAB': '1', 'BARDRIVE_LAB_PRESET': preset.name, 'BARDRIVE_LAB_KERNEL': kernel_name,
            'BARDRIVE_LAB_NICS': ' '.join(n.bdf for n in preset.nics),
            'BARDRIVE_LAB_NIC_MODEL': preset.nics[0].model[0],
            'BARDRIVE_LAB_WINDOWS': ' '.join(w.bdf for w in preset.windows),
            'BARDRIVE_LAB_BOUND': ' '.join(bind), 'BARDRIVE_LAB_OUT': outdir,
            'BARDRIVE_LAB_HUGEPAGES': str(HUGEPAGES), 'BARDRIVE_LAB_IOMMU': 'none' if no_iommu else 'intel',
            'BARDRIVE_LAB_MODULES': '/.lab/kernel' if meta.get('modroot') else '',
            'BARDRIVE_LAB_HUGEPAGES_1G': str(hugepages_1g),
            'BARDRIVE_LAB_DOORBELL': DOORBELL_BDF if doorbell else '',
            'BARDRIVE_LAB_QUEUES': str(queues),
            'BARDRIVE_LAB_INSN_COUNTS': os.path.join(outdir, insn_count.LOG_NAME) if plugin else '',
        })
        if os.environ.get('BARDRIVE_LAB_TRACE'):
            env['LAB_TRACE'] = '1'
        env.update(dict(env_extra))
        lines = [f'export {k}={shlex.quote(v)}' for k, v in sorted(env.items())]
        lines += [
            f'LAB_SHARES={shlex.quote(" ".join(roots))}', f'LAB_RUN={shlex.quote(rundir)}',
            'LAB_EXPECT=' + shlex.quote(' '.join(f'{n.bdf}={n.model[1]}' for n in preset.nics) + ' ' +
                                        ' '.join(f'{w.bdf}={IVSHMEM}' for w in preset.windows)),
            f'LAB_BIND={shlex.quote(" ".join(bind))}',
            f'LAB_MODULES_VFIO={shlex.quote(" ".join(meta["modules_vfio"]))}',
            'LAB_MODULES_NIC=' + shlex.quote(' '.join(m for model in sorted(nic_models)
                                                      for m in meta['modules_nic'].get(model, []))),
            # Built-in drivers on the full kernel (no module tree there): nothing to load.
            'LAB_MODPROBE_NIC=' + shlex.quote(' '.join(m for model in sorted(nic_models) if meta.get('modroot')
                                                       for m in MODPROBE_NIC.get(model, []))),
            f'LAB_MODROOT={"1" if meta.get("modroot") else ""}', f'LAB_PATH={GUEST_PATH}',
            f'LAB_CWD={shlex.quote(cwd)}',
            # CMD by the host path found above: a bare name in /init's busybox shell would run busybox's applet
            # of that name first (`sh` would be busybox's ash, whose `ip` is busybox's), not the host's program.
            f'LAB_CMD={shlex.quote(shlex.join([cmd_path or cmd[0], *cmd[1:]]))}',
        ]
        with open(os.path.join(rundir, 'guest.env'), 'w') as f:
            f.write('\n'.join(lines) + '\n')

        def fs(tag, path, addr, ro):
            return ['-fsdev', f'local,id=fs_{tag},path={path},security_model=none,multidevs=remap'
                              + (',readonly=on' if ro else ''),
                    '-device', f'virtio-9p-pci,fsdev=fs_{tag},mount_tag={tag},bus=pcie.0,addr={addr:#x}']
        argv = [qemu, '-nodefaults', '-no-user-config', '-display', 'none', '-no-reboot',
                '-machine', 'q35' + (',kernel-irqchip=split' if accel == 'kvm' else ''),
                '-accel', accel + (',thread=single' if accel == 'tcg' else ''), '-cpu', 'host' if accel == 'kvm' else 'max', '-smp', '2', '-m', guest_memory(hugepages_1g),
                *([] if no_iommu else ['-device', 'intel-iommu,intremap=on']),
                '-chardev', f'file,id=con,path={rundir}/console.log', '-serial', 'chardev:con',
                '-kernel', os.path.join(entry, meta['kernel']), '-initrd', initrd,
                '-append', ' '.join([KERNEL_ARGS, NOIOMMU_KERNEL_ARGS if no_iommu else IOMMU_KERNEL_ARGS,
                                     huge_1g_kernel_args(hugepages_1g), os.environ.get('BARDRIVE_LAB_APPEND', '')]).strip()]
        argv += fs('run', rundir, 0x10, False) + fs('usr', '/usr', 0x11, True) + fs('etc', '/etc', 0x12, True)
        if meta.get('modroot'):
            argv += fs('modroot', os.path.join(entry, meta['modroot']), 0x13, True)
        for i, r in enumerate(roots):
            argv += fs(f'share{i}', r, 0x14 + i, False)
        argv += preset_qemu_args(preset, shm_paths, virtio_net, queues)
        argv += ['-qmp', f'unix:{rundir}/qmp.sock,server=on,wait=off']  # GuestRequests
        if plugin:
            argv += insn_count.qemu_args(plugin, outdir)
        requests = GuestRequests(outdir, os.path.join(rundir, 'qmp.sock'))
        if doorbell:
            argv += ['-chardev', f'socket,id=doorbell,path={rundir}/doorbell.sock',
                     '-device', 'ivshmem-doorbell,chardev=doorbell,vectors=1,bus=pcie.0,addr=0x9']
        argv = network.wrap(argv, len(preset.nics), queues)  # --queues: taps in a namespace of its own
        with open(os.path.join(rundir, 'qemu.argv'), 'w') as f:
            f.write(shlex.join(argv) + '\n')

        qemu_log = os.path.join(rundir, 'qemu.log')
        tails = [Tail(os.path.join(rundir, 'output'), stdout), Tail(qemu_log, stderr, b'qemu: ', QEMU_QUIET)]
        with open(qemu_log, 'wb') as log:
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                    preexec_fn=die_with_parent)
        t0 = time.monotonic()
        while proc.poll() is None:
            for t in tails:
                t.pump()
            requests.serve()
            if time.monotonic() - t0 > timeout:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                for t in tails:
                    t.pump(final=True)
                say(f'timed out after {timeout} s ({preset.name}: {shlex.join(cmd)}); the guest was killed')
                return fail_report(rundir, EXIT_TIMEOUT)
            time.sleep(0.05)
        for t in tails:
            t.pump(final=True)
        try:
            with open(os.path.join(rundir, 'status')) as f:
                rc = int(f.read().strip())
        except (OSError, ValueError):
            say(f'the guest stopped without reporting an exit code (QEMU exit {proc.returncode}; '
                'a kernel panic or a crash of /init)')
            return fail_report(rundir, EXIT_GUEST_LOST)

        problems = check_windows(preset, window_fds, outdir, checks) if rc != EXIT_SKIP else []
        for p in problems:
            say(p)
        if keep_windows:
            os.makedirs(keep_windows, exist_ok=True)
            for i, fd in enumerate(window_fds):
                dst = os.path.join(keep_windows, f'window{i}.bin')
                with open(dst, 'wb') as f:
                    os.lseek(fd, 0, os.SEEK_SET)
                    shutil.copyfileobj(open(fd, 'rb', closefd=False), f)
                say(f'window {i} ({preset.windows[i].bdf}) copied to {dst}')
        if rc == 0 and problems:
            rc = EXIT_MISMATCH
        if rc not in (0, EXIT_SKIP):
            return fail_report(rundir, rc, console=rc >= 124)
        failed = False
        if keep:
            say(f'run directory kept: {rundir}')
        return rc
    except SystemExit:  # a signal (on_signal): nothing of this run stays
        say('interrupted: QEMU killed, window files and run directory removed')
        failed = False
        raise
    finally:
        if proc and proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        for fd in window_fds:
            os.close(fd)
        if doorbell_server:
            doorbell_server.close()
        for p in shm_paths:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(p)
        if not (failed or keep):
            shutil.rmtree(rundir, ignore_errors=True)


def guest_memory(hugepages_1g):
    """The guest's RAM: 1 GiB; with N 1 GiB hugepages (--hugepages-1g) 3 + N GiB. q35 puts the first
    2 GiB below 4 GiB, where firmware tables sit at the top (no aligned GiB free there), and the kernel's
    early allocations take the top of the RAM above 4 GiB: 1 + N GiB there leave N aligned ones free."""
    return f'{3 + hugepages_1g}G' if hugepages_1g else '1G'


def huge_1g_kernel_args(hugepages_1g):
    """1 GiB hugepages can only be reserved at boot (the buddy allocator has no 1 GiB blocks later);
    -cpu max offers pdpe1gb under TCG and -cpu host under KVM where the host has it."""
    return f'hugepagesz=1G hugepages={hugepages_1g}' if hugepages_1g else ''


def fail_report(rundir, rc, console=True):
    """Keeps the run directory of a failed run and says where its logs are."""
    open(os.path.join(rundir, 'kept'), 'w').close()
    log = os.path.join(rundir, 'console.log')
    if console:
        with contextlib.suppress(OSError):
            with open(log, 'rb') as f:
                tail = f.read().decode(errors='replace').splitlines()[-25:]
            say('last lines of the guest console:\n' + '\n'.join('    ' + ln for ln in tail))
    say(f'exit {rc}; console log: {log} (run directory {rundir} kept)')
    return rc
