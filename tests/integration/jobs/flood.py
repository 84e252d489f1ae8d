"""Prints MB lines of a mebibyte of 'x' each as fast as it can, then 'LAST LINE TOKEN', and
exits 0: a job that would fill the disk with its log.   flood.py MB TOKEN"""
import sys

mb, token = int(sys.argv[1]), sys.argv[2]
line = "x" * (1024 * 1024 - 1) + "\n"
for _ in range(mb):
    sys.stdout.write(line)
print(f"LAST LINE {token}", flush=True)
