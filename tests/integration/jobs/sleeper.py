"""Each rank records its pid in DIR, then sleeps (without torch, so it starts fast)."""
import os
import sys
import time

directory, seconds = sys.argv[1], float(sys.argv[2])
os.makedirs(directory, exist_ok=True)
with open(os.path.join(directory, f"rank{os.environ['RANK']}.pid"), "w") as fh:
    fh.write(str(os.getpid()))
time.sleep(seconds)
