"""The cluster as a whole: health, who am I, nodes (drain, resume), incidents, the event stream."""

from __future__ import annotations

import time

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import JSONResponse, StreamingResponse
from starlette.concurrency import run_in_threadpool

from minihpc.api import sse, streams
from minihpc.api.auth import principal
from minihpc.api.views import node_json
from minihpc.client import nodes as client_nodes
from minihpc.client.access import Principal
from minihpc.core.errors import UsageError
from minihpc.state.connect import REDIS_ERRORS

router = APIRouter(tags=["cluster"])


@router.get("/health")
def health(request: Request):
    """Redis reachable, master alive, nodes up; 503 when Redis does not answer. No token."""
    store = request.app.state.store
    try:
        nodes = store.node_statuses()
        master = store.master_alive()
    except REDIS_ERRORS as exc:
        return JSONResponse({"status": "unavailable", "redis": False, "error": f"Redis does not answer ({exc})"},
                            status_code=503)
    up = sum(n.alive for n in nodes)
    status = "ok" if master and up else "degraded"
    return {"status": status, "redis": True, "master": master, "nodes_up": up, "nodes": len(nodes)}


@router.get("/whoami")
def whoami(who: Principal = Depends(principal)):
    return {"user": who.user, "admin": who.admin}


@router.get("/nodes")
def nodes(request: Request, who: Principal = Depends(principal)):
    now = time.time()
    return {"nodes": [node_json(n, now) for n in request.app.state.store.node_statuses()]}


def _node(request: Request, name: str) -> dict:
    status = client_nodes.known(request.app.state.store, [name])[name]
    return node_json(status, time.time())


@router.post("/nodes/{name}/drain")
async def drain(request: Request, name: str, who: Principal = Depends(principal)):
    try:
        body = await request.json() if await request.body() else {}
    except ValueError:
        raise UsageError('the body must be JSON: {"reason": "..."} (or empty)') from None
    reason = (body.get("reason") if isinstance(body, dict) else None) or f"drained by {who.user}"
    await run_in_threadpool(client_nodes.drain, request.app.state.store, [name], str(reason)[:200], who)
    return await run_in_threadpool(_node, request, name)


@router.post("/nodes/{name}/resume")
def resume(request: Request, name: str, who: Principal = Depends(principal)):
    client_nodes.resume(request.app.state.store, [name], who)
    return _node(request, name)


@router.get("/incidents")
def incidents(request: Request, limit: int = Query(50, ge=1, le=1000), who: Principal = Depends(principal)):
    return {"incidents": request.app.state.store.incidents(limit)}


@router.get("/events")
async def events(request: Request, who: Principal = Depends(principal)):
    """Server-Sent Events: ``job`` (state changes), ``incident`` and ``node`` (state changes)."""
    return StreamingResponse(streams.events(request.app.state.hub), media_type="text/event-stream", headers=sse.HEADERS)
