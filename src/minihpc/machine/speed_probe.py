"""How fast this node computes: ``python -m minihpc.machine.speed_probe`` prints one JSON line,

    {"gflops": 41.3, "threads": 2, "seconds": 1.0}

the GFLOP/s of float32 matrix multiplies (256 x 256) with one torch thread per CPU the node may
use (:func:`minihpc.machine.hardware.usable_cpus`), repeated for about a second of wall time.
A second is ten periods of a cgroup's CPU quota (100 ms each), so a node limited to 0.25 CPU
shows about a quarter of an unlimited one's figure, as its jobs will see.

A node agent runs it once when it starts, in a process of its own: the agent never imports
torch, and a probe that hangs or dies costs it nothing but the figure
(:mod:`minihpc.core.measurements`).
"""

from __future__ import annotations

import json
import sys
import time

from minihpc.machine import hardware

MATRIX = 256
"""Side of the square matrices multiplied: small enough to stay in cache, big enough for BLAS."""

SECONDS = 1.0
"""Wall time measured, after the warm-up."""

WARMUP_SECONDS = 0.1
"""Wall time spent before measuring (BLAS threads started, caches warm)."""


def gflops(size: int, multiplies: int, seconds: float) -> float:
    """GFLOP/s of ``multiplies`` products of two ``size`` x ``size`` matrices in ``seconds``
    (2 n^3 floating-point operations each). Pure."""
    return 2 * size**3 * multiplies / seconds / 1e9


def measure(threads: int, size: int = MATRIX, seconds: float = SECONDS) -> dict:
    """Multiply for ``seconds`` of wall time on ``threads`` threads: {gflops, threads, seconds}."""
    import torch  # here, not at the top: importing this module must stay cheap

    torch.set_num_threads(threads)
    a, b, out = torch.randn(size, size), torch.randn(size, size), torch.empty(size, size)
    _repeat(lambda: torch.mm(a, b, out=out), WARMUP_SECONDS)
    multiplies, elapsed = _repeat(lambda: torch.mm(a, b, out=out), seconds)
    return {"gflops": gflops(size, multiplies, elapsed), "threads": threads, "seconds": elapsed}


def _repeat(step, seconds: float) -> tuple[int, float]:
    """Run ``step`` until ``seconds`` of wall time have passed: (times run, seconds taken)."""
    count, start = 0, time.perf_counter()
    while True:
        step()
        count += 1
        elapsed = time.perf_counter() - start
        if elapsed >= seconds:
            return count, elapsed


def main() -> int:
    print(json.dumps(measure(hardware.usable_cpus())), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
