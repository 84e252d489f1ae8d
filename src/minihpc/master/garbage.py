"""When the master's process collects its cyclic garbage whole (issue 38).

The master keeps every pending job's record in memory (state.pending): 100,000 jobs are
millions of objects, none of them in a reference cycle. Python's collector still walks them
all in each full collection, which its own thresholds start every few passes while records
are read (a queue filling, short jobs ending): 0.5-0.9 s a time on 1,000 simulated nodes
with 100,000 jobs queued, every one finding nothing to free -- inside passes, whose p95 it
set. So the master starts full collections itself, every :data:`FULL_EVERY` seconds between
passes, and the collector's own young collections (which free what a pass leaves in cycles)
go on as before.
"""

from __future__ import annotations

import gc
import logging
import time

log = logging.getLogger(__name__)

FULL_EVERY = 60.0
"""Seconds between the master's full collections: cyclic garbage that reached the oldest
generation waits at most this long."""
NEVER = 1 << 30
"""A threshold the oldest generation's count never reaches."""


class FullCollections:
    def __init__(self, every: float = FULL_EVERY):
        self.every = every
        self.next_at = 0.0

    def take_over(self, now: float) -> None:
        """From now on full collections come from :meth:`step` only."""
        young, middle, _ = gc.get_threshold()
        gc.set_threshold(young, middle, NEVER)
        self.next_at = now + self.every

    def step(self, now: float) -> float | None:
        """A full collection when one is due (between passes); how long it took, or None."""
        if now < self.next_at:
            return None
        self.next_at = now + self.every
        started = time.perf_counter()
        found = gc.collect()
        took = time.perf_counter() - started
        log.debug("master: full garbage collection in %.3fs (%d objects freed)", took, found)
        return took
