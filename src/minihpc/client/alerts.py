"""The alerts Alertmanager sent (minihpc.core.alerts), as every face shows them: the newest
notifications and the alerts still firing, read from the incident log."""

from __future__ import annotations

from minihpc.core import alerts
from minihpc.state.store import Store

READ = 500
"""Incidents looked through for alerts (the newest)."""


def recent(store: Store, limit: int) -> dict:
    """``{"alerts": the newest ``limit`` notifications, newest first, "firing": the alerts
    still firing}``."""
    records = [i for i in store.incidents(READ) if i.get("kind") == alerts.KIND]
    return {"alerts": records[:limit], "firing": alerts.firing(records)}
