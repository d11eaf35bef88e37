#!/usr/bin/env python3
"""Counts meson test results (testlog.json, one JSON object a line) and prints
'N passed, N failed[, N skipped]'. Exit 1 when a test failed or none ran."""
import json
import sys

passed = failed = skipped = 0
for path in sys.argv[1:]:
    try:
        lines = open(path, encoding="utf-8").read().splitlines()
    except OSError as e:
        print(f"test-summary: cannot read {path}: {e.strerror}", file=sys.stderr)
        lines = []
    for line in lines:
        if not line.strip():
            continue
        result = json.loads(line).get("result", "")
        if result in ("OK", "EXPECTEDFAIL"):
            passed += 1
        elif result == "SKIP":
            skipped += 1
        else:  # FAIL, TIMEOUT, ERROR, UNEXPECTEDPASS, INTERRUPT
            failed += 1
summary = f"{passed} passed, {failed} failed"
if skipped:
    summary += f", {skipped} skipped"
print(summary)
sys.exit(1 if failed or passed == 0 else 0)
