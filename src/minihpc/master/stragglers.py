"""The master's straggler watch: every few seconds it reads the newest progress reports of each
running multi-node job, judges them with minihpc.core.straggler, and records one ``straggler``
incident per slow rank and attempt (``minihpc incidents`` shows it; the exporter shows the
ratio of every rank, which the MinihpcStraggler alert watches)."""

from __future__ import annotations

import logging
from collections.abc import Callable

from minihpc.core import straggler
from minihpc.core.models import Job
from minihpc.state.store import Store

log = logging.getLogger(__name__)

INTERVAL = 2.0
"""Seconds between two looks (the agents forward reports about as often)."""


class StragglerWatch:
    def __init__(self, store: Store, interval: float = INTERVAL):
        self.store = store
        self.interval = interval
        self.next_at = 0.0
        self.flagged: set[tuple[int, int, int]] = set()  # (job, attempt, rank) already reported

    def step(self, now: float, running: Callable[[], list[Job]]) -> None:
        """Look again if it is time; ``running``: the running jobs (the master's cache of them,
        asked only then)."""
        if now < self.next_at:
            return
        self.next_at = now + self.interval
        self.judge(running())

    def judge(self, running: list[Job]) -> None:
        watched = [job for job in running if len(job.nodes) > 1]
        for job in watched:
            series = self.store.series(job.id, last=straggler.WINDOW * len(job.nodes))
            for pace in straggler.stragglers(straggler.paces(series, job.attempts)):
                key = (job.id, job.attempts, pace.rank)
                if key in self.flagged:
                    continue
                self.flagged.add(key)
                self.store.incident("straggler", pace.node, job.id, rank=pace.rank, ratio=round(pace.ratio, 2),
                                    step_seconds=round(pace.seconds, 4), others_seconds=round(pace.others, 4),
                                    attempt=job.attempts)
                log.warning("job %s: rank %s on %s is a straggler (%.2fx the others' %.3fs per step)",
                            job.id, pace.rank, pace.node, pace.ratio, pace.others)
        live = {job.id for job in watched}
        self.flagged = {key for key in self.flagged if key[0] in live}
