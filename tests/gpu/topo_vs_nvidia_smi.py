#!/usr/bin/env python3
"""bardrive topo against nvidia-smi on a machine with NVIDIA GPUs (suite 'gpu').

usage: topo_vs_nvidia_smi.py BARDRIVE [--out DIR]

1. Every GPU/NIC cell of `nvidia-smi topo -m` against `bardrive topo --matrix` over the same devices:
   nvidia-smi's GPU<i> is row i of `nvidia-smi --query-gpu=pci.bus_id`, its NIC<i> the legend's name
   (mlx5_0), found among bardrive's OS names (rdma:mlx5_0, net:...). NV<n> cells are compared too.
2. Active NVLinks per GPU: `nvidia-smi nvlink -s` against the NVML table bardrive recorded in
   `bardrive topo snapshot` (the /nvml/nvlinks record).
Prints every cell and count that differs; exit 1 on any difference, 77 (SKIPPED) without nvidia-smi.
--out DIR keeps the raw outputs (topo -m, nvlink -s, bardrive's matrices, JSON and snapshot).
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

SKIP = 77


def run(cmd, check=True):
    p = subprocess.run(cmd, capture_output=True, text=True)
    if check and p.returncode != 0:
        sys.exit(f'FAILED: {" ".join(cmd)}: exit {p.returncode}\n{p.stdout}{p.stderr}')
    return p


def norm_bdf(text):
    """'00000000:1A:00.0' (nvidia-smi) -> '0000:1a:00.0' (sysfs, bardrive)."""
    m = re.fullmatch(r'([0-9a-fA-F]+):([0-9a-fA-F]{2}):([0-9a-fA-F]{2})\.([0-7])', text.strip())
    if not m:
        sys.exit(f'FAILED: nvidia-smi gave the PCI address {text!r}')
    return f'{int(m[1], 16):04x}:{m[2].lower()}:{m[3].lower()}.{m[4]}'


def parse_matrix(text, what):
    """Cells of a `topo -m` style matrix: {(row label, column label): cell}, and the labels in order."""
    labels, cells = None, {}
    for line in text.splitlines():
        tokens = re.sub(r'\x1b\[[0-9;]*m', '', line).split()  # nvidia-smi may colour a terminal's output
        if labels is None:
            if tokens and re.fullmatch(r'(GPU|NIC)\d+', tokens[0]):
                labels = [t for t in tokens if re.fullmatch(r'(GPU|NIC)\d+', t)]
            continue
        if not tokens or tokens[0] not in labels:
            if cells:
                break
            continue
        row = tokens[1:1 + len(labels)]
        if len(row) != len(labels):
            sys.exit(f'FAILED: {what}: row {tokens[0]} has {len(row)} cells for {len(labels)} columns:\n{line}')
        for col, cell in zip(labels, row):
            cells[(tokens[0], col)] = cell
    if labels is None:
        sys.exit(f'FAILED: {what}: no GPU0/NIC0 header line in\n{text}')
    return labels, cells


def nic_legend(text):
    """nvidia-smi's 'NIC Legend:' block: NIC0 -> mlx5_0."""
    return dict(re.findall(r'^\s*(NIC\d+):\s*(\S+)\s*$', text, re.M))


def active_links_smi(text, gpu_bdfs):
    """`nvidia-smi nvlink -s`: active links per GPU (a link with a speed; '<inactive>' is not)."""
    counts, gpu = {}, None
    for line in text.splitlines():
        m = re.match(r'^GPU (\d+):', line)
        if m:
            gpu = gpu_bdfs[int(m[1])]
            counts[gpu] = 0
        elif gpu is not None and re.match(r'^\s*Link \d+:', line) and 'inactive' not in line.lower():
            counts[gpu] += 1
    return counts


def active_links_bardrive(snapshot_text):
    """The /nvml/nvlinks record of a bardrive snapshot: (links per GPU, the table's lines)."""
    lines = snapshot_text.splitlines()
    for i, line in enumerate(lines):
        m = re.fullmatch(r'text /nvml/nvlinks (\d+)', line)
        if m:
            table = lines[i + 1:i + 1 + int(m[1])]
            counts = {}
            for row in table:
                t = row.split()
                if len(t) == 2 and t[1] == 'none':
                    counts.setdefault(t[0], 0)
                elif len(t) == 4 and t[3].isdigit():
                    counts[t[0]] = counts.get(t[0], 0) + int(t[3])
            return counts, table
        if line == 'missing text /nvml/nvlinks':
            return None, ['(recorded as missing)']
    return None, ['(no /nvml/nvlinks record)']


def main():
    args = sys.argv[1:]
    out = None
    if '--out' in args:
        i = args.index('--out')
        out = args[i + 1]
        del args[i:i + 2]
    if len(args) != 1:
        sys.exit(__doc__)
    bardrive = args[0]
    if not shutil.which('nvidia-smi'):
        print('SKIPPED: nvidia-smi not found (no NVIDIA driver on this machine)')
        return SKIP
    saved = {}

    smi_topo = run(['nvidia-smi', 'topo', '-m']).stdout
    saved['nvidia-smi-topo-m.txt'] = smi_topo
    gpu_bdfs = [norm_bdf(l) for l in
                run(['nvidia-smi', '--query-gpu=pci.bus_id', '--format=csv,noheader']).stdout.splitlines() if l.strip()]
    if not gpu_bdfs:
        print('SKIPPED: nvidia-smi lists no GPU')
        return SKIP
    smi_labels, smi_cells = parse_matrix(smi_topo, 'nvidia-smi topo -m')
    nics = nic_legend(smi_topo)

    topo_json = json.loads(run([bardrive, 'topo', '--json']).stdout)
    saved['bardrive-topo.json'] = json.dumps(topo_json, indent=1)
    by_os_name = {}
    for d in topo_json['devices']:
        for n in d['os_names']:
            by_os_name[n.split(':', 1)[1]] = d['bdf']
    bdf_of = {}
    for label in smi_labels:
        if label.startswith('GPU'):
            bdf_of[label] = gpu_bdfs[int(label[3:])]
        elif nics.get(label) in by_os_name:
            bdf_of[label] = by_os_name[nics[label]]
        else:
            sys.exit(f'FAILED: nvidia-smi\'s {label} ({nics.get(label, "no legend entry")}) is none of bardrive\'s '
                     f'OS names: {sorted(by_os_name)}')

    shown = run([bardrive, 'topo', '--matrix', '--all', '--class', 'gpu', '--class', 'nic'])
    saved['bardrive-topo-matrix.txt'] = shown.stdout + shown.stderr
    # The same devices in nvidia-smi's order, so that the labels agree (GPU<i>, NIC<i> by kind).
    same = run([bardrive, 'topo', '--matrix'] + [a for l in smi_labels for a in ('--device', bdf_of[l])])
    saved['bardrive-topo-matrix-smi-order.txt'] = same.stdout + same.stderr
    bd_labels, bd_cells = parse_matrix(same.stdout, 'bardrive topo --matrix --device ...')
    if bd_labels != smi_labels:
        sys.exit(f'FAILED: bardrive labels {bd_labels} for nvidia-smi\'s {smi_labels} (a device of another kind?)')

    differ = 0
    print(f'{len(smi_labels)} devices: ' + ', '.join(f'{l}={bdf_of[l]}' + (f' ({nics[l]})' if l in nics else '')
                                                    for l in smi_labels))
    for r in smi_labels:
        for c in smi_labels:
            a, b = smi_cells[(r, c)], bd_cells[(r, c)]
            if a == b:
                continue
            differ += 1
            hint = ' (NVLink: bardrive --matrix prints NV<n> once its matrix knows NVLinks)' if a.startswith('NV') else ''
            print(f'DIFFERS {r}-{c} {bdf_of[r]} -> {bdf_of[c]}: nvidia-smi {a}, bardrive {b}{hint}')
    print(f'matrix: {len(smi_labels) ** 2 - differ} of {len(smi_labels) ** 2} cells equal')

    smi_nvlink = run(['nvidia-smi', 'nvlink', '-s'], check=False)
    saved['nvidia-smi-nvlink-s.txt'] = smi_nvlink.stdout + smi_nvlink.stderr + f'(exit {smi_nvlink.returncode})\n'
    with tempfile.TemporaryDirectory() as tmp:
        snap = os.path.join(tmp, 'topo.snapshot')
        run([bardrive, 'topo', 'snapshot', snap])
        with open(snap) as f:
            saved['bardrive-topo.snapshot'] = f.read()
    bd_links, table = active_links_bardrive(saved['bardrive-topo.snapshot'])
    print('bardrive NVML table (/nvml/nvlinks):\n  ' + '\n  '.join(table))
    smi_links = active_links_smi(smi_nvlink.stdout, gpu_bdfs)
    if bd_links is None:
        differ += 1
        print('DIFFERS: bardrive recorded no NVLink table')
    for gpu in gpu_bdfs:
        a, b = smi_links.get(gpu, 0), (bd_links or {}).get(gpu)
        same_count = a == b
        print(f'{"equal" if same_count else "DIFFERS"} NVLinks of {gpu}: nvidia-smi nvlink -s {a} active, '
              f'bardrive (NVML) {"unknown" if b is None else b}')
        differ += not same_count

    if out:
        os.makedirs(out, exist_ok=True)
        for name, text in saved.items():
            with open(os.path.join(out, name), 'w') as f:
                f.write(text)
    print('PASS: bardrive agrees with nvidia-smi' if not differ else f'FAIL: {differ} differences')
    return 1 if differ else 0


if __name__ == '__main__':
    sys.exit(main())
