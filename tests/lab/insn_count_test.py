#!/usr/bin/python3
"""Unit tests of the runner's --count-instructions (lab/labrunner/insn_count.py) that boot nothing and download
nothing: QEMU's version line, apt's policy and source records, the header's API version and the plugin's probe
line are read right; a QEMU that is not Debian's is refused with the fix; the runner refuses KVM and such a QEMU
before booting. Usage: insn_count_test.py [LAB_RUNNER]"""

import os
import stat
import subprocess
import sys
import tempfile
import unittest

RUNNER = os.path.abspath(sys.argv.pop(1) if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), '../../lab/lab'))
sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.realpath(RUNNER)))
from labrunner import common  # noqa: E402
from labrunner import insn_count as ic  # noqa: E402

DEB = '1:10.0.2+ds-2+deb13u1~bpo12+1'
POLICY = f'''qemu-system-x86:
  Installed: {DEB}
  Candidate: {DEB}
  Version table:
 *** {DEB} 100
        100 http://deb.debian.org/debian bookworm-backports/main amd64 Packages
        100 /var/lib/dpkg/status
     1:7.2+dfsg-7+deb12u18+b3 500
        500 http://deb.debian.org/debian bookworm/main amd64 Packages
'''
SHOWSRC = f'''Package: qemu
Version: 1:9.2.0+ds-1~bpo12+1
Checksums-Sha256:
 1111111111111111111111111111111111111111111111111111111111111111 3000 qemu_9.2.0+ds-1~bpo12+1.dsc
 2222222222222222222222222222222222222222222222222222222222222222 38000000 qemu_9.2.0+ds.orig.tar.xz

Package: qemu
Version: {DEB}
Build-Depends: debhelper-compat (= 13)
Checksums-Sha256:
 aaaa 9001 qemu_10.0.2+ds-2+deb13u1~bpo12+1.dsc
 0901da33844a331bf8b3602b9c1fbd178e60b737c8e3ade678255bd090c9b9f1 39449628 qemu_10.0.2+ds.orig.tar.xz
 bbbb 180000 qemu_10.0.2+ds-2+deb13u1~bpo12+1.debian.tar.xz
Homepage: http://www.qemu.org/
'''


class Parsing(unittest.TestCase):
    def test_qemu_version(self):
        self.assertEqual(ic.parse_qemu_version(f'QEMU emulator version 10.0.2 (Debian {DEB})\nCopyright (c) 2003'),
                         ('10.0.2', DEB))
        self.assertEqual(ic.parse_qemu_version('QEMU emulator version 9.1.50 (v9.1.0-1234-gabc)\n'),
                         ('9.1.50', None))
        self.assertEqual(ic.parse_qemu_version('QEMU emulator version 10.1.0\n'), ('10.1.0', None))
        self.assertIsNone(ic.parse_qemu_version('qemu-system-x86_64: -version: invalid option'))

    def test_upstream_of(self):
        self.assertEqual(ic.upstream_of(DEB), '10.0.2+ds')
        self.assertEqual(ic.upstream_of('10.0.2'), '10.0.2')

    def test_policy_origin(self):
        self.assertEqual(ic.parse_policy_origin(POLICY, DEB),
                         ('http://deb.debian.org/debian', 'bookworm-backports', 'main'))
        self.assertEqual(ic.parse_policy_origin(POLICY, '1:7.2+dfsg-7+deb12u18+b3'),
                         ('http://deb.debian.org/debian', 'bookworm', 'main'))
        self.assertIsNone(ic.parse_policy_origin(POLICY, '1:8.0'))
        local_only = f' *** {DEB} 100\n        100 /var/lib/dpkg/status\n'
        self.assertIsNone(ic.parse_policy_origin(local_only, DEB))

    def test_showsrc_orig(self):
        self.assertEqual(ic.parse_showsrc_orig(SHOWSRC, DEB),
                         ('qemu_10.0.2+ds.orig.tar.xz',
                          '0901da33844a331bf8b3602b9c1fbd178e60b737c8e3ade678255bd090c9b9f1', 39449628))
        self.assertEqual(ic.parse_showsrc_orig(SHOWSRC, '1:9.2.0+ds-1~bpo12+1')[0], 'qemu_9.2.0+ds.orig.tar.xz')
        self.assertIsNone(ic.parse_showsrc_orig(SHOWSRC, '1:10.0.3+ds-1'))

    def test_header_version(self):
        self.assertEqual(ic.parse_header_version('/* v4 */\n#define QEMU_PLUGIN_VERSION 4\n'), 4)
        self.assertIsNone(ic.parse_header_version('#define QEMU_PLUGIN_VERSION_X 4\n'))

    def test_probe(self):
        ok = ic.parse_probe('insn_count: plugin API: QEMU x86_64 offers 4 (minimum 2), built against 4\n'
                            'qemu-system-x86_64: Could not load plugin x.so: qemu_plugin_install returned error code -1')
        self.assertEqual(ok, {'target': 'x86_64', 'offers': 4, 'minimum': 2, 'built': 4, 'ok': True})
        newer = ic.parse_probe('insn_count: plugin API: QEMU x86_64 offers 5 (minimum 2), built against 4: mismatch, '
                               'rebuild against this QEMU\'s header')
        self.assertFalse(newer['ok'])
        internals = ic.parse_probe('insn_count: plugin API: QEMU x86_64 offers 4 (minimum 2), built against 4; QEMU '
                                   'exports no current_cpu/qemu_get_cpu: cannot attribute blocks to vCPUs')
        self.assertFalse(internals['ok'])
        # QEMU refusing the plugin before running it: no probe line at all
        self.assertIsNone(ic.parse_probe('qemu-system-x86_64: Could not load plugin x.so: plugin needs API version '
                                         '9, but this QEMU supports only a maximum version of 4'))

    def test_entry_key(self):
        self.assertEqual(ic.entry_key(DEB, 'ab' * 32), 'insn_count-1_10.0.2+ds-2+deb13u1_bpo12+1-abababababab-l1')


def fake_qemu(dir, version_line):
    path = os.path.join(dir, 'qemu-system-x86_64')
    with open(path, 'w') as f:
        f.write(f'#!/bin/sh\necho "{version_line}"\n')
    os.chmod(path, stat.S_IRWXU)
    return path


class Refusals(unittest.TestCase):

    def test_not_debian_qemu(self):
        with tempfile.TemporaryDirectory() as d:
            qemu = fake_qemu(d, 'QEMU emulator version 10.1.0')
            with self.assertRaises(common.CannotRun) as e:
                ic.prepare(d, qemu)
            self.assertEqual(e.exception.code, 77)
            self.assertIn('is not Debian\'s QEMU', str(e.exception))
            self.assertIn('scripts/setup.sh', e.exception.fix)

    def test_binary_and_package_disagree(self):
        with tempfile.TemporaryDirectory() as d:
            qemu = fake_qemu(d, 'QEMU emulator version 10.0.2 (Debian 1:10.0.2+ds-1)')
            with self.assertRaises(common.CannotRun) as e:
                ic.prepare(d, qemu)
            self.assertEqual(e.exception.code, 77)
            self.assertIn('says it is Debian 1:10.0.2+ds-1, but dpkg has qemu-system-x86', str(e.exception))

    def test_log_created_empty(self):
        with tempfile.TemporaryDirectory() as d:
            args = ic.qemu_args('/cache/insn_count.so', d)
            self.assertEqual(args, ['-plugin', f'/cache/insn_count.so,log={d}/insn-counts'])
            self.assertEqual(os.path.getsize(os.path.join(d, 'insn-counts')), 0)


class RunnerOption(unittest.TestCase):
    """lab/lab run --count-instructions refuses what it cannot count, before booting anything."""

    def lab(self, *args, env=None):
        e = {k: v for k, v in os.environ.items() if k != 'BARDRIVE_LAB_REQUIRED'}
        e.update(env or {})
        p = subprocess.run([RUNNER, *args], capture_output=True, text=True, env=e, timeout=120)
        return p.returncode, p.stdout + p.stderr

    def test_not_under_kvm(self):
        rc, out = self.lab('run', 'basic', '--count-instructions', '--accel', 'kvm', '--', 'true')
        self.assertEqual(rc, 2, out)
        self.assertIn('--count-instructions counts under TCG', out)

    def test_not_debian_qemu_skips(self):
        with tempfile.TemporaryDirectory() as d:
            qemu = fake_qemu(d, 'QEMU emulator version 10.1.0')
            rc, out = self.lab('run', 'basic', '--count-instructions', '--', 'true',
                               env={'BARDRIVE_LAB_QEMU': qemu, 'BARDRIVE_LAB_CACHE': d})
            self.assertEqual(rc, 77, out)
            self.assertIn('is not Debian\'s QEMU', out)


if __name__ == '__main__':
    unittest.main(verbosity=2)
