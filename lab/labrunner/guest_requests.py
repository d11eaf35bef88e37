"""Requests a guest test makes of the host while it runs (docs/lab.md, "Pulling a cable from the guest"): files
in $BARDRIVE_LAB_OUT that the runner serves through QEMU's monitor (QMP)."""

import json
import os
import re
import socket

class GuestRequests:
    """What a guest test asks the host to do while it runs, through files in $BARDRIVE_LAB_OUT.

    request-set_link holds 'NETDEV on|off' (NIC n's netdev is nicN): the runner sends QEMU's monitor
    (QMP) set_link, which takes that NIC's link down or up as a pulled cable would, removes the
    request and answers in request-set_link.done: 'ok', or 'error: ...'. The guest writes the request
    under another name and renames it, so the runner never reads half of one."""

    LINK = 'request-set_link'

    def __init__(self, outdir, qmp_path):
        self.outdir, self.qmp_path, self.qmp_file = outdir, qmp_path, None

    def serve(self):
        req = os.path.join(self.outdir, self.LINK)
        try:
            with open(req) as f:
                text = f.read()
        except FileNotFoundError:
            return
        os.unlink(req)
        words = text.split()
        if len(words) != 2 or not re.fullmatch(r'nic\d+', words[0]) or words[1] not in ('on', 'off'):
            answer = f'error: {text.strip()!r} is not "nicN on|off"'
        else:
            try:
                reply = self.qmp('set_link', name=words[0], up=words[1] == 'on')
                answer = 'ok' if 'return' in reply else f'error: {reply.get("error", reply)}'
            except (OSError, ValueError) as e:
                answer = f'error: QMP: {e}'
        tmp = req + '.done.tmp'
        with open(tmp, 'w') as f:
            f.write(answer + '\n')
        os.rename(tmp, req + '.done')

    def qmp(self, command, **arguments):
        """Sends one QMP command (connecting on first use) and returns its reply, skipping events."""
        if self.qmp_file is None:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.settimeout(10)
            try:
                sock.connect(self.qmp_path)
            except OSError:
                sock.close()
                raise
            self.qmp_file = sock.makefile('rw')
            json.loads(self.qmp_file.readline())  # the greeting
            self.qmp('qmp_capabilities')
        self.qmp_file.write(json.dumps({'execute': command, 'arguments': arguments}) + '\n')
        self.qmp_file.flush()
        while True:
            line = self.qmp_file.readline()
            if not line:
                raise ValueError('QEMU closed the monitor')
            reply = json.loads(line)
            if 'return' in reply or 'error' in reply:
                return reply
