"""The commands :mod:`minihpc.state.wire` speaks, with redis-py's signatures and reply shapes.

Only what the state layer calls is here: ``tests/unit/test_wire_protocol.py`` reads every Store module and
fails when one calls a command this class lacks.
"""

from __future__ import annotations



# Reply shapes (redis-py's response callbacks for RESP2, the ones the state layer relies on).

def ok(reply) -> bool:
    return reply == b"OK"


def _set(reply):
    return True if reply == b"OK" else None


def _dict(reply) -> dict:
    if not reply:
        return {}
    it = iter(reply)
    return dict(zip(it, it))


def _float(reply):
    return None if reply is None else float(reply)


def _scored(reply) -> list:
    it = iter(reply)
    return [(member, float(score)) for member, score in zip(it, it)]


def _stream(reply):
    if reply is None:
        return None
    return [(entry[0], _dict(entry[1])) if entry is not None else (None, None) for entry in reply]


def _streams(reply) -> list:
    return [[name, _stream(entries)] for name, entries in reply or ()]


def _info(reply) -> dict:
    info = {}
    for line in reply.decode().splitlines():
        if line and not line.startswith("#") and ":" in line:
            key, value = line.split(":", 1)
            try:
                info[key] = float(value) if "." in value else int(value)
            except ValueError:
                info[key] = value
    return info


class Commands:
    """Each method builds one command and hands it to ``_call`` (run now, or queued in a
    pipeline) with the function that shapes its reply."""

    def _call(self, command, parse=None):  # pragma: no cover - Client and Pipeline define it
        raise NotImplementedError

    # Connection and server
    def ping(self):
        return self._call(("PING",), lambda r: r == b"PONG")

    def info(self, section: str | None = None) -> dict:
        return self._call(("INFO", section) if section else ("INFO",), _info)

    def flushdb(self):
        return self._call(("FLUSHDB",), ok)

    def publish(self, channel, message):
        return self._call(("PUBLISH", channel, message))

    # Keys and strings
    def get(self, name):
        return self._call(("GET", name))

    def getdel(self, name):
        return self._call(("GETDEL", name))

    def mget(self, keys, *args):
        return self._call(("MGET", *_names(keys), *args))

    def set(self, name, value, ex=None, px=None, nx: bool = False, xx: bool = False):
        command = ["SET", name, value]
        if ex is not None:
            command += ["EX", ex]
        if px is not None:
            command += ["PX", px]
        if nx:
            command.append("NX")
        if xx:
            command.append("XX")
        return self._call(tuple(command), _set)

    def delete(self, *names):
        return self._call(("DEL", *names))

    def exists(self, *names):
        return self._call(("EXISTS", *names))

    def expire(self, name, time):
        return self._call(("EXPIRE", name, int(time)), bool)

    def persist(self, name):
        return self._call(("PERSIST", name), bool)

    def incr(self, name, amount: int = 1):
        return self._call(("INCRBY", name, amount))

    def incrby(self, name, amount: int = 1):
        return self._call(("INCRBY", name, amount))

    # Hashes
    def hgetall(self, name) -> dict:
        return self._call(("HGETALL", name), _dict)

    def hget(self, name, key):
        return self._call(("HGET", name, key))

    def hmget(self, name, keys, *args):
        return self._call(("HMGET", name, *_names(keys), *args))

    def hset(self, name, key=None, value=None, mapping=None):
        pairs = [] if key is None else [key, value]
        for field, item in (mapping or {}).items():
            pairs += [field, item]
        if not pairs:
            raise ValueError("'hset' with no key value pairs")
        return self._call(("HSET", name, *pairs))

    def hsetnx(self, name, key, value):
        return self._call(("HSETNX", name, key, value))

    def hdel(self, name, *keys):
        return self._call(("HDEL", name, *keys))

    def hkeys(self, name):
        return self._call(("HKEYS", name))

    def hincrby(self, name, key, amount: int = 1):
        return self._call(("HINCRBY", name, key, amount))

    def hincrbyfloat(self, name, key, amount: float = 1.0):
        return self._call(("HINCRBYFLOAT", name, key, amount), float)

    # Lists
    def lpush(self, name, *values):
        return self._call(("LPUSH", name, *values))

    def rpush(self, name, *values):
        return self._call(("RPUSH", name, *values))

    def lrange(self, name, start, end):
        return self._call(("LRANGE", name, start, end))

    def lrem(self, name, count, value):
        return self._call(("LREM", name, count, value))

    def ltrim(self, name, start, end):
        return self._call(("LTRIM", name, start, end), ok)

    def lpos(self, name, value):
        return self._call(("LPOS", name, value))

    def blpop(self, keys, timeout=0):
        return self._call(("BLPOP", *_names(keys), timeout), lambda r: tuple(r) if r else None)

    # Sets
    def sadd(self, name, *values):
        return self._call(("SADD", name, *values))

    def srem(self, name, *values):
        return self._call(("SREM", name, *values))

    def smembers(self, name) -> set:
        return self._call(("SMEMBERS", name), lambda r: set(r) if r else set())

    def sismember(self, name, value):
        return self._call(("SISMEMBER", name, value))

    def scard(self, name):
        return self._call(("SCARD", name))

    def spop(self, name, count=None):
        return self._call(("SPOP", name) if count is None else ("SPOP", name, count))

    # Sorted sets
    def zadd(self, name, mapping: dict):
        pairs = []
        for member, score in mapping.items():
            pairs += [score, member]
        return self._call(("ZADD", name, *pairs))

    def zcard(self, name):
        return self._call(("ZCARD", name))

    def zscore(self, name, value):
        return self._call(("ZSCORE", name, value), _float)

    def zrem(self, name, *values):
        return self._call(("ZREM", name, *values))

    def zrange(self, name, start, end, desc: bool = False, withscores: bool = False):
        command = ["ZRANGE", name, start, end]
        if desc:
            command.append("REV")
        return self._ranged(command, withscores)

    def zrevrange(self, name, start, end, withscores: bool = False):
        return self._ranged(["ZREVRANGE", name, start, end], withscores)

    def zrangebyscore(self, name, min, max, start=None, num=None, withscores: bool = False):  # noqa: A002
        command = ["ZRANGEBYSCORE", name, min, max]
        if start is not None and num is not None:
            command += ["LIMIT", start, num]
        return self._ranged(command, withscores)

    def _ranged(self, command: list, withscores: bool):
        if withscores:
            return self._call((*command, "WITHSCORES"), _scored)
        return self._call(tuple(command))

    # Streams
    def xadd(self, name, fields: dict, id="*", maxlen=None, approximate: bool = True):  # noqa: A002
        command = ["XADD", name]
        if maxlen is not None:
            command += ["MAXLEN", "~", maxlen] if approximate else ["MAXLEN", maxlen]
        command.append(id)
        for field, value in fields.items():
            command += [field, value]
        return self._call(tuple(command))

    def xrange(self, name, min="-", max="+", count=None):  # noqa: A002
        command = ("XRANGE", name, min, max) + (("COUNT", count) if count is not None else ())
        return self._call(command, _stream)

    def xrevrange(self, name, max="+", min="-", count=None):  # noqa: A002
        command = ("XREVRANGE", name, max, min) + (("COUNT", count) if count is not None else ())
        return self._call(command, _stream)

    def xread(self, streams: dict, count=None, block=None):
        command = ["XREAD"]
        if count is not None:
            command += ["COUNT", count]
        if block is not None:
            command += ["BLOCK", block]
        command += ["STREAMS", *streams.keys(), *streams.values()]
        return self._call(tuple(command), _streams)


def _names(keys) -> list:
    """A key or a list of keys, as redis-py's list-taking commands accept."""
    return [keys] if isinstance(keys, (str, bytes)) else list(keys)
