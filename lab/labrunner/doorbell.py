"""--doorbell: QEMU's ivshmem-doorbell device and the one-peer ivshmem server that lab/lab serves it with."""

import os
import socket
import struct
import threading

from .common import MIB

DOORBELL_BDF = '0000:00:09.0'  # --doorbell: QEMU's ivshmem-doorbell on the root bus, bound to vfio-pci


class DoorbellServer:
    """A one-client ivshmem server (QEMU's docs/specs/ivshmem-spec.rst; Debian ships no ivshmem-server) for
    --doorbell: it gives the device peer ID 0, 1 MiB of shared memory and one eventfd per vector for its own
    peer ID, so the device's doorbell rung with its own ID raises its own MSI-X vector."""

    def __init__(self, path, vectors=1):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(path)
        self.sock.listen(1)
        self.shm = os.memfd_create('bardrive-lab-doorbell')
        os.ftruncate(self.shm, MIB)
        self.events = [os.eventfd(0) for _ in range(vectors)]
        self.conn = None
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        try:
            self.conn, _ = self.sock.accept()
            word = lambda v: struct.pack('<q', v)
            self.conn.sendall(word(0))  # protocol version
            self.conn.sendall(word(0))  # the client's peer ID
            socket.send_fds(self.conn, [word(-1)], [self.shm])  # the shared memory
            for fd in self.events:  # its own vectors: peer ID 0, one eventfd each
                socket.send_fds(self.conn, [word(0)], [fd])
        except OSError:
            pass  # QEMU went away; boot() reports that

    def close(self):
        for f in [self.conn, self.sock]:
            if f:
                f.close()
        for fd in [self.shm, *self.events]:
            os.close(fd)
