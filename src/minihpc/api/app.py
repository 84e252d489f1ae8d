"""The API server: the routes, the web page's files, and one error shape for every failure,
``{"error": "one line"}`` with the status that says whose fault it is."""

from __future__ import annotations

import asyncio
import contextlib
from importlib import resources

import redis
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException

from minihpc import __version__
from minihpc.api import alerts, cluster, jobs, queue
from minihpc.api.guard import HEADERS as GUARD_HEADERS, Guard
from minihpc.api.streams import Hub
from minihpc.core.errors import ClusterUnavailable, Conflict, Forbidden, MinihpcError, NotFound, Unauthorized
from minihpc.state.connect import REDIS_ERRORS
from minihpc.state.nodes import RecentNodes
from minihpc.state.pending import PendingCache
from minihpc.state.store import Store

DOCS_POLICY = GUARD_HEADERS["content-security-policy"] + "; style-src 'self' 'unsafe-inline'"
"""Swagger UI sets style attributes; its page alone may (it still runs no inline script)."""

STATUS = [(Unauthorized, 401), (Forbidden, 403), (NotFound, 404), (Conflict, 409), (ClusterUnavailable, 503)]
"""The HTTP status of each error; any other MinihpcError is the request's fault: 400."""


REDIS_FULL = ("the cluster's Redis is full (its maxmemory, noeviction): nothing new can be recorded until an "
              "admin purges ended jobs or gives Redis more memory")
"""The 507 of any request that would write past Redis's maxmemory (reads and deletes go on)."""


def status_of(exc: MinihpcError) -> int:
    return next((code for kind, code in STATUS if isinstance(exc, kind)), 400)


def error(status: int, message: str, **headers) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status, headers=headers or None)


def validation_line(exc: RequestValidationError) -> str:
    """Pydantic's list of problems as one line: ``query limit: Input should be ...``."""
    first = exc.errors()[0] if exc.errors() else {}
    where = " ".join(str(p) for p in first.get("loc", ()))
    return f"{where}: {first.get('msg', 'invalid request')}".strip(": ")


def create_app(url: str, store: Store) -> FastAPI:
    """The app for the cluster whose Redis is at ``url``."""
    hub = Hub(url, store)

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI):
        task = asyncio.create_task(hub.run())
        yield
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    # FastAPI's own /docs loads Swagger UI from a CDN, which an offline cluster cannot reach:
    # the docs page below serves Swagger UI 5 from the fastapi-offline package instead.
    app = FastAPI(title="minihpc", version=__version__, lifespan=lifespan, docs_url=None, redoc_url=None,
                  description="The minihpc cluster's REST API: jobs, logs, nodes and incidents. "
                              "Every route but /health needs `Authorization: Bearer TOKEN` "
                              "(minihpc token create USER).")
    app.state.store, app.state.hub = store, hub
    app.state.pending = PendingCache()  # a deep queue is read whole once, then what changed
    app.state.nodes = RecentNodes()  # what submits are checked against, read at most every 2 s
    app.add_middleware(Guard)

    @app.exception_handler(MinihpcError)
    async def minihpc_error(request: Request, exc: MinihpcError):
        headers = {"WWW-Authenticate": "Bearer"} if isinstance(exc, Unauthorized) else {}
        return error(status_of(exc), str(exc), **headers)

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError):
        return error(400, validation_line(exc))

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, exc: HTTPException):
        return error(exc.status_code, str(exc.detail) if exc.status_code != 404 else f"no such route: {request.url.path}")

    for kind in REDIS_ERRORS:
        app.add_exception_handler(kind, lambda request, exc: error(503, f"the cluster's Redis does not answer ({exc})"))

    app.add_exception_handler(redis.exceptions.OutOfMemoryError, lambda request, exc: error(507, REDIS_FULL))

    app.include_router(cluster.router)
    app.include_router(jobs.router)
    app.include_router(queue.router)
    app.include_router(alerts.router)
    static = resources.files("minihpc.api") / "static"
    app.mount("/static", StaticFiles(directory=str(static)), name="static")

    app.mount("/docs-assets", StaticFiles(directory=str(resources.files("fastapi_offline") / "static")), name="docs-assets")

    @app.get("/", include_in_schema=False)
    def page():
        return FileResponse(str(static / "index.html"), headers={"Cache-Control": "no-cache"})

    @app.get("/docs", include_in_schema=False)
    def docs():
        return FileResponse(str(static / "docs.html"), headers={"Content-Security-Policy": DOCS_POLICY})

    return app
