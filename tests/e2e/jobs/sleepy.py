"""Prints a line, then sleeps long enough to be seen running in the queue."""
import os
import sys
import time

print(f"sleepy rank {os.environ['RANK']} on {os.environ['MINIHPC_NODE']}", flush=True)
time.sleep(float(sys.argv[1]) if len(sys.argv) > 1 else 60)
