"""The rq queues the master dispatches on: one per node, which only that node's agent works.

Payloads are JSON (rq's JSONSerializer), never pickle: what is queued is data, and the only
task is :data:`minihpc.core.launch_spec.LAUNCH_TASK`.
"""

from __future__ import annotations

from rq import Queue
from rq.serializers import JSONSerializer

from minihpc.state import keys

SERIALIZER = JSONSerializer


def node_queue(store, node: str) -> Queue:
    """Node ``node``'s launch queue, on ``store``'s connection."""
    return Queue(keys.node_queue(node), connection=store.connection, serializer=SERIALIZER)


def launch_id(job_id: int, attempt: int, node: str) -> str:
    """The rq id of job ``job_id``'s launch task on ``node`` for ``attempt``."""
    return f"minihpc-{job_id}-{attempt}-{node}"
