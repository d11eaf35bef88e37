#!/usr/bin/env python3
"""umem-bench and umem-sparse-bench reject an unknown --only workload, also inside a comma list, with exit 1
and a message that names it and the known ones (a list once ran nothing and said nothing).
usage: umem_bench_options_test.py UMEM_BENCH UMEM_SPARSE_BENCH"""
import subprocess
import sys

failures = []
for exe, known, listed in ((sys.argv[1], 'gather', 'memcpy, ce, gather, hotset, scan, bfs'),
                           (sys.argv[2], 'lookups', 'lookups, scatter, elements')):
    args = [exe, '--only', known + ',nosuch']
    p = subprocess.run(args, capture_output=True, text=True, timeout=60)
    if p.returncode != 1:
        failures.append(f'{args}: exit {p.returncode}, expected 1')
    for part in ("unknown workload 'nosuch'", listed):
        if part not in p.stderr:
            failures.append(f'{args}: stderr lacks {part!r}: {p.stderr!r}')
for f in failures:
    print(f)
print('both benches rejected it' if not failures else f'{len(failures)} failures')
sys.exit(1 if failures else 0)
