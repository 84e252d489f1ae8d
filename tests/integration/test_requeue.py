"""A node dies mid-job: the job is torn down everywhere, requeued (NODE_FAIL attempt, then
PENDING at the front of its priority), and resumes from its checkpoint once the node is back."""

import json
import re
import signal
import subprocess
import sys
import time

import psutil
import pytest

from tests.conftest import wait_until
from tests.integration.conftest import JOBS

pytestmark = pytest.mark.integration


def kill_node(cluster, name: str) -> None:
    """SIGKILL a node agent and everything it started, as a crashed host would lose them."""
    pids = json.loads((cluster.state_dir / "pids.json").read_text())
    root = psutil.Process(pids[name])
    procs = [root] + root.children(recursive=True)
    # Ranks run in sessions of their own; find them through the agent's torchrun too.
    for p in procs:
        p.send_signal(signal.SIGKILL)
    psutil.wait_procs(procs, timeout=10)


def restart_node(cluster, name: str) -> None:
    """What the health monitor does in local mode: start the node's agent again."""
    log = open(cluster.state_dir / "run" / f"{name}.log", "ab")
    proc = subprocess.Popen(
        [sys.executable, "-m", "minihpc.cli", "agent", "--name", name, "--addr", "127.0.0.1", "--metrics-port", "0"],
        env=cluster.env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
    )
    pids_file = cluster.state_dir / "pids.json"
    pids = json.loads(pids_file.read_text())
    pids[name] = proc.pid
    pids_file.write_text(json.dumps(pids))


def node_state(cluster, name):
    return {n["name"]: n["state"] for n in cluster.nodes()}[name]


def test_a_job_hit_by_a_node_failure_is_requeued_and_resumes_from_its_checkpoint(idle_cluster):
    c = idle_cluster
    job_id = c.submit("-N", 3, JOBS / "steps.py", 40, 0.25)
    logs = lambda: c.cli("logs", job_id).stdout  # noqa: E731
    wait_until(lambda: "starts at step 0" in logs() and c.show(job_id)["state"] == "RUNNING", timeout=60,
               message="the job running")
    time.sleep(3)  # a few checkpoints
    kill_node(c, "worker-node-2")
    job = wait_until(lambda: (j := c.show(job_id))["requeues"] == 1 and j, timeout=30, message="the requeue")
    assert job["state"] == "PENDING" and job["attempts"] == 1
    assert job["failed_node"] == "worker-node-2"
    # Survivors' ranks are torn down and their nodes freed while the job waits for 3 nodes.
    wait_until(lambda: node_state(c, "master-node") == "idle" and node_state(c, "worker-node-1") == "idle",
               timeout=30, message="the survivors freed")
    restart_node(c, "worker-node-2")
    job = c.wait(job_id, timeout=120)
    assert job["state"] == "COMPLETED", logs()
    assert job["attempts"] == 2 and job["requeues"] == 1
    starts = [int(s) for s in re.findall(r"rank 0 attempt 2 starts at step (\d+)", logs())]
    assert starts and starts[0] > 0, logs()  # resumed, not restarted
    assert "rank 0 done at step 40, total 120" in logs()  # every step all-reduced 3 ranks exactly once
