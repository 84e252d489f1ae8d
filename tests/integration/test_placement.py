"""Placement options on a real local cluster of its own, with partitions configured
(MINIHPC_PARTITIONS), node features (MINIHPC_NODE_FEATURES) and nodes that register no GPUs:
-p/--partition, -C/--constraint, --begin, --mem, --gres=gpu:N and --no-requeue as man sbatch
describes them."""

import shutil
import time

import pytest

from minihpc.machine.local_state import LocalState
from tests.conftest import free_port, wait_until
from tests.integration.conftest import Cluster
from tests.integration.test_requeue import kill_node

pytestmark = pytest.mark.integration

PARTITIONS = "debug=worker-node-[1-2];solo=master-node"
FEATURES = "worker-node-[1-2]=ib;worker-node-2=big"


@pytest.fixture(scope="module")
def placed(tmp_path_factory):
    """master-node, worker-node-1 and worker-node-2, in partitions debug and solo besides the
    default (main, every node); each node says it has no GPU whatever the host has."""
    if shutil.which("redis-server") is None:
        pytest.fail("redis-server is not installed; make test installs it (scripts/host-deps.sh test)")
    state = tmp_path_factory.mktemp("placed")
    c = Cluster(state, free_port())
    c.env.update(MINIHPC_PARTITIONS=PARTITIONS, MINIHPC_NODE_GPUS="0", MINIHPC_NODE_FEATURES=FEATURES)
    c.cli("up", "--local", "--workers", 2, "--port", c.port, "--state-dir", state, "--api-port", 0)
    wait_until(lambda: len(c.nodes()) == 3 and all(n["state"] == "idle" for n in c.nodes()), timeout=60,
               message="three idle nodes")
    yield c
    c.cli("down", "--state-dir", state, check=False)


def output(c, job_id) -> str:
    return c.cli("logs", job_id).stdout


def test_a_partition_restricts_the_nodes_and_names_itself(placed):
    """sbatch -p debug: the job's nodes (SLURM_JOB_NODELIST) are debug's, and
    SLURM_JOB_PARTITION says debug; without -p it is the default partition, main."""
    c = placed
    job = c.submit("-p", "debug", "-N", 2, "--wrap", 'echo "list=$SLURM_JOB_NODELIST part=$SLURM_JOB_PARTITION"')
    assert c.wait(job)["state"] == "COMPLETED"
    assert "list=worker-node-[1-2] part=debug" in output(c, job)
    job = c.submit("-p", "solo", "--wrap", 'echo "node=$SLURMD_NODENAME"')
    assert c.wait(job)["state"] == "COMPLETED" and "node=master-node" in output(c, job)
    job = c.submit("--wrap", 'echo "part=$SLURM_JOB_PARTITION"')
    assert c.wait(job)["state"] == "COMPLETED" and "part=main" in output(c, job)
    nodes = {n["name"]: n for n in c.nodes()}
    assert nodes["worker-node-1"]["partitions"] == ["main", "debug"] and nodes["worker-node-1"]["gpus"] == 0
    table = c.cli("nodes").stdout
    assert "main*,solo" in table and "(null)" in table


def test_a_constraint_runs_the_job_on_nodes_with_those_features(placed):
    """sbatch -C ib&big: the one node with both; -C ib -N 2: the two with ib; more nodes than
    have the features is refused at submit, naming the features there are."""
    c = placed
    job = c.submit("-C", "ib&big", "--wrap", 'echo "node=$SLURMD_NODENAME"')
    assert c.wait(job)["state"] == "COMPLETED" and "node=worker-node-2" in output(c, job)
    job = c.submit("--constraint=ib", "-N", 2, "--wrap", "true")
    assert c.wait(job)["state"] == "COMPLETED" and sorted(c.show(job)["nodes"]) == ["worker-node-1", "worker-node-2"]
    refused = c.cli("submit", "-C", "big", "-N", 2, "--wrap", "true", check=False)
    assert refused.returncode == 1 and refused.stderr.count("\n") == 1, refused
    assert "--constraint=big: 1 node(s) in partition 'main' have these features" in refused.stderr


BEGIN = 10
"""Seconds --begin defers the job: long enough to see it wait while each `minihpc show` costs a
second or two of a busy machine (with 3 s, three integration workers missed the wait)."""


def test_begin_defers_the_start(placed):
    """sbatch --begin=now+N: the job waits (Reason BeginTime) and starts no earlier."""
    c = placed
    submitted = time.time()
    job = c.submit("--begin", f"now+{BEGIN}", "--wrap", "true")
    assert c.show(job)["reason"] in ("None", "BeginTime")
    wait_until(lambda: c.show(job)["reason"] == "BeginTime", timeout=BEGIN, message="Reason BeginTime")
    done = c.wait(job)
    assert done["state"] == "COMPLETED" and done["started_at"] >= submitted + BEGIN - 0.01


@pytest.mark.parametrize("argv, line", [
    (["-p", "nope"], "partition 'nope' does not exist; partitions: main, debug, solo"),
    (["--gres", "gpu:1"], "--gres=gpu:1: no node in partition 'main' has GPUs (the most on one node: 0)"),
    (["--mem", "1024T"], "--mem=1024T is more than any node in partition 'main' has"),
    (["-p", "debug", "-N", "3"], "job needs 3 nodes; partition 'debug' has 2"),
])
def test_what_no_node_could_hold_is_refused_at_submit(placed, argv, line):
    """One line, exit non-zero, nothing recorded."""
    before = placed.queue()
    refused = placed.cli("submit", *argv, "--wrap", "true", check=False)
    assert refused.returncode != 0 and line in refused.stderr, refused.stderr
    assert placed.queue() == before


def test_a_no_requeue_job_ends_node_fail_for_good(placed):
    """sbatch --no-requeue: "never be requeued under any circumstances" -- a node failure
    ends it NODE_FAIL, the node comes back, the job stays; scontrol requeue is refused."""
    c = placed
    job = c.submit("--no-requeue", "-p", "solo", "--wrap", "sleep 60")
    wait_until(lambda: c.show(job)["state"] == "RUNNING", timeout=30, message="the job running")
    old_pid = LocalState(c.state_dir).pids()["master-node"]
    kill_node(c, "master-node")
    wait_until(lambda: c.show(job)["state"] == "NODE_FAIL", timeout=30, message="NODE_FAIL")
    wait_until(lambda: LocalState(c.state_dir).pids()["master-node"] != old_pid
               and {n["name"]: n["state"] for n in c.nodes()}["master-node"] == "idle",
               timeout=60, message="master-node back")
    # A job after it runs on that node: the scheduler has passed with the node up, and the
    # --no-requeue job was not sent back to take it.
    assert c.wait(c.submit("-p", "solo", "--wrap", "true"))["state"] == "COMPLETED"
    final = c.show(job)
    assert (final["state"], final["attempts"], final["requeues"]) == ("NODE_FAIL", 1, 0)
    refused = c.cli("scontrol", "requeue", job, check=False)
    assert refused.returncode != 0 and "submitted with --no-requeue" in refused.stderr


def test_a_node_range_runs_on_every_free_node_up_to_its_most_and_waits_below_its_least(placed):
    """sbatch -N 2-5 on three idle nodes runs on the three (SLURM_JOB_NUM_NODES=3), and show
    says so beside the range; -p debug -N 1-3 gets debug's two; a pending range shows as
    2-5 in the queue, and -N 4-5 is refused at submit like -N 4."""
    c = placed
    job = c.submit("-N", "2-5", "--wrap", 'echo "nodes=$SLURM_JOB_NUM_NODES list=$SLURM_JOB_NODELIST"')
    assert c.wait(job)["state"] == "COMPLETED"
    assert "nodes=3 list=master-node,worker-node-[1-2]" in output(c, job)
    shown = c.cli("show", job).stdout
    assert "NumNodes = 3" in shown and "NodeRange = 2-5" in shown, shown
    record = c.show(job)
    assert (record["nodes_requested"], record["max_nodes"], len(record["nodes"])) == (2, 5, 3)
    job = c.submit("-p", "debug", "-N", "1-3", "--wrap", 'echo "nodes=$SLURM_JOB_NUM_NODES"')
    assert c.wait(job)["state"] == "COMPLETED" and "nodes=2" in output(c, job)
    later = c.submit("-N", "2-5", "--begin", "now+1hour", "--wrap", "true")
    row = next(line for line in c.cli("queue").stdout.splitlines() if line.split()[0] == str(later))
    assert row.split()[5] == "2-5", row
    c.cli("cancel", later)
    refused = c.cli("submit", "-N", "4-5", "--wrap", "true", check=False)
    assert refused.returncode != 0 and "job needs 4 nodes; the cluster has 3" in refused.stderr, refused.stderr
