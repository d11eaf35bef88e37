#!/usr/bin/python3
"""Lab tests of lab/lab itself (each boots guests): exit codes come back, a hung guest is killed at
the timeout with its console log kept and nothing left behind, parallel runs keep their windows
apart, and the host-side window check passes on the right bytes and fails on wrong ones.
Usage: runner_lab_test.py LAB_RUNNER"""

import glob
import os
import re
import secrets
import signal
import subprocess
import sys
import tempfile
import threading
import time
import unittest

RUNNER = os.path.abspath(sys.argv.pop(1)) if len(sys.argv) > 1 else None

# Runs in the guest: writes TOKEN at OFFSET of window 0 through sysfs (no driver needed), then states
# what the host must find there (EXPECT: the bytes, or other bytes to provoke a mismatch).
GUEST_WRITER = r'''
import mmap, os, sys
token, offset, expect = sys.argv[1].encode(), int(sys.argv[2], 0), sys.argv[3].encode()
bdf = os.environ['BARDRIVE_LAB_WINDOWS'].split()[0]
with open(f'/sys/bus/pci/devices/{bdf}/resource2', 'r+b') as f:
    m = mmap.mmap(f.fileno(), 1 << 20)
    m[offset:offset + len(token)] = token
    m.close()
with open(os.path.join(os.environ['BARDRIVE_LAB_OUT'], f'expect-window0@{offset:#x}.bin'), 'wb') as f:
    f.write(expect)
'''


# Runs in a virtio guest with --bind none and --queues 2: the kernel's virtio_net on both NICs sees MQ with two queue
# pairs; frames cross the taps' bridge both ways byte-exact; the host pulls NIC B's cable and puts it back.
GUEST_WIRE = r'''
import os, socket, sys, time
out = os.environ['BARDRIVE_LAB_OUT']
def attr(i, a): return open(f'/sys/class/net/{i}/{a}').read().strip()
def wait_carrier(i, want):
    t = time.time()
    while time.time() - t < 15 and attr(i, 'carrier') != want: time.sleep(0.1)
    return attr(i, 'carrier')
def set_link(n, state):
    open(f'{out}/req', 'w').write(f'nic{n} {state}'); os.rename(f'{out}/req', f'{out}/request-set_link')
    while not os.path.exists(f'{out}/request-set_link.done'): time.sleep(0.05)
    answer = open(f'{out}/request-set_link.done').read().strip(); os.unlink(f'{out}/request-set_link.done')
    return answer
socks = {}
for i in ('eth0', 'eth1'):
    os.system(f'ip link set {i} up')
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x88b5)); s.bind((i, 0x88b5)); s.settimeout(2)
    socks[i] = s
def cross(a, b, n):
    got = 0
    for k in range(n):
        payload = os.urandom(1000)
        mac = lambda i: bytes.fromhex(attr(i, 'address').replace(':', ''))
        socks[a].send(mac(b) + mac(a) + b'\x88\xb5' + payload)
        try:
            while socks[b].recv(2048)[14:] != payload: pass
            got += 1
        except socket.timeout: pass
    return got
print('mq', attr('eth0', 'device/features')[22], 'queues', len(os.listdir('/sys/class/net/eth0/queues')) // 2,
      'carrier', wait_carrier('eth0', '1'), wait_carrier('eth1', '1'))
print('a->b', cross('eth0', 'eth1', 10), 'b->a', cross('eth1', 'eth0', 10))
print('off', set_link(1, 'off'), wait_carrier('eth1', '0'), 'on', set_link(1, 'on'), wait_carrier('eth1', '1'))
'''


def lab(*args, timeout=600):
    env = dict(os.environ)
    p = subprocess.run([RUNNER, *args], capture_output=True, text=True, env=env, timeout=timeout)
    if p.returncode == 77:
        raise unittest.SkipTest(p.stderr.strip().splitlines()[-3:])
    return p.returncode, p.stdout, p.stderr


def write_window(token, offset, expect, *extra):
    # The NICs go to vfio-pci (no igb probe to wait for); the window stays driverless for sysfs.
    return lab('run', 'basic', '--bind', '0000:01:00.0,0000:02:00.0', *extra, '--', 'python3', '-c', GUEST_WRITER, token, hex(offset),
               expect)


class Runner(unittest.TestCase):
    def test_exit_code_and_output_come_back(self):
        rc, out, err = lab('run', 'basic', '--', 'sh', '-c',
                           'echo "preset=$BARDRIVE_LAB_PRESET nics=$BARDRIVE_LAB_NICS"; exit 3')
        self.assertEqual(rc, 3, err)
        self.assertIn('preset=basic nics=0000:01:00.0 0000:02:00.0', out)
        subprocess.run(['rm', '-rf', re.search(r'run directory (\S+) kept', err).group(1)])

    def test_a_bare_name_runs_the_hosts_program_not_busybox(self):
        # /init is a busybox shell, which prefers its own applets to PATH: `sh` must still be the host's sh, and
        # `ip` in it the host's ip (iproute2), as lab/guest-programs promises.
        rc, out, err = lab('run', 'basic', '--bind', 'all', '--', 'sh', '-c',
                           'readlink /proc/$$/exe; ip -V')
        self.assertEqual(rc, 0, err)
        self.assertNotIn('busybox', out)
        self.assertIn(os.path.realpath('/usr/bin/sh'), out)
        self.assertIn('iproute2', out)

    def test_virtio_queues_on_taps_carry_frames_and_set_link(self):
        rc, out, err = lab('run', 'virtio', '--queues', '2', '--bind', 'none', '--', 'python3', '-c', GUEST_WIRE)
        self.assertEqual(rc, 0, err)
        self.assertIn('mq 1 queues 2 carrier 1 1', out)
        self.assertIn('a->b 10 b->a 10', out)
        self.assertIn('off ok 0 on ok 1', out)

    def test_hung_guest_is_killed_and_leaves_nothing(self):
        rc, out, err = lab('run', 'basic', '--timeout', '5', '--', 'sleep', '3600')
        self.assertEqual(rc, 124, err)
        self.assertIn('timed out after 5', err)
        log = re.search(r'console log: (\S+)', err).group(1)
        self.assertTrue(os.path.isfile(log), err)
        rundir = os.path.dirname(log)
        run_id = os.path.basename(rundir)
        self.assertEqual(glob.glob(f'/dev/shm/{run_id}*'), [])
        ps = subprocess.run(['ps', '-eo', 'args'], capture_output=True, text=True).stdout
        self.assertNotIn(rundir, ps)
        subprocess.run(['rm', '-rf', rundir])

    def test_signals_leave_nothing(self):
        # SIGTERM: the runner kills QEMU and removes its files itself. SIGKILL: QEMU dies with the
        # runner (PDEATHSIG) and the next lab/lab command removes the window file left behind.
        for sig in (signal.SIGTERM, signal.SIGKILL):
            p = subprocess.Popen([RUNNER, 'run', 'basic', '--', 'sleep', '3600'], stdout=subprocess.PIPE,
                                 stderr=subprocess.STDOUT)
            deadline = time.monotonic() + 60
            while not glob.glob(f'/dev/shm/bardrive-lab-{p.pid}-*') and time.monotonic() < deadline:
                time.sleep(0.1)
            self.assertTrue(glob.glob(f'/dev/shm/bardrive-lab-{p.pid}-*'), 'the run never started')
            time.sleep(1)
            p.send_signal(sig)
            p.wait()
            time.sleep(0.5)
            ps = subprocess.run(['ps', '-eo', 'args'], capture_output=True, text=True).stdout
            self.assertNotIn(f'bardrive-lab-{p.pid}-', ps, sig)
            if sig == signal.SIGKILL:
                lab('run', 'nosuch', '--', 'true')
            self.assertEqual(glob.glob(f'/dev/shm/bardrive-lab-{p.pid}-*'), [], sig)
            self.assertEqual(glob.glob(f'{tempfile.gettempdir()}/bardrive-lab-{p.pid}-*'), [], sig)

    def test_window_check_passes_and_parallel_runs_stay_apart(self):
        results = {}
        keep = tempfile.mkdtemp()

        def one(name, extra):
            token = f'bardrive-{name}-{secrets.token_hex(8)}'
            results[name] = (token, write_window(token, 0x2000, token, *extra))
        threads = [threading.Thread(target=one, args=('a', ['--keep-windows', keep])),
                   threading.Thread(target=one, args=('b', []))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for name, (token, (rc, out, err)) in results.items():
            self.assertEqual(rc, 0, err)
            self.assertIn('window 0 holds expect-window0@0x2000.bin', err)
        with open(os.path.join(keep, 'window0.bin'), 'rb') as f:
            f.seek(0x2000)
            self.assertEqual(f.read(len(results['a'][0])), results['a'][0].encode())
        subprocess.run(['rm', '-rf', keep])

    def test_window_mismatch_fails_the_run(self):
        with tempfile.NamedTemporaryFile(suffix='.bin') as want:
            want.write(b'not what the guest wrote')
            want.flush()
            rc, out, err = write_window('bardrive-written', 0x3000, 'bardrive-wriTTen',
                                        '--check-window', f'0:0x3000:{want.name}')
        self.assertEqual(rc, 1, err)
        self.assertIn('does not hold expect-window0@0x3000.bin: 2 of 16 bytes differ', err)
        self.assertIn(f'does not hold {os.path.basename(want.name)}', err)
        subprocess.run(['rm', '-rf', re.search(r'run directory (\S+) kept', err).group(1)])


if __name__ == '__main__':
    unittest.main(verbosity=2)
