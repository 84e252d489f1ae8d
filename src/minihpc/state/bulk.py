"""Reading thousands of job records at once (squeue, the API's first listing, the master's
first pass over a deep queue)."""

from __future__ import annotations

import contextlib
import gc


@contextlib.contextmanager
def bulk_reading():
    """Without the cyclic garbage collector while thousands of records are read and parsed:
    they make hundreds of thousands of objects and no cycle, and the collector ran over the
    growing heap again and again (a quarter of a 100,000-job squeue). Reference counting frees
    them as ever; the collector is back on after (the one who turned it off turns it on)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()
