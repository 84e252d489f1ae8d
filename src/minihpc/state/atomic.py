"""Optimistic transactions: WATCH, read, decide with a pure function, MULTI/EXEC.

Any process may be killed at any point and the state stays whole, because every multi-key
change commits in one step or not at all.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from minihpc.state import keys
from minihpc.state.connect import text, watch_errors


def atomic(client, watch: Iterable[str], body: Callable):
    """Run ``body(pipe)`` under WATCH until it commits; it must call pipe.multi() to write."""
    with client.pipeline() as pipe:
        while True:
            try:
                pipe.watch(*watch)
                result = body(pipe)
                if pipe.explicit_transaction:
                    pipe.execute()
                return result
            except watch_errors():
                continue


def held_by(pipe, nodes: Iterable[str], job_id: int) -> list[str]:
    """Those of ``nodes`` whose allocation is ``job_id``'s (read in a WATCHed pipeline)."""
    return [n for n in nodes if text(pipe.get(keys.node_alloc(n))) == str(job_id)]


def free(pipe, nodes: list[str]) -> None:
    """Release ``nodes`` inside the transaction and wake the master if any were."""
    for n in nodes:
        pipe.delete(keys.node_alloc(n))
    if nodes:
        pipe.rpush(keys.EVENTS, f"freed {','.join(nodes)}")
