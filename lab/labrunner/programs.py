"""What the guest runs from the host: its PATH (the host's /usr, then busybox), the programs lab tests and benches
need there (lab/guest-programs, with their packages, checked before booting), and CMD located before booting."""

import os
import subprocess

from .common import EXIT_NOT_FOUND, LAB_DIR, CannotRun, LabError

GUEST_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/.lab/bin'
GUEST_PROGRAMS = os.path.join(LAB_DIR, 'guest-programs')  # the programs guests run from the host's /usr
HOST_PATH_IN_GUEST = [d for d in GUEST_PATH.split(':') if d.startswith('/usr/')]


def read_guest_programs(path):
    """[(program, package)] from lab/guest-programs (which scripts/setup.sh installs too)."""
    out = []
    with open(path) as f:
        for n, line in enumerate(f, 1):
            words = line.split()
            if not words or words[0].startswith('#'):
                continue
            if len(words) < 2:
                raise LabError(f'{path}:{n}: expected PROGRAM PACKAGE, got {line.strip()!r}', 'fix that line')
            out.append((words[0], words[1]))
    return out


def missing_guest_programs(programs, dirs=HOST_PATH_IN_GUEST):
    """[(program, package)] of the programs that the guest's PATH would not find in the host's /usr, or would
    find only as busybox (whose applets, e.g. `ip`, lack what the tests use)."""
    missing = []
    for prog, pkg in programs:
        found = next((os.path.join(d, prog) for d in dirs if os.path.isfile(os.path.join(d, prog))
                      and os.access(os.path.join(d, prog), os.X_OK)), None)
        if not found or os.path.basename(os.path.realpath(found)) == 'busybox':
            missing.append((prog, pkg))
    return missing


def check_guest_programs():
    missing = missing_guest_programs(read_guest_programs(GUEST_PROGRAMS))
    if missing:
        pkgs = sorted({pkg for _, pkg in missing})
        raise CannotRun('the guest runs the host\'s programs, and these are not installed here: ' +
                        ', '.join(f'{prog} (package {pkg})' for prog, pkg in missing) +
                        f'; {GUEST_PROGRAMS} lists them',
                        f'run scripts/setup.sh as root (or apt-get install {" ".join(pkgs)})')


def locate_command(cmd0, cwd):
    """The host path of CMD[0] (the guest sees the same files), or an error before booting."""
    if '/' in cmd0:
        path = os.path.normpath(os.path.join(cwd, cmd0))
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
        raise LabError(f'command not found: {cmd0} (no executable {path})',
                       'build it first (meson compile -C BUILDDIR) or fix the path', EXIT_NOT_FOUND)
    for d in GUEST_PATH.split(':'):
        path = os.path.join(d, cmd0)
        if d.startswith('/usr') and os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    if os.path.exists('/bin/busybox') and cmd0 in subprocess.run(['/bin/busybox', '--list'], capture_output=True,
                                                                  text=True).stdout.split():
        return None
    raise LabError(f'command not found in the guest: {cmd0} (the guest\'s PATH is the host\'s /usr/sbin, /usr/bin '
                   'and busybox)', 'install it on the host (the guest shares its /usr) or give a path', EXIT_NOT_FOUND)
