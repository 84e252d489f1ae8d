"""The master's full garbage collections come between passes, when due, not whenever Python's
thresholds say (issue 38: 0.5-0.9 s each over 100,000 queued jobs, inside passes)."""

import gc
import weakref

from minihpc.master.garbage import NEVER, FullCollections


class Cycle:
    def __init__(self):
        self.me = self


def test_garbage_in_the_oldest_generation_waits_for_the_master_s_due_collection():
    thresholds = gc.get_threshold()
    try:
        full = FullCollections(every=10.0)
        full.take_over(100.0)
        assert gc.get_threshold() == (*thresholds[:2], NEVER)  # young collections as before
        cycle = Cycle()
        ref = weakref.ref(cycle)
        gc.collect(1)
        gc.collect(1)  # it lives through two: the oldest generation now holds it
        del cycle
        churn = [[i] for i in range(300_000)]  # what a pass allocates: young collections, many
        del churn
        gc.collect(1)
        assert ref() is not None, "a full collection came by itself"
        assert full.step(105.0) is None and ref() is not None  # not due yet
        assert full.step(110.0) is not None and ref() is None  # due: between passes
        assert full.step(115.0) is None  # and not again before 120
    finally:
        gc.set_threshold(*thresholds)
