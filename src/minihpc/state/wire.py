"""A small synchronous Redis client for one-shot commands: RESP2 over one socket a thread.

``import redis`` (redis-py 8) costs a command-line call about 0.15-0.25 s: it imports its
asyncio client, ``ssl`` and OpenTelemetry. Slurm's ``sbatch`` answers in tens of milliseconds,
and a script that submits in a loop pays the import every time. A CLI call sends a few commands
and exits; it needs no pool, retry or RESP3. This client speaks the commands the state layer
(:mod:`minihpc.state`) uses and gives their replies the shapes redis-py gives them with
``decode_responses=False`` (bytes; HGETALL a dict, SMEMBERS a set, ZRANGE WITHSCORES
``(member, score)`` pairs, a stream entry ``(id, fields)``), so every Store method runs on either
client. Daemons keep redis-py: rq needs it, and their threads share its pool.

Replies are parsed by hiredis (a dependency already, redis-py's own fast parser), or by the pure
Python reader in :mod:`minihpc.state.resp` where hiredis is missing.
"""

from __future__ import annotations

import socket
import threading
import time
from urllib.parse import unquote, urlsplit

from minihpc.state.wire_commands import Commands, _dict, ok

try:
    from hiredis import Reader
except ImportError:  # pragma: no cover - hiredis ships wheels for every platform we build on
    from minihpc.state.resp import Reader


class RedisError(Exception):
    """Anything this client raises."""


class ConnectionError(RedisError):  # noqa: A001 - redis-py's name, for the same meaning
    """Redis could not be reached, or the connection broke."""


class TimeoutError(RedisError):  # noqa: A001
    """Redis did not answer within the socket timeout."""


class ResponseError(RedisError):
    """Redis answered with an error."""


class AuthenticationError(ConnectionError):
    """Redis refused the credentials (or wanted some)."""


class WatchError(RedisError):
    """A WATCHed key changed before EXEC; the transaction did nothing."""


def pack(args) -> bytes:
    """One command in RESP: an array of bulk strings (floats as repr, as redis-py sends them)."""
    out = [b"*%d\r\n" % len(args)]
    for arg in args:
        if isinstance(arg, bytes):
            data = arg
        elif isinstance(arg, str):
            data = arg.encode()
        elif isinstance(arg, float):
            data = repr(arg).encode()
        else:
            data = str(arg).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(data), data))
    return b"".join(out)


def _error(reply: ResponseError) -> ResponseError:
    message = str(reply)
    if message.startswith(("NOAUTH", "WRONGPASS", "NOPERM invalid")) or "invalid password" in message:
        return AuthenticationError(message)
    return reply


class Connection:
    """One socket to Redis, authenticated and on its database."""

    def __init__(self, url: str, connect_timeout: float, socket_timeout: float | None, keepalive: dict[int, int]):
        parts = urlsplit(url)
        query = dict(p.split("=", 1) for p in parts.query.split("&") if "=" in p)
        if parts.scheme not in ("redis", "unix"):
            raise ValueError("a Redis URL starts with redis://, rediss:// or unix://")
        db = query.get("db", "0") if parts.scheme == "unix" else (parts.path or "/").strip("/") or query.get("db", "0")
        if not db.isdigit():
            raise ValueError(f"its database must be a number, not {db!r}")
        try:
            if parts.scheme == "unix":
                self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                self.sock.settimeout(connect_timeout)
                self.sock.connect(parts.path)
            else:
                host = parts.hostname or "localhost"  # bytes when ASCII: no IDNA codec to import
                self.sock = socket.create_connection((host.encode() if host.isascii() else host, parts.port or 6379),
                                                     timeout=connect_timeout)
                self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
                for option, value in keepalive.items():
                    self.sock.setsockopt(socket.IPPROTO_TCP, option, value)
        except socket.timeout as exc:
            raise TimeoutError(f"Timeout connecting to {parts.hostname}:{parts.port}") from exc
        except OSError as exc:
            raise ConnectionError(f"Error {exc.errno} connecting to {parts.hostname or parts.path}:"
                                  f"{parts.port or ''}. {exc.strerror or exc}") from exc
        self.sock.settimeout(socket_timeout)
        self.reader = Reader(replyError=ResponseError)
        password = unquote(parts.password) if parts.password is not None else None
        if password is not None:
            user = unquote(parts.username) if parts.username else None
            self.run(("AUTH", user, password) if user else ("AUTH", password))
        if db != "0":
            self.run(("SELECT", db))

    def send(self, commands) -> None:
        self.sock_send(b"".join(pack(c) for c in commands))

    def sock_send(self, data: bytes) -> None:
        try:
            self.sock.sendall(data)
        except socket.timeout as exc:
            raise TimeoutError("Timeout writing to socket") from exc
        except OSError as exc:
            raise ConnectionError(f"Error while writing to socket. {exc}") from exc

    def read(self):
        """The next reply, as it came (an error reply is returned, not raised)."""
        while True:
            reply = self.reader.gets()
            if reply is not False:
                return reply
            try:
                data = self.sock.recv(1 << 16)
            except socket.timeout as exc:
                raise TimeoutError("Timeout reading from socket") from exc
            except OSError as exc:
                raise ConnectionError(f"Error while reading from socket: {exc}") from exc
            if not data:
                raise ConnectionError("Connection closed by server.")
            self.reader.feed(data)

    def run(self, command, parse=None):
        """Send one command and return its parsed reply; an error reply is raised."""
        self.send((command,))
        reply = self.read()
        if isinstance(reply, ResponseError):
            raise _error(reply)
        return parse(reply) if parse else reply

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass


RETRIES = 10
"""Times a command is sent again after its connection broke, as redis-py's default client does
(redis._defaults): a command that was running when Redis restarted goes on once it is back."""


def backoff(failures: int) -> float:
    """Seconds before retry ``failures`` (redis-py's exponential backoff, base 10 ms, cap 1 s;
    without its jitter: one process retries, not a crowd)."""
    return min(1.0, 0.01 * 2 ** failures)


class Pipeline(Commands):
    """redis-py's Pipeline, as the state layer uses it: after ``watch()`` commands run at once
    (the reads a transaction decides on); ``multi()`` starts buffering; ``execute()`` sends the
    buffer in one round trip, inside MULTI/EXEC when ``transaction``, and raises WatchError
    when a watched key changed. A connection that breaks while keys are watched raises
    WatchError too (redis-py's rule), so the transaction is decided again on fresh reads."""

    def __init__(self, client: Client, transaction: bool = True):
        self._client = client
        self.transaction = transaction
        self._queue: list = []
        self.watching = False
        self.explicit_transaction = False

    def __enter__(self) -> Pipeline:
        return self

    def __exit__(self, *exc) -> None:
        self.reset()

    def __len__(self) -> int:
        return len(self._queue)

    def __bool__(self) -> bool:  # as redis-py's: a pipeline is true even while empty
        return True

    def _call(self, command, parse=None):
        if self.watching and not self.explicit_transaction:
            return self._watched(lambda conn: conn.run(command, parse))
        self._queue.append((command, parse))
        return self

    def _watched(self, op):
        """``op(connection)`` while keys are watched: a broken connection is a WatchError."""
        try:
            return op(self._client._conn)
        except (ConnectionError, TimeoutError) as exc:
            if isinstance(exc, AuthenticationError):
                raise
            self._client.close()
            self.watching = False
            raise WatchError(f"the connection broke while keys were watched ({exc})") from exc

    def watch(self, *names) -> bool:
        if self.explicit_transaction:
            raise RedisError("Cannot issue a WATCH after a MULTI")
        done = self._client._retrying(lambda conn: conn.run(("WATCH", *names), ok))
        self.watching = True
        return done

    def multi(self) -> None:
        if self.explicit_transaction:
            raise RedisError("Cannot issue nested calls to MULTI")
        if self._queue:
            raise RedisError("Commands without an initial WATCH have already been issued")
        self.explicit_transaction = True

    def execute(self, raise_on_error: bool = True) -> list:
        queue, self._queue = self._queue, []
        try:
            if not queue:
                replies = []
            elif not (self.transaction or self.explicit_transaction):
                replies = self._client._retrying(lambda conn: _batch(conn, queue))
            elif self.watching:
                replies = self._watched(lambda conn: _transaction(conn, queue))
            else:
                replies = self._client._retrying(lambda conn: _transaction(conn, queue))
            self.watching = False  # EXEC (or its abort) ended the WATCH
        finally:
            self.reset()
        out = []
        for (_, parse), reply in zip(queue, replies):
            if isinstance(reply, ResponseError):
                if raise_on_error:
                    raise _error(reply)
                out.append(reply)
            else:
                out.append(parse(reply) if parse else reply)
        return out

    def reset(self) -> None:
        self._queue = []
        if self.watching:
            self.watching = False
            try:
                self._client._conn.run(("UNWATCH",))
            except RedisError:
                self._client.close()
        self.explicit_transaction = False


def _hashes(conn: Connection, names: list[str]) -> list[dict[str, str]]:
    out = []
    for start in range(0, len(names), BULK):
        chunk = names[start:start + BULK]
        conn.sock_send(b"".join(b"*2\r\n$7\r\nHGETALL\r\n$%d\r\n%s\r\n" % (len(k), k)
                                for k in (name.encode() for name in chunk)))
        conn.reader.set_encoding("utf-8")
        try:
            for _ in chunk:
                reply = conn.read()
                if isinstance(reply, ResponseError):
                    raise _error(reply)
                out.append(_dict(reply))
        finally:
            conn.reader.set_encoding(None)
    return out


BULK = 10_000
"""Commands a bulk read sends at once: the replies of one chunk are read before the next goes."""


def _batch(conn: Connection, queue) -> list:
    conn.send([command for command, _ in queue])
    return [conn.read() for _ in queue]


def _transaction(conn: Connection, queue) -> list:
    conn.send([("MULTI",), *(command for command, _ in queue), ("EXEC",)])
    queued = [conn.read() for _ in range(len(queue) + 1)]  # +OK, then +QUEUED each
    result = conn.read()
    refused = [r for r in queued if isinstance(r, ResponseError)]
    if refused:
        raise _error(refused[0])
    if isinstance(result, ResponseError):
        raise _error(result)
    if result is None:
        raise WatchError("Watched variable changed.")
    return result


class Script:
    """``register_script``'s callable: EVALSHA, loading the script when Redis lacks it. In a
    pipeline it is sent as EVAL, since a pipeline's replies come back only at execute()."""

    def __init__(self, client: Client, script: str):
        import hashlib

        self.client = client
        self.script = script
        self.sha = hashlib.sha1(script.encode()).hexdigest()

    def __call__(self, keys=(), args=(), client=None):
        target = self.client if client is None else client
        if isinstance(target, Pipeline) and not (target.watching and not target.explicit_transaction):
            return target._call(("EVAL", self.script, len(keys), *keys, *args))
        try:
            return target._call(("EVALSHA", self.sha, len(keys), *keys, *args))
        except ResponseError as exc:
            if not str(exc).startswith("NOSCRIPT"):
                raise
            return target._call(("EVAL", self.script, len(keys), *keys, *args))


class Client(Commands):
    """A Redis client with redis-py's method names and reply shapes for the state layer's
    commands. Each thread that uses it gets a connection of its own (``minihpc run`` forwards
    stdin from a thread while the main one waits on output). A broken connection is dropped and
    the command sent again on a new one, RETRIES times (:func:`backoff`)."""

    def __init__(self, url: str, connect_timeout: float, socket_timeout: float | None,
                 keepalive: dict[int, int] | None = None):
        self.url = url
        self._options = (connect_timeout, socket_timeout, keepalive or {})
        self._local = threading.local()

    @property
    def _conn(self) -> Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._local.conn = Connection(self.url, *self._options)
        return conn

    def _retrying(self, op):
        """``op(connection)``, on a new connection after each break, RETRIES times at most."""
        for failures in range(RETRIES + 1):
            try:
                return op(self._conn)
            except (ConnectionError, TimeoutError) as exc:
                self.close()
                if isinstance(exc, AuthenticationError) or failures == RETRIES:
                    raise
            time.sleep(backoff(failures))

    def _call(self, command, parse=None):
        return self._retrying(lambda conn: conn.run(command, parse))

    def check(self) -> None:
        """PING once, without retries: a command that cannot reach Redis says so at once."""
        try:
            self._conn.run(("PING",))
        except RedisError:
            self.close()
            raise

    def pipeline(self, transaction: bool = True) -> Pipeline:
        return Pipeline(self, transaction)

    def hgetall_texts(self, names: list[str]) -> list[dict[str, str]]:
        """HGETALL of each of ``names`` in one round trip, keys and values decoded (UTF-8):
        the bulk read of job records (squeue of 100,000 jobs), without a Python call a field."""
        return self._retrying(lambda conn: _hashes(conn, names))

    def register_script(self, script: str) -> Script:
        return Script(self, script)

    def close(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None
