"""``scontrol show node|partition`` text and ``scontrol update NodeName=`` words, as pure
functions (core.node_formats)."""

import pytest

from minihpc.core.errors import UsageError
from minihpc.core.models import NodeStatus
from minihpc.core.node_formats import (
    REASON_REQUIRED,
    NodeUpdate,
    is_node_update,
    node_lines,
    parse_node_update,
    partition_lines,
    reasons,
)
from minihpc.core.partitions import Partitions, parse

GIB = 1 << 30
T = 1_700_000_000.0


def node(name, alive=True, job=None, drain=None, cpus=4, gpus=0):
    return NodeStatus(name, "10.0.0.5", alive, job=job, drain_reason=drain, cpus=cpus, memory_bytes=16 * GIB,
                      gpus=gpus, last_heartbeat=T)


def stamp(ts):
    return f"t{ts:.0f}"


def test_show_node_prints_what_minihpc_knows_in_slurms_words():
    assert node_lines(node("worker-node-1", gpus=2), Partitions(), None, stamp) == [
        "NodeName=worker-node-1",
        "CPUAlloc=0 CPUTot=4",
        "AvailableFeatures=(null)",
        "ActiveFeatures=(null)",
        "Gres=gpu:2",
        "NodeAddr=10.0.0.5",
        "RealMemory=16384",
        "State=IDLE",
        "Partitions=main",
    ]


def test_show_node_of_a_busy_drained_node_with_its_reason():
    busy = node("worker-node-2", job=9, drain="bad fan")
    [why] = reasons([busy], [{"at": T + 5, "kind": "drained", "node": "worker-node-2"}])
    lines = node_lines(busy, parse("gpu=worker-node-2"), why, stamp)
    assert "CPUAlloc=4 CPUTot=4" in lines and "State=ALLOCATED+DRAIN" in lines
    assert "Partitions=main,gpu" in lines  # main, the implicit default, holds every node
    assert lines[-1] == f"Reason=bad fan [Unknown@t{T + 5:.0f}]"
    down = node("worker-node-3", alive=False, job=9)
    [why] = reasons([down], [])
    lines = node_lines(down, Partitions(), why, stamp)
    assert "State=DOWN+NOT_RESPONDING" in lines and "CPUAlloc=0 CPUTot=4" in lines
    assert lines[-1] == f"Reason=Not responding [Unknown@t{T:.0f}]"
    assert not any(key in " ".join(lines) for key in ("Arch=", "CoresPerSocket=", "Sockets=", "CPULoad="))


def test_show_node_names_its_features():
    if "features" not in Partitions.__dataclass_fields__:
        pytest.skip("partitions carry no node features in this tree")
    lines = node_lines(node("worker-node-1"), parse("", "main", "worker-node-1=ib"), None, stamp)
    assert "AvailableFeatures=ib" in lines and "ActiveFeatures=ib" in lines


def test_show_partition():
    nodes = [node("master-node"), node("worker-node-1", cpus=8), node("worker-node-2")]
    assert partition_lines("main", Partitions(), nodes) == [
        "PartitionName=main",
        "AllowGroups=ALL",
        "Default=YES",
        "MaxNodes=UNLIMITED MaxTime=UNLIMITED",
        "Nodes=master-node,worker-node-[1-2]",
        "RootOnly=NO OverSubscribe=EXCLUSIVE",
        "State=UP TotalCPUs=16 TotalNodes=3",
    ]
    parts = parse("debug=worker-node-[1-2]")
    lines = partition_lines("debug", parts, nodes)
    assert "Default=NO" in lines and "Nodes=worker-node-[1-2]" in lines and lines[-1].endswith("TotalCPUs=12 TotalNodes=2")
    assert "Nodes=(null)" in partition_lines("main", parse("main=spare-1;debug=worker-node-1"), nodes)  # none up


def test_update_words():
    assert is_node_update(["nodename=a1", "State=drain"]) and not is_node_update(["JobId=3", "Priority=high"])
    assert parse_node_update(["NodeName=worker-node-[1-2]", "State=DRAIN", "Reason=disk check"]) == NodeUpdate(
        ["worker-node-1", "worker-node-2"], "DRAIN", "disk check")
    assert parse_node_update(["nodename=a1", "state=resume"]) == NodeUpdate(["a1"], "RESUME")
    assert parse_node_update(["NodeName=a1", "State=Undrain"]).state == "UNDRAIN"


@pytest.mark.parametrize("words, message", [
    (["NodeName=a1", "State=DRAIN"], REASON_REQUIRED),
    (["NodeName=a1", "State=DRAIN", "Reason="], REASON_REQUIRED),
    (["NodeName=a1", "State=DOWN", "Reason=x"], "State=DOWN is not supported by minihpc"),
    (["NodeName=a1", "State=SLEEPY"], "invalid node state 'SLEEPY'"),
    (["NodeName=a1"], "no State="),
    (["NodeName=a1", "State=DRAIN", "Weight=5"], "Update of this parameter is not supported: Weight=5"),
    (["NodeName=a1", "State=DRAIN", "state=RESUME"], "given twice"),
    (["NodeName=", "State=RESUME"], "no node in NodeName="),
])
def test_update_refusals_are_one_line(words, message):
    with pytest.raises(UsageError) as exc:
        parse_node_update(words)
    assert message in str(exc.value) and "\n" not in str(exc.value)
