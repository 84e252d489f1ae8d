"""The restart proxy: the one process in a Compose cluster that holds the Docker socket.

Its API is three routes: ``GET /health`` (open, for the healthcheck; says nothing secret),
``GET /events`` (with the restart token: one JSON line per node container of this project that
dies, the moment Docker says so -- the master's crash detection, :mod:`minihpc.master.crashes`)
and ``POST /restart/<node>``, which restarts that node's container of this Compose project only if
every rule lets it through, in this order:

- 401: the request carries the restart token (:mod:`minihpc.restart.token`);
- 403: the name is a node's, never the control plane's (:func:`~minihpc.restart.rules.name_refusal`);
- 503 / 409: Redis answers and shows the node DOWN (:func:`~minihpc.restart.rules.state_refusal`);
- 404 / 403: the node has a container, and it is not the caller's own;
- 429: the rate limits allow it (:func:`~minihpc.restart.rules.allow`); the answer's Retry-After
  header says in how many seconds they will (:func:`~minihpc.restart.rules.wait_before`).

It unpauses a paused container, then restarts it (which also starts a stopped one). Nothing
else of the Docker API is reachable through it. It also runs the watchdog that starts Redis
again when it was killed or crashed (:mod:`minihpc.restart.watchdog`). It runs no jobs, and the node containers never see the socket.
"""

from __future__ import annotations

import json
import logging
import math
import re
import threading
import time
from collections.abc import Iterable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import redis

from minihpc.core.crashes import docker_death
from minihpc.core.errors import ClusterUnavailable
from minihpc.core.models import NodeState, NodeStatus
from minihpc.restart.engine import DockerError, Engine, EventStream
from minihpc.restart.rules import (RateLimits, allow, booting, caller_refusal, name_refusal, prune, state_refusal,
                                   wait_before)
from minihpc.restart.token import authorized
from minihpc.restart.watchdog import Watchdog, WatchPolicy, docker_time
from minihpc.state.connect import connect
from minihpc.state.store import Store

log = logging.getLogger(__name__)

ROUTES = "only GET /health, GET /events and POST /restart/<node>"
RESTART_PATH = re.compile(r"/restart/([^/?]+)")
"""POST /restart/<node>: the node's name is group 1."""
STOP_TIMEOUT = 5
"""Seconds Docker gives a node's processes to stop before it kills them on restart."""
EVENTS_KEEPALIVE = 10.0
"""Seconds between the empty lines GET /events sends while no node dies (readers time out
after a few missed ones: minihpc.restart.docker)."""


class NodeStates:
    """A node's state as the cluster's Redis shows it, connecting on first use (the proxy
    starts, and keeps serving, while Redis is down)."""

    def __init__(self, redis_url: str):
        self.redis_url = redis_url
        self._store: Store | None = None

    def state(self, node: str) -> NodeState | None:
        """The node's state, None if it never registered; ClusterUnavailable or a RedisError
        when Redis does not answer."""
        status = self.status(node)
        return None if status is None else status.state

    def status(self, node: str) -> NodeStatus | None:
        """The node as Redis shows it (state, last heartbeat), None if it never registered."""
        store = self._store or Store(connect(self.redis_url))
        try:
            statuses = store.node_statuses()
        except redis.RedisError:
            self._store = None
            raise
        self._store = store
        return next((s for s in statuses if s.name == node), None)


class RestartProxy:
    """The decisions of one request, without HTTP: ``post()`` -> (status, message)."""

    def __init__(self, engine: Engine, project: str, token: str, nodes: NodeStates,
                 limits: RateLimits | None = None, clock=time.time):
        self.engine = engine
        self.project = project
        self.token = token
        self.nodes = nodes
        self.limits = limits or RateLimits()
        self.clock = clock
        self.history: list[tuple[float, str]] = []
        self.lock = threading.Lock()

    def post(self, path: str, authorization: str | None, caller: str) -> tuple[int, str]:
        if not authorized(authorization, self.token):
            return 401, "missing or wrong restart token; expected Authorization: Bearer <MINIHPC_RESTART_TOKEN>"
        match = RESTART_PATH.fullmatch(path)
        if not match:
            return 404, ROUTES
        try:
            return self.restart(match.group(1), caller)
        except DockerError as exc:
            return 502, str(exc)

    def retry_after(self, path: str) -> int | None:
        """For a 429 on ``path``: whole seconds until its node may be restarted (Retry-After)."""
        match = RESTART_PATH.fullmatch(path)
        if not match:
            return None
        with self.lock:
            return math.ceil(wait_before(self.clock(), self.history, match.group(1), self.limits))

    def deaths(self, events: Iterable[dict]) -> Iterator[dict]:
        """Each node container of this project that dies, as {"node", "at", "exit_code"}, from
        Docker's ``events``; never a control-plane service's (:func:`~minihpc.core.crashes.docker_death`)."""
        for event in events:
            death = docker_death(event)
            if death is not None and name_refusal(death["node"]) is None:
                yield death

    def restart(self, node: str, caller: str) -> tuple[int, str]:
        refusal = name_refusal(node)
        if refusal:
            return 403, refusal
        try:
            status = self.nodes.status(node)
        except (ClusterUnavailable, redis.RedisError) as exc:
            return 503, f"cannot read {node}'s state from Redis ({exc}); not restarting"
        refusal = state_refusal(node, None if status is None else status.state,
                                None if status is None else status.drain_reason)
        if refusal:
            return 409, refusal
        container = self.engine.find(self.project, node)
        if container is None:
            return 404, f"no container for node {node} in Compose project {self.project}"
        refusal = caller_refusal(node, container, caller)
        if refusal:
            return 403, refusal
        with self.lock:  # check and record as one step: two requests at once are two restarts
            now = self.clock()
            ok, reason = allow(now, self.history, node, self.limits)
            if not ok:
                return 429, reason
            self.history = prune(self.history, now, self.limits) + [(now, node)]
        cid = container["Id"]
        if container.get("State") == "running":
            started = docker_time(self.engine.inspect(cid).get("State", {}).get("StartedAt"))
            if booting(True, started, status.last_heartbeat, self.clock()):
                return 200, (f"{node} ({cid[:12]}) was started again by Docker {self.clock() - started:.1f}s ago, "
                             "after its agent died; left to boot")
        if container.get("State") == "paused":
            self.engine.act(cid, "unpause")
        self.engine.act(cid, f"restart?t={STOP_TIMEOUT}")
        return 200, f"restarted {node} ({cid[:12]}), {'DOWN' if status.state is NodeState.DOWN else 'stuck'} in Redis"


def stream_deaths(proxy: RestartProxy, stream: EventStream, out, peer: str) -> None:
    """Write each node container death to ``out`` as a JSON line until the engine's stream or
    the reader goes away, with an empty line every EVENTS_KEEPALIVE seconds meanwhile (so a
    reader that is gone is noticed, and the engine's stream closed, without waiting for a death)."""
    lock, done = threading.Lock(), threading.Event()

    def send(data: bytes) -> None:
        with lock:
            out.write(data)
            out.flush()

    def keepalive() -> None:
        while not done.wait(EVENTS_KEEPALIVE):
            try:
                send(b"\n")
            except OSError:
                stream.close()
                return

    threading.Thread(target=keepalive, name="events-keepalive", daemon=True).start()
    try:
        send(b"\n")
        for death in proxy.deaths(stream):
            send(json.dumps(death).encode() + b"\n")
    except (DockerError, OSError) as exc:
        log.warning("GET /events from %s ended: %s", peer, exc)
    finally:
        done.set()
        stream.close()
        stream.release()


def make_server(proxy: RestartProxy, host: str, port: int) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        def _answer(self, status: int, message: str, retry_after: int | None = None) -> None:
            data = json.dumps({"message": message}).encode()
            self.send_response(status)
            if status == 401:
                self.send_header("WWW-Authenticate", "Bearer")
            if retry_after is not None:
                self.send_header("Retry-After", str(retry_after))
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):  # noqa: N802 - http.server's naming
            if self.path == "/events":
                return self._stream_deaths()
            self._answer(*((200, "ok") if self.path == "/health" else (404, ROUTES)))

        def _stream_deaths(self) -> None:
            if not authorized(self.headers.get("Authorization"), proxy.token):
                return self._answer(401, "missing or wrong restart token; expected Authorization: Bearer <MINIHPC_RESTART_TOKEN>")
            try:
                stream = proxy.engine.events(proxy.project)
            except DockerError as exc:
                return self._answer(502, str(exc))
            self.send_response(200)
            self.send_header("Content-Type", "application/x-ndjson")
            self.end_headers()
            stream_deaths(proxy, stream, self.wfile, self.client_address[0])

        def do_POST(self):  # noqa: N802
            caller = self.client_address[0]
            try:
                status, message = proxy.post(self.path, self.headers.get("Authorization"), caller)
            except Exception as exc:  # noqa: BLE001 - answer, log, keep serving
                log.exception("POST %s from %s failed", self.path[:100], caller)
                status, message = 500, f"{type(exc).__name__}: {exc}"
            log.warning("POST %s from %s: %s %s", self.path[:100], caller, status, message)
            self._answer(status, message, proxy.retry_after(self.path) if status == 429 else None)

        def log_message(self, *args):  # quiet: the line above is the log
            pass

    server = ThreadingHTTPServer((host, port), Handler)
    server.daemon_threads = True
    return server


def serve(host: str, port: int, engine: Engine, token: str, redis_url: str,
          limits: RateLimits, watch: WatchPolicy, watched: list[str]) -> None:
    """Serve until the process ends, keeping the ``watched`` services of this project up."""
    project = engine.own_project()
    proxy = RestartProxy(engine, project, token, NodeStates(redis_url), limits)
    server = make_server(proxy, host, port)
    for service in watched:
        Watchdog(engine, project, service, policy=watch).start()
    log.info("restart proxy for project %s on %s:%s; at most one restart per node every %gs and %d per %gs; "
             "watching %s every %gs", project, host, port, limits.node_interval, limits.max_restarts, limits.window,
             ", ".join(watched) or "nothing", watch.interval)
    server.serve_forever()
