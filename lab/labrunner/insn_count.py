"""--count-instructions: builds lab/plugins/insn_count.c, the lab's QEMU TCG plugin that counts guest instructions per vCPU, once per
machine and QEMU version, into the lab's cache (docs/lab.md, "Counting guest instructions").

The plugin API header (qemu-plugin.h) is not packaged by Debian; it comes from QEMU's source: the orig tarball of
the installed qemu-system-x86's source package, fetched with apt-get source --download-only through a private
apt configuration in the cache (a deb-src line for the archive and suite apt installed QEMU from; the host's apt
sources are left alone). The build is probed against the binary: QEMU loads it with probe=on and the plugin
reports QEMU's plugin API beside the one it was built against; any difference is refused.

Cache entry: CACHE/insn_count-<QEMU's Debian version>-<sha of insn_count.c>-l<LAYOUT>/ with insn_count.so,
qemu-plugin.h and complete.json (written last). Entries of other QEMU versions or sources are removed.
Errors are the runner's: CannotRun (exit 77) where the machine lacks something, LabError otherwise.
"""

import contextlib
import fcntl
import glob
import hashlib
import json
import os
import re
import shutil
import subprocess
import time

from .common import LAB_DIR, CannotRun, LabError

LAYOUT = 1  # bump when an entry's layout changes
SOURCE = os.path.join(LAB_DIR, 'plugins', 'insn_count.c')
PACKAGE = 'qemu-system-x86'
SOURCE_PACKAGE = 'qemu'
LOG_NAME = 'insn-counts'  # in the run's out/ directory ($BARDRIVE_LAB_OUT)


def plugin_error(message, fix='', cannot_run=False):
    """The runner's error: CannotRun (exit 77) where the machine lacks something, LabError otherwise."""
    return CannotRun(message, fix) if cannot_run else LabError(message, fix)


# ---------------------------------------------------------------------------------------------
# Parsing (unit-tested: tests/lab/insn_count_test.py)

def parse_qemu_version(text):
    """`qemu-system-x86_64 --version` -> (upstream version, Debian package version or None)."""
    m = re.search(r'QEMU emulator version (\S+)(?: \(Debian ([^)]+)\))?', text)
    if not m:
        return None
    return m.group(1), m.group(2)


def upstream_of(debian_version):
    """'1:10.0.2+ds-2+deb13u1~bpo12+1' -> '10.0.2+ds' (epoch and Debian revision dropped)."""
    v = debian_version.split(':', 1)[-1]
    return v.rsplit('-', 1)[0] if '-' in v else v


def parse_policy_origin(policy, version):
    """The archive (URI, suite, component) `apt-cache policy PACKAGE` lists for `version`, or None."""
    lines = policy.splitlines()
    for i, line in enumerate(lines):
        words = line.split()
        if len(words) >= 2 and words[-2] == version and (words[0] in ('***', version)):
            for origin in lines[i + 1:]:
                o = origin.split()
                if len(o) < 2 or not o[0].isdigit():
                    break
                if len(o) >= 3 and '://' in o[1] and '/' in o[2]:
                    suite, component = o[2].split('/', 1)
                    return o[1], suite, component
    return None


def parse_showsrc_orig(showsrc, version):
    """(file name, sha256, size) of the orig tarball of `version` in `apt-cache showsrc` output, or None."""
    for stanza in showsrc.split('\n\n'):
        if not re.search(rf'^Version: {re.escape(version)}$', stanza, re.M):
            continue
        m = re.search(r'^Checksums-Sha256:\n((?: .*\n?)+)', stanza, re.M)
        for line in (m.group(1).splitlines() if m else []):
            sha, size, name = line.split()
            if re.search(r'\.orig\.tar\.[a-z0-9]+$', name):
                return name, sha, int(size)
    return None


def parse_header_version(header):
    """QEMU_PLUGIN_VERSION of a qemu-plugin.h, or None."""
    m = re.search(r'^#define QEMU_PLUGIN_VERSION (\d+)', header, re.M)
    return int(m.group(1)) if m else None


PROBE_RE = re.compile(r'insn_count: plugin API: QEMU (\S+) offers (\d+) \(minimum (\d+)\), built against (\d+)(.*)')


def parse_probe(output):
    """The plugin's probe=on line -> dict(target, offers, minimum, built, ok), or None when QEMU never ran it
    (QEMU refused the plugin itself: its message is in `output`)."""
    m = PROBE_RE.search(output)
    if not m:
        return None
    offers, built = int(m.group(2)), int(m.group(4))
    return {'target': m.group(1), 'offers': offers, 'minimum': int(m.group(3)), 'built': built,
            'ok': offers == built and not m.group(5)}


# ---------------------------------------------------------------------------------------------

def run(argv, what, fix, cannot_run=False, check=True, **kw):
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=600, **kw)
    except FileNotFoundError:
        raise plugin_error(f'{argv[0]} not found ({what})', fix, cannot_run)
    except subprocess.TimeoutExpired:
        raise plugin_error(f'{what}: timed out', fix, cannot_run)
    if check and p.returncode != 0:
        detail = ' | '.join((p.stderr or p.stdout or '').strip().splitlines()[-3:])
        raise plugin_error(f'{what} failed (exit {p.returncode}): {detail}', fix, cannot_run)
    return p


def qemu_versions(qemu):
    """(upstream, Debian version) of the QEMU binary, checked against dpkg's record of qemu-system-x86."""
    out = run([qemu, '--version'], 'asking QEMU its version', 'run scripts/setup.sh as root', True).stdout
    parsed = parse_qemu_version(out)
    if not parsed or not parsed[1]:
        raise plugin_error(f'{qemu} is not Debian\'s QEMU ({out.strip().splitlines()[0] if out else "no version"}): '
                          'the plugin header comes from Debian\'s source package of the installed QEMU',
                          f'use Debian\'s {PACKAGE} (scripts/setup.sh) for --count-instructions', True)
    installed = run(['dpkg-query', '-W', '-f=${Version}', PACKAGE], f'asking dpkg for {PACKAGE}',
                    'run scripts/setup.sh as root', True, check=False).stdout.strip()
    if installed != parsed[1]:
        raise plugin_error(f'{qemu} says it is Debian {parsed[1]}, but dpkg has {PACKAGE} {installed or "not installed"}',
                          f'use the installed {PACKAGE}\'s qemu-system-x86_64 (or reinstall it)', True)
    return parsed


def fetch_orig(workdir, debian_version):
    """Downloads the orig tarball of QEMU's source package `debian_version` into workdir; returns its path."""
    policy = run(['apt-cache', 'policy', PACKAGE], 'apt-cache policy', 'run scripts/setup.sh as root', True).stdout
    origin = parse_policy_origin(policy, debian_version) or ('http://deb.debian.org/debian', 'bookworm-backports',
                                                             'main')
    apt = os.path.join(workdir, 'apt')
    for d in ('lists/partial', 'cache/archives/partial', 'download'):
        os.makedirs(os.path.join(apt, d), exist_ok=True)
    with open(os.path.join(apt, 'sources.list'), 'w') as f:
        f.write(f'deb-src {origin[0]} {origin[1]} {origin[2]}\n')
    opts = [f'-oDir::Etc::SourceList={apt}/sources.list', '-oDir::Etc::SourceParts=/dev/null',
            f'-oDir::State::Lists={apt}/lists', f'-oDir::Cache={apt}/cache', '-oDir::Cache::pkgcache=',
            '-oDir::Cache::srcpkgcache=']
    if os.geteuid() == 0:
        opts.append('-oAPT::Sandbox::User=root')  # the cache is not the _apt user's to write
    fix = 'check the network and that Debian\'s archive is reachable, then run the lab again'
    run(['apt-get', *opts, 'update'], f'apt-get update for deb-src {" ".join(origin)}', fix, True)
    showsrc = run(['apt-cache', *opts, 'showsrc', SOURCE_PACKAGE], 'apt-cache showsrc qemu', fix, True).stdout
    orig = parse_showsrc_orig(showsrc, debian_version)
    if not orig:
        raise plugin_error(f'the archive\'s sources ({" ".join(origin)}) list no orig tarball for qemu {debian_version}',
                          f'install a {PACKAGE} whose source the archive still serves (apt-get update, scripts/setup.sh)',
                          True)
    name, sha, size = orig
    dl = os.path.join(apt, 'download')
    # apt also fetches the .dsc and .debian.tar, which the archive may not serve for a backport (404): only the
    # orig tarball is needed, so the exit status is not trusted either way; its checksum is.
    p = run(['apt-get', *opts, 'source', '--download-only', f'{SOURCE_PACKAGE}={debian_version}'],
            f'apt-get source --download-only {SOURCE_PACKAGE}={debian_version}', fix, True, check=False, cwd=dl)
    path = os.path.join(dl, name)
    if not os.path.exists(path):
        detail = ' | '.join((p.stderr or p.stdout).strip().splitlines()[-3:])
        raise plugin_error(f'apt-get source did not fetch {name}: {detail}', fix, True)
    got = sha256_file(path)
    if got != sha or os.path.getsize(path) != size:
        raise plugin_error(f'{name}: sha256 {got} does not match the archive\'s {sha}', fix)
    return path


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, 'rb') as f:
        for block in iter(lambda: f.read(1 << 20), b''):
            h.update(block)
    return h.hexdigest()


def entry_key(debian_version, source_sha):
    return f'insn_count-{debian_version.replace(":", "_").replace("~", "_")}-{source_sha[:12]}-l{LAYOUT}'


def build(entry, qemu, versions):
    """Fetches the header, compiles the plugin and probes it against `qemu`; returns the metadata."""
    upstream, debian_version = versions
    orig = fetch_orig(entry, debian_version)
    run(['tar', '-xf', orig, '-C', entry, '--no-same-owner', '--wildcards', '*/include/qemu/qemu-plugin.h',
         '--strip-components=3'],
        f'unpacking qemu-plugin.h from {os.path.basename(orig)}', 'check free disk space in the cache (and xz-utils)')
    header = os.path.join(entry, 'qemu-plugin.h')
    with open(header) as f:
        api = parse_header_version(f.read())
    if api is None:
        raise plugin_error(f'{header}: no QEMU_PLUGIN_VERSION', 'report it: the header\'s format changed')
    cflags = run(['pkg-config', '--cflags', 'glib-2.0'], 'pkg-config glib-2.0 (qemu-plugin.h includes glib.h)',
                 'install libglib2.0-dev: run scripts/setup.sh as root', True).stdout.split()
    so = os.path.join(entry, 'insn_count.so')
    run([os.environ.get('CC', 'cc'), '-shared', '-fPIC', '-O2', '-Wall', '-Wextra', '-Wno-unused-parameter', '-Werror',
         *cflags, '-I', entry, SOURCE, '-o', so], 'compiling lab/plugins/insn_count.c',
        'run scripts/setup.sh as root (gcc, libglib2.0-dev)', True)
    p = run([qemu, '-M', 'none', '-accel', 'tcg', '-display', 'none', '-nodefaults', '-plugin', f'{so},probe=on'],
            'loading the plugin into QEMU (probe=on)', '', check=False)
    probe = parse_probe(p.stdout + p.stderr)
    if not probe or not probe['ok']:
        said = ' | '.join((p.stdout + p.stderr).strip().splitlines()[-2:])
        raise plugin_error(f'QEMU {debian_version} does not take insn_count built against qemu-{upstream}\'s '
                          f'qemu-plugin.h (API {api}): {said}',
                          'the header and the binary must come from the same QEMU: reinstall qemu-system-x86 '
                          'and remove the cache entry')
    shutil.rmtree(os.path.join(entry, 'apt'), ignore_errors=True)  # 40 MB of tarball, no longer needed
    return {'qemu': debian_version, 'upstream': upstream, 'api': api, 'probe': probe,
            'source_sha256': sha256_file(SOURCE), 'header_sha256': sha256_file(header)}


def prepare(root, qemu='qemu-system-x86_64', say=lambda msg: None):
    """The path of insn_count.so for `qemu`, built into the cache `root` when missing (under a lock, so that
    parallel runs wait for one build)."""
    qemu = shutil.which(qemu) or qemu
    versions = qemu_versions(qemu)
    entry = os.path.join(root, entry_key(versions[1], sha256_file(SOURCE)))
    so = os.path.join(entry, 'insn_count.so')
    if os.path.exists(os.path.join(entry, 'complete.json')):
        return so
    with open(os.path.join(root, '.lock-insn_count'), 'w') as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if os.path.exists(os.path.join(entry, 'complete.json')):  # another run built it while we waited
            return so
        say(f'building the insn_count plugin for QEMU {versions[1]} (header from Debian\'s source package)')
        t0 = time.monotonic()
        tmp = entry + '.partial'
        shutil.rmtree(tmp, ignore_errors=True)
        os.makedirs(tmp)
        try:
            meta = build(tmp, qemu, versions)
            meta['seconds'] = round(time.monotonic() - t0, 1)
            with open(os.path.join(tmp, 'complete.json'), 'w') as f:
                json.dump(meta, f, indent=1)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        shutil.rmtree(entry, ignore_errors=True)
        os.rename(tmp, entry)
        for old in glob.glob(os.path.join(root, 'insn_count-*')):  # other QEMU versions or sources
            if old != entry and not old.endswith('.partial'):
                shutil.rmtree(old, ignore_errors=True)
        say(f'built {so} in {meta["seconds"]} s')
        return so


def qemu_args(plugin, outdir):
    """QEMU's arguments that load the plugin with its log in the run's out/ directory (created empty here, so
    that the guest finds it from the start)."""
    log = os.path.join(outdir, LOG_NAME)
    open(log, 'w').close()
    return ['-plugin', f'{plugin},log={log}']
