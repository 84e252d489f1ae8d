"""Opening the cluster: what every face (CLI, REST API) calls first."""

from __future__ import annotations

from minihpc.core.config import Settings
from minihpc.state.connect import connect, connect_command
from minihpc.state.store import Store


def open_store(settings: Settings, shared: bool = False) -> Store:
    """The cluster's state, or ClusterUnavailable with one line saying why not. A command's
    store speaks state.wire (no redis-py import: a CLI call's cost); ``shared`` is for a server
    whose threads share one store (the REST API), which gets redis-py's pooled client."""
    return Store(connect(settings.redis_url) if shared else connect_command(settings.redis_url))
