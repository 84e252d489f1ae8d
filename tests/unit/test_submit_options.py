"""sbatch's options as minihpc submit reads them, from the command line and header lines
(man sbatch: -n/--ntasks, --ntasks-per-node, -N/--nodes; "#SBATCH" lines before the first
command)."""

import subprocess
from pathlib import Path

import pytest

from minihpc.client.options import parse_header, tasks_per_node
from minihpc.cli.main import build_parser
from minihpc.core.errors import UsageError

ROOT = Path(__file__).resolve().parents[2]


def test_no_option_is_taken_from_a_prefix_of_another():
    """argparse's prefix matching took --ntasks for --ntasks-per-node; Slurm does not."""
    args = build_parser().parse_args(["submit", "-N", "2", "--ntasks", "4", "x.py"])
    assert (args.ntasks, args.ntasks_per_node) == (4, None)
    with pytest.raises(SystemExit) as exc:
        build_parser().parse_args(["submit", "--ntasks-per", "2", "x.py"])
    assert exc.value.code == 2


def test_ntasks_spreads_evenly_over_the_nodes():
    """-N 2 -n 4 starts 4 ranks (2 per node), not 8."""
    assert tasks_per_node(2, 4, None) == 2
    assert tasks_per_node(1, None, None) == 1
    assert tasks_per_node(3, None, 2) == 2
    assert tasks_per_node(1, 4, None) == 4
    with pytest.raises(UsageError, match="does not divide evenly over 2 nodes"):
        tasks_per_node(2, 3, None)
    with pytest.raises(UsageError, match="disagrees"):
        tasks_per_node(2, 4, 3)


def test_an_option_minihpc_cannot_honour_is_refused_and_advisory_ones_are_accepted():
    """issue 37: a job must not land where it did not ask to; mail and account change nothing."""
    header = parse_header("#!/bin/bash\n#SBATCH --nodes=2\n#SBATCH --mem=4G --mail-type=END\n#SBATCH --account a1\n"
                          "#SBATCH -A a2\n#SBATCH --exclusive\n#SBATCH --mail-user me@x\nsrun x\n")
    assert header.options.nodes == "2" and header.options.mem == "4G" and header.warnings == []
    for line in ("#SBATCH --qos high", "#SBATCH --reservation=r1", "#SBATCH --licenses=x:1"):
        with pytest.raises(UsageError, match=f"{line}: not an option minihpc supports"):
            parse_header(f"#!/bin/bash\n{line}\n")
    with pytest.raises(UsageError, match="#SBATCH: argument -N/--nodes: invalid --nodes 'two': expected a number"):
        parse_header("#SBATCH --nodes=two\n")  # a wrong value is an error
    with pytest.raises(UsageError, match="#MINIHPC --qos high: not an option"):
        parse_header("#MINIHPC --qos high\n")


def test_memory_per_cpu_and_gpu_options_become_what_each_node_needs():
    """man sbatch: --mem-per-cpu x the CPUs used on a node; --gpus-per-node, -G/--gpus (the
    job's total, the same on every node here), --gpus-per-task x tasks on a node."""
    from minihpc.client.options import node_gpus, node_memory

    assert node_memory(None, "1G", 4) == 4 << 30 and node_memory("2G", None, 4) == 2 << 30
    assert node_memory(None, None, 4) == 0
    with pytest.raises(UsageError, match="mutually exclusive"):
        node_memory("1G", "1G", 1)
    assert node_gpus(None, "gpu:2", None, None, 3, 1) == 2
    assert node_gpus(None, None, "4", None, 2, 1) == 2
    assert node_gpus(None, None, None, "1", 2, 4) == 4
    assert node_gpus("gpu:1", None, None, None, 2, 1) == 1
    with pytest.raises(UsageError, match="does not divide evenly"):
        node_gpus(None, None, "3", None, 2, 1)
    with pytest.raises(UsageError, match="give one of"):
        node_gpus("gpu:1", "1", None, None, 1, 1)


def test_flags_beat_header_lines_beat_defaults():
    import argparse

    from minihpc.client.options import request

    header = parse_header("#SBATCH -N 3\n#SBATCH --time=10 -J from-header\n#MINIHPC --priority high\n")
    given = argparse.Namespace(nodes=2, ntasks=None, ntasks_per_node=None, priority=None, time=None,
                               job_name=None, dependency=None, progress_timeout=None)
    req = request(given, header, script="x.py", text="", args=["a"])
    assert (req.nodes, req.priority.value, req.time_limit, req.name, req.args) == (2, "high", 600.0, "from-header", ["a"])
    req = request(argparse.Namespace(), parse_header(""), script="x.py", text="", args=[])
    assert (req.nodes, req.tasks_per_node, req.priority.value, req.time_limit, req.name) == (1, 1, "normal", None, None)


def test_make_submit_passes_only_what_the_user_set():
    """Without NODES/PRIORITY the script's own header lines decide."""
    plain = subprocess.run(["make", "-n", "submit", "JOB=jobs/hello.py", "COMPOSE=docker-compose"], cwd=ROOT,
                           capture_output=True, text=True).stdout
    assert "minihpc submit" in plain and " -N " not in plain and "--priority" not in plain
    both = subprocess.run(["make", "-n", "submit", "JOB=jobs/hello.py", "NODES=2", "PRIORITY=high",
                           "COMPOSE=docker-compose"], cwd=ROOT, capture_output=True, text=True).stdout
    assert "-N 2" in both and "--priority high" in both
