"""The Redis users of minihpc.state.acl against a real redis-server: each role can do its work
and nothing that would wipe, reconfigure or take over Redis; no connection is the default
user; and what was written in a transaction survives a crash of Redis (the AOF is replayed
with the ACL in force)."""

import os
import secrets
import shutil
import signal
import subprocess
import tempfile

import pytest
import redis

from minihpc.state import acl, keys
from tests.conftest import free_port, wait_until

pytestmark = pytest.mark.integration


class AclRedis:
    def __init__(self, root: str):
        self.root = root
        self.port = free_port()
        self.passwords = {role: secrets.token_urlsafe(16) for role in acl.ROLES}
        self.acl_path = os.path.join(root, "users.acl")
        with open(self.acl_path, "w") as f:
            f.write(acl.acl_file(self.passwords))
        self.proc = None

    def start(self) -> None:
        self.proc = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--aclfile", self.acl_path,
             "--appendonly", "yes", "--appendfsync", "always", "--save", "", "--dir", self.root,
             # Allowed by the server, so that what refuses them below is the ACL alone.
             "--enable-debug-command", "yes", "--enable-module-command", "yes"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_until(self._answers, timeout=10, message="redis-server to answer")

    def _answers(self) -> bool:
        try:
            return self.client("master").ping()
        except redis.RedisError:
            return False

    def crash(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def client(self, role: str) -> redis.Redis:
        return redis.Redis.from_url(acl.url(role, self.passwords[role], "127.0.0.1", self.port), socket_timeout=5)


@pytest.fixture
def server():
    if shutil.which("redis-server") is None:
        pytest.fail("redis-server is not installed; make test installs it (scripts/host-deps.sh test)")
    root = tempfile.mkdtemp(prefix="acl-")
    s = AclRedis(root)
    s.start()
    yield s
    s.crash()
    shutil.rmtree(root, ignore_errors=True)


def _refused(call) -> str:
    """Redis's NOPERM message for ``call``."""
    with pytest.raises(redis.exceptions.NoPermissionError) as info:
        call()
    return str(info.value)


@pytest.mark.parametrize("role", acl.ROLES)
def test_no_role_can_wipe_reconfigure_or_debug_redis(server, role):
    r = server.client(role)
    assert r.ping()
    for name, call in [("flushall", r.flushall), ("flushdb", r.flushdb),
                       ("config|set", lambda: r.config_set("dir", "/tmp")),
                       ("config|get", lambda: r.config_get("requirepass")),
                       ("debug", lambda: r.execute_command("DEBUG", "SLEEP", "0")),
                       ("acl|setuser", lambda: r.acl_setuser("evil", enabled=True, nopass=True)),
                       ("keys", lambda: r.keys("*")), ("shutdown", lambda: r.execute_command("SHUTDOWN", "NOSAVE")),
                       ("module|load", lambda: r.execute_command("MODULE", "LOAD", "/tmp/x.so"))]:
        message = _refused(call)
        assert f"no permissions to run the '{name}' command" in message, (name, message)
    assert server.client("master").ping()  # still up: SHUTDOWN was refused


def test_no_connection_is_the_default_user(server):
    anonymous = redis.Redis(port=server.port, socket_timeout=5)
    with pytest.raises(redis.AuthenticationError):
        anonymous.get(keys.CLUSTER)
    with pytest.raises(redis.AuthenticationError):
        redis.Redis(port=server.port, username="default", password="", socket_timeout=5).ping()


def test_each_role_has_its_keys(server):
    master, node, cli, api, exporter = (server.client(r) for r in acl.ROLES)
    master.hset(keys.job(1), mapping={"state": "PENDING"})
    master.hset(keys.TOKENS, "digest", "{}")
    master.lpush("rq:queue:" + keys.node_queue("worker-node-1"), "job")
    # A node agent works on jobs, nodes and rq, but cannot read or mint API tokens.
    node.hset(keys.job(1), "state", "RUNNING")
    node.set(keys.node_alive("worker-node-1"), "1", ex=5)
    assert node.lpop("rq:queue:" + keys.node_queue("worker-node-1")) == b"job"
    assert "no permissions" in _refused(lambda: node.hget(keys.TOKENS, "digest"))
    assert "no permissions" in _refused(lambda: node.hset(keys.TOKENS, "mine", '{"admin": true}'))
    # The CLI submits and manages tokens; rq's keys are its to read only.
    cli.hset(keys.job(2), "state", "PENDING")
    assert cli.hget(keys.TOKENS, "digest") == b"{}"
    assert cli.llen("rq:queue:" + keys.node_queue("worker-node-1")) == 0
    assert "no permissions" in _refused(lambda: cli.lpush("rq:queue:" + keys.node_queue("worker-node-1"), "os.system"))
    # The API submits, and checks tokens: it cannot mint one, change the cluster's settings or
    # give a user a uid, nor push to rq.
    api.hset(keys.job(3), "state", "PENDING")
    api.sadd(keys.user_jobs("alice"), 3)
    assert api.hget(keys.TOKENS, "digest") == b"{}"
    for write in (lambda: api.hset(keys.TOKENS, "mine", '{"admin": true}'), lambda: api.hdel(keys.TOKENS, "digest"),
                  lambda: api.hset(keys.CLUSTER, "max_jobs_per_user", "0"),
                  lambda: api.hset(keys.USER_UIDS, "alice", "0"),
                  lambda: api.lpush("rq:queue:" + keys.node_queue("worker-node-1"), "os.system")):
        assert "no permissions" in _refused(write)
    # The exporter only reads.
    assert exporter.hget(keys.job(1), "state") == b"RUNNING"
    assert "no permissions" in _refused(lambda: exporter.hset(keys.job(1), "state", "CANCELLED"))
    assert "no permissions" in _refused(lambda: exporter.delete(keys.job(1)))
    # Nobody reaches keys that are not minihpc's or rq's.
    for r in (master, node, cli, api):
        assert "no permissions" in _refused(lambda r=r: r.set("other:app", "x"))


def test_a_transaction_survives_a_crash_of_redis_with_the_acl_in_force(server):
    with server.client("master").pipeline(transaction=True) as pipe:
        pipe.hset(keys.job(7), mapping={"state": "RUNNING", "attempts": "1"})
        pipe.sadd(keys.JOBS_ACTIVE, 7)
        pipe.execute()
    server.crash()
    server.start()
    master = server.client("master")
    assert master.hgetall(keys.job(7)) == {b"state": b"RUNNING", b"attempts": b"1"}
    assert master.smembers(keys.JOBS_ACTIVE) == {b"7"}
