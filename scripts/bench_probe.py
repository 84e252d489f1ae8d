"""Benchmark job: each rank writes the time it started running, then exits (no torch import)."""
import os
import sys
import time

now = time.time()
out = sys.argv[1]
os.makedirs(out, exist_ok=True)
with open(os.path.join(out, f"rank{os.environ.get('RANK', '0')}"), "w") as fh:
    fh.write(repr(now))
