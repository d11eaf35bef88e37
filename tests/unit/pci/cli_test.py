#!/usr/bin/env python3
"""bardrive topo end to end over the dual-socket fixture: every output mode, the JSON schema of
docs/topology.md, bad input that must fail with a clear message (not a crash), the name cache, and
on this machine the names lspci prints.
usage: cli_test.py BARDRIVE FIXTURES_DIR"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

cli, fixtures = sys.argv[1], sys.argv[2]
snap = os.path.join(fixtures, 'dual-socket.snapshot')
failures = []
# The name cache goes to a folder of this test's, not the user's.
cache_home = tempfile.TemporaryDirectory()
os.environ['XDG_CACHE_HOME'] = cache_home.name
os.environ.pop('BARDRIVE_NO_NAME_CACHE', None)


def run(*args, rc=0, env=None):
    p = subprocess.run([cli, 'topo', *args], capture_output=True, text=True, timeout=60,
                       env=dict(os.environ, **(env or {})))
    if p.returncode != rc:
        failures.append(f'topo {" ".join(args)}: exit {p.returncode}, expected {rc}\n{p.stderr}')
    return p


def check(cond, what):
    if not cond:
        failures.append(what)


# JSON: schema keys, devices, pairs with classes and verdicts.
d = json.loads(run('--sysfs', snap, '--json').stdout)
check(d['schema'] == 'bardrive-topo/1', 'schema name')
for key in ('source', 'numa_nodes', 'iommu_groups_known', 'bars_known', 'warnings', 'host_bridges', 'devices', 'pairs'):
    check(key in d, f'JSON lacks {key}')
check(len(d['devices']) == 23, 'device count')
dev = {x['bdf']: x for x in d['devices']}
gpu0 = dev['0000:1a:00.0']
for key in ('parent', 'host_bridge', 'role', 'role_inferred', 'kind', 'vendor_id', 'device_id', 'subsystem_vendor_id',
            'subsystem_id', 'vendor', 'device', 'subsystem', 'class', 'class_name', 'driver', 'iommu_group', 'numa_node',
            'local_cpus', 'bars', 'link', 'config_bytes', 'extended_config', 'acs', 'ats', 'pri', 'pasid', 'aer',
            'sriov', 'physfn', 'os_names', 'warnings'):
    check(key in gpu0, f'device JSON lacks {key}')
check(gpu0['os_names'] == ['nvidia:0'], 'GPU0 nvidia minor')
check(gpu0['parent'] == '0000:19:00.0' and gpu0['kind'] == 'gpu' and gpu0['iommu_group'] == 20, 'GPU0 facts')
check(gpu0['bars'][1]['size'] == 64 << 30 and gpu0['bars'][1]['bits'] == 64, 'GPU0 BAR1')
check(dev['0000:1e:00.0']['role_inferred'] and dev['0000:1e:00.0']['acs'] is None, '64-byte port')
check(dev['0000:19:08.0']['acs']['control'] == 'SV RR CR UF', 'ACS control')
check(dev['0000:1c:00.2']['physfn'] == '0000:1c:00.0', 'VF')
pairs = {(p['initiator'], p['target']): p for p in d['pairs']}
check(len(pairs) == 9 * 8, 'pairs of the default devices')
p = pairs[('0000:1a:00.0', '0000:af:00.0')]
check(p['class'] == 'SYS' and p['verdict'] == 'platform-dependent' and p['via_host_bridge'], 'SYS pair')
check(pairs[('0000:1a:00.0', '0000:1b:00.0')]['bridges'] == ['0000:19:00.0', '0000:18:00.0', '0000:19:04.0'], 'PIX path')

# Matrix, tree, filters, show, p2p, dot.
m = run('--sysfs', snap, '--matrix').stdout
rows = {line.split()[0]: line.split()[1:] for line in m.splitlines() if line[:3] in ('GPU', 'NIC', 'NVM')}
check(rows.get('GPU0', [])[:9] == ['X', 'PIX', 'PIX', 'PIX', 'PIX', 'PXB', 'NODE', 'SYS', 'SYS'], 'matrix row GPU0:\n' + m)
check(rows.get('GPU2', [])[:9] == ['SYS'] * 7 + ['X', 'PHB'], 'matrix row GPU2:\n' + m)
check('Legend:' in m and 'PXB  = Connection traversing multiple PCIe bridges' in m, 'matrix legend')
m = run('--sysfs', snap, '--matrix', '--class', 'gpu').stdout
check('GPU2' in m and 'NIC0' not in m, 'class filter')
m = run('--sysfs', snap, '--matrix', '--device', 'af:00.0', '--device', '0000:1a:00.0').stdout
rows = {line.split()[0]: line.split()[1:] for line in m.splitlines() if line[:3] == 'GPU'}
check(rows.get('GPU0', [])[:2] == ['X', 'SYS'] and 'GPU0   0000:af:00.0' in m, 'matrix of chosen devices:\n' + m)
check('no such device' in run('--sysfs', snap, '--matrix', '--device', '0000:99:00.0', rc=1).stderr, 'unknown --device')
m = run('--sysfs', snap, '--matrix', '--vendor', 'samsung').stdout
check('NVME1' in m and 'GPU0' not in m, 'vendor filter by name')
t = run('--sysfs', snap).stdout
check('DOWNGRADED (capable 8GT/s x4)' in t and 'VF of 0000:1c:00.0' in t and 'nvme:nvme0' in t, 'tree facts')
t = run('--sysfs', snap, '--vendor', '10de').stdout
check('0000:18:00.0' in t and '0000:3b:00.0' not in t, 'tree filter keeps ancestors only')
s = run('--sysfs', snap, 'show', '1c:00.0').stdout
check('SR-IOV:     1 of 8 VFs enabled' in s and 'members: 0000:1c:00.0(vfio-pci) 0000:1c:00.1(mlx5_core)' in s, 'show:\n' + s)
s = run('--sysfs', snap, 'p2p', '0000:1b:00.0', '0000:1c:00.0').stdout
check('PIX, supported' in s and 'not viable for VFIO until 0000:1c:00.1 (mlx5_core)' in s, 'p2p pair:\n' + s)
g = run('--sysfs', snap, '--dot').stdout
check(g.startswith('digraph pcie {') and '"0000:19:08.0" -> "0000:1c:00.0";' in g, 'dot')

# Snapshot of a snapshot reads back the same.
with tempfile.TemporaryDirectory() as tmp:
    again = os.path.join(tmp, 'again.snapshot')
    run('snapshot', again, '--sysfs', snap)
    check(run('--sysfs', again, '--json').stdout.count('"bdf"') == 23, 'snapshot of a snapshot')
    bad = os.path.join(tmp, 'v2.snapshot')
    with open(bad, 'w') as f:
        f.write('bardrive-topo-snapshot 2\nend\n')
    e = run('--sysfs', bad, rc=1).stderr
    check('v2.snapshot' in e and 'format version 2' in e, 'version error: ' + e)
    half = os.path.join(tmp, 'half.snapshot')
    with open(snap) as src, open(half, 'w') as f:
        f.write(src.read()[:50000])
    e = run('--sysfs', half, rc=1).stderr
    check('half.snapshot' in e and 'line' in e, 'truncated snapshot error: ' + e)

# Bad arguments.
check('no such device' in run('--sysfs', snap, 'show', '0000:99:00.0', rc=1).stderr, 'unknown BDF')
check('not a PCI address' in run('--sysfs', snap, 'show', 'zz', rc=1).stderr, 'bad BDF')
check('unknown option' in run('--frobnicate', rc=1).stderr, 'unknown option')
check('give one source' in run('--sysfs', snap, '--hwloc-xml', snap, rc=1).stderr, 'two sources')
check('no PCI functions found' in run('--lspci-tv', snap, rc=1).stderr, 'lspci -tv of a snapshot')
check('load hwloc XML' in run('--hwloc-xml', snap, rc=1).stderr or 'open hwloc XML' in run('--hwloc-xml', snap, rc=1).stderr,
      'hwloc error')

# The name cache changes nothing printed; a cache folder that cannot be made changes nothing and says nothing.
cache_file = os.path.join(cache_home.name, 'bardrive', 'pci-names')
if os.path.exists(cache_file):
    os.remove(cache_file)
uncached = run('--sysfs', snap, '--json', env={'BARDRIVE_NO_NAME_CACHE': '1'}).stdout
check(not os.path.exists(cache_file), 'BARDRIVE_NO_NAME_CACHE=1 wrote a cache')
first = run('--sysfs', snap, '--json')
check(os.path.isfile(cache_file), 'no name cache under XDG_CACHE_HOME')
again = run('--sysfs', snap, '--json')
check(first.stdout == uncached and again.stdout == uncached, 'names differ with the cache')
with tempfile.NamedTemporaryFile() as not_a_dir:
    blocked = run('--sysfs', snap, '--json', env={'XDG_CACHE_HOME': not_a_dir.name})
    check(blocked.stdout == uncached and blocked.stderr == '', 'unusable cache folder: ' + blocked.stderr)


# This machine: bardrive prints the names lspci prints. lspci asks udev's hwdb where pci.ids has no
# name; bardrive reads pci.ids alone (so snapshots read the same everywhere), hence hwdb.disable=1.
def without_id(text):  # lspci -nn and libpci's class-only names end in " [ID]"
    return re.sub(r' \[[0-9a-f]{4}\]$', '', text)


def numeric(text):  # bardrive's name for an ID pci.ids lacks
    return re.fullmatch(r'(vendor|device|class) [0-9a-f]{4}', text) is not None


if shutil.which('lspci') and os.path.isdir('/sys/bus/pci/devices'):
    p = subprocess.run(['lspci', '-vmm', '-nnD', '-O', 'hwdb.disable=1'], capture_output=True, text=True, timeout=60)
    lspci = {}
    for block in p.stdout.strip().split('\n\n'):
        rec = dict(line.split(':\t', 1) for line in block.splitlines() if ':\t' in line)
        lspci[rec.get('Slot')] = rec
    live = json.loads(run('--json').stdout)
    compared = 0
    for d in live['devices']:
        rec = lspci.get(d['bdf'])
        check(rec is not None, f'lspci does not list {d["bdf"]}')
        if rec is None:
            continue
        for key, name in (('Vendor', d['vendor']), ('Device', d['device']), ('Class', d['class_name']),
                          ('SDevice', d['subsystem'])):
            theirs = without_id(rec.get(key, ''))
            if key == 'SDevice' and 'SVendor' not in rec:
                continue
            if name is None or name == '' or numeric(name):  # unknown to pci.ids: lspci says so too
                check(theirs in ('Vendor', 'Device', 'Class', 'Unknown vendor'), f'{d["bdf"]} {key}: lspci names '
                      f'{rec.get(key)!r}, bardrive {name!r}')
            else:
                check(theirs == without_id(name), f'{d["bdf"]} {key}: lspci {rec.get(key)!r}, bardrive {name!r}')
            compared += 1
    print(f'{compared} names of {len(live["devices"])} functions on this machine compared with lspci')
else:
    print('names on this machine not compared with lspci: no lspci or no /sys/bus/pci/devices')

if failures:
    print('\n'.join('FAILED: ' + f for f in failures))
    sys.exit(1)
print('all checks passed')
