"""Progress reports from job scripts: the step heartbeat the watchdog and monitors read.

    from minihpc.job import progress
    progress.report(step, total=total_steps, loss=loss.item())

Cheap enough for every step: it replaces a small file the node's agent watches
($MINIHPC_PROGRESS_FILE, one per node and attempt); the agent forwards what changed to Redis.
Outside a minihpc job it does nothing. Call it from one rank per node (local rank 0) or from
rank 0 only; either way the job counts as making progress.

Metrics the cluster knows how to show (Prometheus, Grafana, ``minihpc monitor`` and
``minihpc report``): ``total`` (steps), ``loss``, ``samples_per_second``, ``grad_norm``, ``rank``,
and the step time by phase, ``<phase>_seconds`` for each of :data:`PHASES`, which
:class:`StepTimer` measures:

    timer = progress.StepTimer()
    timer.hook_allreduce(ddp_model)              # times DDP's gradient all-reduce
    with timer.phase("data"):
        images, labels = next(batches)
    with timer.phase("forward"):
        loss = F.cross_entropy(model(images), labels)
    ...
    progress.report(step, loss=loss.item(), **timer.lap(samples=len(images) * world))
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from contextlib import contextmanager

from minihpc.machine import files

ENV = "MINIHPC_PROGRESS_FILE"
PHASES = ("data", "forward", "backward", "allreduce", "optimizer")


class StepTimer:
    """Wall time per phase of the steps since the last :meth:`lap`, averaged per step.

    DDP overlaps its all-reduce with the backward pass: ``backward`` is the wall time of
    ``loss.backward()`` less the all-reduce time measured inside it, never below zero.

    CUDA runs kernels after the Python call that queued them has returned: on a GPU pass
    ``synchronize=torch.cuda.synchronize``, called as each phase ends, so a phase's time is its
    kernels' and not whichever later call happened to wait for them."""

    def __init__(self, synchronize: Callable[[], object] | None = None):
        self.synchronize = synchronize
        self.totals = dict.fromkeys(PHASES, 0.0)
        self.steps = 0
        self.started = time.perf_counter()

    @contextmanager
    def phase(self, name: str):
        start = time.perf_counter()
        try:
            yield
        finally:
            if self.synchronize is not None:
                self.synchronize()
            self.add(name, time.perf_counter() - start)
            if name == "optimizer":
                self.steps += 1

    def add(self, name: str, seconds: float) -> None:
        self.totals[name] += seconds

    def hook_allreduce(self, ddp_model) -> None:
        """Time the gradient all-reduce of a DistributedDataParallel model (same arithmetic
        as DDP's default: average over ranks)."""
        from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

        def timed(state, bucket):
            start = time.perf_counter()
            future = default_hooks.allreduce_hook(state, bucket)

            def done(fut):
                self.add("allreduce", time.perf_counter() - start)
                return fut.value()

            return future.then(done)

        ddp_model.register_comm_hook(None, timed)

    def lap(self, samples: int = 0) -> dict[str, float]:
        """Per-step phase times (and samples/s when ``samples`` per step is given) since the
        last lap; starts the next one."""
        steps = max(1, self.steps)
        per_step = {name: total / steps for name, total in self.totals.items()}
        per_step["backward"] = max(0.0, per_step["backward"] - per_step["allreduce"])
        out = {f"{name}_seconds": value for name, value in per_step.items()}
        elapsed = time.perf_counter() - self.started
        if samples and elapsed > 0:
            out["samples_per_second"] = samples * steps / elapsed
        self.totals = dict.fromkeys(PHASES, 0.0)
        self.steps = 0
        self.started = time.perf_counter()
        return out


_first_reported: set[str] = set()


def report(step: int, **metrics: float) -> None:
    path = os.environ.get(ENV)
    if not path:
        return
    record = json.dumps({"step": int(step), "at": time.time(), **{k: float(v) for k, v in metrics.items()}}).encode()
    if path not in _first_reported:
        # The agent samples the latest report; this attempt's first one is kept apart, so the
        # cluster knows exactly when training (re)started and from which step.
        _first_reported.add(path)
        files.replace(first_path(path), record)
    files.replace(path, record)


def first_path(path: str) -> str:
    return path + ".first"
