"""What every part of the runner shares: exit codes (docs/lab.md), the errors that carry them, where the lab and
the project are, and running a host tool with a clear error."""

import os
import shutil
import subprocess
import sys

# Exit codes (docs/lab.md): meson reads 77 as SKIPPED; everything else non-zero is a failure.
EXIT_USAGE = 2
EXIT_SKIP = 77
EXIT_MISMATCH = 1
EXIT_TIMEOUT = 124
EXIT_GUEST_LOST = 125
EXIT_NOT_FOUND = 127
MIB = 1 << 20

LAB_DIR = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))  # lab/: this package's parent
PROJECT_ROOT = os.path.dirname(LAB_DIR)


class LabError(Exception):
    """A failure with what went wrong, how to fix it, and the exit code to leave with."""

    def __init__(self, message, fix='', code=1):
        super().__init__(message)
        self.fix = fix
        self.code = code


class CannotRun(LabError):
    """The lab cannot run on this machine (no QEMU, no kernel, no network): SKIPPED under meson."""

    def __init__(self, message, fix=''):
        super().__init__(message, fix, EXIT_SKIP)


def say(*parts):
    print('lab:', *parts, file=sys.stderr, flush=True)


def run_tool(argv, what, fix, cannot_run=False, **kw):
    try:
        return subprocess.run(argv, check=True, capture_output=True, text=True, **kw).stdout
    except FileNotFoundError:
        err = LabError(f'{argv[0]} not found ({what})', fix)
    except subprocess.CalledProcessError as e:
        detail = (e.stderr or e.stdout or '').strip().splitlines()[-3:]
        err = LabError(f'{what} failed: ' + ' | '.join(detail), fix)
    if cannot_run:
        raise CannotRun(str(err), err.fix)
    raise err


def check_tools(*tools):
    for tool, pkg in tools:
        if not shutil.which(tool):
            raise CannotRun(f'{tool} not found (package {pkg})', 'run scripts/setup.sh as root')
