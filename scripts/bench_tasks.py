"""Task functions for the raw-rq baselines of scripts/bench.py (imported by rq workers)."""

import subprocess
import sys
import time

import redis


def record_start(redis_url: str, key: str) -> None:
    """Note when the worker started this task."""
    redis.Redis.from_url(redis_url).rpush(key, time.time())


def run_torchrun(probe: str, out_dir: str) -> int:
    """What a 1-node minihpc job does, without minihpc: a torchrun launch of the probe."""
    return subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nnodes=1",
         "--nproc-per-node=1", probe, out_dir],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True,
    ).returncode


def noop() -> None:
    return None
