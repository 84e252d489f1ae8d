"""Prints LINES numbered lines, one every PAUSE s (default 0.05), reporting progress (with a
loss) on each; with a GATE argument, first waits until that file exists (a test attaches
meanwhile).   chatty.py LINES [GATE [PAUSE]]"""
import os
import sys
import time

from minihpc import progress

lines = int(sys.argv[1])
gate = sys.argv[2] if len(sys.argv) > 2 else None
pause = float(sys.argv[3]) if len(sys.argv) > 3 else 0.05
while gate and not os.path.exists(gate):
    time.sleep(0.05)
rank = os.environ["RANK"]
for i in range(1, lines + 1):
    print(f"rank {rank} line {i} of {lines}", flush=True)
    if os.environ.get("LOCAL_RANK") == "0":
        progress.report(i, total=lines, loss=1.0 / i, samples_per_second=100.0)
    time.sleep(pause)
