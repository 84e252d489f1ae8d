"""Graceful stops for job scripts: on SIGTERM, save a checkpoint and exit within the grace period.

    from minihpc.job import preempt
    stop = preempt.StopRequest()                # installs the SIGTERM handler
    for batch in loader:
        ...
        if stop.agreed():                       # every rank, every step
            save_checkpoint()                   # rank 0 writes, as usual
            return preempt.EXIT_CODE

A graceful ``docker stop`` of one node, or the cluster tearing a job down, sends SIGTERM to
that node's ranks only; the rank that writes checkpoints may be elsewhere. :meth:`agreed`
therefore all-reduces the flag (MAX) across the process group, so every rank leaves at the
same step and rank 0 saves that step. The cost is one one-element all-reduce per call, on the
device the group's backend moves (:func:`minihpc.job.devices.collective_device`: the rank's GPU
under NCCL, the CPU under gloo).

The job then exits with 143 (128 + SIGTERM), never 0: a stopped job is not a finished one, and
the cluster requeues it (NODE_FAIL) when its node went away.
"""

from __future__ import annotations

import signal

EXIT_CODE = 128 + signal.SIGTERM


class StopRequest:
    def __init__(self, signals: tuple[int, ...] = (signal.SIGTERM,)):
        self.received: int | None = None
        for sig in signals:
            signal.signal(sig, self._handle)

    def _handle(self, signum, _frame) -> None:
        self.received = signum

    def agreed(self) -> bool:
        """Whether any rank was asked to stop; a collective call when a process group is up."""
        import torch
        import torch.distributed as dist

        from minihpc.job import devices

        if not (dist.is_available() and dist.is_initialized()):
            return self.received is not None
        flag = torch.tensor([0 if self.received is None else 1], dtype=torch.int32,
                            device=devices.collective_device())
        dist.all_reduce(flag, op=dist.ReduceOp.MAX)
        return bool(flag.item())
