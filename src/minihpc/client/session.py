"""Opening the cluster: what every face (CLI, REST API) calls first."""

from __future__ import annotations

from minihpc.core.config import Settings
from minihpc.state.connect import connect
from minihpc.state.store import Store


def open_store(settings: Settings) -> Store:
    """The cluster's state, or ClusterUnavailable with one line saying why not."""
    return Store(connect(settings.redis_url))
