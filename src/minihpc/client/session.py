"""Opening the cluster: what every face (CLI, REST API) calls first."""

from __future__ import annotations

from minihpc.core.config import Settings
from minihpc.state.connect import connect_command
from minihpc.state.store import Store


def open_store(settings: Settings) -> Store:
    """The cluster's state, or ClusterUnavailable with one line saying why not. It speaks
    state.wire: no redis-py import (most of a CLI call's cost), and each thread a connection of
    its own (the REST API's handlers run in a thread pool); about 15% more API submits a second
    than redis-py's pooled client, side by side (docs/scale.md)."""
    return Store(connect_command(settings.redis_url))
