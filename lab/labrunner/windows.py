"""Proving a DMA from the host side (docs/lab.md): after the run, each window's host backing file is compared with
what the guest test (expect-window<N>@<OFFSET>.bin in $BARDRIVE_LAB_OUT) or --check-window says it must hold."""

import os
import re

from .common import EXIT_USAGE, MIB, LabError, say

EXPECT_RE = re.compile(r'^expect-window(\d+)@(0x[0-9a-fA-F]+|\d+)\.bin$')


def parse_check(text):
    m = re.match(r'^(\d+):(0x[0-9a-fA-F]+|\d+):(.+)$', text)
    if not m:
        raise LabError(f'--check-window {text}: expected N:OFFSET:FILE (e.g. 0:0x1000:expected.bin)', '', EXIT_USAGE)
    path = os.path.abspath(m.group(3))
    if not os.path.isfile(path):
        raise LabError(f'--check-window {text}: {path} does not exist', '', EXIT_USAGE)
    return int(m.group(1)), int(m.group(2), 0), path


def compare_window(fd, offset, expected, size):
    """None when window bytes at offset equal expected, else a message naming where they differ."""
    if offset + len(expected) > size:
        return f'expectation of {len(expected)} bytes at {offset:#x} runs past the window ({size:#x} bytes)'
    got = os.pread(fd, len(expected), offset)
    if got == expected:
        return None
    diffs = [i for i in range(len(expected)) if got[i] != expected[i]]
    first = diffs[0]
    lo = first - first % 16
    return (f'{len(diffs)} of {len(expected)} bytes differ at {offset:#x}+; first at {offset + first:#x}: '
            f'expected {expected[lo:lo + 16].hex(" ")}, window has {got[lo:lo + 16].hex(" ")} '
            f'(16 bytes from {offset + lo:#x})')


def check_windows(preset, fds, outdir, checks):
    """Compares each window's host backing file against what the guest test or --check-window expect."""
    todo = list(checks)
    for name in sorted(os.listdir(outdir)):
        if name.startswith('expect-'):
            m = EXPECT_RE.match(name)
            if not m:
                return [f'{name} in BARDRIVE_LAB_OUT: expected the form expect-window<N>@<offset>.bin']
            todo.append((int(m.group(1)), int(m.group(2), 0), os.path.join(outdir, name)))
    problems = []
    for n, offset, path in todo:
        if n >= len(fds):
            problems.append(f'window check {os.path.basename(path)}: preset {preset.name} has {len(fds)} windows')
            continue
        with open(path, 'rb') as f:
            expected = f.read()
        msg = compare_window(fds[n], offset, expected, preset.windows[n].size_mib * MIB)
        if msg:
            problems.append(f'window {n} ({preset.windows[n].bdf}) does not hold {os.path.basename(path)}: {msg}')
        else:
            say(f'window {n} holds {os.path.basename(path)} ({len(expected)} bytes at {offset:#x}), '
                'read from the host\'s backing file')
    return problems
