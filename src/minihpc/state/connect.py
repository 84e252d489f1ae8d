"""Reaching Redis, and what every layer does when it cannot.

One policy, in one place:
- a command (CLI, client) fails at once with one line: :func:`connect_command` (and a daemon's
  :func:`connect`) raises ClusterUnavailable;
- a daemon keeps going through an outage: it catches :data:`REDIS_ERRORS` (or :func:`outages`), or calls
  :func:`retrying` for a write that must not be lost; a loop that must outlive anything Redis
  answers (the heartbeat, a metrics scrape, a drill's measuring) catches ``redis.RedisError``;
- a starting container waits for Redis to answer first: :func:`wait_until_answers`.
"""

from __future__ import annotations

import logging
import socket
import sys
import time

from minihpc.core.errors import ClusterUnavailable
from minihpc.state import wire

log = logging.getLogger(__name__)

# Two clients: the daemons use redis-py (rq needs it), the CLI and the REST API state.wire,
# which imports in a millisecond where redis-py takes 0.15-0.25 s. So this module imports
# redis-py only when a daemon asks for it: REDIS_ERRORS, connect().


def __getattr__(name: str):
    if name == "REDIS_ERRORS":  # PEP 562: a daemon's `from ... import REDIS_ERRORS` imports redis-py
        import redis

        return (redis.ConnectionError, redis.TimeoutError, wire.ConnectionError, wire.TimeoutError)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def outages() -> tuple[type[Exception], ...]:
    """What an unreachable or restarting Redis raises, from either client: wire's always,
    redis-py's once this process has imported it. For ``except outages():`` in code that must
    not import redis-py itself (the CLI)."""
    found: tuple[type[Exception], ...] = (wire.ConnectionError, wire.TimeoutError)
    redis = sys.modules.get("redis")
    if redis is not None and hasattr(redis, "ConnectionError"):
        found += (redis.ConnectionError, redis.TimeoutError)
    return found


def watch_errors() -> tuple[type[Exception], ...]:
    """What a transaction raises when a watched key changed, from either client."""
    found: tuple[type[Exception], ...] = (wire.WatchError,)
    redis = sys.modules.get("redis")
    if redis is not None and hasattr(redis, "WatchError"):
        found += (redis.WatchError,)
    return found

CONNECT_TIMEOUT = 3.0
"""Seconds a connection attempt to Redis may take before it fails. A client that began one just
before Redis came back (its SYN lost to a container still starting) beats that much late."""

SOCKET_TIMEOUT = 5.0
"""Seconds a command waits for Redis's answer before it raises (an outage): a stopped or
partitioned Redis would hang a connection for ever otherwise. Our own blocking commands wait
at most BLOCK_MAX; rq's worker gets a connection without one (rq sets its own, longer than its
405 s dequeue wait: rq.worker.base.BaseWorker.connection_timeout)."""

BLOCK_MAX = 2.0
"""The longest our own blocking commands (BLPOP) wait, well within SOCKET_TIMEOUT."""

KEEPALIVE = {"TCP_KEEPIDLE": 10, "TCP_KEEPINTVL": 5, "TCP_KEEPCNT": 3}
"""TCP keepalive: a peer that vanished (a host down, a partition) is noticed within about 25 s
even on a connection that waits without a socket timeout."""

REDIS_RETRY = 120.0
"""Seconds a daemon keeps retrying a write that must not be lost (a job's result) while Redis
is unreachable, e.g. restarting."""


def connect(url: str, socket_timeout: float | None = SOCKET_TIMEOUT):
    """A redis-py client for ``url`` (a daemon's) that raises ClusterUnavailable with one clear
    line if unreachable. Replies stay bytes: rq shares the connection and needs them so;
    :func:`text` decodes. ``socket_timeout=None`` only for the connection an rq worker blocks on
    (it sets its own)."""
    import redis

    client = redis.Redis.from_url(
        url, socket_connect_timeout=CONNECT_TIMEOUT, socket_timeout=socket_timeout, health_check_interval=30,
        socket_keepalive=True, socket_keepalive_options=_keepalive_options(),
    )
    return _answering(client, url, (redis.AuthenticationError, redis.ResponseError))


def connect_command(url: str) -> wire.Client:
    """A state.wire client for ``url`` (the CLI's and the REST API's: one connection a thread,
    no pool), checked the way :func:`connect` checks. TLS (``rediss://``) gets redis-py's client."""
    if url.startswith("rediss:"):
        return connect(url)
    client = wire.Client(url, CONNECT_TIMEOUT, SOCKET_TIMEOUT, _keepalive_options())
    return _answering(client, url, (wire.ResponseError, wire.AuthenticationError), client.check)


def _answering(client, url: str, refusals: tuple[type[Exception], ...], ping=None):
    """``client`` once it answered PING; ClusterUnavailable with one line if it does not."""
    try:
        (ping or client.ping)()
    except refusals as exc:
        if "@" not in url:
            raise ClusterUnavailable(
                f"Redis at {redact(url)} needs a password: put it in MINIHPC_REDIS_URL "
                "(redis://:PASSWORD@host:port/db)"
            ) from None
        raise ClusterUnavailable(f"Redis at {redact(url)} refused the password ({_short(exc)})") from None
    except ValueError as exc:  # state.wire's check of the URL (redis-py's from_url raises before)
        raise ClusterUnavailable(f"the Redis URL {redact(url)} is not valid: {exc}") from None
    except (*outages(), OSError) as exc:
        raise ClusterUnavailable(
            f"cannot reach Redis at {redact(url)} ({_short(exc)}); start a cluster with "
            "'minihpc up --local' or set MINIHPC_REDIS_URL"
        ) from None
    return client


def _keepalive_options() -> dict[int, int]:
    """KEEPALIVE as socket options, those this platform has."""
    return {getattr(socket, name): value for name, value in KEEPALIVE.items() if hasattr(socket, name)}


def wait_until_answers(url: str, timeout: float, interval: float = 0.5) -> str | None:
    """None once Redis answers PING, else the reason it did not within ``timeout``. A wrong
    password is not waited out: it is reported at once."""
    import redis

    client = redis.Redis.from_url(url, socket_connect_timeout=2, socket_timeout=2)
    deadline = time.monotonic() + timeout
    said = False
    while True:
        try:
            client.ping()
            return None
        except redis.AuthenticationError as exc:
            return f"Redis refused the password ({exc}); check the REDIS_<ROLE>_PASSWORD settings in .env"
        except redis.ResponseError as exc:
            return f"Redis answered with an error: {exc}"
        except outages() as exc:
            if time.monotonic() >= deadline:
                return f"Redis did not answer within {timeout:g}s: {exc}"
            if not said:
                print(f"minihpc: waiting for Redis at {redact(url).split('@')[-1]}", file=sys.stderr, flush=True)
                said = True
            time.sleep(interval)


def retrying(call, *args, what: str, deadline: float = REDIS_RETRY, **kwargs):
    """``call(*args, **kwargs)``, retried through a Redis outage of up to ``deadline`` s."""
    give_up = time.monotonic() + deadline
    while True:
        try:
            return call(*args, **kwargs)
        except outages() as exc:
            if time.monotonic() >= give_up:
                raise
            log.warning("%s: Redis unreachable (%s); retrying", what, exc)
            time.sleep(0.5)


def text(value) -> str | None:
    """A Redis reply as str (None stays None): the one place bytes are decoded."""
    if value is None:
        return None
    return value.decode() if isinstance(value, bytes) else str(value)


def texts(mapping: dict) -> dict[str, str]:
    """A hash reply with its keys and values decoded (bytes, as every hash reply is, decoded
    without a call a field: squeue reads 100,000 records of 50 fields)."""
    try:
        return {k.decode(): v.decode() for k, v in mapping.items()}
    except AttributeError:  # some already text
        return {text(k): text(v) for k, v in mapping.items()}


def redact(url: str) -> str:
    """The URL without its password, for messages."""
    if "@" not in url:
        return url
    scheme, _, rest = url.partition("://")
    creds, _, host = rest.rpartition("@")
    user = creds.split(":", 1)[0]
    return f"{scheme}://{user}:***@{host}"


def _short(exc: Exception) -> str:
    message = str(exc).strip().rstrip(".")
    return message.split(". ")[-1] if message else type(exc).__name__
