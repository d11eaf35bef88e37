#!/usr/bin/python3
"""Unit tests of lab/lab that boot nothing, one class per part of the runner (lab/labrunner/): the command
line (bad input gets a clear message and the right exit code), the guest programs checked before booting,
the preset table (it covers the topology classes docs/lab.md promises), window comparison (finds bytes),
guest requests (request-set_link reaches a fake QMP monitor and answers the guest), the doorbell server.
Usage: runner_test.py LAB_RUNNER"""

import json
import os
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import unittest
from unittest import mock

RUNNER = os.path.abspath(sys.argv.pop(1) if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), '../../lab/lab'))
# The runner's parts, imported from the package beside the command (lab/labrunner/).
sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.realpath(RUNNER)))
from labrunner import boot, common, doorbell, guest_requests, network, presets, programs, windows  # noqa: E402


def lab(*args, env=None):
    e = dict(os.environ)
    e.pop('BARDRIVE_LAB_REQUIRED', None)
    e.update(env or {})
    p = subprocess.run([RUNNER, *args], capture_output=True, text=True, env=e, timeout=120)
    return p.returncode, p.stdout + p.stderr


class BadInput(unittest.TestCase):
    def test_unknown_preset(self):
        rc, out = lab('run', 'nosuch', '--', 'true')
        self.assertEqual(rc, 2, out)
        self.assertIn("unknown preset 'nosuch'", out)
        self.assertIn('basic, switch, numa, virtio, e1000e', out)

    def test_no_command(self):
        rc, out = lab('run', 'basic')
        self.assertEqual(rc, 2, out)
        self.assertIn('no command given after --', out)

    def test_missing_program_path(self):
        rc, out = lab('run', 'basic', '--', 'build/no/such-test')
        self.assertEqual(rc, 127, out)
        self.assertIn('command not found: build/no/such-test', out)
        self.assertIn('meson compile', out)

    def test_command_not_in_guest_path(self):
        rc, out = lab('run', 'basic', '--', 'no-such-tool-bardrive')
        self.assertEqual(rc, 127, out)
        self.assertIn('command not found in the guest: no-such-tool-bardrive', out)

    def test_bind_not_in_preset(self):
        rc, out = lab('run', 'basic', '--bind', '05:00.0', '--', 'true')
        self.assertEqual(rc, 2, out)
        self.assertIn('not a NIC or window of preset basic', out)
        self.assertIn('0000:01:00.0', out)

    def test_bad_hugepages_1g(self):
        for preset, n in (('basic', '9'), ('basic', '-1'), ('numa', '1')):
            rc, out = lab('run', preset, '--hugepages-1g', n, '--', 'true')
            self.assertEqual(rc, 2, out)
            self.assertIn(f'--hugepages-1g {n}: between 0 and 4, and not with a NUMA preset', out)

    def test_virtio_net_properties(self):
        rc, out = lab('run', 'basic', '--virtio-net', 'packed=on', '--', 'true')
        self.assertEqual(rc, 2, out)
        self.assertIn('preset basic has no virtio-net NIC', out)
        rc, out = lab('run', 'virtio', '--virtio-net', 'packed=on;reboot', '--', 'true')
        self.assertEqual(rc, 2, out)
        self.assertIn('not a comma-separated list of NAME=VALUE', out)

    def test_bad_timeout_and_share(self):
        for t in ('-5', '0', 'inf', 'nan'):
            rc, out = lab('run', 'basic', '--timeout', t, '--', 'true')
            self.assertEqual(rc, 2, out)
            self.assertIn('not a number of seconds from 1 to 86400', out)
        rc, out = lab('run', 'basic', '--share', '/nonexistent/bardrive', '--', 'true')
        self.assertEqual(rc, 2, out)
        self.assertIn('--share /nonexistent/bardrive: not a directory on this host', out)

    def test_bad_check_window(self):
        rc, out = lab('run', 'basic', '--check-window', 'zero', '--', 'true')
        self.assertEqual(rc, 2, out)
        self.assertIn('expected N:OFFSET:FILE', out)

    def test_no_qemu_skips_with_the_fix(self):
        rc, out = lab('run', 'basic', '--', 'true', env={'BARDRIVE_LAB_QEMU': '/nonexistent/qemu-system-x86_64'})
        self.assertEqual(rc, 77, out)
        self.assertIn('not found (package qemu-system-x86', out)
        self.assertIn('scripts/setup.sh', out)
        self.assertIn('SKIPPED', out)

    def test_required_lab_fails_instead_of_skipping(self):
        rc, out = lab('run', 'basic', '--', 'true', env={'BARDRIVE_LAB_QEMU': '/nonexistent/qemu-system-x86_64',
                                                          'BARDRIVE_LAB_REQUIRED': '1'})
        self.assertEqual(rc, 1, out)

    def test_unwritable_cache(self):
        rc, out = lab('prepare', env={'BARDRIVE_LAB_CACHE': '/proc/bardrive-lab-cache'})
        self.assertEqual(rc, 77, out)
        self.assertIn('BARDRIVE_LAB_CACHE', out)

    def test_no_network(self):
        # A proxy that refuses connections stands in for a machine without network.
        with tempfile.TemporaryDirectory() as cache, tempfile.NamedTemporaryFile('w', suffix='.conf') as conf:
            conf.write('Acquire::Retries "0";\n')
            conf.flush()
            env = {'BARDRIVE_LAB_CACHE': cache, 'http_proxy': 'http://127.0.0.1:9', 'APT_CONFIG': conf.name}
            rc, out = lab('prepare', env=env)
            self.assertEqual(rc, 1, out)
            self.assertIn('failed', out)
            self.assertIn('check the network', out)
            rc, out = lab('run', 'basic', '--', 'true', env=env)
            self.assertEqual(rc, 77, out)  # under meson: SKIPPED, with the reason
            self.assertIn('the guest kernel cannot be prepared', out)
            self.assertEqual(sorted(os.listdir(cache)), ['.lock-debian', 'debian.resolved.json'])  # nothing half-made

    def test_stale_cache_is_rebuilt(self):
        with tempfile.TemporaryDirectory() as cache, tempfile.NamedTemporaryFile('w', suffix='.conf') as conf:
            conf.write('Acquire::Retries "0";\n')
            conf.flush()
            old = os.path.join(cache, 'debian-6.12.1-old')
            os.makedirs(old)
            with open(os.path.join(old, 'complete.json'), 'w') as f:
                f.write('{}')
            os.symlink('debian-6.12.1-old', os.path.join(cache, 'debian.current'))
            env = {'BARDRIVE_LAB_CACHE': cache, 'http_proxy': 'http://127.0.0.1:9', 'APT_CONFIG': conf.name}
            rc, out = lab('prepare', env=env)
            self.assertIn('cache debian-6.12.1-old is stale', out)
            self.assertIn('downloading', out)
            self.assertEqual(rc, 1, out)


class GuestPrograms(unittest.TestCase):
    """lab/guest-programs: what the guest runs from the host's /usr; missing or busybox-only programs are named
    with their package before anything boots."""

    def test_the_list_names_what_the_tests_run(self):
        table = dict(programs.read_guest_programs(programs.GUEST_PROGRAMS))
        self.assertEqual(table['ip'], 'iproute2')
        self.assertEqual(table['tcpdump'], 'tcpdump')

    def test_setup_installs_every_package_of_the_list(self):
        with open(os.path.join(common.PROJECT_ROOT, 'scripts', 'setup.sh')) as f:
            setup = f.read()
        self.assertIn('lab/guest-programs', setup)  # setup.sh takes the packages from the same file

    def test_missing_and_busybox_stand_ins_are_refused_real_ones_pass(self):
        with tempfile.TemporaryDirectory() as d:
            for name, target in (('ip', '/bin/busybox'), ('lspci', None)):
                path = os.path.join(d, name)
                if target:
                    os.symlink(target, path)
                else:
                    with open(path, 'w') as f:
                        f.write('#!/bin/sh\n')
                    os.chmod(path, 0o755)
            got = programs.missing_guest_programs([('ip', 'iproute2'), ('lspci', 'pciutils'), ('tcpdump', 'tcpdump')],
                                             [d])
            self.assertEqual(got, [('ip', 'iproute2'), ('tcpdump', 'tcpdump')])

    def test_run_refuses_with_the_package_to_install(self):
        with tempfile.TemporaryDirectory() as d:
            listing = os.path.join(d, 'guest-programs')
            with open(listing, 'w') as f:
                f.write('# comment\nno-such-program-bardrive  no-such-package  a test\n')
            with mock.patch.object(programs, 'GUEST_PROGRAMS', listing), self.assertRaises(common.CannotRun) as e:
                programs.check_guest_programs()
            self.assertIn('no-such-program-bardrive (package no-such-package)', str(e.exception))
            self.assertIn('apt-get install no-such-package', e.exception.fix)
            self.assertEqual(e.exception.code, 77)


class Presets(unittest.TestCase):
    def test_listed(self):
        rc, out = lab('presets')
        self.assertEqual(rc, 0, out)
        for name in ('basic:', 'switch:', 'numa:', 'e1000e:', 'virtio:'):
            self.assertIn(name, out)

    def test_topology_classes_all_occur(self):
        classes = {c for p in presets.PRESETS.values() for _, _, c in p.classes}
        self.assertLessEqual({'PIX', 'PXB', 'PHB', 'NODE'}, classes)

    def test_every_preset_has_two_nics_and_a_window_with_unique_bdfs(self):
        for p in presets.PRESETS.values():
            bdfs = [d.bdf for d in p.nics + p.windows]
            self.assertEqual(len(bdfs), len(set(bdfs)), p.name)
            self.assertGreaterEqual(len(p.nics), 2, p.name)
            self.assertGreaterEqual(len(p.windows), 1, p.name)
            args = presets.preset_qemu_args(p, [f'/dev/shm/x{i}' for i in range(len(p.windows))])
            ids = [a.split('id=')[1].split(',')[0] for a in args if 'id=' in a]
            self.assertEqual(len(ids), len(set(ids)), p.name)

    def test_virtio_nics_are_modern_behind_the_iommu_and_take_extra_properties(self):
        args = presets.preset_qemu_args(presets.PRESETS['virtio'], ['/dev/shm/x0'], 'packed=on,mrg_rxbuf=off')
        nics = [a for a in args if a.startswith('virtio-net-pci,')]
        self.assertEqual(len(nics), 2)
        for a in nics:
            self.assertIn('disable-legacy=on,iommu_platform=on,packed=on,mrg_rxbuf=off', a)
        basic = presets.preset_qemu_args(presets.PRESETS['basic'], ['/dev/shm/x0'], 'packed=on')
        self.assertFalse([a for a in basic if 'packed=on' in a])


class Network(unittest.TestCase):
    """The NICs' wire: QEMU's hub by default; --queues N: multiqueue taps on a bridge in a namespace of the run's own."""

    def test_hub_by_default(self):
        args = presets.preset_qemu_args(presets.PRESETS['virtio'], ['/dev/shm/x0'])
        self.assertEqual([a for a in args if a.startswith(('hubport', 'tap'))],
                         ['hubport,id=nic0,hubid=0', 'hubport,id=nic1,hubid=0'])
        self.assertFalse([a for a in args if 'mq=on' in a])
        argv = ['qemu-system-x86_64', '-m', '1G']
        self.assertIs(network.wrap(argv, 2, 1), argv)

    def test_queues_make_taps_with_mq_and_a_vector_per_queue(self):
        args = presets.preset_qemu_args(presets.PRESETS['virtio'], ['/dev/shm/x0'], 'packed=on', 4)
        self.assertEqual([a for a in args if a.startswith(('hubport', 'tap'))],
                         [f'tap,id=nic{n},ifname=tap{n},script=no,downscript=no,vhost=off,queues=4' for n in (0, 1)])
        nics = [a for a in args if a.startswith('virtio-net-pci,')]
        self.assertEqual(len(nics), 2)
        for a in nics:
            self.assertIn('disable-legacy=on,iommu_platform=on,mq=on,vectors=10,packed=on', a)

    def test_queues_run_qemu_in_a_network_namespace_of_its_own(self):
        argv = ['qemu-system-x86_64', '-m', '1G']
        wrapped = network.wrap(argv, 2, 4)
        self.assertEqual(wrapped[0], 'unshare')
        self.assertIn('--net', wrapped[:wrapped.index('--')])
        self.assertEqual(wrapped[-3:], argv)
        script = wrapped[wrapped.index('-c') + 1]
        self.assertIn('ip tuntap add dev tap$i mode tap multi_queue', script)
        self.assertIn('learning off', script)  # the bridge floods like the hub

    def test_queues_refused_elsewhere_or_out_of_range(self):
        rc, out = lab('run', 'basic', '--queues', '2', '--', 'true')
        self.assertEqual(rc, 2, out)
        self.assertIn('the NICs of preset basic are not virtio-net', out)
        for n in ('0', '17'):
            rc, out = lab('run', 'virtio', '--queues', n, '--', 'true')
            self.assertEqual(rc, 2, out)
            self.assertIn(f'--queues {n}: between 1 and 16', out)


class Windows(unittest.TestCase):
    def setUp(self):
        self.f = tempfile.TemporaryFile()
        self.f.write(bytes(4096))
        self.f.seek(0x100)
        self.f.write(b'bardrive')
        self.f.flush()

    def tearDown(self):
        self.f.close()

    def test_equal(self):
        self.assertIsNone(windows.compare_window(self.f.fileno(), 0x100, b'bardrive', 4096))

    def test_difference_names_its_offset(self):
        msg = windows.compare_window(self.f.fileno(), 0x100, b'bardrivE', 4096)
        self.assertIn('1 of 8 bytes differ', msg)
        self.assertIn('first at 0x107', msg)

    def test_past_the_end(self):
        self.assertIn('runs past the window', windows.compare_window(self.f.fileno(), 4090, b'bardrive', 4096))

    def test_share_roots_never_nest_or_expose_usr(self):
        roots = boot.share_roots(['/work/main', '/work/main/build', '/usr/lib', '/', '/tmp/x'])
        self.assertEqual(roots, ['/tmp/x', '/work/main'])


class GuestRequests(unittest.TestCase):
    """request-set_link against a fake QMP server: what the runner sends and what it answers."""

    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.sock_path = os.path.join(self.dir.name, 'qmp.sock')
        self.received = []
        self.server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.server.bind(self.sock_path)
        self.server.listen(1)
        threading.Thread(target=self.serve_qmp, daemon=True).start()
        self.requests = guest_requests.GuestRequests(self.dir.name, self.sock_path)

    def tearDown(self):
        self.server.close()
        self.dir.cleanup()

    def serve_qmp(self):
        conn, _ = self.server.accept()
        f = conn.makefile('rw')
        f.write(json.dumps({'QMP': {'version': {}, 'capabilities': []}}) + '\n')
        f.flush()
        for line in f:
            cmd = json.loads(line)
            self.received.append(cmd)
            f.write(json.dumps({'event': 'NOISE'}) + '\n')  # events come between replies
            if cmd.get('arguments', {}).get('name') == 'nic9':
                f.write(json.dumps({'error': {'class': 'DeviceNotFound', 'desc': "Device 'nic9' not found"}}) + '\n')
            else:
                f.write(json.dumps({'return': {}}) + '\n')
            f.flush()

    def ask(self, text):
        req = os.path.join(self.dir.name, 'request-set_link')
        with open(req, 'w') as f:
            f.write(text)
        self.requests.serve()
        self.assertFalse(os.path.exists(req), 'the request stays until served')
        with open(req + '.done') as f:
            return f.read().strip()

    def test_nothing_asked_nothing_done(self):
        self.requests.serve()
        self.assertEqual(os.listdir(self.dir.name), ['qmp.sock'])

    def test_set_link_off_and_on(self):
        self.assertEqual(self.ask('nic1 off\n'), 'ok')
        self.assertEqual(self.ask('nic1 on'), 'ok')
        sent = [c for c in self.received if c['execute'] == 'set_link']
        self.assertEqual(sent, [{'execute': 'set_link', 'arguments': {'name': 'nic1', 'up': False}},
                                {'execute': 'set_link', 'arguments': {'name': 'nic1', 'up': True}}])
        self.assertEqual(self.received[0]['execute'], 'qmp_capabilities')

    def test_malformed_request_is_answered_not_sent(self):
        self.assertIn('is not "nicN on|off"', self.ask('eth0 down'))
        self.assertIn('is not "nicN on|off"', self.ask('nic0'))
        self.assertEqual(self.received, [])

    def test_qmp_error_is_passed_back(self):
        self.assertIn("Device 'nic9' not found", self.ask('nic9 off'))

    def test_no_monitor(self):
        requests = guest_requests.GuestRequests(self.dir.name, os.path.join(self.dir.name, 'none.sock'))
        req = os.path.join(self.dir.name, 'request-set_link')
        with open(req, 'w') as f:
            f.write('nic0 off')
        requests.serve()
        with open(req + '.done') as f:
            self.assertIn('error: QMP:', f.read())
class Doorbell(unittest.TestCase):
    """--doorbell's ivshmem server speaks QEMU's protocol: version 0, peer ID 0, the shared memory, then
    one eventfd per vector for the peer's own ID; the eventfd is the one the server holds."""

    def test_server_protocol(self):
        with tempfile.TemporaryDirectory() as d:
            server = doorbell.DoorbellServer(os.path.join(d, 'sock'))
            try:
                c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                c.connect(os.path.join(d, 'sock'))
                got = []
                for _ in range(4):
                    data, fds, _, _ = socket.recv_fds(c, 8, 1)
                    got.append((struct.unpack('<q', data)[0], len(fds)))
                    if fds:
                        if got[-1][0] == -1:
                            self.assertEqual(os.fstat(fds[0]).st_size, 1 << 20)
                        else:
                            os.eventfd_write(fds[0], 1)  # the device rings: the server's eventfd sees it
                            self.assertEqual(os.eventfd_read(server.events[0]), 1)
                        for fd in fds:
                            os.close(fd)
                self.assertEqual(got, [(0, 0), (0, 0), (-1, 1), (0, 1)])
                c.close()
            finally:
                server.close()


if __name__ == '__main__':
    unittest.main(verbosity=2)

