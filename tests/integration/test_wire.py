"""state.wire, the commands' Redis client, against a real redis-server and redis-py: every
command the state layer uses gives the same Python value on both clients, transactions and
scripts behave the same, and a broken or refusing server is the same one line to a user."""

import re
import subprocess
import threading

import pytest
import redis

from minihpc.core.errors import ClusterUnavailable
from minihpc.state import resp, wire
from minihpc.state.connect import connect, connect_command, watch_errors

pytestmark = pytest.mark.integration

CALLS = [
    ("set", ("k", "v"), {}), ("get", ("k",), {}), ("set", ("k", "w"), {"nx": True}), ("set", ("p", 1), {"px": 5000}),
    ("getdel", ("k",), {}), ("get", ("k",), {}),
    ("hset", ("h", "a", "1"), {}), ("hset", ("h",), {"mapping": {"b": 2, "c": 3.5}}), ("hgetall", ("h",), {}),
    ("hgetall", ("nothing",), {}), ("hmget", ("h", ["a", "b", "x"]), {}), ("hmget", ("h", "a", "c"), {}),
    ("hsetnx", ("h", "a", "9"), {}), ("hsetnx", ("h", "d", "9"), {}), ("hincrby", ("h", "b", 3), {}),
    ("hincrbyfloat", ("h", "c", 1.25), {}), ("hkeys", ("h",), {}), ("hget", ("h", "a"), {}), ("hdel", ("h", "a"), {}),
    ("incr", ("n",), {}), ("incrby", ("n", 5), {}), ("rpush", ("l", "a", "b", "c"), {}), ("lpush", ("l", "z"), {}),
    ("lrange", ("l", 0, -1), {}), ("lpos", ("l", "b"), {}), ("lpos", ("l", "q"), {}), ("lrem", ("l", 0, "a"), {}),
    ("ltrim", ("l", 0, 1), {}), ("sadd", ("s", "x", "y"), {}), ("smembers", ("s",), {}), ("smembers", ("none",), {}),
    ("sismember", ("s", "x"), {}), ("sismember", ("s", "q"), {}), ("scard", ("s",), {}), ("srem", ("s", "x"), {}),
    ("spop", ("s", 5), {}), ("zadd", ("z", {"a": 1, "b": 2.5, "c": 1e18}), {}), ("zrange", ("z", 0, -1), {}),
    ("zrange", ("z", 0, -1), {"withscores": True}), ("zrevrange", ("z", 0, -1), {}), ("zrangebyscore", ("z", 0, 2), {}),
    ("zscore", ("z", "b"), {}), ("zscore", ("z", "q"), {}), ("zcard", ("z",), {}), ("zrem", ("z", "a"), {}),
    ("exists", ("h", "nothing"), {}), ("expire", ("h", 100), {}), ("persist", ("h",), {}), ("persist", ("h",), {}),
    ("mget", (["h2", "n"],), {}), ("publish", ("channel", "m"), {}), ("blpop", (["empty"],), {"timeout": 0.1}),
    ("rpush", ("bl", "v"), {}), ("blpop", (["bl"],), {"timeout": 0.1}), ("delete", ("z", "s", "nothing"), {}),
    ("xadd", ("st", {"id": 1}), {"maxlen": 10, "approximate": True}), ("xadd", ("st", {"id": 2}), {}),
    ("xrange", ("st",), {"min": "-", "count": 5}), ("xrevrange", ("st",), {"count": 1}),
    ("xread", ({"st": "0"},), {"count": 5, "block": 10}), ("xread", ({"st": "$"},), {"count": 5, "block": 10}),
    ("ping", (), {}),
]
"""Each command the state layer calls, with the arguments it passes (and the edge cases: a
missing key, an empty set, a blocking pop that times out)."""

STREAM_ID = re.compile(rb"\d+-\d+")


def _both(redis_port):
    ours = connect_command(f"redis://127.0.0.1:{redis_port}/1")
    theirs = connect(f"redis://127.0.0.1:{redis_port}/2")
    ours.flushdb()
    theirs.flushdb()
    return ours, theirs


@pytest.fixture(params=["hiredis", "pure-python"])
def reader(request, monkeypatch):
    """Each of the replies' parsers: hiredis, and state.resp where hiredis is missing (a GPU
    machine given only pure-Python wheels)."""
    if request.param == "pure-python":
        monkeypatch.setattr(wire, "Reader", resp.Reader)
    return request.param


def test_every_command_gives_what_redis_py_gives(redis_port, reader):
    ours, theirs = _both(redis_port)
    for name, args, kwargs in CALLS:
        got, want = getattr(ours, name)(*args, **kwargs), getattr(theirs, name)(*args, **kwargs)
        if name.startswith("x"):  # stream ids are times: compare their shape
            got, want = STREAM_ID.sub(b"ID", repr(got).encode()), STREAM_ID.sub(b"ID", repr(want).encode())
        assert (got, type(got)) == (want, type(want)), f"{name}{args}{kwargs}"
    assert ours.info("memory")["used_memory"] > 0
    ours.hset("h2", mapping={"é": "ü", "n": 1})
    assert ours.hgetall_texts(["h", "nothing", "h2"]) == [
        {k.decode(): v.decode() for k, v in theirs.hgetall("h").items()}, {}, {"é": "ü", "n": "1"}]
    assert ours.get("n") == theirs.get("n")  # the connection reads bytes again after a decoded bulk read


def test_transactions_commit_abort_and_report_errors_as_redis_py_does(redis_port):
    for client, db in zip(_both(redis_port), (1, 2)):
        client.set("n", 1)
        with client.pipeline() as pipe:
            pipe.watch("n")
            seen = int(pipe.get("n"))  # after WATCH: runs at once
            pipe.multi()
            pipe.set("n", seen + 1)
            pipe.hgetall("nothing")
            assert pipe.execute() == [True, {}]
        with client.pipeline(transaction=False) as pipe:
            assert pipe.get("n").hgetall("nothing").zscore("z", "q").execute() == [b"2", {}, None]
        pipe = client.pipeline()
        pipe.watch("n")
        redis.Redis(port=redis_port, db=db).set("n", 100)  # another client changes it
        pipe.multi()
        pipe.set("n", 0)
        with pytest.raises(watch_errors()):
            pipe.execute()
        assert client.get("n") == b"100"
        client.set("str", "x")
        with pytest.raises(Exception) as refused, client.pipeline() as pipe:
            pipe.hset("str", "a", "b")
            pipe.set("after", 1)
            pipe.execute()
        assert "WRONGTYPE" in str(refused.value)
        assert client.get("after") == b"1"  # Redis ran the rest; both clients raise the first error


def test_scripts_run_by_sha_and_in_pipelines(redis_port):
    for client in _both(redis_port):
        add = client.register_script("return redis.call('incrby', KEYS[1], ARGV[1])")
        assert add(keys=["c"], args=[5]) == 5
        with client.pipeline() as pipe:
            add(keys=["c"], args=[1], client=pipe)
            pipe.get("c")
            assert pipe.execute() == [6, b"6"]


def test_threads_each_get_a_connection_and_see_each_others_writes(redis_port):
    ours, _ = _both(redis_port)
    errors = []

    def count():
        try:
            for _ in range(200):
                ours.incr("shared")
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=count) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and ours.get("shared") == b"800"


def test_a_refusing_or_absent_server_is_one_line_as_with_redis_py(redis_port):
    with pytest.raises(ClusterUnavailable, match="refused the password"):
        connect_command(f"redis://:wrong@127.0.0.1:{redis_port}/0")
    port = redis_port + 1 if redis_port < 65000 else redis_port - 1
    with pytest.raises(ClusterUnavailable, match=r"cannot reach Redis at redis://127.0.0.1:\d+/0 \("):
        connect_command(f"redis://127.0.0.1:{port}/0")
    locked = subprocess.run(["redis-cli", "-p", str(redis_port), "CONFIG", "SET", "requirepass", "s3cret"],
                            capture_output=True, text=True)
    assert locked.returncode == 0, locked.stderr
    try:
        with pytest.raises(ClusterUnavailable, match="needs a password"):
            connect_command(f"redis://127.0.0.1:{redis_port}/0")
        assert connect_command(f"redis://:s3cret@127.0.0.1:{redis_port}/3").ping() is True
        assert connect_command(f"redis://default:s3cret@127.0.0.1:{redis_port}/3").ping() is True
    finally:
        subprocess.run(["redis-cli", "-p", str(redis_port), "-a", "s3cret", "--no-auth-warning",
                        "CONFIG", "SET", "requirepass", ""], check=True, capture_output=True)


def test_a_connection_the_server_closed_is_replaced(redis_port):
    ours, theirs = _both(redis_port)
    ours.set("k", "v")
    theirs.execute_command("CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes")
    assert ours.get("k") == b"v"


def test_a_command_rides_through_a_redis_restart_as_redis_py_does(tmp_path):
    """A command's connection breaks when Redis restarts (minihpc drill redis-restart, a wait or a
    log follow across it): the client connects again and sends the command again."""
    from minihpc.machine.ports import free_port

    port = free_port()
    start = ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--dir", str(tmp_path)]
    server = subprocess.Popen(start, stdout=subprocess.DEVNULL)
    try:
        ours = None
        for _ in range(100):
            try:
                ours = connect_command(f"redis://127.0.0.1:{port}/0")
                break
            except ClusterUnavailable:
                threading.Event().wait(0.05)
        ours.set("k", "before")
        server.terminate()
        server.wait()
        with pytest.raises(wire.ConnectionError):  # gone for good: an outage, after the retries
            ours.get("k")
        server = subprocess.Popen(start, stdout=subprocess.DEVNULL)  # a restart: the data is gone, the port back
        assert ours.get("k") is None
        with ours.pipeline(transaction=False) as pipe:
            assert pipe.set("k", "after").get("k").execute() == [True, b"after"]
    finally:
        server.terminate()
        server.wait()
