#!/usr/bin/env python3
"""bardrive topo end to end over the dual-socket fixture: every output mode, the JSON schema of
docs/topology.md, and bad input that must fail with a clear message (not a crash).
usage: cli_test.py BARDRIVE FIXTURES_DIR"""
import json
import os
import re
import subprocess
import sys
import tempfile

cli, fixtures = sys.argv[1], sys.argv[2]
snap = os.path.join(fixtures, 'dual-socket.snapshot')
failures = []


def run(*args, rc=0):
    p = subprocess.run([cli, 'topo', *args], capture_output=True, text=True, timeout=60)
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

# NCCL topology files (hand-written fixtures): NV<n> cells like nvidia-smi topo -m, NVLinks in p2p, show
# and JSON, and NCCL XML that is broken.
nvs = os.path.join(fixtures, 'nccl-nvswitch.xml')
m = run('--nccl-xml', nvs, '--matrix').stdout
rows = {line.split()[0]: line.split()[1:] for line in m.splitlines() if line[:3] in ('GPU', 'NIC')}
check(rows.get('GPU0', [])[:6] == ['X', 'PIX', 'NV18', 'NV18', 'SYS', 'NV12'], 'NVSwitch matrix row GPU0:\n' + m)
check(rows.get('GPU3', [])[:6] == ['NV12', 'SYS', 'NV12', 'NV12', 'PIX', 'X'], 'NVSwitch matrix row GPU3:\n' + m)
check(rows.get('NIC0', [])[:6] == ['PIX', 'X', 'PIX', 'SYS', 'SYS', 'SYS'], 'NICs keep PCIe classes:\n' + m)
check('  NV#  = Connection traversing a bonded set of # NVLinks' in m, 'NV# legend:\n' + m)
check('rdma:mlx5_0' in m and 'cuda:3' in m, 'matrix OS names:\n' + m)
m = run('--nccl-xml', os.path.join(fixtures, 'nccl-nvlink-direct.xml'), '--matrix').stdout
rows = {line.split()[0]: line.split()[1:] for line in m.splitlines() if line[:3] == 'GPU'}
check(rows.get('GPU0', [])[:4] == ['X', 'NV4', 'NV2', 'SYS'] and rows.get('GPU3', [])[:4] == ['SYS', 'NV1', 'PHB', 'X'],
      'direct NVLink matrix:\n' + m)
m = run('--sysfs', snap, '--matrix').stdout
check('NV#  = ' in m and 'NVLinks: unknown for this input' in m and not re.search(r'NV\d', m.split('Legend:')[0]),
      'no NVLinks known:\n' + m)
s = run('--nccl-xml', nvs, 'p2p', '0000:18:00.0', '0000:1a:00.0').stdout
check('PIX, platform-dependent' in s and 'note     NV18: the GPUs share 18 NVLinks through NVSwitches' in s, 'p2p NVLink:\n' + s)
s = run('--nccl-xml', nvs, 'show', '0000:9c:00.0').stdout
check('nvlink:     5 links to nvswitch 0000:05:00.0' in s and 'nvlink:     4 links to nvswitch (address not reported)' in s,
      'show NVLinks:\n' + s)
d = json.loads(run('--nccl-xml', nvs, '--json').stdout)
check(d['nvlink_source'] == 'NCCL XML ' + nvs and d['source'] == 'NCCL XML ' + nvs, 'JSON nvlink_source')
dev = {x['bdf']: x for x in d['devices']}
check(dev['0000:9c:00.0']['nvlinks'][3] == {'peer_type': 'nvswitch', 'peer': None, 'links': 4}, 'JSON device nvlinks')
check(dev['0000:19:00.0']['nvlinks'] == [] and dev['0000:19:00.0']['os_names'] == ['rdma:mlx5_0'], 'JSON NIC')
pairs = {(p['initiator'], p['target']): p for p in d['pairs']}
check(pairs[('0000:18:00.0', '0000:9e:00.0')]['nvlinks'] == 12 and pairs[('0000:18:00.0', '0000:19:00.0')]['nvlinks'] == 0,
      'JSON pair nvlinks')
check(json.loads(run('--sysfs', snap, '--json').stdout)['nvlink_source'] is None, 'JSON nvlink_source null')
check('give one source' in run('--nccl-xml', nvs, '--hwloc-xml', nvs, rc=1).stderr, 'two sources (NCCL)')
with tempfile.TemporaryDirectory() as tmp:
    broken = os.path.join(tmp, 'broken.xml')
    with open(broken, 'w') as f:
        f.write('<system version="1">\n  <cpu numaid="0">\n</system>\n')
    e = run('--nccl-xml', broken, rc=1).stderr
    check('broken.xml' in e and 'line 3' in e and 'Traceback' not in e, 'malformed NCCL XML: ' + e)
    e = run('--nccl-xml', snap, rc=1).stderr
    check('dual-socket.snapshot' in e and 'NCCL_TOPO_DUMP_FILE' in e, 'NCCL XML of a snapshot: ' + e)
    nobusid = os.path.join(tmp, 'nobusid.xml')
    with open(nobusid, 'w') as f:
        f.write('<system version="1">\n  <cpu numaid="0">\n    <pci class="0x030200"/>\n'
                '    <pci busid="0000:01:00.0" class="0x030200"/>\n  </cpu>\n</system>\n')
    p = run('--nccl-xml', nobusid)
    check('nobusid.xml line 3: <pci> has no busid' in p.stderr and '0000:01:00.0' in p.stdout, 'missing busid: ' + p.stderr)

if failures:
    print('\n'.join('FAILED: ' + f for f in failures))
    sys.exit(1)
print('all checks passed')
