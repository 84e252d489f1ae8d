"""Reports progress for a few steps, then every rank hangs (as in a stuck collective) -- on
the first attempt only; the requeued attempt finishes at once."""
import os
import sys
import time

from minihpc import progress

attempt = int(os.environ["MINIHPC_ATTEMPT"])
for step in range(1, 4):
    progress.report(step, total=10)
    time.sleep(0.2)
if attempt == 1:
    print(f"rank {os.environ['RANK']} hangs", flush=True)
    time.sleep(300)
print(f"rank {os.environ['RANK']} attempt {attempt} done", flush=True)
sys.stdout.flush()
os._exit(0)
