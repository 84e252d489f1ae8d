"""Leaves a detached daemon behind (double fork, setsid, SIGTERM ignored) and exits 0; the
daemon's pid goes to the file named by argv[1]."""
import os
import signal
import sys
import time

if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        with open(sys.argv[1], "w") as fh:
            fh.write(str(os.getpid()))
        while True:
            time.sleep(1)
    os._exit(0)
os.wait()
while not os.path.exists(sys.argv[1]):
    time.sleep(0.05)
print("left a daemon behind", flush=True)
