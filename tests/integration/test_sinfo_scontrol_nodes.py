"""sinfo's layout and scontrol's node commands on the local cluster (master-node, worker-node-1
and -2, one default partition): ``sinfo`` by partition and state, ``-h -o``, ``-s``, ``-N``;
``scontrol show node|partition``; ``scontrol update NodeName=... State=DRAIN Reason=...`` keeps
the scheduler off the node until ``State=RESUME``."""

import subprocess
import sys

import pytest

from tests.integration.conftest import JOBS

pytestmark = pytest.mark.integration

ALL = "master-node,worker-node-[1-2]"


def sinfo(c, *args, check=True) -> subprocess.CompletedProcess:
    """``sinfo ARGS``: the alias under its own name (``minihpc nodes`` keeps its own table)."""
    proc = subprocess.run([sys.executable, "-m", "minihpc.cli.slurm", "sinfo", *map(str, args)], env=c.env,
                          capture_output=True, text=True, timeout=60)
    if check:
        assert proc.returncode == 0, f"sinfo {args} exited {proc.returncode}: {proc.stderr}"
    return proc


def fields(text: str) -> dict[str, str]:
    return dict(w.split("=", 1) for w in text.split() if "=" in w)


def test_sinfo_prints_slurms_layouts(idle_cluster):
    c = idle_cluster
    assert sinfo(c).stdout.splitlines() == [
        "PARTITION AVAIL  TIMELIMIT  NODES  STATE NODELIST",
        f"main*        up   infinite      3   idle {ALL}",
    ]
    assert sinfo(c, "-h", "-o", "%N %t").stdout == f"{ALL} idle\n"
    assert sinfo(c, "-s").stdout.splitlines() == [
        "PARTITION AVAIL  TIMELIMIT   NODES(A/I/O/T)  NODELIST",
        f"main*        up   infinite          0/3/0/3  {ALL}",
    ]
    assert [line.split() for line in sinfo(c, "-N").stdout.splitlines()] == [
        ["NODELIST", "NODES", "PARTITION", "STATE"], ["master-node", "1", "main*", "idle"],
        ["worker-node-1", "1", "main*", "idle"], ["worker-node-2", "1", "main*", "idle"]]
    # minihpc's own name keeps its table, and takes sinfo's -o
    assert c.cli("nodes").stdout.split()[:3] == ["NODE", "STATE", "PARTITION"]
    assert c.cli("nodes", "--noheader", "-o", "%D|%C").stdout.startswith("3|0/")
    bad = sinfo(c, "-o", "%N %z", check=False)
    assert bad.returncode == 1 and bad.stderr.count("\n") == 1 and "%z" in bad.stderr


def test_scontrol_shows_nodes_and_partitions(idle_cluster):
    c = idle_cluster
    out = c.cli("scontrol", "show", "node", "worker-node-1").stdout
    assert out.startswith("NodeName=worker-node-1\n   ") and out.endswith("\n\n")
    f = fields(out)
    assert (f["State"], f["CPUAlloc"], f["Partitions"]) == ("IDLE", "0", "main")
    assert int(f["CPUTot"]) > 0 and int(f["RealMemory"]) > 0 and "CoresPerSocket" not in f
    assert c.cli("scontrol", "-o", "show", "node").stdout.count("\n") == 3
    f = fields(c.cli("scontrol", "show", "partition").stdout)
    assert (f["PartitionName"], f["Default"], f["Nodes"], f["State"], f["TotalNodes"]) == ("main", "YES", ALL, "UP", "3")
    missing = c.cli("scontrol", "show", "node", "worker-node-9", check=False)
    assert missing.returncode == 1 and "Node worker-node-9 not found" in missing.stderr


def test_scontrol_update_drains_and_resumes_a_node(idle_cluster, tmp_path):
    c = idle_cluster
    refused = c.cli("scontrol", "update", "NodeName=worker-node-2", "State=DRAIN", check=False)
    assert refused.returncode == 1 and refused.stderr.count("\n") == 1
    assert "You must specify a reason when DOWNING or DRAINING a node" in refused.stderr
    unknown = c.cli("scontrol", "update", "NodeName=worker-node-9", "State=DRAIN", "Reason=x", check=False)
    assert unknown.returncode == 1 and "worker-node-9" in unknown.stderr and unknown.stderr.count("\n") == 1

    assert c.cli("scontrol", "update", "NodeName=worker-node-2", "State=DRAIN", "Reason=maintenance").stdout == ""
    try:
        assert sinfo(c, "-h").stdout.splitlines() == [
            "main*        up   infinite      1  drain worker-node-2",
            "main*        up   infinite      2   idle master-node,worker-node-1",
        ]
        f = fields(c.cli("scontrol", "show", "node", "worker-node-2").stdout)
        assert (f["State"], f["Reason"]) == ("IDLE+DRAIN", "maintenance")
        gate = tmp_path / "open"
        gate.touch()
        job = c.wait(c.submit("-N", 2, JOBS / "gate.py", gate))
        assert job["state"] == "COMPLETED" and sorted(job["nodes"]) == ["master-node", "worker-node-1"], job
    finally:
        c.cli("scontrol", "update", "nodename=worker-node-2", "state=resume")
    assert sinfo(c, "-h", "-t", "drain").stdout == "main*        up   infinite      0    n/a \n"
    assert sinfo(c, "-h", "-o", "%D %t").stdout == "3 idle\n"
