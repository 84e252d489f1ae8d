"""Alertmanager's webhook receiver and the alerts it brought (minihpc.core.alerts).

``POST /alerts`` takes Alertmanager's notifications; it answers only the cluster's alert token
(MINIHPC_ALERT_TOKEN, a secret ``make up`` generates and gives Alertmanager too), never a user's,
so no user can make up an alert. ``GET /alerts`` is any user's: which alerts fired and which
still fire, newest first.
"""

from __future__ import annotations

import hmac
import json
import os

from fastapi import APIRouter, Depends, Query, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.security import HTTPAuthorizationCredentials

from minihpc.api.auth import bearer, principal
from minihpc.client import alerts as client_alerts
from minihpc.client.access import Principal
from minihpc.core import alerts
from minihpc.core.errors import ClusterUnavailable, Unauthorized, UsageError

router = APIRouter(tags=["alerts"])

TOKEN_ENV = "MINIHPC_ALERT_TOKEN"
BODY_MAX = 1 << 20
"""Bytes one notification may have."""


def _check_token(credentials: HTTPAuthorizationCredentials | None) -> None:
    expected = os.environ.get(TOKEN_ENV, "")
    if not expected:
        raise ClusterUnavailable(f"the alert receiver is off: the API has no {TOKEN_ENV}")
    given = credentials.credentials.strip() if credentials else ""
    if not hmac.compare_digest(given.encode(), expected.encode()):
        raise Unauthorized("POST /alerts needs the cluster's alert token")


@router.post("/alerts", status_code=202)
async def receive(request: Request, credentials: HTTPAuthorizationCredentials | None = Depends(bearer)):
    """Alertmanager's webhook (version 4): each alert becomes an incident of kind ``alert``."""
    _check_token(credentials)
    body = await request.body()
    if len(body) > BODY_MAX:
        raise UsageError(f"a notification may have at most {BODY_MAX} bytes")
    try:
        payload = json.loads(body)
    except ValueError:
        raise UsageError("the notification is not JSON") from None
    records = alerts.incidents(payload)
    store = request.app.state.store
    for record in records:
        await run_in_threadpool(store.incident, **record)
    return {"recorded": len(records)}


@router.get("/alerts")
def recent(request: Request, limit: int = Query(50, ge=1, le=client_alerts.READ), who: Principal = Depends(principal)):
    """The newest alert notifications, and the alerts still firing."""
    return client_alerts.recent(request.app.state.store, limit)
