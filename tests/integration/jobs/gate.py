"""Waits until the file given as its argument exists."""
import os
import sys
import time

while not os.path.exists(sys.argv[1]):
    time.sleep(0.05)
