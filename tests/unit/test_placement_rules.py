"""Partitions from config, GPUs a node registers, and the one-line refusals of submit for
what no node could ever hold (man sbatch: -p/--partition, --gres, --mem, -c, -N)."""

import pytest

from minihpc.cli.display import nodes_table
from minihpc.core.config import load_settings, published_settings
from minihpc.core.errors import Conflict, UsageError
from minihpc.core.job_control import requeue
from minihpc.core.models import Job, JobState, NodeStatus
from minihpc.core.partitions import Partitions, parse
from minihpc.core.requirements import Needs, format_mem, refusal
from minihpc.machine.resources import gpu_count

G = 1 << 30


def node(name, gpus=0, mem=8 * G, cpus=4):
    return NodeStatus(name, name, alive=True, gpus=gpus, memory_bytes=mem, cpus=cpus)


NODES = [node("worker-node-1"), node("worker-node-2"), node("worker-node-3", gpus=2, mem=32 * G, cpus=8)]
PARTS = parse("debug=worker-node-[1-2];gpu=worker-node-3")


def needs(**kw) -> Needs:
    return Job(1, "j", "u", "s", "s", "x", **kw)


def test_partitions_parse_from_a_hostlist_setting():
    assert PARTS.groups == {"debug": ("worker-node-1", "worker-node-2"), "gpu": ("worker-node-3",)}
    assert PARTS.names == ["main", "debug", "gpu"]  # the implicit default, first
    assert PARTS.of_node("worker-node-3") == ["main", "gpu"]
    assert PARTS.effective("") == "main" and PARTS.effective("gpu") == "gpu"
    assert Partitions.from_record(PARTS.to_record()) == PARTS
    assert Partitions.from_record({}) == Partitions()  # a record from before partitions
    named = parse("main=worker-node-1", default="main")
    assert named.names == ["main"] and named.of_node("worker-node-2") == []


@pytest.mark.parametrize("spec, message", [
    ("debug", "expected NAME=HOSTLIST"),
    ("a b=n1", "expected NAME=HOSTLIST"),
    ("debug=n1;debug=n2", "given twice"),
    ("debug=", "has no nodes"),
    ("debug=n[1-", "invalid host list"),
])
def test_bad_partition_settings_are_refused_when_read(spec, message):
    with pytest.raises(UsageError, match=message):
        load_settings(env={"MINIHPC_PARTITIONS": spec})


def test_the_master_publishes_the_partitions():
    settings = load_settings(env={"MINIHPC_PARTITIONS": "debug=n[1-2]", "MINIHPC_DEFAULT_PARTITION": "all"})
    published = published_settings(settings)
    assert (published["partitions"], published["default_partition"]) == ("debug=n1,n2", "all")


def test_gpus_are_the_nvidia_device_files(tmp_path):
    for name in ("nvidia0", "nvidia1", "nvidiactl", "nvidia-uvm", "nvme0"):
        (tmp_path / name).touch()
    assert gpu_count(tmp_path) == 2
    assert gpu_count(tmp_path / "absent") == 0
    assert load_settings(env={"MINIHPC_NODE_GPUS": "2"}).node_gpus == 2
    assert load_settings(env={}).node_gpus == -1  # count the devices


@pytest.mark.parametrize("kw, nodes, partition, line", [
    ({}, 1, "x", "partition 'x' does not exist; partitions: main, debug, gpu"),
    ({"gpus": 2}, 1, "debug", "--gres=gpu:2: no node in partition 'debug' has GPUs (the most on one node: 0)"),
    ({"gpus": 3}, 1, "", "--gres=gpu:3: no node in partition 'main' has 3 GPUs (the most on one node: 2)"),
    ({"mem_bytes": 64 * G}, 1, "", "--mem=64G is more than any node in partition 'main' has (the most on one node: 32G)"),
    ({}, 3, "debug", "job needs 3 nodes; partition 'debug' has 2"),
    ({"gpus": 1}, 2, "", "job needs 2 nodes in partition 'main' with its --mem, --gres and CPUs; 1 of the 3 have them"),
    ({"tasks_per_node": 2, "cpus_per_task": 3}, 1, "debug",
     "--ntasks-per-node 2 x --cpus-per-task 3 needs 6 CPUs per node; the largest node in partition 'debug' has 4"),
])
def test_submit_refuses_what_no_node_could_hold(kw, nodes, partition, line):
    assert refusal(needs(**kw), nodes, partition, NODES, PARTS) == line


def test_submit_accepts_what_some_node_can_hold():
    assert refusal(needs(gpus=2, mem_bytes=16 * G, tasks_per_node=2, cpus_per_task=4), 1, "gpu", NODES, PARTS) is None
    assert refusal(needs(tasks_per_node=2, cpus_per_task=3), 2, "", NODES[:2], Partitions(), cpus_override=8) is None
    # No partitions configured: the lines do not name one.
    assert refusal(needs(gpus=1), 1, "", NODES[:2], Partitions()) == \
        "--gres=gpu:1: no node has GPUs (the most on one node: 0)"
    assert format_mem(1536 << 20) == "1536M"


def test_a_no_requeue_job_cannot_be_requeued_by_scontrol():
    job = Job(7, "j", "u", "s", "s", "x", state=JobState.NODE_FAIL, requeue=False)
    with pytest.raises(Conflict, match="^job 7 was submitted with --no-requeue; it cannot be requeued$"):
        requeue(job)
    job.requeue = True
    assert requeue(job).state is JobState.PENDING


def test_nodes_shows_partitions_with_the_default_starred_and_gres():
    table = nodes_table(NODES, 0.0, PARTS).splitlines()
    assert table[0].split()[:6] == ["NODE", "STATE", "PARTITION", "CPUS", "MEMORY", "GRES"]
    assert table[1].split()[:3:2] == ["worker-node-1", "main*,debug"] and "(null)" in table[1]
    assert table[3].split()[:3:2] == ["worker-node-3", "main*,gpu"] and "gpu:2" in table[3]
