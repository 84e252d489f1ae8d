"""The containers' entrypoint: wait until Redis answers, then run ``minihpc ARGS``.

Compose starts the nodes only once Redis is healthy, but a node restarted on its own (or a
host whose Redis is across the network) may still come up first; waiting here keeps it from
crash-looping. A wrong password is not waited out: it fails at once with one line.
"""

from __future__ import annotations

import os
import sys
import time

import redis

from .config import load_settings


def wait_for_redis(url: str, timeout: float, interval: float = 0.5) -> str | None:
    """None once Redis answers PING, else the reason it did not within ``timeout``."""
    client = redis.Redis.from_url(url, socket_connect_timeout=2, socket_timeout=2)
    deadline = time.monotonic() + timeout
    said = False
    while True:
        try:
            client.ping()
            return None
        except redis.AuthenticationError as exc:
            return f"Redis refused the password ({exc}); check REDIS_PASSWORD in .env"
        except redis.ResponseError as exc:
            return f"Redis answered with an error: {exc}"
        except redis.ConnectionError as exc:
            if time.monotonic() >= deadline:
                return f"Redis did not answer within {timeout:g}s: {exc}"
            if not said:
                print(f"minihpc: waiting for Redis at {url.split('@')[-1]}", file=sys.stderr, flush=True)
                said = True
            time.sleep(interval)


def main(argv: list[str]) -> int:
    if argv and argv[0] not in ("-h", "--help", "--version"):
        problem = wait_for_redis(load_settings().redis_url, float(os.environ.get("MINIHPC_WAIT_REDIS", "60")))
        if problem:
            print(f"minihpc: error: {problem}", file=sys.stderr)
            return 1
    os.execvp(sys.executable, [sys.executable, "-m", "minihpc.cli", *argv])
    return 127  # not reached


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
