"""Rank FAIL_RANK exits with CODE (or kills itself with SIGNAL); the others would sleep."""
import os
import signal
import sys
import time

fail_rank, how, directory = int(sys.argv[1]), sys.argv[2], sys.argv[3]
os.makedirs(directory, exist_ok=True)
with open(os.path.join(directory, f"rank{os.environ['RANK']}.pid"), "w") as fh:
    fh.write(str(os.getpid()))
if int(os.environ["RANK"]) == fail_rank:
    time.sleep(0.5)
    if how.startswith("SIG"):
        os.kill(os.getpid(), getattr(signal, how))
    sys.exit(int(how))
time.sleep(120)
