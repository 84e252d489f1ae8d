"""Writes malformed progress records to its progress file (and its first-report file) for
SECONDS, then exits 0: the cluster must skip them and keep scheduling."""
import json
import os
import sys
import time

path = os.environ["MINIHPC_PROGRESS_FILE"]
seconds = float(sys.argv[1])
BAD = [
    lambda: '{"step": 1, "at": 1, "note": "x"}',
    lambda: '{"step": "abc"}',
    lambda: "not json at all",
    lambda: "[1, 2, 3]",
    lambda: json.dumps({"step": 2, "at": time.time(), "loss": "x" * 10000}),
    lambda: '{"step": 3, "at": NaN}',
    lambda: '{"step": 4, "at": %r, "note": "x", "loss": NaN, "node": "evil", "attempt": "x"}' % time.time(),
]


def write(target: str, text: str) -> None:
    with open(target + ".tmp", "w") as fh:
        fh.write(text)
    os.replace(target + ".tmp", target)


write(path + ".first", BAD[1]())
end, written = time.time() + seconds, 0
while time.time() < end:
    write(path, BAD[written % len(BAD)]())
    written += 1
    time.sleep(0.15)
print(f"rank {os.environ['RANK']} wrote {written} malformed progress records", flush=True)
