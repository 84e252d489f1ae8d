"""A node's compute speed, measured when its agent starts on hardware not measured yet.

The speed probe (:mod:`minihpc.machine.speed_probe`) runs in a process of its own, started from
a background thread: registration and heartbeats never wait on it, the agent never imports
torch, and a probe that hangs is killed after :data:`PROBE_TIMEOUT`. A probe that fails costs
the node its GFLOPS figure, and one warning in the agent's log.
"""

from __future__ import annotations

import logging
import subprocess
import sys
import threading
import time

import redis

from minihpc.core.measurements import ProbeError, probe_gflops
from minihpc.state.store import Store

log = logging.getLogger(__name__)

PROBE_TIMEOUT = 60.0
"""Seconds the probe may take (it measures for about one, after importing torch)."""

PROBE_COMMAND = [sys.executable, "-m", "minihpc.machine.speed_probe"]


def run_probe(timeout: float = PROBE_TIMEOUT, command: list[str] | None = None) -> float:
    """Run the speed probe and return its GFLOP/s; :class:`ProbeError` says why there is none."""
    try:
        proc = subprocess.run(command or PROBE_COMMAND, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                              timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        raise ProbeError(f"the probe took more than {timeout:g}s and was killed") from None
    except OSError as exc:
        raise ProbeError(f"the probe did not start: {exc}") from None
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise ProbeError(f"the probe exited {proc.returncode}: {last[:200]}")
    return probe_gflops(proc.stdout)


def probe_in_background(store: Store, node: str, hardware: str = "", timeout: float = PROBE_TIMEOUT,
                        command: list[str] | None = None) -> threading.Thread:
    """Measure node ``node``'s speed in a daemon thread and record it for ``hardware``
    (core.measurements.signature; :meth:`Store.record_speed`)."""

    def probe() -> None:
        try:
            gflops = run_probe(timeout, command)
        except ProbeError as exc:
            log.warning("node %s: speed probe failed: %s; its GFLOPS stays unknown", node, exc)
            return
        try:
            store.record_speed(node, gflops, time.time(), hardware)
        except redis.RedisError as exc:
            log.warning("node %s: could not record its speed (%.1f GFLOP/s): %s", node, gflops, exc)
            return
        log.info("node %s: %.1f GFLOP/s (speed probe)", node, gflops)

    thread = threading.Thread(target=probe, name="speed-probe", daemon=True)
    thread.start()
    return thread
