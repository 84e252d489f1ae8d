"""A batch job's steps in Redis: the messages that reach each node's share (start a step's
tasks, kill a step, the batch script has ended, send a signal) and the ends of the tasks, which
srun waits on.

Each node's share of a batch job reads its own inbox (``keys.job_inbox``); srun's server on the
first node writes every node's messages in one transaction, and reads the step's task ends
(``keys.job_step_ends``). Both expire: a job that vanishes leaves nothing behind for long.
"""

from __future__ import annotations

import json

from minihpc.core.steps import TaskEnd
from minihpc.state import keys
from minihpc.state.connect import BLOCK_MAX

STEP_TTL = 86400
"""Seconds a step's messages and task ends outlive their last write."""

START, KILL, END, SIGNAL = "start", "kill", "end", "signal"
"""What a message to a node's share says (SIGNAL: ``scancel --signal``, to a running job of
either launch mode)."""

STEPS, BATCH_SHELL, FULL = "steps", "batch", "full"
"""Whom a SIGNAL message's signal is for (its ``scope``): every step's tasks (the default), the
batch shell only (``scancel -b``, ``sbatch --signal=B:``), or both with the shell's children
(``scancel -f``)."""


def signal_message(sig: int, scope: str, by: str) -> dict:
    """The message that asks a node's share to send ``sig`` to its processes in ``scope``."""
    return {"kind": SIGNAL, "signal": int(sig), "scope": scope, "by": by}


class Steps:
    def send(self, job_id: int, attempt: int, messages: dict[str, dict]) -> None:
        """``messages[node]`` to each node's share, all or none."""
        with self.r.pipeline() as pipe:
            for node, message in messages.items():
                key = keys.job_inbox(job_id, attempt, node)
                pipe.rpush(key, json.dumps(message))
                pipe.expire(key, STEP_TTL)
            pipe.execute()

    def next_message(self, job_id: int, attempt: int, node: str, timeout: float) -> dict | None:
        """The next message to ``node``'s share, or None if none came within ``timeout``."""
        got = self.r.blpop([keys.job_inbox(job_id, attempt, node)], timeout=min(BLOCK_MAX, timeout))
        if not got:
            return None
        message = json.loads(got[1])
        return message if isinstance(message, dict) else None

    def take_message(self, job_id: int, attempt: int, node: str) -> dict | None:
        """The next message to ``node``'s share if one is there, without waiting."""
        raw = self.r.lpop(keys.job_inbox(job_id, attempt, node))
        message = json.loads(raw) if raw else None
        return message if isinstance(message, dict) else None

    def report_task_end(self, job_id: int, attempt: int, step: int, end: TaskEnd) -> None:
        key = keys.job_step_ends(job_id, attempt, step)
        with self.r.pipeline() as pipe:
            pipe.rpush(key, json.dumps(end.to_dict()))
            pipe.expire(key, STEP_TTL)
            pipe.execute()

    def next_task_end(self, job_id: int, attempt: int, step: int, timeout: float) -> TaskEnd | None:
        got = self.r.blpop([keys.job_step_ends(job_id, attempt, step)], timeout=min(BLOCK_MAX, timeout))
        return TaskEnd.from_dict(json.loads(got[1])) if got else None

    def forget_steps(self, job_id: int, attempt: int, nodes: list[str], steps: int) -> None:
        """Remove what the attempt's steps left (its end: nothing waits on them any more)."""
        names = [keys.job_inbox(job_id, attempt, n) for n in nodes]
        names += [keys.job_step_ends(job_id, attempt, s) for s in range(steps)]
        if names:
            self.r.delete(*names)
