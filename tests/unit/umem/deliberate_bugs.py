#!/usr/bin/env python3
"""Deliberate bugs in umem's automatic page size (the profile and its choice, partial pages, frames that pages
share, displaced blocks, the change to smaller pages): each must turn a test red.

It builds a copy of HEAD (a git worktree in a temporary directory, so the checkout is never touched), then for each
bug changes one passage, rebuilds the test binary and runs it, and puts the passage back.

usage: tests/unit/umem/deliberate_bugs.py [--gpu | --gpu-build DIR | --gpu-run DIR] [--only NAME,...]
  the CPU's bugs against unit-umem (about 12 minutes on 2 cores, a debug build);
  --gpu: also those in the GPU pager's kernels against gpu-umem (a CUDA build, and a GPU to run on);
  --gpu-build DIR: only build the GPU bugs' gpu-umem (and HEAD's) into DIR, on a machine with nvcc and no GPU;
  --gpu-run DIR: run them on the GPU machine (python3 only), from DIR as --gpu-build left it.
One line a bug: "caught" with the failed assertions, or SURVIVED. Exits 1 where one survived."""
import argparse
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile

PAGER, GPU_PAGER, GPU = 'umem/pager.hpp', 'umem/gpu_pager.cu', 'umem/gpu.cuh'
CPU_TEST, GPU_TEST = 'tests/unit/umem/unit-umem', 'tests/gpu/gpu-umem'

# (name, file, passage, with the bug, test binary)
BUGS = [
    # the profile and the choice
    ('choice: 3x the 128-byte footprint', PAGER, 'if (tally_field(t, j) * 2 < w0 * 3) k = j;',
     'if (tally_field(t, j) < w0 * 3) k = j;', CPU_TEST),
    ('choice: the size in use kept against a choice up to 128x larger', PAGER, '* 2 < w0 * 3 && chosen < current + 2)',
     '* 2 < w0 * 3 && chosen < current + 8)', CPU_TEST),
    ('choice: from one region', PAGER, 'if (tally_field(t, 5) < 32ull * profile_min_regions) return current;',
     'if (tally_field(t, 5) < 32ull) return current;', CPU_TEST),
    ('tally: a region added whole, not what it gained', PAGER, 'const std::uint64_t d = now[i] - was[i];',
     'const std::uint64_t d = now[i];', CPU_TEST),
    ('tally: larger pages not folded', PAGER, 'm = (m | (m >> (1u << (k - 1)))) & keep[k - 1];', 'm = m & keep[k - 1];',
     CPU_TEST),
    ('profile: an access\'s last block left out', PAGER, '(2ull << last_block) - 1) >> first_block',
     '(1ull << last_block) - 1) >> first_block', CPU_TEST),
    ('change_pays: the bytes in frames ignored', PAGER, '(resident * 2 < pages && chosen + 1 < current)',
     '(chosen + 1 < current)', CPU_TEST),
    ('change_pays: larger pages never', PAGER, 'return chosen > current || !never_evicts ||', 'return !never_evicts ||',
     CPU_TEST),
    ('look: a later change on one look', PAGER, 'return {shift, shift != v.page_shift && (first || shift == wanted)};',
     'return {shift, shift != v.page_shift};', CPU_TEST),
    ('look: the first choice waits for a second look', PAGER,
     'return {shift, shift != v.page_shift && (first || shift == wanted)};',
     'return {shift, shift != v.page_shift && shift == wanted};', CPU_TEST),
    ('look: the bytes filled not passed', PAGER, 'filled >> v.page_shift, v.pages))', '0, v.pages))', CPU_TEST),
    # adaptive admission's sample while the pool thrashes
    ('admission: one miss in 64, whatever its fill moves', PAGER,
     'sampled(v, page, fill_bytes / (read_bytes > 128 ? read_bytes : 128))', 'sampled(v, page, 1)', CPU_TEST),
    ('admission: the sample not divided', PAGER, 'return (h >> 32) * ratio < (std::uint64_t{1} << 26);',
     'return (h >> 58) == 0;', CPU_TEST),
    # partial pages
    ('a lone element\'s chunk: its first byte\'s only', PAGER, 'end = (offset + bytes + chunk - 1) & ~(chunk - 1);',
     'end = first + chunk;', CPU_TEST),
    ('a lone element\'s chunk: one block', PAGER, 'return lone_fill_shift < shift - 5 ? shift - 5 : lone_fill_shift;',
     'return shift - 5;', CPU_TEST),
    ('the rest of a page copied over its blocks in the frame', PAGER, 'return v.page_blocks(page) & ~have;',
     'return v.page_blocks(page);', CPU_TEST),
    ('the rest of a page: claims not counted', PAGER, 'popcount32(have | claimed) >= v.lone_rest_blocks',
     'popcount32(have) >= v.lone_rest_blocks', CPU_TEST),
    ('a page whole at half its blocks', PAGER, '(~static_cast<std::uint32_t>(w) & v.page_blocks(page)) == 0) {',
     'popcount32(static_cast<std::uint32_t>(w)) >= 16) {', CPU_TEST),
    ('a partial page\'s hit on any of its blocks', PAGER, '& b) == b ? frame : nullptr;', '& b) != 0 ? frame : nullptr;',
     CPU_TEST),
    ('a sector copy serves a write', PAGER, 'return s.kind == Step::sector && !write &&', 'return s.kind == Step::sector &&',
     CPU_TEST),
    ('a write marks its first block only', PAGER, 'atom::fetch_or(&v.dirty_blocks[page], v.blocks_of(offset, n));',
     'atom::fetch_or(&v.dirty_blocks[page], v.blocks_of(offset, 1));', CPU_TEST),
    ('a sub-page with marks elsewhere counts as written', PAGER, 'return m == 0 || (m & v.sub_page_blocks(j, d)) != 0;',
     'return m == 0;', CPU_TEST),
    # frames that pages share, second frames, displaced blocks
    ('shared placement into a taken slot', PAGER, 'while (s != 0 && (s & blocks) == 0)', 'while (s != 0)', CPU_TEST),
    ('a page grows into another page\'s slot', PAGER,
     '    while ((s & blocks) == 0)\n        if (atom::cas(&slots[frame], s, s | blocks)) return true;',
     '    while (true)\n        if (atom::cas(&slots[frame], s, s | blocks)) return true;', CPU_TEST),
    ('sharing before the tally proposes: the whole pool', PAGER,
     'return atom::peek(&v.ctl[ctl_fresh]) < v.frames_n / 2;', 'return atom::peek(&v.ctl[ctl_fresh]) < v.frames_n;',
     CPU_TEST),
    ('a never-used frame past the pool', PAGER, '        if (f < v.frames_n) return static_cast<std::uint32_t>(f);',
     '        return static_cast<std::uint32_t>(f);', CPU_TEST),
    ('a second frame\'s slot taken twice', PAGER, 'return claim_slots(v, f, blocks) ? f : Pte::max_frames;', 'return f;',
     CPU_TEST),
    ('a read across two frames served from one', PAGER,
     'return there == blocks ? static_cast<std::uint32_t>(w >> 32) - 1 : split_frames;',
     'return static_cast<std::uint32_t>(w >> 32) - 1;', CPU_TEST),
    ('a write out of a shared frame keeps its blocks', PAGER,
     '    atom::store(&v.sectors[page], std::uint64_t{0});\n    if (v.displaced_blocks != nullptr)',
     '    if (v.displaced_blocks != nullptr)', CPU_TEST),
    ('a write takes a page out of a shared frame under readers', PAGER,
     'if (e.pins() != 0 || e.writers() != 0 ||\n        !atom::cas(slot, alone,',
     'if (e.writers() != 0 ||\n        !atom::cas(slot, alone,', CPU_TEST),
    ('known displaced: any block, not all', PAGER, '(blocks & ~atom::peek(&v.displaced_blocks[page])) == 0;',
     '(blocks & atom::peek(&v.displaced_blocks[page])) != 0;', CPU_TEST),
    ('displaced: new blocks unmarked where one was', PAGER,
     '(atom::peek(&v.displaced_blocks[page]) & blocks) == blocks) return;',
     '(atom::peek(&v.displaced_blocks[page]) & blocks) != 0) return;', CPU_TEST),
    ('displaced: blocks in the second frame filled again', PAGER,
     'return marked & ~static_cast<std::uint32_t>(atom::peek(&from.sectors[page])) & ~in_second;',
     'return marked & ~static_cast<std::uint32_t>(atom::peek(&from.sectors[page]));', CPU_TEST),
    ('displaced: the n-th block takes the n+1-th free slot', PAGER, 'popcount32(want & ((1u << k) - 1u))',
     'popcount32(want & ((2u << k) - 1u))', CPU_TEST),
    ('displaced: a sub-frame another page took', PAGER,
     'if (owner != free_frame || !atom::cas(&to.frame_owner[s], owner', 'if (!atom::cas(&to.frame_owner[s], owner',
     CPU_TEST),
    ('displaced: filled from the next page\'s bytes', PAGER, 'to.host_page(q), to.page_bytes(q));',
     'to.host_page(q ^ 1), to.page_bytes(q));', CPU_TEST),
    # the change
    ('settling: any slot, not the lowest', PAGER, 'return ((have >> ctz64(slots)) & 1u) != 0;',
     'return (have & slots) != 0;', CPU_TEST),
    ('settling: a page sent back keeps its blocks', PAGER,
     '    atom::store(&v.sectors[page], std::uint64_t{0});\n    atom::store(&v.pte[page], e.word & Pte::touched);',
     '    atom::store(&v.pte[page], e.word & Pte::touched);', CPU_TEST),
    ('a shared frame freed though a page took it', PAGER, '    atom::cas(owner, untaken, free_frame);',
     '    atom::store(owner, free_frame);', CPU_TEST),
    ('relay: dirty dropped', PAGER, 'if (e.is(Pte::dirty) && written(from, q >> d, j, d)) w |= Pte::dirty;',
     'if (e.is(Pte::dirty) && written(from, q >> d, j, d)) w |= 0;', CPU_TEST),
    ('relay: a partial sub-page\'s other blocks not completed', PAGER,
     'copy_words(from.frame_data(frame) + off, from.host_page(q >> d) + off, n);', '(void)off; (void)n;', CPU_TEST),
    ('relay: a partial page\'s sub-pages all kept', PAGER,
     'valid = static_cast<std::uint32_t>(atom::peek(&from.sectors[q >> d])) & sub;', 'valid = sub;', CPU_TEST),
    ('relay: the second frame ignored', PAGER, 'second < Pte::max_frames) {\n                frame = second;',
     'second < 0u) {\n                frame = second;', CPU_TEST),
    ('relay: sub-pages of shared frames paid', PAGER, 'return shared ? Pte{}.next_hit() : Pte::hits_mask;',
     'return Pte::hits_mask;', CPU_TEST),
    ('relay: fresh frames over the relaid ones', PAGER,
     'return (fresh < from.frames_n ? fresh : from.frames_n) << (from.page_shift - to_shift);',
     'return fresh < from.frames_n ? fresh : from.frames_n;', CPU_TEST),
    ('relay: free frames not first', PAGER, 'to.ctl[ctl_free_first] = 1;', 'to.ctl[ctl_free_first] = 0;', CPU_TEST),
    ('relay into a pool half too small', PAGER, '<< (from.page_shift - to_shift)) <= to_frames;',
     '<< (from.page_shift - to_shift)) <= 2 * to_frames;', CPU_TEST),
    # the GPU pager's kernels and its accesses' notes
    ('GPU relay: a warp\'s lanes take the wrong pages', GPU_PAGER, '__fns(pages, 0, static_cast<int>(i >> d) + 1)) << d)',
     '__fns(pages, 0, static_cast<int>(i >> d))) << d)', GPU_TEST),
    ('GPU displaced fill: a block stored in another\'s sub-frame', GPU_PAGER,
     '__shfl_sync(0xffffffffu, s, k & 31u);  // block k\'s sub-frame', '__shfl_sync(0xffffffffu, s, i & 31u);', GPU_TEST),
    ('GPU settling never runs', GPU_PAGER, '    if (!any_shared(v)) return;\n    const std::uint64_t threads',
     '    return;\n    const std::uint64_t threads', GPU_TEST),
    ('staged read: its first 16 bytes not copied', GPU,
     'm.to_frame(g, buffer + begin, host + begin, static_cast<std::uint32_t>(stop - begin));',
     'm.to_frame(g, buffer + begin + 16, host + begin + 16, static_cast<std::uint32_t>(stop - begin - 16));',
     GPU_TEST),
    ('staged read: the buffer never given back', GPU,
     'if (g.leader()) atom::store(&view_.staging_owner[(d - view_.staging) >> staging_shift], 0u);', '',
     GPU_TEST),
    ('staged read: the pin kept', GPU, 'if (g.leader()) end_access(view, page, host, false);', '', GPU_TEST),
    ('get() notes 64 elements for one', GPU, '        profile_note(view_, i * sizeof(T), sizeof(T));\n        unsigned mask;',
     '        profile_note(view_, i * sizeof(T), 64 * sizeof(T));\n        unsigned mask;', GPU_TEST),
]


def run(cmd, cwd, timeout=None):
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout)


def failed_assertions(out):
    lines = [l for l in out.splitlines() if l.startswith('assertions:') or 'test cases' in l]
    return lines[-1].strip() if lines else 'no summary: it crashed'


def verdict(cmd, cwd):
    """(caught, how) of one run of a test binary with a bug in it."""
    try:
        r = run(cmd, cwd, timeout=900)
        return r.returncode != 0, failed_assertions(r.stdout)
    except subprocess.TimeoutExpired:
        return True, 'hung: killed after 900 s'


def carry_binary(binary, folder):
    """A copy to carry to the GPU machine, its symbols stripped (the machines take 64 MiB of binaries)."""
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copy2(binary, folder)
    if shutil.which('strip'):
        subprocess.run(['strip', str(folder / binary.name)], check=True)


def run_prebuilt(folder):
    """--gpu-run: the binaries --gpu-build left in `folder` (the lent GPU machine has no compiler)."""
    listed = [l.split('\t') for l in (folder / 'bugs.tsv').read_text().splitlines()]
    head = run([str(folder / 'head' / pathlib.Path(GPU_TEST).name)], folder, timeout=900)
    if head.returncode != 0:
        sys.exit('the GPU tests fail at HEAD, before any bug:\n' + head.stdout[-3000:])
    survived = 0
    for sub, name in listed:
        caught, how = verdict([str(folder / sub / pathlib.Path(GPU_TEST).name)], folder)
        survived += not caught
        print(f'{name}: ' + (f'caught ({how})' if caught else 'SURVIVED'), flush=True)
    print(f'{len(listed) - survived} of {len(listed)} deliberate bugs caught')
    sys.exit(1 if survived else 0)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--gpu', action='store_true', help='also the GPU pager\'s bugs (a CUDA build and a GPU)')
    ap.add_argument('--gpu-build', metavar='DIR', help='only build the GPU bugs\' test binaries into DIR, to carry')
    ap.add_argument('--gpu-run', metavar='DIR', help='only run the binaries --gpu-build left in DIR')
    ap.add_argument('--only', default='', help='comma-separated names (or parts of them)')
    args = ap.parse_args()
    if args.gpu_run:
        run_prebuilt(pathlib.Path(args.gpu_run).resolve())
    repo = pathlib.Path(__file__).resolve().parents[3]
    gpu, carry = args.gpu, pathlib.Path(args.gpu_build).resolve() if args.gpu_build else None
    if gpu and (shutil.which('nvidia-smi') is None or run(['nvidia-smi', '-L'], repo).returncode != 0):
        print('SKIPPED the GPU bugs: nvidia-smi finds no GPU here')
        gpu = False
    if (gpu or carry) and pathlib.Path('/usr/local/cuda/bin/nvcc').exists():  # where the CUDA toolkit puts nvcc
        os.environ['PATH'] = '/usr/local/cuda/bin:' + os.environ.get('PATH', '')
    bugs = [b for b in BUGS if (b[4] == GPU_TEST if carry else gpu or b[4] == CPU_TEST)]
    if args.only:
        parts = args.only.split(',')
        bugs = [b for b in bugs if any(p in b[0] for p in parts)]
    tmp = pathlib.Path(tempfile.mkdtemp(prefix='umem-bugs-'))
    tree = tmp / 'tree'
    if run(['git', 'worktree', 'add', '--detach', str(tree), 'HEAD'], repo).returncode != 0:
        sys.exit('cannot make a worktree of HEAD here (a git checkout is needed)')
    survived = 0
    # The CPU's bugs in a debug build; the GPU's in one with device code optimised (a debug build's device code,
    # -G, runs the GPU tests many times slower) and asserts kept.
    build = {CPU_TEST: ('build', 'debug', 'disabled'), GPU_TEST: ('build-gpu', 'debugoptimized', 'enabled')}
    try:
        targets = sorted({b[4] for b in bugs})
        for t in targets:  # every test passes before any bug
            folder, buildtype, cuda = build[t]
            setup = ['meson', 'setup', folder, '--buildtype=' + buildtype, '-Dlab=disabled', '-Dcuda=' + cuda]
            if (r := run(setup, tree)).returncode != 0:
                sys.exit('meson setup failed:\n' + r.stdout[-2000:] + r.stderr[-2000:])
            if (r := run(['ninja', '-C', folder, t], tree)).returncode != 0:
                sys.exit(f'{t} does not build at HEAD:\n' + r.stdout[-3000:])
            if carry:
                carry_binary(tree / folder / t, carry / 'head')
            elif (r := run([f'{folder}/{t}'], tree, timeout=900)).returncode != 0:
                sys.exit(f'{t} fails at HEAD, before any bug:\n' + r.stdout[-3000:])
        listed = []
        for i, (name, path, passage, bug, test) in enumerate(bugs):
            src = tree / path
            text = src.read_text()
            if text.count(passage) != 1:
                print(f'{name}: its passage is not in {path} once (found {text.count(passage)} times): update this list')
                survived += 1
                continue
            src.write_text(text.replace(passage, bug))
            try:
                folder = build[test][0]
                if (r := run(['ninja', '-C', folder, test], tree)).returncode != 0:
                    print(f'{name}: does not build:\n' + r.stdout[-1500:])
                    survived += 1
                    continue
                if carry:
                    carry_binary(tree / folder / test, carry / f'bug{i}')
                    listed.append(f'bug{i}\t{name}')
                    print(f'{name}: built', flush=True)
                    continue
                caught, how = verdict([f'{folder}/{test}'], tree)
                survived += not caught
                print(f'{name}: ' + (f'caught ({how})' if caught else 'SURVIVED'), flush=True)
            finally:
                src.write_text(text)
    finally:
        run(['git', 'worktree', 'remove', '--force', str(tree)], repo)
        shutil.rmtree(tmp, ignore_errors=True)
    if carry:
        (carry / 'bugs.tsv').write_text(''.join(l + '\n' for l in listed))
        print(f'{len(listed)} GPU bugs built into {carry}; run them there with --gpu-run {carry}')
        sys.exit(1 if survived else 0)
    print(f'{len(bugs) - survived} of {len(bugs)} deliberate bugs caught')
    sys.exit(1 if survived else 0)


if __name__ == '__main__':
    main()
