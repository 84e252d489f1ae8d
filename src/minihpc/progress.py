"""Progress reports from job scripts: the step heartbeat the watchdog and monitors read.

    from minihpc import progress
    progress.report(step, total=total_steps, loss=loss.item())

Cheap enough for every step: it replaces a small file the node's agent watches
($MINIHPC_PROGRESS_FILE, one per node and attempt); the agent forwards what changed to Redis.
Outside a minihpc job it does nothing. Call it from one rank per node (local rank 0) or from
rank 0 only; either way the job counts as making progress.
"""

from __future__ import annotations

import json
import os
import time

from . import files

ENV = "MINIHPC_PROGRESS_FILE"


def report(step: int, **metrics: float) -> None:
    path = os.environ.get(ENV)
    if not path:
        return
    record = {"step": int(step), "at": time.time(), **{k: float(v) for k, v in metrics.items()}}
    files.replace(path, json.dumps(record).encode())


def read(path: str) -> dict | None:
    try:
        with open(path) as fh:
            return json.load(fh)
    except (OSError, ValueError):
        return None
