#!/usr/bin/env python3
"""bardrive topo end to end over the dual-socket fixture: every output mode, the JSON schema of
docs/topology.md (read from the document itself), names with quotes, control characters and bytes
that are not UTF-8 fed through a snapshot and an lspci -tv file, bad input that must fail with a
clear message (not a crash), the name cache, and on this machine the names lspci prints.
usage: cli_test.py BARDRIVE FIXTURES_DIR TOPOLOGY_MD [SHARED_TOPOLOGIES]"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

cli, fixtures, topology_md = sys.argv[1:4]
shared = sys.argv[4] if len(sys.argv) > 4 else ''
snap = os.path.join(fixtures, 'dual-socket.snapshot')
failures = []
# The name cache goes to a folder of this test's, not the user's.
cache_home = tempfile.TemporaryDirectory()
os.environ['XDG_CACHE_HOME'] = cache_home.name
os.environ.pop('BARDRIVE_NO_NAME_CACHE', None)


def report_and_exit():
    if failures:
        print('\n'.join('FAILED: ' + f for f in failures[:50]))
        if len(failures) > 50:
            print(f'... and {len(failures) - 50} more')
        sys.exit(1)
    print('all checks passed')
    sys.exit(0)


def run(*args, rc=0, env=None):
    p = subprocess.run([cli, 'topo', *args], capture_output=True, text=True, timeout=60,
                       env=dict(os.environ, **(env or {})))
    if p.returncode != rc:
        failures.append(f'topo {" ".join(args)}: exit {p.returncode}, expected {rc}\n{p.stderr}')
    return p


def check(cond, what):
    if not cond:
        failures.append(what)


# ---- the schema, as docs/topology.md writes it ----
# The block under "## JSON schema" is JSON-like: a value is alternatives joined by '|', each an object,
# an array of examples, a string literal (an example; two or more are the only values allowed, FILE
# and DIR standing for any text), a number (two or more: the only values), a range (0..5), or a type word.
# Parenthesised text is a comment.
def read_schema(path):
    with open(path) as f:
        block = f.read().split('## JSON schema', 1)[1].split('```', 2)[1]
    tokens = [t for t in re.findall(r'"[^"]*"|\([^)]*\)|[{}\[\]:,|]|[^\s{}\[\]:,|"()]+', block) if t[0] != '(']
    pos = 0

    def take(expected=None):
        nonlocal pos
        if pos >= len(tokens) or (expected and tokens[pos] != expected):
            raise SystemExit(f'FAILED: {path}: JSON schema unreadable at token {pos} ({tokens[pos:pos + 5]}), '
                             f'expected {expected}')
        pos += 1
        return tokens[pos - 1]

    def value():
        alts = [one()]
        while pos < len(tokens) and tokens[pos] == '|':
            take('|')
            alts.append(one())
        return alts

    def one():
        t = take()
        if t == '{':
            obj = {}
            while tokens[pos] != '}':
                key = take()
                take(':')
                obj[key.strip('"')] = value()
                if tokens[pos] == ',':
                    take(',')
            take('}')
            return obj
        if t == '[':
            items = []
            while tokens[pos] != ']':
                items += value()
                if tokens[pos] == ',':
                    take(',')
            take(']')
            return ('array', items)
        return t

    schema = value()
    check(pos == len(tokens), f'{path}: JSON schema has text after its end: {tokens[pos:pos + 5]}')
    return schema


def scalar_ok(v, word, enum):
    number = type(v) in (int, float)
    if word[0] == '"':
        if not enum:
            return isinstance(v, str)
        pattern = re.escape(word[1:-1]).replace('FILE', '.+').replace('DIR', '.+').replace(r'\.\.\.', '.*')
        return isinstance(v, str) and re.fullmatch(pattern, v, re.S) is not None
    if re.fullmatch(r'\d+\.\.\d+', word):
        lo, hi = map(int, word.split('..'))
        return type(v) is int and lo <= v <= hi
    if re.fullmatch(r'-?\d+(\.\d+)?', word):
        return number and (not enum or v == float(word))
    types = {'int': lambda: type(v) is int, 'bytes': lambda: type(v) is int and v >= 0,
             'bool': lambda: type(v) is bool, 'string': lambda: isinstance(v, str), 'null': lambda: v is None,
             'bdf': lambda: isinstance(v, str) and re.fullmatch(r'[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]', v)}
    if word not in types:
        raise SystemExit(f'FAILED: {topology_md}: unknown type "{word}" in the JSON schema')
    return bool(types[word]())


def check_schema(v, alts, where, enum=True):
    """Every key the schema lists, no other, each value one of its alternatives."""
    strings = sum(isinstance(a, str) and a[0] == '"' for a in alts)
    numbers = sum(isinstance(a, str) and re.fullmatch(r'-?\d+(\.\d+)?', a) is not None for a in alts)
    for a in alts:
        if isinstance(a, dict) and isinstance(v, dict):
            for k in a.keys() - v.keys():
                failures.append(f'{where}: lacks "{k}"')
            for k in v.keys() - a.keys():
                failures.append(f'{where}: has "{k}", which docs/topology.md\'s schema does not list')
            for k in a.keys() & v.keys():
                check_schema(v[k], a[k], f'{where}.{k}')
            return
        if isinstance(a, tuple) and isinstance(v, list):
            for i, x in enumerate(v):
                check_schema(x, a[1], f'{where}[{i}]', enum=False)
            return
        if isinstance(a, str) and scalar_ok(v, a, enum and (strings > 1 if a[0] == '"' else numbers > 1)):
            return
    failures.append(f'{where}: {v!r} is none of {alts}')


schema = read_schema(topology_md)


def topo_json(*args):
    """topo --json's output: valid UTF-8, strict JSON (python refuses raw control characters), of the schema."""
    p = subprocess.run([cli, 'topo', *args, '--json'], capture_output=True, timeout=120)
    shown = [os.fsdecode(a) for a in args]
    what = 'topo ' + ' '.join(a if a.isprintable() else repr(a) for a in shown) + ' --json'
    try:
        if p.returncode != 0:
            raise ValueError(f'exit {p.returncode}\n{p.stderr.decode(errors="replace")}')
        d = json.loads(p.stdout.decode('utf-8'))
    except ValueError as e:  # nothing more to check: say what failed so far and stop
        failures.append(f'{what}: {e}')
        report_and_exit()
    check_schema(d, schema, what)
    return d


# JSON: the schema (every output of this test goes through topo_json), devices, pairs with classes
# and verdicts.
d = topo_json('--sysfs', snap)
check(d['schema'] == 'bardrive-topo/1', 'schema name')
check(len(d['devices']) == 23, 'device count')
dev = {x['bdf']: x for x in d['devices']}
gpu0 = dev['0000:1a:00.0']
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
check(dev['0000:1a:00.0']['link'] == {'speed_gts': 16, 'width': 16, 'max_speed_gts': 16, 'max_width': 16,
                                      'downgraded': False}, 'GPU0 link: ' + repr(dev['0000:1a:00.0']['link']))
for name in sorted(os.listdir(fixtures)):  # every fixture, every endpoint paired: all of the schema
    if name.endswith('.snapshot'):
        topo_json('--sysfs', os.path.join(fixtures, name), '--all')
if os.path.isdir(shared):  # real servers: an hwloc XML and an lspci -tv (no config space, no groups)
    topo_json('--hwloc-xml', os.path.join(shared, 'nvidia-dgx2h-16xv100-hwloc', 'nvidiaDGX2.v2.xml'))
    topo_json('--lspci-tv', os.path.join(shared, 'puget-wrx90-threadripperpro-2gpu-2nic-1s', 'lspci-tv.txt'), '--all')
else:
    print(f'note: {shared or "no SHARED_TOPOLOGIES given"}: not there, so the hwloc XML and lspci -tv servers are '
          'left out of the schema check')

# Hostile names: quotes, backslashes, tabs, CR, other control characters, UTF-8, and bytes that are not
# UTF-8, through real inputs. Each arrives intact, the bad bytes as U+FFFD (docs/topology.md: each
# maximal ill-formed subsequence, as Python's decode(errors='replace') does). Snapshot lines cannot
# hold a newline, but a text record of two lines (local_cpulist, numa_node) is one.
HOSTILE = [b'q"uo"te', b'back\\slash\\', b'tab\there', b'cr\r', b'ctl\x01\x1b[31m\x7f\x1f', b'caf\xc3\xa9 \xe6\x97\xa5 \xf0\x9f\x98\x80',
           b'bad\xff\xfe', b'cut\xe2\x82A', b'end\xf0\x9f\x98', b'over\xc0\xaf', b'surr\xed\xa0\x80', b'</script>']


def text(raw):
    return raw.decode('utf-8', 'replace')


def record(kind, path, lines):
    return b'%s %s %d\n' % (kind, path, len(lines)) + b''.join(line + b'\n' for line in lines)


with open(snap, 'rb') as f:
    lines = f.read().split(b'\n')
nic = b'/sys/bus/pci/devices/0000:3b:00.0/'
driver = b'ig"b\\\x01caf\xc3\xa9\xff'  # a link target holds no white space
cpus = [b'0-27\t"x"\\', b'\x02\xf0\x9f\x98\x80\xed\xa0\x80']
numa = [b'1\t\x1b', b'two \xff\'lines\'']
out, i = [], 0
while i < len(lines):  # swap the NIC's records for hostile ones
    fields = lines[i].split(b' ')
    if fields[0] in (b'text', b'list') and fields[1] in (nic + b'net', nic + b'local_cpulist', nic + b'numa_node'):
        i += 1 + int(fields[2])
        body = {b'net': HOSTILE, b'local_cpulist': cpus, b'numa_node': numa}[fields[1][len(nic):]]
        out.append(record(fields[0], fields[1], body))
        continue
    if lines[i].startswith(b'link ' + nic + b'driver '):
        lines[i] = b'link ' + nic + b'driver ../../../../bus/pci/drivers/' + driver
    out.append(lines[i] + (b'\n' if i + 1 < len(lines) else b''))
    i += 1
with tempfile.TemporaryDirectory() as tmp:
    path = os.path.join(os.fsencode(tmp), b'host "a"\\b\tc\nd\x01\xc3\xa9\xff.snapshot')  # a file name too
    with open(path, 'wb') as f:
        f.write(b''.join(out))
    h = topo_json('--sysfs', path, '--all')
    check(h['source'] == text(b'snapshot ' + path), f'hostile source: {h["source"]!r}')
    n = {x['bdf']: x for x in h['devices']}['0000:3b:00.0']
    check(n['os_names'] == ['net:' + text(x) for x in HOSTILE], f'hostile net names: {n["os_names"]!r}')
    check(n['driver'] == text(driver), f'hostile driver: {n["driver"]!r}')
    check(n['local_cpus'] == text(b'\n'.join(cpus)), f'hostile local_cpus: {n["local_cpus"]!r}')
    want = text(nic + b"numa_node: cannot parse '" + b'\n'.join(numa) + b"'")
    check(want in n['warnings'], f'hostile numa_node warning: {n["warnings"]!r}')
    check(n['numa_node'] is None, 'hostile numa_node is unknown')
    # The text outputs carry the same bytes (they are not JSON): the tree prints the names as read.
    t = subprocess.run([cli, 'topo', '--sysfs', path], capture_output=True, timeout=60).stdout
    check(b'net:' + HOSTILE[0] in t and driver in t, 'tree keeps the names as read')

    # lspci -tv from a bug report: the rest of a function's line is its name.
    names = [b'Intel "Host" \\Bridge\\ \ttab ' + HOSTILE[4], b'NVIDIA ' + HOSTILE[5] + b' ' + HOSTILE[6] + b'\r',
             HOSTILE[7] + b' ' + HOSTILE[8]]
    tree = (b'-[0000:00]-+-00.0  ' + names[0] + b'\n' + b'           +-01.0-[01]----00.0  ' + names[1] + b'\n' +
            b'           \\-02.0  ' + names[2] + b'\n' + b' \xfe\n')
    lspci = os.path.join(os.fsencode(tmp), b'lspci \xff.txt')
    with open(lspci, 'wb') as f:
        f.write(tree)
    h = topo_json('--lspci-tv', lspci, '--all')
    got = {x['bdf']: x['vendor'] for x in h['devices']}
    check(got == {'0000:00:00.0': text(names[0]), '0000:00:01.0': '', '0000:01:00.0': text(names[1]),
                  '0000:00:02.0': text(names[2])}, f'lspci -tv names: {got!r}')
    check(text(lspci + b" line 4: unexpected '\xfe' at column 2") in h['warnings'],
          f'lspci -tv warning with a bad byte: {h["warnings"]!r}')
    check(len(h['pairs']) == 3 * 2, f'lspci -tv pairs of the three endpoints: {len(h["pairs"])}')

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
check('not a PCI address' in run('--sysfs', snap, 'show', 'zz', rc=2).stderr, 'bad BDF')
check('unknown option' in run('--frobnicate', rc=2).stderr, 'unknown option')
check('give one source' in run('--sysfs', snap, '--hwloc-xml', snap, rc=2).stderr, 'two sources')
check('no PCI functions found' in run('--lspci-tv', snap, rc=1).stderr, 'lspci -tv of a snapshot')
e = run('--hwloc-xml', snap, rc=1).stderr
check('read hwloc XML' in e and 'line 1: Start tag expected' in e, 'hwloc error: ' + e)
e = run('--hwloc-xml', os.path.join(fixtures, 'nccl-nvswitch.xml'), rc=1).stderr
check('an NCCL topology file (read it with --nccl-xml)' in e, 'hwloc of an NCCL file: ' + e)

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
check('give one source' in run('--nccl-xml', nvs, '--hwloc-xml', nvs, rc=2).stderr, 'two sources (NCCL)')
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

# ---- a rack's worth of GPUs in one NCCL file: pairs bounded, what was left out said ----
with tempfile.TemporaryDirectory() as d:
    lines = ['<system version="1">', '  <cpu numaid="0" affinity="ff" arch="x86_64" vendor="GenuineIntel" '
             'familyid="6" modelid="85">']
    for sw in range(375):  # 375 switches of 8 GPUs: 3000 GPUs
        lines.append(f'    <pci busid="ffff:{sw >> 5:02x}:{sw & 31:02x}.0" class="0x060400" vendor="0xffff" '
                     'device="0xffff" link_speed="16 GT/s" link_width="16">')
        for g in range(8):
            lines.append(f'      <pci busid="{1 + sw // 200:04x}:{sw % 200:02x}:{g:02x}.0" class="0x030200" '
                         'vendor="0x10de" device="0x20b0" link_speed="16 GT/s" link_width="16"/>')
        lines.append('    </pci>')
    lines += ['  </cpu>', '</system>']
    rack = os.path.join(d, 'rack.xml')
    with open(rack, 'w') as f:
        f.write('\n'.join(lines))
    p = run('--nccl-xml', rack, '--json')
    j = json.loads(p.stdout)
    check(len(j['devices']) >= 3000, f'rack: {len(j["devices"])} devices')
    check(len(j['pairs']) == 64 * 63, f'rack: {len(j["pairs"])} pairs, expected 64 * 63')
    check(j['devices_left_out_of_pairs'] > 2900, f'rack: {j["devices_left_out_of_pairs"]} left out')
    check('pairs 64 of' in p.stderr and 'left out' in p.stderr, f'rack: no note on stderr: {p.stderr[-300:]}')
    check(len(p.stdout) < 16 << 20, f'rack: {len(p.stdout)} bytes of JSON')
    p = run('--nccl-xml', rack, 'p2p', '--all')
    check(p.stdout.count('\n') < 4032 * 40, 'rack: p2p --all bounded')
    check('p2p pairs 64 of' in p.stderr, 'rack: p2p --all says what it left out')
    p = run('--nccl-xml', rack, '--matrix')
    check(len(p.stdout) < 1 << 20 and 'the matrix pairs 64 of' in p.stderr, 'rack: the matrix is capped with a note')

report_and_exit()
