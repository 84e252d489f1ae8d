"""The Compose cluster for the end-to-end suite: real images, real containers, driven through
the Makefile exactly as users drive it.

It runs as its own Compose project (minihpc-e2e) on free loopback ports, so it never touches a
cluster the user has up. The images are rebuilt first (cached), so they hold the code under test. Skipped
only when no Docker engine answers; a missing Compose tool is a failure.
"""

import json
import os
import re
import shutil
import subprocess
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from tests.conftest import docker_answers, free_port, wait_until

ROOT = Path(__file__).resolve().parents[2]
PROJECT = "minihpc-e2e"
LOG_MAX = 4 * 1024 * 1024
"""The suite's cap on a job's log per node (MINIHPC_JOB_LOG_MAX), small so a flood is quick."""
LAUNCH_TIMEOUT = 20
"""The suite's MINIHPC_LAUNCH_TIMEOUT, short so a stuck node is found soon (the master adds
twice the kill wait, 3 s)."""

GROW_EVERY = 3
"""The suite's MINIHPC_ELASTIC_GROW_EVERY: an elastic job takes a returned node back 3 s after it
shrank (10 by default), so its drill need not train 10 s more than the fault lasts."""

pytestmark = pytest.mark.e2e


def compose_command() -> list[str]:
    if subprocess.run(["docker", "compose", "version"], capture_output=True).returncode == 0:
        return ["docker", "compose"]
    if shutil.which("docker-compose"):
        return ["docker-compose"]
    pytest.fail("a Docker engine runs but neither 'docker compose' nor 'docker-compose' is installed")


class ComposeCluster:
    def __init__(self):
        self.env = dict(
            os.environ,
            COMPOSE_PROJECT_NAME=PROJECT, MINIHPC_CONTAINER_PREFIX=f"{PROJECT}-",
            REDIS_PORT=str(free_port()),
            PROMETHEUS_PORT=str(free_port()),
            GRAFANA_PORT=str(free_port()),
            MINIHPC_API_PORT=str(free_port()),
            MINIHPC_JOB_LOG_MAX=str(LOG_MAX),
            MINIHPC_LAUNCH_TIMEOUT=str(LAUNCH_TIMEOUT),
            MINIHPC_ELASTIC_GROW_EVERY=str(GROW_EVERY),
        )
        self.env.pop("MINIHPC_REDIS_URL", None)
        self.compose = compose_command()
        self.prepared: str | None = None

    def make(self, target, *assignments, check=True, timeout=600, stdin=subprocess.DEVNULL):
        proc = subprocess.run(
            ["make", "--no-print-directory", target, *assignments],
            cwd=ROOT, env=self.env, capture_output=True, text=True, timeout=timeout, stdin=stdin,
        )
        if check and proc.returncode != 0:
            raise AssertionError(
                f"make {target} {' '.join(assignments)} exited {proc.returncode}\n"
                f"stdout: {proc.stdout[-4000:]}\nstderr: {proc.stderr[-4000:]}"
            )
        return proc

    def docker_compose(self, *args, check=True, timeout=300):
        proc = subprocess.run(
            [*self.compose, *args], cwd=ROOT, env=self.env, capture_output=True, text=True, timeout=timeout
        )
        if check and proc.returncode != 0:
            raise AssertionError(f"{' '.join(args)} exited {proc.returncode}: {proc.stderr[-2000:]}")
        return proc

    def minihpc(self, *args, check=True, timeout=300):
        """The CLI where `make` runs it: in the control container."""
        return self.docker_compose("exec", "-T", "control", "minihpc", *map(str, args), check=check, timeout=timeout)

    def in_master(self, *args, check=True, timeout=300):
        """A command in the master-node container (as its agent's user, root)."""
        return self.docker_compose("exec", "-T", "master-node", *map(str, args), check=check, timeout=timeout)

    def prepare_data(self) -> str:
        """`make prepare-data`'s output, run once: the data stays on its volume, which `make
        down` keeps (each run is a Python start in a container, seconds on 2 cores)."""
        if self.prepared is None:
            self.prepared = self.make("prepare-data").stdout
        return self.prepared

    def submit(self, job, nodes=1, args="", options="") -> int:
        out = self.make("submit", f"JOB={job}", f"NODES={nodes}", *([f"ARGS={args}"] if args else []),
                        *([f"SUBMIT_OPTS={options}"] if options else [])).stdout
        match = re.search(r"Submitted batch job (\d+)", out)
        assert match, out
        return int(match.group(1))

    def show(self, job_id) -> dict:
        return json.loads(self.minihpc("show", job_id, "--json").stdout)

    def wait(self, job_id, timeout=300) -> dict:
        self.minihpc("wait", job_id, "--timeout", timeout, check=False, timeout=timeout + 30)
        return self.show(job_id)

    def prometheus(self, path, **params) -> dict:
        url = f"http://127.0.0.1:{self.env['PROMETHEUS_PORT']}{path}"
        if params:
            url += "?" + urllib.parse.urlencode(params)
        with urllib.request.urlopen(url, timeout=10) as resp:
            return json.load(resp)

    def healthy(self) -> dict[str, str]:
        ids = self.docker_compose("ps", "-q").stdout.split()
        out = subprocess.run(
            ["docker", "inspect", "-f",
             '{{index .Config.Labels "com.docker.compose.service"}} '
             "{{if .State.Health}}{{.State.Health.Status}}{{else}}{{.State.Status}}{{end}}", *ids],
            capture_output=True, text=True, check=True,
        ).stdout
        return dict(line.split() for line in out.splitlines())


@pytest.fixture(scope="session")
def compose_cluster():
    if not docker_answers():
        pytest.skip("no Docker engine answers here")
    c = ComposeCluster()
    c.docker_compose("down", "--volumes", "--remove-orphans", check=False)
    c.make("build", timeout=3600)  # cold on a fresh machine; seconds when only our code changed
    c.make("up", timeout=600)
    yield c
    c.docker_compose("down", "--volumes", "--remove-orphans", check=False)


@pytest.fixture
def idle(compose_cluster):
    c = compose_cluster
    wait_until(lambda: json.loads(c.minihpc("queue", "--json").stdout) == [], timeout=120, interval=1,
               message="an empty queue")
    return c
