#!/usr/bin/env python3
"""Replays bad inputs to the bardrive CLI with the exit status and message each must get (issue 24's sweep,
../shared/docs/bad-input-sweep.md, kept so the next sweep starts from it). The contract: 0 success, 1 an error,
2 bad usage; every message names what is wrong; nothing hangs (each run has a 20 s limit); standard output that
cannot be written is an error, never exit 0. Each group names the sweep's rows it replays (row N); the
library-level rows live in the unit tests of their layer (umem::check: unit-umem; IovaAllocator: unit-dma; the
statistics file's reader: unit-nic; vfio::Domain's overlap check: unit-vfio), the quadratic NCCL file in cli_test.
usage: bad_input_test.py BARDRIVE FIXTURES_DIR"""
import os
import subprocess
import sys
import tempfile

cli, fixtures = sys.argv[1:3]
failures = []
ran = 0


def shown(args):
    """The command line for a failure message, each argument cut to 80 characters."""
    return 'bardrive ' + ' '.join(a if len(a) <= 80 else a[:80] + '...' for a in args)


def case(args, rc, message, stdout=None, env=None):
    """Runs bardrive ARGS; its status must be rc and its stderr must hold every part of message."""
    global ran
    ran += 1
    try:
        out = stdout if stdout is not None else subprocess.PIPE
        p = subprocess.run([cli, *args], stdout=out, stderr=subprocess.PIPE, text=True, timeout=20,
                           env=dict(os.environ, **(env or {})))
    except subprocess.TimeoutExpired:
        failures.append(f'{shown(args)}: still running after 20 s')
        return
    if p.returncode != rc:
        failures.append(f'{shown(args)}: exit {p.returncode}, expected {rc}\n{p.stderr[-2000:]}')
    for part in ([message] if isinstance(message, str) else message):
        if part not in p.stderr:
            failures.append(f'{shown(args)}: stderr lacks {part[:200]!r}:\n{p.stderr[-2000:]}')


snapshot = os.path.join(fixtures, 'dual-socket.snapshot')
with tempfile.TemporaryDirectory() as d, open('/dev/full', 'w') as full:
    # Output that cannot be written (a full disk): an error, never a silent exit 0 (rows 39, 77).
    for args in (['topo', '--sysfs', snapshot], ['topo', '--sysfs', snapshot, '--json'],
                 ['topo', '--sysfs', snapshot, '--matrix'], ['topo', '--sysfs', snapshot, '--dot'],
                 ['topo', '--sysfs', snapshot, 'p2p', '--all'], ['topo', '--sysfs', snapshot, 'show', '1a:00.0'],
                 ['help'], ['topo', '--help'], ['version'], ['bench', '--json', '-'], ['nic', 'stats', '--help']):
        case(args, 1, 'writing standard output failed', stdout=full)

    # Bad usage: exit 2 in every subcommand, the command named once, input echoed to 64 characters (rows 3, 5, 9,
    # 45-47, 60-61, 72-74, 78, 83-84, 88-89, 94-100, 103-104); absent devices and paths that cannot be used are
    # errors, exit 1 (rows 75, 80, 82, 85).
    case(['topo', '--json=1'], 2, '--json takes no value')
    case(['topo', '--bogus'], 2, 'bardrive topo: error: --bogus: unknown option')  # the command named once
    case(['help', 'nosuch'], 2, 'no such command')
    case(['version', '--bogus'], 2, 'unexpected argument')
    case(['bind', '--list', '0000:99:00.0'], 2, '--list takes no device')
    p = subprocess.run([cli, 'help', 'topo'], capture_output=True, text=True, timeout=20)
    ran += 1
    if p.returncode != 0 or not p.stdout.startswith('usage: bardrive topo'):
        failures.append(f'help topo: exit {p.returncode}, not topo\'s help:\n{p.stdout[:200]}')
    case(['bind', '--force=yes'], 2, '--force takes no value')
    case(['nic', 'stats', 'zz'], 2, ['is not a PCI address', '0000:01:00.0'])
    case(['nic', 'stats', '0000:01:00.0', '--watch', '--interval', 'inf'], 2, 'is not 0.01 to 86400 seconds')
    case(['nic', 'stats', '0000:01:00.0', '--watch', '--interval', '1e300'], 2, 'is not 0.01 to 86400 seconds')
    case(['nic', 'stats', '0000:01:00.0', '--watch', '--count', '1e30'], 2, 'is not a whole number')
    case(['nic', 'stats', '0000:01:00.0', '--watch', '--count', '-1'], 2, 'is not a whole number')
    case(['nosuch'], 2, "unknown command 'nosuch'")
    case(['x' * 100000], 2, "unknown command '" + 'x' * 64 + "...'")
    p = subprocess.run([cli, 'x' * 100000], capture_output=True, text=True, timeout=20)
    if len(p.stderr) > 300:
        failures.append(f'an unknown command of 100000 characters is echoed in {len(p.stderr)} bytes')
    case(['topo', 'frob'], 2, 'unknown mode')
    case(['topo', '-h'], 0, '')
    case(['topo', '--sysfs', snapshot, 'show', 'zz'], 2, 'not a PCI address')
    case(['topo', '--sysfs', snapshot, 'show', 'a' * 300], 2, ["'" + 'a' * 64 + "...'"])
    case(['topo', '--sysfs', snapshot, 'p2p', '0000:1a:00.0', '1a:00.0'], 2, 'initiator and target are the same')
    case(['topo', '--sysfs', snapshot, '--matrix', '--device', 'zz'], 2, 'not a PCI address')
    case(['topo', '--sysfs', snapshot, '--class', 'zzz'], 2, ['--class zzz', 'not a kind of device', 'gpu, nic'])
    case(['topo', '--sysfs', snapshot, '--vendor', ''], 2, '--vendor')
    case(['topo', '--sysfs', snapshot, '--vendor', 'nosuchvendor'], 0,
         'no device of the 23 matches --vendor nosuchvendor')
    case(['topo', '--sysfs', snapshot, '--json', '--dot'], 2, 'give at most one of them')
    p = subprocess.run([cli, 'topo', '--sysfs', snapshot, 'p2p', '--all', '--device', '1a:00.0'], capture_output=True,
                       text=True, timeout=20)
    ran += 1
    if p.returncode != 0 or 'fewer than two devices to pair' not in p.stdout or 'try --all' in p.stdout:
        failures.append(f'p2p of one device asked with --all: exit {p.returncode}, told {p.stdout!r}')
    case(['topo', '--sysfs', snapshot, '--hwloc-xml', snapshot], 2, 'give one source')
    case(['topo', 'snapshot'], 2, 'usage: bardrive topo snapshot FILE [--sysfs DIR])')
    p = subprocess.run([cli, 'topo', 'snapshot'], capture_output=True, text=True, timeout=20)
    if len(p.stderr) > 300:
        failures.append(f'topo snapshot without FILE: {len(p.stderr)} bytes of error (the whole usage?)')
    never = os.path.join(d, 'never.snapshot')
    for option in (['--hwloc-xml', snapshot], ['--matrix'], ['--class', 'gpu']):
        case(['topo', 'snapshot', never, *option], 2, [option[0], 'a snapshot records sysfs only'])
    if os.path.exists(never):
        failures.append('topo snapshot with an option it cannot use still wrote a snapshot')
    case(['bind'], 2, 'no device given')
    case(['bind', 'zz'], 2, 'not a PCI address')
    case(['bind', '0000:99:00.0', '--sysfs', d], 1, ['0000:99:00.0', 'no such PCI device'])  # not "modprobe"
    case(['unbind', '0' * 300], 2, ["'" + '0' * 64 + "...'"])
    case(['bench', 'extra'], 2, 'unexpected argument')
    case(['bench', '--json', d], 1, [d, 'Is a directory'])
    case(['bench', '--svg', os.path.join(d, 'no', 'such', 'x.svg')], 1, 'No such file or directory')
    case(['bench', '--json', '/dev/full'], 1, ['/dev/full', 'No space left on device'])
    case(['bench', '--reps', '0'], 2, 'not a count')
    case(['bench', '--sizes', 'lots'], 2, 'lots')
    case(['bench', '--sizes', '99999999999999999999999'], 2, 'more than 2^64 bytes')
    case(['bench', '--only', ''], 2, 'names no method')
    case(['bench', '--only', ',,,'], 2, 'names no method')
    case(['bench', '--only', 'ce,foo'], 2, ['--only foo', 'unknown method'])
    case(['bench', '--nics', '0000:99:00.0,0000:98:00.0', '--only', 'nic'], 1,
         ['--nics 0000:99:00.0', 'no such PCI device'])
    case(['bench', '--only', 'mmio-wc', '--quiet'], 1, 'asked for but could not run here: mmio-wc')

    # A snapshot value of 10 MB: the warning shows its start, not all of it (row 21). An address listed twice: one
    # device (rows 24, 41).
    with open(snapshot) as f:
        text = f.read()
    big_class = os.path.join(d, 'big-class.snapshot')
    with open(big_class, 'w') as f:
        f.write(text.replace('text /sys/bus/pci/devices/0000:1a:00.0/class 1\n0x030200\n',
                             'text /sys/bus/pci/devices/0000:1a:00.0/class 1\n0x' + 'f' * (10 << 20) + '\n', 1))
    p = subprocess.run([cli, 'topo', '--sysfs', big_class], capture_output=True, text=True, timeout=20)
    ran += 1
    if p.returncode != 0 or "class: cannot parse '0xfff" not in p.stderr or len(p.stderr) > 10000:
        failures.append(f'10 MB class value: exit {p.returncode}, {len(p.stderr)} bytes of stderr')
    twice = os.path.join(d, 'twice.snapshot')
    with open(twice, 'w') as f:
        lines = text.split('\n')
        at = next(i for i, line in enumerate(lines) if line.startswith('list /sys/bus/pci/devices '))
        n = int(lines[at].split()[-1])
        lines[at] = f'list /sys/bus/pci/devices {n + 1}'
        lines.insert(at + 1, '0000:1a:00.0')
        f.write('\n'.join(lines))
    case(['topo', '--sysfs', twice, 'p2p', '--all'], 0, 'lists 0000:1a:00.0 more than once')
    p = subprocess.run([cli, 'topo', '--sysfs', twice, 'p2p', '--all'], capture_output=True, text=True, timeout=20)
    if '0000:1a:00.0 -> 0000:1a:00.0' in p.stdout:
        failures.append('a device listed twice is paired with itself')

    # A FIFO or a directory in place of a statistics file: refused at once, not waited on (rows 55, 56).
    fifo = os.path.join(d, 'nic-0000:01:00.0.stats')
    os.mkfifo(fifo)
    case(['nic', 'stats', '0000:01:00.0', '--dir', d], 1, 'it is a FIFO')
    os.unlink(fifo)
    os.mkdir(fifo)
    case(['nic', 'stats', '0000:01:00.0', '--dir', d], 1, 'it is a directory')
    os.rmdir(fifo)
    case(['nic', 'stats', '0000:01:00.0', '--dir', d], 1, 'nobody publishes statistics there')

    # An empty folder given as a copied /sys: the path looked for in it, not /sys and "is sysfs mounted?" (row 16).
    empty = os.path.join(d, 'empty')
    os.mkdir(empty)
    case(['topo', '--sysfs', empty], 1, [f'no {empty}/bus/pci/devices in it', 'copy of a whole /sys folder'])

    # A copied sysfs folder whose attributes are FIFOs: each is unreadable at once (a warning), never waited on
    # (rows 120, 121).
    copied = os.path.join(d, 'copied-sys')
    fn = os.path.join(copied, 'devices/pci0000:00/0000:00:00.0')
    os.makedirs(fn)
    os.makedirs(os.path.join(copied, 'bus/pci/devices'))
    os.symlink('../../../devices/pci0000:00/0000:00:00.0', os.path.join(copied, 'bus/pci/devices/0000:00:00.0'))
    for name, text in (('vendor', '0x8086\n'), ('device', '0x1237\n')):
        with open(os.path.join(fn, name), 'w') as f:
            f.write(text)
    for name in ('config', 'resource', 'class', 'numa_node'):
        os.mkfifo(os.path.join(fn, name))
    case(['topo', '--sysfs', copied], 0, [f'{copied}/bus/pci/devices/0000:00:00.0/config: not readable',
                                          'resource: not readable'])  # the path in the folder, not /sys/...

    # An hwloc XML with an internal DTD subset: read by hwloc's own parser (its libxml2 backend crashes; rows 34, 123).
    dtd = os.path.join(d, 'dtd.xml')
    with open(dtd, 'w') as f:
        f.write('<?xml version="1.0"?>\n<!DOCTYPE topology [ ]>\n<topology version="2.0">\n'
                '<object type="Machine" os_index="0" cpuset="0x1" complete_cpuset="0x1" online_cpuset="0x1" '
                'allowed_cpuset="0x1" nodeset="0x1" complete_nodeset="0x1" allowed_nodeset="0x1">\n'
                '<object type="NUMANode" os_index="0" cpuset="0x1" complete_cpuset="0x1" nodeset="0x1" '
                'complete_nodeset="0x1" local_memory="1048576"/>\n'
                '<object type="PU" os_index="0" cpuset="0x1" complete_cpuset="0x1" nodeset="0x1" '
                'complete_nodeset="0x1"/>\n</object>\n</topology>\n')
    # Read (exit 0) even where the user's environment asks hwloc for libxml2 (HWLOC_LIBXML overrides the others).
    for env in ({}, {'HWLOC_LIBXML': '1'}, {'HWLOC_LIBXML_IMPORT': '1'}, {'HWLOC_NO_LIBXML_IMPORT': '0'}):
        case(['topo', '--hwloc-xml', dtd], 0, '', env=env)

    # lspci -tv text past 1 MiB is read whole (the last host bridge keeps its device); past 16 MiB refused (row 40).
    big = os.path.join(d, 'big-lspci-tv.txt')
    with open(big, 'w') as f:
        f.write('-+-[0000:00]-+-00.0  Filler host bridge ' + 'x' * 60 + '\n')
        for i in range(14000):
            f.write(f' |           +-{i % 32:02x}.{i // 32 % 8}  Filler device {i} ' + 'y' * 60 + '\n')
        f.write(' \-[0001:00]-+-00.0  The last host bridge\n')
        f.write('             \-01.0  The device past the first MiB\n')
    p = subprocess.run([cli, 'topo', '--lspci-tv', big, '--all'], capture_output=True, text=True, timeout=20)
    ran += 1
    if os.path.getsize(big) <= 1 << 20 or 'The device past the first MiB' not in p.stdout:
        failures.append(f'topo --lspci-tv of {os.path.getsize(big)} bytes lost its tail (exit {p.returncode})\n'
                        f'{p.stderr[-400:]}')
    huge = os.path.join(d, 'huge.txt')
    with open(huge, 'wb') as f:
        f.truncate((16 << 20) + 1)
    case(['topo', '--lspci-tv', huge], 1, 'more than 16 MiB')

    # unbind --restore with a remembered driver that is a path: refused, nothing written outside sysfs (row 90).
    sysfs = os.path.join(d, 'sys')
    dev = os.path.join(sysfs, 'devices/pci0000:00/0000:99:00.0')
    os.makedirs(dev)
    os.makedirs(os.path.join(sysfs, 'bus/pci/devices'))
    os.makedirs(os.path.join(sysfs, 'bus/pci/drivers/vfio-pci'))
    os.symlink('../../../devices/pci0000:00/0000:99:00.0', os.path.join(sysfs, 'bus/pci/devices/0000:99:00.0'))
    os.symlink('../../../bus/pci/drivers/vfio-pci', os.path.join(dev, 'driver'))
    for name, text in (('vendor', '0x8086\n'), ('device', '0x10c9\n'), ('driver_override', 'vfio-pci\n')):
        with open(os.path.join(dev, name), 'w') as f:
            f.write(text)
    state = os.path.join(d, 'state')
    os.makedirs(state)
    victim = os.path.join(d, 'victim')
    os.makedirs(victim)
    with open(os.path.join(victim, 'bind'), 'w') as f:
        f.write('untouched')
    with open(os.path.join(state, '0000:99:00.0.driver'), 'w') as f:
        f.write('../../../../../../../..' + victim + '\n')
    case(['unbind', '--restore', '0000:99:00.0', '--sysfs', sysfs, '--state-dir', state], 1, 'is not a driver name')
    with open(os.path.join(victim, 'bind')) as f:
        if f.read() != 'untouched':
            failures.append('unbind --restore wrote through a remembered path')

    # An IOMMU group link past 32 bits: an error naming it (was group 0, or "internal error: stoul"; rows 92, 93).
    os.symlink('../../../kernel/iommu_groups/99999999999999999999999', os.path.join(dev, 'iommu_group'))
    case(['bind', '--list', '--sysfs', sysfs], 1, ['0000:99:00.0', "names '99999999999999999999999'"])

for f in failures:
    print('FAILED:', f)
print(f'{ran} bad inputs replayed, {len(failures)} failures')
sys.exit(1 if failures else 0)
