"""``minihpc api``: serve the REST API and the web page with uvicorn."""

from __future__ import annotations

import logging

from minihpc.core.config import Settings
from minihpc.state.connect import redact, wait_until_answers

log = logging.getLogger(__name__)


def serve(settings: Settings, host: str, port: int, wait_redis: float = 0.0) -> None:
    import uvicorn

    from minihpc.api.app import create_app
    from minihpc.client.session import open_store

    if wait_redis:
        problem = wait_until_answers(settings.redis_url, wait_redis)
        if problem:
            raise SystemExit(f"minihpc api: {problem}")
    store = open_store(settings)
    log.info("api: serving http://%s:%d/ for the cluster at %s", host, port, redact(settings.redis_url).split("@")[-1])
    uvicorn.run(create_app(settings.redis_url, store), host=host, port=port, log_level="warning",
                access_log=False, timeout_graceful_shutdown=3)
