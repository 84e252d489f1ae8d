"""The containers' entrypoint: wait until Redis answers, then run ``minihpc ARGS``.

Compose starts the nodes only once Redis is healthy, but a node restarted on its own (or a
host whose Redis is across the network) may still come up first; waiting here keeps it from
crash-looping. A wrong password is not waited out: it fails at once with one line.
"""

from __future__ import annotations

import os
import sys

from minihpc.core.config import load_settings
from minihpc.state.connect import wait_until_answers


def main(argv: list[str]) -> int:
    if argv and argv[0] not in ("-h", "--help", "--version"):
        problem = wait_until_answers(load_settings().redis_url, float(os.environ.get("MINIHPC_WAIT_REDIS", "60")))
        if problem:
            print(f"minihpc: error: {problem}", file=sys.stderr)
            return 1
    os.execvp(sys.executable, [sys.executable, "-m", "minihpc.cli", *argv])
    return 127  # not reached


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
