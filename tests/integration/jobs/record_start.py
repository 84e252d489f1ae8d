"""Appends 'job-id start-time' to a file, so tests can see the order jobs ran in; then waits
SECONDS, or until the file GATE exists: record_start.py ORDER [SECONDS | GATE]."""
import os
import sys
import time

if os.environ["RANK"] == "0":
    with open(sys.argv[1], "a") as fh:
        fh.write(f"{os.environ['MINIHPC_JOB_ID']} {time.time()}\n")
wait = sys.argv[2] if len(sys.argv) > 2 else "0"
try:
    time.sleep(float(wait))
except ValueError:
    while not os.path.exists(wait):
        time.sleep(0.05)
