"""The `lab/lab` command: presets, prepare, run, probe-kvm; errors printed with their fix and exit code."""

import argparse
import json
import os
import re
import signal
import sys
import tempfile
import time
import contextlib

from .boot import boot, kvm_probe_file, parse_bind, pick_accel, sweep_orphans
from . import network
from .common import EXIT_SKIP, EXIT_USAGE, LabError, say
from .doorbell import DOORBELL_BDF
from .initramfs import initramfs
from .kernels import KERNELS, prepare
from .presets import PRESETS, VIRTIO_NET, describe_presets
from .windows import parse_check

def main(argv):
    ap = argparse.ArgumentParser(prog='lab/lab', description='bardrive QEMU lab (docs/lab.md)')
    sub = ap.add_subparsers(dest='what', required=True)
    sub.add_parser('presets', help='list the machine presets')
    p = sub.add_parser('prepare', help='download and unpack the guest kernel into the cache')
    p.add_argument('--kernel', default='debian', help='debian (default) or full')
    sub.add_parser('probe-kvm', help='trial boot under KVM; --accel auto then uses KVM')
    r = sub.add_parser('run', help='boot a preset and run a command in the guest')
    r.add_argument('preset')
    r.add_argument('--bind', action='append', metavar='BDF|all|none',
                   help='devices to bind to vfio-pci (repeatable; default all NICs and windows)')
    r.add_argument('--kernel', default='debian', help='debian (default) or full (lab/lab prepare --kernel full first)')
    r.add_argument('--accel', default=os.environ.get('BARDRIVE_LAB_ACCEL', 'tcg'), choices=['tcg', 'kvm', 'auto'])
    r.add_argument('--timeout', type=float, default=120, help='seconds before the guest is killed (120)')
    r.add_argument('--share', action='append', default=[], metavar='DIR',
                   help='another host directory to show the guest at the same path (writable)')
    r.add_argument('--check-window', action='append', default=[], metavar='N:OFFSET:FILE',
                   help='fail unless window N holds FILE at OFFSET after the run')
    r.add_argument('--keep-windows', metavar='DIR', help='copy each window to DIR/window<N>.bin')
    r.add_argument('--keep', action='store_true', help='keep the run directory (logs, out/)')
    r.add_argument('--no-iommu', action='store_true',
                   help='no emulated IOMMU; VFIO in unsafe no-IOMMU mode (needs --kernel full)')
    r.add_argument('--doorbell', action='store_true',
                   help=f'add an ivshmem-doorbell at {DOORBELL_BDF} (bound to vfio-pci) served by lab/lab itself')
    r.add_argument('--virtio-net', default='', metavar='PROPS',
                   help='extra QEMU properties of every virtio-net NIC, comma-separated (packed=on, mrg_rxbuf=off, '
                        'iommu_platform=off, host_mtu=9000, csum=off, ...)')
    r.add_argument('--queues', type=int, default=1, metavar='N',
                   help=f'queue pairs of each virtio-net NIC (1-{network.MAX_QUEUES}; 1: QEMU\'s hub; more: mq=on over '
                        'multiqueue taps on a bridge in the run\'s own network namespace)')
    r.add_argument('--hugepages-1g', type=int, default=0, metavar='N',
                   help='reserve N 1 GiB hugepages at boot (the guest then has 3 + N GiB; not with numa)')
    r.add_argument('--count-instructions', action='store_true',
                   help='load the insn_count TCG plugin: the guest reads every vCPU\'s instruction count '
                        '(bench/nic/insn_count.hpp, docs/lab.md)')
    cmd = []
    if '--' in argv:  # everything after the first -- is the guest's command, options included
        cmd, argv = argv[argv.index('--') + 1:], argv[:argv.index('--')]
    args = ap.parse_args(argv)

    if args.what == 'presets':
        print(describe_presets())
        return 0
    sweep_orphans(tempfile.gettempdir())
    if getattr(args, 'kernel', 'debian') not in KERNELS:
        raise LabError(f'unknown kernel {args.kernel!r}', f'use one of: {", ".join(KERNELS)}', EXIT_USAGE)
    if args.what == 'prepare':
        entry, meta = prepare(args.kernel)
        initramfs(entry, meta)
        print(entry)
        return 0
    if args.what == 'probe-kvm':
        return probe_kvm()

    preset = PRESETS.get(args.preset)
    if not preset:
        raise LabError(f'unknown preset {args.preset!r}', 'use one of: ' + ', '.join(PRESETS) +
                       ' (lab/lab presets describes them)', EXIT_USAGE)
    if args.no_iommu and not KERNELS[args.kernel].noiommu:
        raise LabError(f'--no-iommu needs a kernel with VFIO_NOIOMMU; {args.kernel} has none', 'add --kernel full',
                       EXIT_USAGE)
    if not (0 < args.timeout <= 86400):
        raise LabError(f'--timeout {args.timeout:g}: not a number of seconds from 1 to 86400', 'e.g. --timeout 300',
                       EXIT_USAGE)
    for d in args.share:
        if not os.path.isdir(d):
            raise LabError(f'--share {d}: not a directory on this host', 'create it first, or give another',
                           EXIT_USAGE)
    if args.hugepages_1g < 0 or args.hugepages_1g > 4 or (args.hugepages_1g and preset.numa):
        raise LabError(f'--hugepages-1g {args.hugepages_1g}: between 0 and 4, and not with a NUMA preset '
                       '(its memory is split in fixed nodes)', 'ask for 1 or 2 on basic, switch or e1000e', EXIT_USAGE)
    if args.virtio_net and not any(n.model == VIRTIO_NET for n in preset.nics):
        raise LabError(f'--virtio-net given, but preset {preset.name} has no virtio-net NIC', 'use the virtio preset (lab/lab run virtio ...)',
                       EXIT_USAGE)
    if not re.fullmatch(r'([A-Za-z0-9_-]+=[A-Za-z0-9_.-]+)?(,[A-Za-z0-9_-]+=[A-Za-z0-9_.-]+)*', args.virtio_net):
        raise LabError(f'--virtio-net {args.virtio_net!r}: not a comma-separated list of NAME=VALUE',
                       'e.g. --virtio-net packed=on,mrg_rxbuf=off', EXIT_USAGE)
    if args.count_instructions and pick_accel(args.accel) != 'tcg':
        raise LabError('--count-instructions counts under TCG only (a TCG plugin)', 'leave --accel at tcg', EXIT_USAGE)
    if args.queues != 1 and not (preset.nics and all(n.model == VIRTIO_NET for n in preset.nics)):
        raise LabError(f'--queues given, but the NICs of preset {preset.name} are not virtio-net',
                       'use the virtio preset (lab/lab run virtio --queues N ...)', EXIT_USAGE)
    if not 1 <= args.queues <= network.MAX_QUEUES:
        raise LabError(f'--queues {args.queues}: between 1 and {network.MAX_QUEUES}', 'e.g. --queues 4', EXIT_USAGE)
    if not cmd:
        raise LabError('no command given after --', 'usage: lab/lab run PRESET [options] -- CMD [ARGS...]', EXIT_USAGE)
    return boot(preset, args.kernel, cmd, bind=parse_bind(preset, args.bind), accel=pick_accel(args.accel),
                timeout=args.timeout, shares=args.share, checks=[parse_check(c) for c in args.check_window],
                keep_windows=args.keep_windows, keep=args.keep or bool(os.environ.get('BARDRIVE_LAB_KEEP')),
                no_iommu=args.no_iommu, hugepages_1g=args.hugepages_1g, doorbell=args.doorbell,
                queues=args.queues, virtio_net=args.virtio_net, count_instructions=args.count_instructions)


def probe_kvm():
    """Boots `true` under KVM; records the verdict so that `--accel auto` picks KVM only when it works."""
    ok = False
    if os.access('/dev/kvm', os.R_OK | os.W_OK):
        with contextlib.suppress(LabError):
            ok = boot(PRESETS['basic'], 'debian', ['true'], bind=[], accel='kvm', timeout=30) == 0
    with open(kvm_probe_file(), 'w') as f:
        json.dump({'ok': ok, 'time': time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}, f)
    say('KVM works: --accel auto uses it' if ok else 'KVM does not boot the lab guest here: the lab uses TCG')
    return 0 if ok else 1


def on_signal(sig, _frame):
    raise SystemExit(128 + sig)  # unwinds through boot()'s cleanup: QEMU killed, window files removed


def run():
    """lab/lab's entry point: signals unwind through boot()'s cleanup; a LabError exits with its code and fix."""
    for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(s, on_signal)
    try:
        sys.exit(main(sys.argv[1:]))
    except LabError as e:
        code = e.code
        if code == EXIT_SKIP and os.environ.get('BARDRIVE_LAB_REQUIRED'):
            code = 1  # -Dlab=enabled: the lab must run here, so not running is a failure
        say(f'error: {e}' + (f'\nlab: fix: {e.fix}' if e.fix else '') +
            ('\nlab: SKIPPED (exit 77)' if code == EXIT_SKIP else ''))
        sys.exit(code)
