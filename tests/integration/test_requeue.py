"""A node dies mid-job: the health monitor restarts it, the job is torn down everywhere,
requeued (a NODE_FAIL attempt, then PENDING at the front of its priority), and resumes from its
checkpoint once the node is back."""

import json
import os
import re
import signal
import subprocess
import time

import psutil
import pytest

from minihpc.machine.local_state import LocalState
from minihpc.machine.processes import process_tree, send

from tests.conftest import wait_until
from tests.integration.conftest import JOBS

pytestmark = pytest.mark.integration


def kill_node(cluster, name: str) -> None:
    """SIGKILL a node agent and everything it started, as a crashed host would lose them."""
    procs = process_tree(LocalState(cluster.state_dir).pids()[name])
    send(procs, signal.SIGKILL)
    psutil.wait_procs(procs, timeout=10)


def test_a_killed_node_is_restarted_and_its_job_requeued_and_resumed_from_its_checkpoint(idle_cluster):
    c = idle_cluster
    job_id = c.submit("-N", 3, JOBS / "steps.py", 40, 0.25)
    logs = lambda: c.cli("logs", job_id).stdout  # noqa: E731
    wait_until(lambda: "starts at step 0" in logs() and c.show(job_id)["state"] == "RUNNING", timeout=60,
               message="the job running")
    time.sleep(3)  # a few checkpoints
    old_pid = LocalState(c.state_dir).pids()["worker-node-2"]
    killed_at = time.time()
    kill_node(c, "worker-node-2")
    job = c.wait(job_id, timeout=120)
    assert job["state"] == "COMPLETED", logs()
    assert job["attempts"] == 2 and job["requeues"] == 1
    starts = [int(s) for s in re.findall(r"rank 0 attempt 2 starts at step (\d+)", logs())]
    assert starts and starts[0] > 0, logs()  # resumed, not restarted
    assert "rank 0 done at step 40, total 120" in logs()  # every step all-reduced 3 ranks exactly once
    new_pid = LocalState(c.state_dir).pids()["worker-node-2"]
    assert new_pid != old_pid and psutil.pid_exists(new_pid)  # the monitor respawned the node
    incidents = json.loads(c.cli("incidents", "--json").stdout)
    # this kill's incidents (the cluster, and so its incident log, is shared with earlier tests)
    kinds = [(i["kind"], i["node"]) for i in reversed(incidents) if i["node"] == "worker-node-2" and i["at"] >= killed_at]
    assert kinds[:4] == [("down", "worker-node-2"), ("restart", "worker-node-2"),
                         ("requeued", "worker-node-2"), ("back", "worker-node-2")] or \
        kinds[:4] == [("down", "worker-node-2"), ("requeued", "worker-node-2"),
                      ("restart", "worker-node-2"), ("back", "worker-node-2")], kinds
    requeued = next((i for i in incidents if i["kind"] == "requeued" and i["job"] == job_id), None)
    assert requeued is not None and requeued["attempt"] == 1 and requeued["reason"] == "node worker-node-2 failed", requeued  # why, for the operator


def test_a_job_that_always_loses_a_node_gets_exactly_max_requeues_plus_one_attempts(idle_cluster):
    c = idle_cluster
    job_id = c.submit("-N", 2, JOBS / "kill_my_node.py")
    # Four attempts, each a node killed, restarted and warm again: 51 s alone, over 150 s with
    # two more clusters and an image build beside it.
    job = c.wait(job_id, timeout=400)
    assert job["state"] == "NODE_FAIL", job
    assert (job["attempts"], job["requeues"]) == (4, 3)  # max_requeues defaults to 3
    logs = c.cli("logs", job_id).stdout
    # An attempt can be torn down before its ranks print; the first and last always ran. The
    # log is node by node, and node rank 0 may be another node in each attempt: no order.
    printed = {int(a) for a in re.findall(r"rank 0 attempt (\d+)", logs)}
    assert {1, 4} <= printed <= {1, 2, 3, 4}, printed
    # Every node is back (and not drained: four restarts stay within the budget of five).
    wait_until(lambda: all(n["state"] == "idle" for n in c.nodes()), timeout=60, message="all nodes idle")


def test_a_job_whose_progress_stops_is_torn_down_and_requeued(idle_cluster):
    c = idle_cluster
    job_id = c.submit("-N", 2, "--progress-timeout", "0:03", JOBS / "stall.py")
    job = c.wait(job_id, timeout=90)
    assert job["state"] == "COMPLETED", job
    assert (job["attempts"], job["requeues"]) == (2, 1)
    logs = c.cli("logs", job_id).stdout
    assert "hangs" in logs and logs.count("attempt 2 done") == 2
    stalled = [i for i in json.loads(c.cli("incidents", "--json").stdout) if i["kind"] == "stalled"]
    assert stalled and stalled[0]["job"] == job_id and stalled[0]["silent_for"] > 3


def test_restarting_the_master_disturbs_no_running_job(idle_cluster, tmp_path):
    c = idle_cluster
    job_id = c.submit("-N", 3, JOBS / "steps.py", 16, 0.25)
    wait_until(lambda: c.show(job_id)["state"] == "RUNNING", timeout=60, message="the job running")
    state = LocalState(c.state_dir)
    pids = state.pids()
    # Only the master's own process: agents it respawned earlier are its children.
    os.kill(pids["master"], signal.SIGKILL)
    try:
        psutil.Process(pids["master"]).wait(timeout=10)
    except psutil.NoSuchProcess:
        pass
    waiting = c.submit("-N", 1, JOBS / "steps.py", 1, 0)  # accepted with no master up
    log = open(c.state_dir / "run" / "master.log", "ab")
    again = state.master_command()  # as `up` started it: with the master's own Redis user
    master = subprocess.Popen(again["argv"], env=dict(c.env, **again["env"]), stdout=log, stderr=subprocess.STDOUT,
                              start_new_session=True)
    state.set_pid("master", master.pid)
    job = c.wait(job_id, timeout=120)
    assert job["state"] == "COMPLETED" and (job["attempts"], job["requeues"]) == (1, 0)
    assert c.wait(waiting, timeout=60)["state"] == "COMPLETED"
