"""The restart proxy's rules: the token, which names, which states, how often, never the
caller's container; the Redis watchdog's decision on real inspect States; and the proxy's
answers end to end over HTTP with the master's DockerRestarter, on a fake Engine."""

import threading
from datetime import datetime, timezone
from types import SimpleNamespace

import pytest
import redis

from minihpc.cli.main import main
from minihpc.core.errors import ClusterUnavailable, UsageError
from minihpc.core.models import NodeState
from minihpc.restart import rules, token, watchdog
from minihpc.restart.docker import DockerRestarter
from minihpc.restart.engine import DockerError
from minihpc.restart.proxy import RestartProxy, make_server
from minihpc.restart.watchdog import Revive, Watchdog, WatchPolicy, decide, docker_time
from minihpc.restart.rules import RateLimits, allow
from minihpc.restart.spec import RestartRefused, from_spec

TOKEN = "k3Jx9-generated-token-0123456789abcdef"
AUTH = f"Bearer {TOKEN}"

# -- the token --------------------------------------------------------------------------


def test_the_token_comes_from_a_file_before_the_environment(tmp_path):
    path = tmp_path / "restart_token"
    path.write_text(TOKEN + "\n")
    assert token.load_token({}, str(path)) == TOKEN
    assert token.load_token({"MINIHPC_RESTART_TOKEN_FILE": str(path), "MINIHPC_RESTART_TOKEN": "x" * 20}) == TOKEN
    assert token.load_token({"MINIHPC_RESTART_TOKEN": f"  {TOKEN} "}) == TOKEN


def test_no_token_or_a_short_one_is_refused_with_where_it_looked(tmp_path):
    with pytest.raises(UsageError, match="no restart token: MINIHPC_RESTART_TOKEN is empty or unset"):
        token.load_token({})
    with pytest.raises(UsageError, match="restart token from MINIHPC_RESTART_TOKEN has 8 characters; expected at least 16"):
        token.load_token({"MINIHPC_RESTART_TOKEN": "changeme"})
    with pytest.raises(UsageError, match=f"restart token file {tmp_path}/missing cannot be read"):
        token.load_token({}, str(tmp_path / "missing"))


def test_only_the_exact_bearer_token_is_authorized():
    assert token.authorized(AUTH, TOKEN)
    assert token.authorized(f"bearer  {TOKEN}", TOKEN)
    for header in (None, "", "Bearer", f"Bearer {TOKEN}x", f"Basic {TOKEN}", TOKEN, f"Bearer {TOKEN[:-1]}"):
        assert not token.authorized(header, TOKEN), header


def test_the_docker_restarter_needs_a_token_at_start():
    with pytest.raises(UsageError, match="no restart token"):
        from_spec("docker:http://restart-proxy:8700", env={})
    restarter = from_spec("docker:http://restart-proxy:8700/", env={"MINIHPC_RESTART_TOKEN": TOKEN})
    assert (restarter.url, restarter.token) == ("http://restart-proxy:8700", TOKEN)


def test_the_proxy_refuses_to_start_without_a_token(monkeypatch, capsys):
    monkeypatch.delenv("MINIHPC_RESTART_TOKEN", raising=False)
    monkeypatch.delenv("MINIHPC_RESTART_TOKEN_FILE", raising=False)
    assert main(["restart-proxy", "--docker-socket", "/nonexistent.sock"]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("minihpc restart-proxy: error: no restart token:") and "\n" not in err


# -- names, states, the caller ----------------------------------------------------------


@pytest.mark.parametrize("service", ["control", "restart-proxy", "api", "redis", "prometheus", "grafana"])
def test_the_control_plane_is_never_a_target(service):
    assert rules.name_refusal(service) == f"{service} is part of the control plane; only nodes (master-node, worker-node-N) are restarted"


def test_only_node_names_pass():
    assert rules.name_refusal("master-node") is None
    assert rules.name_refusal("worker-node-12") is None
    for name in ("worker-node-", "worker-node-1x", "minihpc-redis-1", "..", "master-node2"):
        assert "is not a node name; expected master-node or worker-node-N" in rules.name_refusal(name)


def test_only_a_node_redis_shows_down_is_restarted():
    assert rules.state_refusal("worker-node-1", NodeState.DOWN) is None
    assert rules.state_refusal("worker-node-1", NodeState.IDLE) == "worker-node-1 is idle, not DOWN; not restarting"
    assert rules.state_refusal("worker-node-1", NodeState.ALLOC) == "worker-node-1 is alloc, not DOWN; not restarting"
    assert rules.state_refusal("worker-node-1", NodeState.DRAIN) == "worker-node-1 is drain, not DOWN; not restarting"
    assert rules.state_refusal("worker-node-9", None) == "worker-node-9 is not registered in the cluster, not DOWN; not restarting"


def container(name, ip="172.20.0.5", state="exited"):
    return {"Id": f"{name}-0123456789abcdef", "Names": [f"/{name}"], "State": state,
            "NetworkSettings": {"Networks": {"minihpc_default": {"IPAddress": ip, "GlobalIPv6Address": ""}}}}


def test_the_caller_s_own_container_is_refused():
    assert rules.caller_refusal("master-node", container("master-node", ip="172.20.0.5"), "172.20.0.9") is None
    refusal = rules.caller_refusal("master-node", container("master-node", ip="172.20.0.9"), "172.20.0.9")
    assert refusal == ("master-node (master-node-) is the container this request came from (172.20.0.9); "
                       "a master never restarts the container it runs in")


# -- rate limits ------------------------------------------------------------------------

LIMITS = RateLimits(node_interval=10.0, max_restarts=3, window=60.0)


def test_one_restart_per_node_per_interval():
    history = [(100.0, "worker-node-1")]
    ok, reason = allow(105.0, history, "worker-node-1", LIMITS)
    assert not ok and reason == "worker-node-1 was restarted 5.0s ago; at most one restart per node every 10s (next in 5.0s)"
    assert allow(105.0, history, "worker-node-2", LIMITS) == (True, "ok")
    assert allow(110.0, history, "worker-node-1", LIMITS) == (True, "ok")


def test_at_most_max_restarts_per_window_in_total():
    history = [(100.0, "worker-node-1"), (101.0, "worker-node-2"), (102.0, "worker-node-3")]
    ok, reason = allow(130.0, history, "master-node", LIMITS)
    assert not ok and reason == "3 restarts in the last 60s; at most 3 (next in 30.0s)"
    assert allow(160.0, history, "master-node", LIMITS) == (True, "ok")  # the first aged out


def test_wait_before_is_when_both_limits_let_the_node_through():
    """What a 429's Retry-After says: the later of the node's interval and the window's slot."""
    history = [(100.0, "worker-node-1")]
    assert rules.wait_before(105.0, history, "worker-node-1", LIMITS) == 5.0
    assert rules.wait_before(105.0, history, "worker-node-2", LIMITS) == 0.0
    assert rules.wait_before(112.0, history, "worker-node-1", LIMITS) == 0.0
    full = [(100.0, "worker-node-1"), (101.0, "worker-node-2"), (125.0, "worker-node-3")]
    assert rules.wait_before(130.0, full, "master-node", LIMITS) == 30.0  # the window: 100 + 60
    assert rules.wait_before(130.0, full, "worker-node-3", LIMITS) == 30.0  # both; the window is later
    assert rules.wait_before(160.0, full, "worker-node-3", LIMITS) == 0.0
    assert not allow(130.0, full, "worker-node-3", LIMITS)[0] and allow(160.0, full, "worker-node-3", LIMITS)[0]


def test_prune_keeps_what_can_still_refuse():
    history = [(10.0, "a"), (95.0, "b"), (100.0, "c")]
    assert rules.prune(history, 100.0, LIMITS) == [(95.0, "b"), (100.0, "c")]
    assert rules.prune(history, 100.0, RateLimits(node_interval=100.0, window=5.0)) == history


def test_rate_limits_must_make_sense():
    with pytest.raises(ValueError):
        RateLimits(max_restarts=0)


# -- the Redis watchdog's decision --------------------------------------------------------

T0 = docker_time("2024-06-01T10:05:00.987654321Z")


def inspect_state(status="exited", code=137, oom=False, restarting=False, finished="2024-06-01T10:05:00.987654321Z"):
    """A container's State as ``docker inspect`` shows it."""
    return {"Status": status, "Running": status == "running", "Paused": status == "paused",
            "Restarting": restarting, "OOMKilled": oom, "Dead": status == "dead", "Pid": 0 if status != "running" else 4242,
            "ExitCode": code, "Error": "", "StartedAt": "2024-06-01T10:00:00.123456789Z", "FinishedAt": finished,
            "Health": {"Status": "unhealthy", "FailingStreak": 0, "Log": []}}


POLICY = WatchPolicy(settle=1.0, backoff_initial=1.0, backoff_max=8.0, window=100.0)


def test_docker_times_parse_and_the_zero_time_is_none():
    assert docker_time("2024-06-01T10:05:00Z") == pytest.approx(1717236300.0)
    assert T0 == pytest.approx(1717236300.987654)
    assert docker_time("2024-06-01T12:05:00.5+02:00") == pytest.approx(1717236300.5)
    assert docker_time("0001-01-01T00:00:00Z") is None
    assert docker_time("yesterday") is None and docker_time(None) is None


def test_a_killed_redis_is_started():
    assert decide(inspect_state(code=137), T0 + 2, [], POLICY) == (
        Revive.START, "killed (exit code 137: SIGKILL, e.g. docker kill)")


def test_a_crashed_or_oom_killed_redis_is_started():
    assert decide(inspect_state(code=139), T0 + 2, [], POLICY) == (Revive.START, "crashed (exit code 139)")
    assert decide(inspect_state(code=137, oom=True), T0 + 2, [], POLICY) == (Revive.START, "OOM-killed (exit code 137)")
    assert decide(inspect_state(status="dead", code=1), T0 + 2, [], POLICY)[0] is Revive.START


def test_a_redis_stopped_on_purpose_is_left_stopped():
    assert decide(inspect_state(code=0), T0 + 2, [], POLICY) == (Revive.LEAVE, "exited with exit code 0: stopped on purpose")


@pytest.mark.parametrize("status", ["running", "paused", "created", "removing"])
def test_a_redis_that_is_not_stopped_is_left_alone(status):
    assert decide(inspect_state(status=status, code=0), T0 + 2, [], POLICY) == (Revive.LEAVE, status)


def test_docker_s_own_restart_goes_first():
    assert decide(inspect_state(code=1, restarting=True), T0 + 2, [], POLICY) == (Revive.LEAVE, "restarting (Docker's restart policy)")
    assert decide(inspect_state(code=137), T0 + 0.5, [], POLICY)[0] is Revive.WAIT  # settling
    assert decide(None, T0, [], POLICY) == (Revive.LEAVE, "no container (not created, or removed)")


def test_a_crash_looping_redis_is_started_with_a_doubling_backoff():
    assert [watchdog.backoff(n, POLICY) for n in range(6)] == [0.0, 1.0, 2.0, 4.0, 8.0, 8.0]
    starts = [T0 - 10, T0 - 5, T0 - 1]  # three starts: the fourth waits 4 s after the last
    action, reason = decide(inspect_state(code=139), T0 + 2, starts, POLICY)
    assert action is Revive.WAIT and reason == "crashed (exit code 139); started 3 times in 100s, backing off 4s"
    assert decide(inspect_state(code=139), T0 + 3, starts, POLICY)[0] is Revive.START
    # A hundred seconds on, the old starts no longer count: at once again.
    assert decide(inspect_state(code=139, finished="2024-06-01T10:07:00Z"), T0 + 200, starts, POLICY)[0] is Revive.START


class FakeEngine:
    """The Engine calls the proxy and the watchdog make, on canned containers."""

    def __init__(self, containers=None, states=None):
        self.containers = containers or {}
        self.states = states or {}
        self.actions: list[tuple[str, str]] = []
        self.fail = None

    def find(self, project, service):
        if self.fail:
            raise self.fail
        return self.containers.get(service)

    def inspect(self, cid):
        return {"Id": cid, "State": self.states[cid]}

    def act(self, cid, action):
        self.actions.append((cid, action))


def test_the_watchdog_starts_a_killed_redis_once_then_backs_off():
    engine = FakeEngine({"redis": {"Id": "r1"}}, {"r1": inspect_state(code=137)})
    now = [T0 + 5]
    dog = Watchdog(engine, "minihpc", policy=POLICY, clock=lambda: now[0])
    assert dog.check() is Revive.START and engine.actions == [("r1", "start")]
    now[0] += 0.5  # still exited (the start failed): backing off
    assert dog.check() is Revive.WAIT and engine.actions == [("r1", "start")]
    engine.states["r1"] = inspect_state(status="running", code=0)
    assert dog.check() is Revive.LEAVE and len(engine.actions) == 1


def test_a_watchdog_keeps_the_service_it_is_given_and_nothing_else():
    engine = FakeEngine({"redis": {"Id": "r1"}, "control": {"Id": "c1"}},
                        {"r1": inspect_state(code=137), "c1": inspect_state(code=137)})
    assert Watchdog(engine, "minihpc", "control", policy=POLICY, clock=lambda: T0 + 5).check() is Revive.START
    assert engine.actions == [("c1", "start")]
    assert Watchdog(engine, "minihpc", "grafana", policy=POLICY).check() is Revive.LEAVE  # no such container


def test_the_watchdog_logs_its_own_errors_and_keeps_going(caplog):
    engine = FakeEngine({"redis": {"Id": "r1"}}, {"r1": inspect_state(code=137)})
    engine.fail = DockerError("Docker Engine at /var/run/docker.sock: GET /containers/json failed (refused)")
    dog = Watchdog(engine, "minihpc", policy=WatchPolicy(interval=0.01, settle=0.0))
    thread = dog.start()
    try:
        wait_for(lambda: "GET /containers/json failed" in caplog.text)
        engine.fail = None
        wait_for(lambda: engine.actions)
        assert thread.is_alive()
    finally:
        dog.stop.set()
        thread.join(5)
    assert caplog.text.count("GET /containers/json failed") == 1  # once, not every 10 ms


def wait_for(predicate, timeout=5.0):
    done = threading.Event()
    for _ in range(int(timeout / 0.01)):
        if predicate():
            return
        done.wait(0.01)
    pytest.fail("timed out")


# -- the proxy's answers, over HTTP, to the master's restarter ---------------------------


class FakeNodes:
    def __init__(self, states, last_beat=990.0):
        self.states = states
        self.last_beat = last_beat
        self.error = None

    def status(self, node):
        if self.error:
            raise self.error
        state = self.states.get(node)
        return None if state is None else SimpleNamespace(state=state, last_heartbeat=self.last_beat, drain_reason=None)


def rfc3339(at: float) -> str:
    return datetime.fromtimestamp(at, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f000Z")


@pytest.fixture
def proxy():
    engine = FakeEngine({name: container(name) for name in ("master-node", "worker-node-1", "worker-node-2", "control")})
    engine.containers["worker-node-2"]["State"] = "paused"
    nodes = FakeNodes({"master-node": NodeState.ALLOC, "worker-node-1": NodeState.DOWN, "worker-node-2": NodeState.DOWN,
                       "worker-node-3": NodeState.DOWN})
    now = [1000.0]
    proxy = RestartProxy(engine, "minihpc", TOKEN, nodes, RateLimits(10.0, 2, 60.0), clock=lambda: now[0])
    proxy.now = now
    return proxy


def test_without_the_token_nothing_is_restarted(proxy):
    for header in (None, "Bearer wrong-token-wrong-token", f"Basic {TOKEN}"):
        status, message = proxy.post("/restart/worker-node-1", header, "172.20.0.9")
        assert (status, message) == (401, "missing or wrong restart token; expected Authorization: Bearer <MINIHPC_RESTART_TOKEN>")
    assert proxy.post("/anything", None, "172.20.0.9")[0] == 401
    assert proxy.engine.actions == []


def test_each_rule_refuses_with_its_status(proxy):
    caller = "172.20.0.9"
    assert proxy.post("/restart/control", AUTH, caller)[0] == 403
    assert proxy.post("/restart/master-node", AUTH, caller) == (409, "master-node is alloc, not DOWN; not restarting")
    assert proxy.post("/restart/worker-node-3", AUTH, caller) == (404, "no container for node worker-node-3 in Compose project minihpc")
    proxy.engine.containers["worker-node-1"] = container("worker-node-1", ip=caller)
    assert proxy.post("/restart/worker-node-1", AUTH, caller)[0] == 403
    proxy.nodes.error = ClusterUnavailable("cannot reach Redis at redis://:***@redis:6379/0 (Connection refused)")
    status, message = proxy.post("/restart/worker-node-2", AUTH, caller)
    assert status == 503 and message.startswith("cannot read worker-node-2's state from Redis (cannot reach Redis")
    proxy.nodes.error = redis.ConnectionError("Connection reset by peer")
    assert proxy.post("/restart/worker-node-2", AUTH, caller)[0] == 503
    assert proxy.post("/other", AUTH, caller) == (404, "only GET /health, GET /events and POST /restart/<node>")
    assert proxy.engine.actions == []


def test_a_down_node_is_restarted_within_the_rate_limits(proxy):
    caller = "172.20.0.9"
    assert proxy.post("/restart/worker-node-1", AUTH, caller) == (200, "restarted worker-node-1 (worker-node-), DOWN in Redis")
    assert proxy.post("/restart/worker-node-1", AUTH, caller)[0] == 429
    assert proxy.post("/restart/worker-node-2", AUTH, caller)[0] == 200  # paused: unpaused first
    proxy.now[0] += 15
    status, message = proxy.post("/restart/worker-node-1", AUTH, caller)
    assert (status, message) == (429, "2 restarts in the last 60s; at most 2 (next in 45.0s)")
    assert proxy.engine.actions == [("worker-node-1-0123456789abcdef", "restart?t=5"),
                                    ("worker-node-2-0123456789abcdef", "unpause"),
                                    ("worker-node-2-0123456789abcdef", "restart?t=5")]


def test_a_container_docker_started_again_after_its_agent_died_is_left_to_boot(proxy):
    caller = "172.20.0.9"
    cid = "worker-node-1-0123456789abcdef"
    proxy.engine.containers["worker-node-1"]["State"] = "running"
    proxy.engine.states[cid] = inspect_state(status="running", code=0)
    proxy.engine.states[cid]["StartedAt"] = rfc3339(995.0)  # after the last beat (990), 5 s ago
    status, message = proxy.post("/restart/worker-node-1", AUTH, caller)
    assert (status, message) == (200, "worker-node-1 (worker-node-) was started again by Docker 5.0s ago, "
                                      "after its agent died; left to boot")
    assert proxy.engine.actions == []
    proxy.now[0] += 11  # still no heartbeat 16 s after that start: stuck, restarted
    assert proxy.post("/restart/worker-node-1", AUTH, caller)[0] == 200
    assert proxy.engine.actions == [(cid, "restart?t=5")]


def test_booting_means_started_after_the_last_beat_and_not_long_ago():
    assert rules.booting(True, 995.0, 990.0, 1000.0)
    assert not rules.booting(True, 985.0, 990.0, 1000.0)  # a hung agent that started before its last beat
    assert not rules.booting(True, 995.0, 990.0, 1011.0)  # booting for 16 s: not any more
    assert not rules.booting(False, 995.0, 990.0, 1000.0)
    assert not rules.booting(True, None, 990.0, 1000.0) and not rules.booting(True, 995.0, None, 1000.0)


def test_a_docker_failure_is_a_502(proxy):
    proxy.engine.fail = DockerError("Docker Engine at /var/run/docker.sock: GET /containers/json failed (refused)")
    assert proxy.post("/restart/worker-node-1", AUTH, "172.20.0.9")[0] == 502


def test_the_master_s_restarter_talks_to_the_proxy_over_http(proxy):
    server = make_server(proxy, "127.0.0.1", 0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        DockerRestarter(url, TOKEN, timeout=5).restart("worker-node-1")
        assert proxy.engine.actions == [("worker-node-1-0123456789abcdef", "restart?t=5")]
        with pytest.raises(RuntimeError, match="^restart proxy refused master-node: 409 master-node is alloc, not DOWN; not restarting$"):
            DockerRestarter(url, TOKEN, timeout=5).restart("master-node")
        with pytest.raises(RuntimeError, match="^restart proxy refused worker-node-2: 401 missing or wrong restart token"):
            DockerRestarter(url, "another-token-another-token", timeout=5).restart("worker-node-2")
        # Again at once: the rate limit refuses, and says when it will not (whole seconds, rounded up).
        with pytest.raises(RestartRefused, match="^restart proxy refused worker-node-1: 429 worker-node-1 was restarted") as refused:
            DockerRestarter(url, TOKEN, timeout=5).restart("worker-node-1")
        assert refused.value.retry_after == 10.0  # the proxy's clock stands still: its whole interval
        import urllib.request

        with urllib.request.urlopen(f"{url}/health", timeout=5) as resp:  # open, and says nothing
            assert resp.read() == b'{"message": "ok"}'
    finally:
        server.shutdown()
        server.server_close()
    assert len(proxy.engine.actions) == 1
    with pytest.raises(RuntimeError, match=f"^restart proxy at {url} did not answer for worker-node-1"):
        DockerRestarter(url, TOKEN, timeout=2).restart("worker-node-1")


class SilentStream:
    """An engine event stream with no death to tell, until it is closed."""

    def __init__(self):
        self.closed = threading.Event()

    def __iter__(self):
        self.closed.wait(10)
        return iter(())

    def close(self):
        self.closed.set()

    def release(self):
        self.released = True


class GoneReader:
    """A master that went away after the first line: every later write fails."""

    def __init__(self):
        self.lines = []

    def write(self, data):
        if self.lines:
            raise BrokenPipeError(32, "Broken pipe")
        self.lines.append(data)

    def flush(self):
        pass


def test_a_death_stream_whose_reader_is_gone_closes_the_engine_s_stream(monkeypatch):
    import minihpc.restart.proxy as proxy_module

    monkeypatch.setattr(proxy_module, "EVENTS_KEEPALIVE", 0.05)
    stream, reader = SilentStream(), GoneReader()
    done = threading.Thread(target=proxy_module.stream_deaths,
                            args=(RestartProxy(None, "minihpc", "t", None), stream, reader, "10.0.0.2"))
    done.start()
    done.join(5)
    assert not done.is_alive() and stream.closed.is_set() and stream.released
    assert reader.lines == [b"\n"]
