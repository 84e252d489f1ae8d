"""Each rank records its pid in DIR, then sleeps (without torch, so it starts fast)."""
import os
import sys
import time

directory, seconds = sys.argv[1], float(sys.argv[2])
os.makedirs(directory, exist_ok=True)
path = os.path.join(directory, f"rank{os.environ['RANK']}.pid")
with open(path + ".tmp", "w") as fh:  # whole or not at all: a reader never sees an empty pid file
    fh.write(str(os.getpid()))
os.replace(path + ".tmp", path)
time.sleep(seconds)
