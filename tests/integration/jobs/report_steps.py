"""Reports STEPS steps of progress, one every half second, then exits 0."""
import os
import sys
import time

from minihpc import progress

steps = int(sys.argv[1])
for step in range(1, steps + 1):
    if os.environ.get("LOCAL_RANK") == "0":
        progress.report(step, total=steps)
    time.sleep(0.5)
print(f"rank {os.environ['RANK']} done at step {steps}", flush=True)
