"""The restart proxy as a real process (``minihpc restart-proxy``) against a real redis-server
and a fake Docker Engine on a unix socket: it restarts only with the token, only a node Redis
shows DOWN, never the control plane or the caller's own container, within its rate limits, and
it starts a killed Redis again but leaves one stopped on purpose."""

import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

import pytest
import redis

from minihpc.core.restart_policy import RestartPolicy
from minihpc.master.health import NodeHealth
from minihpc.restart.docker import DockerRestarter
from minihpc.state import acl
from minihpc.state.connect import connect
from minihpc.state.store import Store
from tests.conftest import free_port, wait_until
from tests.integration.fake_docker import FakeDocker

pytestmark = pytest.mark.integration

TOKEN = secrets.token_urlsafe(32)


class World:
    """redis-server, the fake Engine and the proxy, all started by the test."""

    def __init__(self, root: str):
        self.root = root
        self.redis_port = free_port()
        self.passwords = {role: secrets.token_hex(8) for role in acl.ROLES}
        # The test plays the master (it marks nodes DOWN); the proxy connects as in Compose,
        # with the read-only user.
        self.redis_url = acl.url("master", self.passwords["master"], "127.0.0.1", self.redis_port)
        self.proxy_url = acl.url("exporter", self.passwords["exporter"], "127.0.0.1", self.redis_port)
        self.acl_path = os.path.join(root, "users.acl")
        with open(self.acl_path, "w") as f:
            f.write(acl.acl_file(self.passwords))
        self.redis = None
        self.started: list[subprocess.Popen] = []  # every redis-server, so none outlives the test
        self.docker = FakeDocker(os.path.join(root, "docker.sock"))
        self.port = free_port()
        self.proxy = None
        self.log = open(os.path.join(root, "proxy.log"), "w+")

    def start_redis(self) -> None:
        self.redis = subprocess.Popen(
            ["redis-server", "--port", str(self.redis_port), "--bind", "127.0.0.1", "--aclfile", self.acl_path,
             "--appendonly", "yes", "--appendfsync", "always", "--save", "", "--dir", self.root],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.started.append(self.redis)
        wait_until(self._redis_answers, timeout=10, message="redis-server to answer")

    def _redis_answers(self) -> bool:
        try:
            return redis.Redis.from_url(self.redis_url, socket_timeout=1).ping()
        except redis.RedisError:
            return False

    def kill_redis(self) -> None:
        self.redis.send_signal(signal.SIGKILL)
        self.redis.wait(10)

    def start_proxy(self, *extra, env=None) -> None:
        env = env or dict(os.environ, MINIHPC_REDIS_URL=self.proxy_url, MINIHPC_RESTART_TOKEN=TOKEN)
        self.proxy = subprocess.Popen(
            [sys.executable, "-m", "minihpc.cli", "restart-proxy", "--host", "127.0.0.1", "--port", str(self.port),
             "--docker-socket", self.docker.socket_path, "--watch-interval", "0.2", *extra],
            env=env, stdout=self.log, stderr=subprocess.STDOUT)
        wait_until(lambda: self.get("/health")[0] == 200 or self.proxy.poll() is not None, timeout=20,
                   message="the restart proxy to answer")
        assert self.proxy.poll() is None, self.logs()

    def get(self, path: str) -> tuple[int, str]:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}{path}", timeout=5) as resp:
                return resp.status, json.loads(resp.read())["message"]
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read())["message"]
        except OSError:
            return 0, "no answer"

    def restart(self, node: str, token: str | None = TOKEN) -> tuple[int, str]:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        request = urllib.request.Request(f"http://127.0.0.1:{self.port}/restart/{node}", data=b"", method="POST",
                                         headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=10) as resp:
                return resp.status, json.loads(resp.read())["message"]
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read())["message"]

    def logs(self) -> str:
        self.log.seek(0)
        return self.log.read()

    def stop(self) -> None:
        for proc in (self.proxy, *self.started):
            if proc is not None and proc.poll() is None:
                proc.terminate()
                proc.wait(10)
        self.docker.stop()
        self.log.close()


@pytest.fixture
def world():
    if shutil.which("redis-server") is None:
        pytest.fail("redis-server is not installed; make test installs it (scripts/host-deps.sh test)")
    root = tempfile.mkdtemp(prefix="proxy-", dir="/tmp")  # a unix socket's path must be short
    w = World(root)
    w.start_redis()
    store = Store(connect(w.redis_url))
    for i, node in enumerate(["master-node", "worker-node-1", "worker-node-2"]):
        store.register_node(node, node, cpus=2, memory_bytes=2**30, ttl=600)
        w.docker.add(node, ip=f"172.20.0.{10 + i}")
    store.leave("worker-node-2")  # DOWN from now on
    for i, service in enumerate(["control", "restart-proxy", "api", "redis", "prometheus"]):
        w.docker.add(service, ip=f"172.20.0.{20 + i}")
    w.docker.start()
    w.store = store
    try:
        yield w
    finally:
        w.stop()
        shutil.rmtree(root, ignore_errors=True)


def test_without_the_token_nothing_is_restarted_and_health_stays_open(world):
    world.start_proxy()
    assert world.get("/health") == (200, "ok")
    for token in (None, "a-wrong-token-of-the-right-length-0123456789"):
        status, message = world.restart("worker-node-2", token)
        assert status == 401, message
    assert world.docker.posted() == []


def test_only_a_node_redis_shows_down_is_restarted_once_per_interval(world):
    world.start_proxy("--node-interval", "30")
    assert world.restart("worker-node-1") == (409, "worker-node-1 is idle, not DOWN; not restarting")
    for service in ("control", "restart-proxy", "api", "redis", "prometheus"):
        status, message = world.restart(service)
        assert (status, message) == (403, f"{service} is part of the control plane; only nodes "
                                          "(master-node, worker-node-N) are restarted")
    assert world.docker.posted() == []
    status, message = world.restart("worker-node-2")
    assert status == 200 and message.startswith("restarted worker-node-2 ("), message
    assert world.docker.posted() == ["worker-node-2 restart"]
    status, message = world.restart("worker-node-2")
    assert status == 429 and "at most one restart per node every 30s" in message
    assert world.docker.posted() == ["worker-node-2 restart"]
    assert "POST /restart/worker-node-2 from 127.0.0.1: 429" in world.logs()


def test_the_caller_s_own_container_is_never_restarted(world):
    world.store.leave("master-node")
    world.docker.containers["master-node"]["ip"] = "127.0.0.1"  # the master calls from master-node
    world.start_proxy()
    status, message = world.restart("master-node")
    assert status == 403 and "is the container this request came from (127.0.0.1)" in message
    assert world.docker.posted() == []


def test_no_restart_while_redis_is_unreachable(world):
    world.start_proxy("--watch", "")
    world.kill_redis()
    status, message = world.restart("worker-node-2")
    assert status == 503 and message.startswith("cannot read worker-node-2's state from Redis"), message
    assert world.docker.posted() == []


def test_a_killed_redis_is_started_again_and_one_stopped_on_purpose_is_left(world):
    world.docker.on_start["redis"] = world.start_redis
    world.start_proxy()
    world.kill_redis()
    world.docker.set_state("redis", "exited", 137)  # what Docker shows after `docker kill`
    wait_until(lambda: world.docker.containers["redis"]["state"]["Running"], timeout=15, message="the proxy to start redis")
    assert world.docker.posted() == ["redis start"] and world._redis_answers()
    assert "redis: killed (exit code 137: SIGKILL, e.g. docker kill); starting it" in world.logs()
    # Redis's data and the proxy's connection came back: the DOWN node is restarted.
    assert world.restart("worker-node-2")[0] == 200
    world.docker.set_state("redis", "exited", 0)  # `docker stop redis`: redis-server exits 0
    seen = world.docker.inspections("redis")
    # Long enough for a start to have come (1 s to settle, 1 s of backoff), had it been decided.
    wait_until(lambda: world.docker.inspections("redis") >= seen + 15, timeout=15, message="15 more inspections")
    assert world.docker.posted() == ["redis start", "worker-node-2 restart"]


def test_the_proxy_refuses_to_start_without_a_token(world):
    env = {k: v for k, v in os.environ.items() if not k.startswith("MINIHPC_RESTART_TOKEN")}
    proc = subprocess.run([sys.executable, "-m", "minihpc.cli", "restart-proxy", "--port", str(world.port),
                           "--docker-socket", world.docker.socket_path],
                          env=dict(env, MINIHPC_REDIS_URL=world.proxy_url), capture_output=True, text=True, timeout=30)
    assert proc.returncode == 1
    assert proc.stderr.startswith("minihpc restart-proxy: error: no restart token: MINIHPC_RESTART_TOKEN is empty or unset")
    assert proc.stderr.count("\n") == 1
    assert world.get("/health") == (0, "no answer")


def test_node_container_deaths_stream_to_the_master_with_the_token_only(world):
    world.start_proxy()
    assert world.get("/events")[0] == 401
    reports: list = []
    stop = threading.Event()
    DockerRestarter(f"http://127.0.0.1:{world.port}", TOKEN).watch(reports.append, stop)
    try:
        wait_until(lambda: world.docker.listeners, timeout=10, message="the master following /events")
        world.docker.die("redis", 137)  # the control plane's deaths are the watchdog's, not the master's
        killed_at = world.docker.die("worker-node-1", 137)
        wait_until(lambda: reports, timeout=10, message="a crash report")
        (crash,) = reports
        assert crash.node == "worker-node-1" and abs(crash.at - killed_at) < 0.01, crash
        assert crash.cause == "its container exited with code 137 (SIGKILL)"
        world.docker.die("worker-node-2", 1)
        wait_until(lambda: len(reports) == 2, timeout=10, message="a second report")
        assert reports[1].cause == "its container exited with code 1"
    finally:
        stop.set()


def test_the_master_asks_again_when_the_proxy_s_retry_after_says_it_may(world):
    """A node that fails again just after a restart: the master's health monitor asks the proxy
    again when the 429's Retry-After says, not after its 20 s boot grace, and the refused attempt
    spends none of the node's budget."""
    world.start_proxy("--node-interval", "3")
    restarter = DockerRestarter(f"http://127.0.0.1:{world.port}", TOKEN, timeout=10)
    health = NodeHealth(world.store, restarter, RestartPolicy(), node_timeout=2.0)
    restarter.restart("worker-node-2")  # the restart that ended its last outage: it comes back...
    world.store.register_node("worker-node-2", "worker-node-2", cpus=2, memory_bytes=2**30, ttl=600)
    health.step(world.store.node_statuses(), time.time())
    world.store.leave("worker-node-2")  # ...and fails again at once

    def restarted_twice() -> bool:
        health.step(world.store.node_statuses(), time.time())
        return world.docker.posted() == ["worker-node-2 restart"] * 2

    wait_until(restarted_twice, timeout=15, interval=0.1, message="the master's restart of worker-node-2")
    assert world.logs().count("POST /restart/worker-node-2 from 127.0.0.1: 429") == 1  # asked again once allowed
    assert len(world.store.restarts("worker-node-2")) == 1  # the refused attempt was taken back
    refused = [i for i in world.store.incidents() if i.get("kind") == "restart_failed"]
    assert len(refused) == 1 and "429" in refused[0]["error"], refused
