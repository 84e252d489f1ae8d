"""Signals a running job gets without being ended: ``sbatch --signal=[B:]SIG@SECS`` (SECS
before its time limit) and ``scancel --signal=SIG [-b|-f]`` (now). Each node's share delivers
them to its own processes of the job, polled from its loop:

- ``--signal`` by its own clock: the limit (start + TimeLimit) is re-read from the job's record
  every :data:`RECHECK` seconds, so ``scontrol update TimeLimit=`` moves the moment; sent once.
- ``scancel --signal`` by a message in the node's inbox (state.steps, :data:`SIGNAL`).

Who gets it, as Slurm's man pages say: by default every task of the job's steps (srun's tasks
with whatever they started; in torchrun mode the ranks, never torchrun itself, whose default
action on SIGUSR1 would end it); ``B:`` (sbatch) or ``-b/--batch`` (scancel) the batch shell
only, none of the other processes; ``-f/--full`` (scancel) the batch shell with its children and
every step's tasks. A torchrun-mode job has no batch shell: its ranks are signalled either way.
"""

from __future__ import annotations

import logging
import math
import signal
import time
from collections.abc import Callable

import psutil

from minihpc.core.batch import BATCH
from minihpc.core.errors import UsageError
from minihpc.core.launch_spec import LaunchSpec
from minihpc.core.signals import WarnSignal, parse_warn_signal, warn_at
from minihpc.machine.processes import process_tree, send
from minihpc.state.connect import REDIS_ERRORS
from minihpc.state.steps import BATCH_SHELL, FULL, SIGNAL, STEPS

log = logging.getLogger(__name__)

RECHECK = 1.0
"""Seconds between two reads of a job's time limit by a node waiting to send ``--signal``."""

Processes = Callable[[], list[psutil.Process]]


class WarnTimer:
    """``--signal``'s SIG, due once SECS before the time limit as the record says now."""

    def __init__(self, warn: WarnSignal):
        self.warn = warn
        self.due_at: float | None = None
        self.read_at = -math.inf
        self.sent = False

    def due(self, read_limit: Callable[[], tuple[float | None, float | None]], now: float) -> bool:
        """Whether to send it now (True once); ``read_limit`` gives (started_at, time_limit)."""
        if self.sent:
            return False
        if now - self.read_at >= RECHECK:
            self.read_at = now
            try:
                self.due_at = warn_at(self.warn, *read_limit())
            except REDIS_ERRORS:  # an outage: keep the last known moment
                pass
        if self.due_at is None or now < self.due_at:
            return False
        self.sent = True
        return True


class JobSignals:
    """One node's deliverer: ``tasks`` lists the processes of the job's tasks running here,
    ``shell`` the batch shell (empty where it does not run here); ``note`` writes a line in the
    node's job log."""

    def __init__(self, spec: LaunchSpec, store, note: Callable[[str], None], tasks: Processes,
                 shell: Processes | None = None):
        self.spec, self.store, self.note = spec, store, note
        self.tasks, self.shell = tasks, shell or tasks
        self.timer = _timer(spec)

    def poll(self, now: float | None = None) -> None:
        """Deliver what is due: a ``scancel --signal`` waiting in the inbox (torchrun mode: a
        batch job's loop reads its inbox itself and hands SIGNAL messages to :meth:`handle`),
        then ``--signal`` at its time."""
        try:
            message = self.store.take_message(self.spec.job_id, self.spec.attempt, self.spec.node)
        except REDIS_ERRORS:
            message = None
        if message is not None:
            self.handle(message)
        self.warn_if_due(now)

    def warn_if_due(self, now: float | None = None) -> None:
        """``--signal``'s SIG, once, when its time has come."""
        job_id = self.spec.job_id
        if self.timer is not None and self.timer.due(lambda: self.store.run_limit(job_id),
                                                     time.time() if now is None else now):
            warn = self.timer.warn
            self.send(warn.signal, BATCH_SHELL if warn.batch_only else STEPS,
                      f"--signal={warn.text()}: {warn.seconds} s before the time limit")

    def handle(self, message: dict) -> None:
        """A SIGNAL message (anything else is not for this deliverer and is dropped)."""
        if message.get("kind") != SIGNAL:
            return
        try:
            sig = signal.Signals(int(message.get("signal")))
        except (TypeError, ValueError):
            log.warning("job %s: ignoring a malformed signal message %r", self.spec.job_id, message)
            return
        self.send(sig, str(message.get("scope") or STEPS), f"scancel --signal by {message.get('by') or '?'}")

    def send(self, sig: signal.Signals, scope: str, why: str) -> int:
        """Send ``sig`` to the processes ``scope`` names here; how many got it."""
        if scope == BATCH_SHELL:
            procs = self.shell()
        elif scope == FULL:
            procs = list({p.pid: p for p in [*trees([r.pid for r in self.shell()]), *self.tasks()]}.values())
        else:
            procs = self.tasks()
        if scope == BATCH_SHELL and not procs and self.spec.launch == BATCH and self.spec.node_rank:
            return 0  # the batch shell runs on the first node only: nothing for this one
        send(procs, sig)
        log.info("job %s on %s: %s sent to %d process(es) (%s)", self.spec.job_id, self.spec.node, sig.name,
                 len(procs), why)
        self.note(f"{sig.name} sent to {len(procs)} process(es) of the job on {self.spec.node} ({why})")
        return len(procs)


def _timer(spec: LaunchSpec) -> WarnTimer | None:
    if not spec.warn_signal:
        return None
    try:
        warn = parse_warn_signal(spec.warn_signal)
    except UsageError as exc:  # checked at submit: only a damaged record gets here, and the job runs on
        log.warning("job %s: ignoring its --signal: %s", spec.job_id, exc)
        return None
    if warn.batch_only and spec.launch == BATCH and spec.node_rank != 0:
        return None  # only the first node runs the batch shell
    return WarnTimer(warn)


def trees(roots: list[int]) -> list[psutil.Process]:
    """Every live process of the trees rooted at ``roots`` (pids)."""
    return [p for pid in roots for p in process_tree(pid)]


def descendants(pid: int) -> list[psutil.Process]:
    """A process's live descendants, not itself (torchrun's ranks and what they started)."""
    return process_tree(pid)[1:]
