"""A real local cluster for the integration suite: redis-server, the master, and three node
agents (master-node, worker-node-1, worker-node-2) as processes, driven through the CLI."""

import json
import os
import shutil
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest
import redis

from tests.conftest import free_port, wait_until
from tests.integration import warm_cli

JOBS = Path(__file__).parent / "jobs"

pytestmark = pytest.mark.integration


class Cluster:
    def __init__(self, state_dir: Path, port: int):
        self.state_dir = state_dir
        self.port = port
        self.api_port = free_port()
        # Many tests here kill nodes on purpose; a real budget would drain them part-way
        # through the suite (draining is tested in e2e and in tests/unit/test_health.py (restart_policy)).
        # No speed probe (a few CPU-seconds per agent start, and the suite restarts agents often):
        # tests/integration/test_node_hardware.py turns it on for a cluster of its own.
        # Elastic jobs grow back 2 s after a resize, not 10 (test_elastic waits for it).
        self.env = dict(os.environ, MINIHPC_STATE_DIR=str(state_dir), MINIHPC_RESTART_BUDGET="100", MINIHPC_JOB_LOG_MAX="4194304",
                        MINIHPC_SPEED_PROBE="0", MINIHPC_ELASTIC_GROW_EVERY="2")
        self.env.pop("MINIHPC_REDIS_URL", None)

    def cli(self, *args, check=True, timeout=120, env=None, input=None):
        proc = warm_cli.run(args, env=env or self.env, input=input, timeout=timeout)
        if check and proc.returncode != 0:
            raise AssertionError(
                f"minihpc {' '.join(map(str, args))} exited {proc.returncode}\n"
                f"stdout: {proc.stdout}\nstderr: {proc.stderr}"
            )
        return proc

    def submit(self, *args) -> int:
        return int(self.cli("submit", "--parsable", *args).stdout.strip())

    def show(self, job_id) -> dict:
        return json.loads(self.cli("show", job_id, "--json").stdout)

    def nodes(self) -> list[dict]:
        return json.loads(self.cli("nodes", "--json").stdout)

    def wait(self, job_id, timeout=90) -> dict:
        self.cli("wait", job_id, "--timeout", timeout, check=False, timeout=timeout + 30)
        return self.show(job_id)

    def queue(self) -> list[dict]:
        return json.loads(self.cli("queue", "--json").stdout)

    @property
    def api(self) -> dict:
        """{"url", "token"}: the REST API and the admin token `up --local` made."""
        return json.loads((self.state_dir / "api.json").read_text())

    def idle(self) -> bool:
        """Nothing pending or running, and every node idle. Asked of the cluster's REST API from
        this process: the suite asks around every test, and each CLI call costs a Python start
        (about 0.35 s of CPU), which on 2 cores was a large share of the suite's time."""
        from minihpc.core.models import JobState

        active = ",".join(s.value for s in JobState if not s.terminal)
        try:
            jobs = self.api_get(f"/jobs?state={active}&limit=1")["total"]
            nodes = self.api_get("/nodes")["nodes"]
        except OSError:  # the API, or the Redis behind it, is away (some tests stop Redis)
            return False
        return jobs == 0 and all(n["state"] == "idle" for n in nodes)

    def api_get(self, path: str) -> dict:
        """GET ``path`` of the REST API as the admin `up --local` made."""
        api = self.api
        request = urllib.request.Request(api["url"].rstrip("/") + path, headers={"Authorization": f"Bearer {api['token']}"})
        with urllib.request.urlopen(request, timeout=10) as resp:
            return json.load(resp)


def start_cluster(state: Path, **env: str) -> Cluster:
    """A local cluster of master-node, worker-node-1 and -2 in ``state``, with ``env`` set."""
    if shutil.which("redis-server") is None:
        pytest.fail("redis-server is not installed; make test installs it (scripts/host-deps.sh test)")
    for _ in range(3):
        c = Cluster(state, free_port())
        c.env.update(env)
        out = c.cli("up", "--local", "--workers", 2, "--port", c.port, "--state-dir", state, "--api-port", c.api_port,
                    check=False)
        # Clusters of parallel workers pick free ports at once: one may take a port between
        # another's pick and its start, which `up` refuses (nothing started); pick again.
        if out.returncode != 0 and "is already in use" in out.stderr:
            continue
        assert out.returncode == 0, f"minihpc up exited {out.returncode}\nstdout: {out.stdout}\nstderr: {out.stderr}"
        assert "MINIHPC_REDIS_URL=redis://cli:" in out.stdout
        return c
    pytest.fail(f"minihpc up found its ports taken three times: {out.stderr}")


def stop_cluster(c: Cluster) -> None:
    c.cli("down", "--state-dir", c.state_dir, check=False)
    # Every daemon ran as its own Redis user (minihpc.state.acl): none may have been refused.
    refused = [f"{log.name}: {line.strip()}" for log in sorted((c.state_dir / "run").glob("*.log"))
               for line in log.read_text(errors="replace").splitlines() if "no permissions" in line]
    assert not refused, "Redis refused a daemon a command or key:\n" + "\n".join(refused[:20])


@pytest.fixture(scope="session")
def cluster(tmp_path_factory):
    c = start_cluster(tmp_path_factory.mktemp("cluster"))
    yield c
    stop_cluster(c)


@pytest.fixture
def idle_cluster(cluster):
    """The cluster with nothing queued or running, before and after the test."""
    wait_until(cluster.idle, timeout=30, message="an idle cluster")
    yield cluster
    leftover = [j["id"] for j in cluster.queue()]
    if leftover:
        cluster.cli("cancel", *leftover, check=False)
    wait_until(cluster.idle, timeout=30, message="the cluster to drain after the test")


@pytest.fixture
def redis_port(tmp_path):
    """A redis-server of the test's own, without a password: for tests of the Redis layer alone.
    Its own for sure: parallel workers may pick one free port at once, and the one that loses
    the bind would otherwise talk to the other's server (seen: a test saw another's writes)."""
    for _ in range(3):
        port = free_port()
        proc = subprocess.Popen(
            ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--dir", str(tmp_path)],
            stdout=subprocess.DEVNULL,
        )
        client = redis.Redis(port=port)
        wait_until(lambda: proc.poll() is not None or _serves(client, proc.pid), timeout=10, message="redis-server")
        if proc.poll() is None:
            break
    else:
        pytest.fail("redis-server found its port taken three times")
    yield port
    proc.terminate()
    proc.wait()


def _serves(client, pid: int) -> bool:
    """Whether the server answering at ``client`` is process ``pid``."""
    try:
        return int(client.info("server")["process_id"]) == pid
    except redis.ConnectionError:
        return False


@pytest.fixture
def store(redis_port):
    """A Store on the test's own redis-server."""
    from minihpc.state.store import Store
    return Store(redis.Redis(port=redis_port))


def add_pending(store, job_id: int, nodes: int = 2) -> None:
    """A pending job record, straight into the store."""
    from minihpc.core.models import Job
    store.add_job(Job(job_id, f"j{job_id}", "u", "s", "s", "x", nodes_requested=nodes, submitted_at=time.time()))


HEAVY_FIRST = ("test_validate.py", "test_drill.py", "test_validator_spec.py", "test_balanced_ddp.py",
               "test_slurm_oracle.py", "test_requeue.py", "test_observability.py", "test_elastic.py")
"""Files whose tests take minutes (a clean-clone CI's JUnit report, 2026-11-27): handed to the
parallel workers first (--dist loadfile gives out whole files in collection order), so the
tier does not end with one worker running a long file while the others are idle."""


def pytest_collection_modifyitems(items):
    rank = {name: i for i, name in enumerate(HEAVY_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: the rest keep their order
