"""Simulated nodes (core.simulation): who they take, how long a share runs, their names."""

import pytest

from minihpc.core import simulation
from minihpc.core.models import Job, NodeStatus
from minihpc.core.partitions import Partitions, parse
from minihpc.core.requirements import refusal
from minihpc.core.scheduler import eligible


def node(name, simulated=False, cpus=8):
    return NodeStatus(name, name, alive=True, cpus=cpus, simulated=simulated)


def job(job_id=1, nodes=1, constraint=""):
    return Job(job_id, f"j{job_id}", "u", "s", "s", "x", nodes_requested=nodes, constraint=constraint)


NODES = [node("real-1"), node("real-2"), node("sim-0001", True), node("sim-0002", True), node("sim-0003", True)]


def test_a_real_job_never_goes_to_a_simulated_node_and_a_simulated_job_only_there():
    assert eligible(job(), NODES, Partitions()) == ["real-1", "real-2"]
    assert eligible(job(constraint="simulated"), NODES, Partitions()) == ["sim-0001", "sim-0002", "sim-0003"]


def test_a_simulated_job_meets_the_other_features_its_node_has():
    parts = parse("", features="sim-000[1-2]=big")
    assert eligible(job(constraint="simulated&big"), NODES, parts) == ["sim-0001", "sim-0002"]
    assert eligible(job(constraint="big"), NODES, parts) == []


def test_a_job_larger_than_the_nodes_of_its_kind_is_refused_whatever_the_others():
    assert refusal(job(nodes=3), 3, "", NODES, Partitions()) == "job needs 3 nodes; partition 'main' has 2"
    assert refusal(job(nodes=3, constraint="simulated"), 3, "", NODES, Partitions()) is None


@pytest.mark.parametrize("args, seconds, code", [
    ([], 1.5, 0),
    (["--sim-seconds", "0.25"], 0.25, 0),
    (["--sim-seconds=3", "--sim-exit=7"], 3.0, 7),
    (["--epochs", "2", "--sim-exit", "1"], 1.5, 1),
    (["--sim-seconds", "soon", "--sim-exit", "300"], 1.5, 0),
    (["--sim-seconds", "-1"], 1.5, 0),
])
def test_a_share_runs_as_long_and_ends_as_the_jobs_arguments_say(args, seconds, code):
    assert simulation.duration(args, 1.5) == seconds
    assert simulation.exit_code(args) == code


def test_simulated_nodes_are_named_to_sort_as_numbers():
    assert simulation.node_names(3) == ["sim-0001", "sim-0002", "sim-0003"]
    assert simulation.node_names(12000, "s")[-1] == "s12000"
    assert simulation.node_names(0) == []
