"""Appends 'job-id start-time' to a file, so tests can see the order jobs ran in."""
import os
import sys
import time

if os.environ["RANK"] == "0":
    with open(sys.argv[1], "a") as fh:
        fh.write(f"{os.environ['MINIHPC_JOB_ID']} {time.time()}\n")
time.sleep(float(sys.argv[2]) if len(sys.argv) > 2 else 0)
