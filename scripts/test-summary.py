#!/usr/bin/env python3
"""Counts meson test results (testlog.json, one JSON object a line) and prints
'N passed, N failed[, N skipped]'. Exit 1 when a test failed or none ran.

Each failed test is named with the last lines of its output just before that line,
because a CI log is often read from its tail only."""
import json
import sys


TAIL_LINES = 30

passed = failed = skipped = 0
failures = []
for path in sys.argv[1:]:
    try:
        lines = open(path, encoding="utf-8").read().splitlines()
    except OSError as e:
        print(f"test-summary: cannot read {path}: {e.strerror}", file=sys.stderr)
        lines = []
    for line in lines:
        if not line.strip():
            continue
        test = json.loads(line)
        result = test.get("result", "")
        if result in ("OK", "EXPECTEDFAIL"):
            passed += 1
        elif result == "SKIP":
            skipped += 1
        else:  # FAIL, TIMEOUT, ERROR, UNEXPECTEDPASS, INTERRUPT
            failed += 1
            failures.append(test)
for test in failures:
    output = ((test.get("stdout") or "") + (test.get("stderr") or "")).splitlines()[-TAIL_LINES:]
    print(f"=== failed: {test.get('name', '?')} ({test.get('result', '?')}), its last lines:")
    for out_line in output:
        print(f"  {out_line}")
summary = f"{passed} passed, {failed} failed"
if skipped:
    summary += f", {skipped} skipped"
print(summary)
sys.exit(1 if failed or passed == 0 else 0)
