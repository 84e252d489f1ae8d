"""How a script is started (core.batch), where srun puts tasks (core.steps), the local-mode
torchrun's name mapping (job.localnames) and srun's options (job.srun)."""

import pytest

from minihpc.core.batch import BATCH, TORCHRUN, batch_argv, launch_mode, tasks_per_node_text, wrap_script
from minihpc.core.errors import UsageError
from minihpc.core.steps import TaskEnd, layout, step_exit, task_env
from minihpc.job import srun
from minihpc.job.localnames import rewrite


@pytest.mark.parametrize("text, name, mode", [
    ("#!/bin/bash\n#SBATCH -N 2\nsrun hostname\n", "job.sh", BATCH),
    ("#!/usr/bin/env bash\necho hi\n", "job", BATCH),
    ("#!/bin/sh\necho hi\n", "x.py", BATCH),
    ("#!/usr/bin/env python3\nprint(1)\n", "train.py", TORCHRUN),
    ("#!/usr/bin/python3.11 -u\nprint(1)\n", "train", TORCHRUN),
    ('"""doc"""\nimport torch\n', "train.py", TORCHRUN),
    ("import torch\n", "-", TORCHRUN),
])
def test_the_script_decides_how_it_runs(text, name, mode):
    """A non-Python #! line is a Slurm batch script; a Python script runs through torchrun."""
    assert launch_mode(text, name) == mode


def test_launch_flag_wins_and_a_shell_script_needs_a_shebang():
    """man sbatch: "The batch script ... must begin with #!" -- sbatch refuses one without."""
    assert launch_mode("#!/usr/bin/env python3\n", "t.py", BATCH) == BATCH
    assert launch_mode("#!/bin/bash\n", "t.sh", TORCHRUN) == TORCHRUN
    with pytest.raises(UsageError, match="first line must start with #!"):
        launch_mode("srun hostname\n", "job.sh")
    with pytest.raises(UsageError, match="has no #! line"):
        launch_mode("print(1)\n", "t.py", BATCH)
    with pytest.raises(UsageError, match="expected one of"):
        launch_mode("#!/bin/bash\n", "t.sh", "mpirun")


def test_wrap_is_a_sh_script_and_batch_argv_uses_the_shebang():
    """man sbatch, --wrap: the command string is wrapped in a simple "sh" shell script."""
    text = wrap_script("srun hostname")
    assert text.startswith("#!/bin/sh\n") and text.rstrip().endswith("srun hostname")
    with pytest.raises(UsageError):
        wrap_script("  ")
    assert batch_argv("#!/bin/bash -l\necho\n", "/spool/job.sh", ["a"]) == ["/bin/bash", "-l", "/spool/job.sh", "a"]


def test_tasks_per_node_text_is_slurms_form():
    """man sbatch, SLURM_TASKS_PER_NODE: "2(x3),1" for 2 tasks on 3 nodes then 1 on the next."""
    assert tasks_per_node_text([2, 2, 2]) == "2(x3)"
    assert tasks_per_node_text([2, 2, 1]) == "2(x2),1"
    assert tasks_per_node_text([1]) == "1"


def test_srun_places_tasks_in_blocks():
    """man srun, -m block (the default): consecutive tasks share a node; -n 3 -N 2 is 2 + 1."""
    nodes = ["n1", "n2", "n3"]
    assert layout(nodes, 2).tasks == [[0, 1], [2, 3], [4, 5]]
    lay = layout(nodes, 2, nodes=2, ntasks=3)
    assert (lay.nodes, lay.tasks) == (["n1", "n2"], [[0, 1], [2]])
    assert layout(nodes, 1, ntasks=1).nodes == ["n1"]  # -n 1 without -N: one node
    assert layout(nodes, 1, per_node=3).tasks == [[0, 1, 2], [3, 4, 5], [6, 7, 8]]
    with pytest.raises(UsageError, match="only 3 nodes allocated"):
        layout(nodes, 1, nodes=4)
    with pytest.raises(UsageError, match="cannot run 1 task on 2 nodes"):
        layout(nodes, 1, nodes=2, ntasks=1)
    with pytest.raises(UsageError, match="at least 1"):
        layout(nodes, 1, ntasks=0)


def test_task_env_numbers_tasks_like_srun():
    """man srun, OUTPUT ENVIRONMENT VARIABLES: SLURM_PROCID (global), SLURM_LOCALID (on the
    node), SLURM_NODEID (node of the step), SLURM_NTASKS, SLURM_STEP_ID, SLURMD_NODENAME."""
    lay = layout(["n1", "n2"], 1, ntasks=3)
    env = task_env(lay, 4, 1, 2)
    assert {k: env[k] for k in ("SLURM_PROCID", "SLURM_LOCALID", "SLURM_NODEID", "SLURM_NTASKS", "SLURM_STEP_ID",
                                "SLURMD_NODENAME", "SLURM_STEP_NODELIST", "SLURM_TASKS_PER_NODE")} == {
        "SLURM_PROCID": "2", "SLURM_LOCALID": "0", "SLURM_NODEID": "1", "SLURM_NTASKS": "3", "SLURM_STEP_ID": "4",
        "SLURMD_NODENAME": "n2", "SLURM_STEP_NODELIST": "n[1-2]", "SLURM_TASKS_PER_NODE": "2,1"}


def test_the_step_exits_with_the_first_failure():
    """man srun: srun exits with a failed task's code; the tasks killed after it say nothing."""
    ends = [TaskEnd(0, "n1", 0), TaskEnd(1, "n2", 3), TaskEnd(2, "n2", 143, "SIGTERM")]
    assert step_exit(ends) == 3
    assert step_exit([TaskEnd(0, "n1", 0)]) == 0
    assert ends[1].describe() == "srun: error: n2: task 1: Exited with exit code 3"
    assert TaskEnd.from_dict(ends[2].to_dict()) == ends[2]


def test_local_mode_torchrun_maps_node_names_to_loopback():
    """Local mode's nodes are processes here: --rdzv-endpoint $head:29500 must reach them."""
    nodes = {"master-node", "worker-node-1"}
    assert rewrite(["--rdzv-endpoint", "master-node:29500", "train.py"], nodes) == \
        ["--rdzv-endpoint", "127.0.0.1:29500", "train.py"]
    assert rewrite(["--master_addr=worker-node-1", "--rdzv_endpoint=elsewhere:1"], nodes) == \
        ["--master_addr=127.0.0.1", "--rdzv_endpoint=elsewhere:1"]


def test_local_mode_torchrun_takes_the_jobs_own_port_for_a_node():
    """Two local jobs whose scripts both say $head:29500 share this machine's ports: each gets
    its own; a port that goes with another host, or a script's own args, stay."""
    nodes = {"master-node", "worker-node-1"}
    assert rewrite(["--standalone", "--rdzv-endpoint", "master-node:29500", "t.py", "--master-port", "1"],
                   nodes, "40001") == \
        ["--standalone", "--rdzv-endpoint", "127.0.0.1:40001", "t.py", "--master-port", "1"]
    assert rewrite(["-m", "pkg.train", "--rdzv-endpoint", "master-node:29500"], nodes, "40001") == \
        ["-m", "pkg.train", "--rdzv-endpoint", "master-node:29500"]
    assert rewrite(["--master-addr=master-node", "--master_port=29500", "t.py"], nodes, "40001") == \
        ["--master-addr=127.0.0.1", "--master_port=40001", "t.py"]
    assert rewrite(["--master-addr", "10.0.0.9", "--master-port", "29500", "t.py"], nodes, "40001") == \
        ["--master-addr", "10.0.0.9", "--master-port", "29500", "t.py"]
    assert rewrite(["--rdzv-endpoint=elsewhere:29500", "t.py"], nodes, "40001") == \
        ["--rdzv-endpoint=elsewhere:29500", "t.py"]
    # No port given: c10d's 29400 and torchrun's 29500 are shared defaults too.
    assert rewrite(["--rdzv-endpoint", "master-node", "t.py"], nodes, "40001") == \
        ["--rdzv-endpoint", "127.0.0.1:40001", "t.py"]
    assert rewrite(["--master_addr", "master-node", "t.py"], nodes, "40001") == \
        ["--master_addr", "127.0.0.1", "--master-port", "40001", "t.py"]
    # Flags without a value and short options with theirs attached are one word each.
    assert rewrite(["--virtual-local-rank", "-t3", "--rdzv-endpoint", "master-node:29500", "t.py"], nodes, "40001") == \
        ["--virtual-local-rank", "-t3", "--rdzv-endpoint", "127.0.0.1:40001", "t.py"]


def test_srun_options_no_prefix_matching_and_ignored_ones_warn():
    """man srun: -N, -n, --ntasks-per-node place tasks; -l labels; --mpi... has no meaning here."""
    args = srun.parser().parse_args(["-N", "2", "--mpi=pmix", "-l", "python", "t.py", "-n", "5"])
    assert (args.nodes, args.ntasks, args.label, args.command) == (2, None, True, ["python", "t.py", "-n", "5"])
    assert srun.warnings(args) == ["srun: warning: --mpi has no effect in minihpc; ignored"]
    with pytest.raises(SystemExit):
        srun.parser().parse_args(["--ntasks-per", "2", "x"])


def test_srun_takes_slurms_option_syntax_and_names_signals_as_slurm_does():
    """man srun: -K/--kill-on-bad-exit[=0|1] takes an attached value only (``-K1``), -W/--wait
    takes seconds; a task ended by a signal is reported in strsignal()'s words (``Killed``)."""
    for argv in (["-K1", "-n", "1", "true"], ["--kill-on-bad-exit=1", "-n", "1", "true"], ["-W", "5", "-n", "1", "true"],
                 ["-K", "-n", "1", "true"]):
        args = srun.parser().parse_args(srun.normalize(argv))
        assert (args.command, args.ntasks) == (["true"], 1), argv
    args = srun.parser().parse_args(srun.normalize(["python", "t.py", "-K1"]))
    assert args.command == ["python", "t.py", "-K1"]  # the command's own arguments are its own
    assert TaskEnd(1, "n2", 137, "SIGKILL").describe() == "srun: error: n2: task 1: Killed"
    assert TaskEnd(0, "n1", 143, "SIGTERM").describe() == "srun: error: n1: task 0: Terminated"


def test_a_step_of_millions_of_tasks_is_refused_before_any_task_id_is_made():
    from minihpc.core.steps import MAX_TASKS_PER_NODE

    with pytest.raises(UsageError, match=r"15000000 tasks on 3 nodes is 5000000 on a node; a step runs at most 512"):
        layout(["a", "b", "c"], 1, ntasks=15_000_000)
    assert layout(["a", "b"], 1, ntasks=2 * MAX_TASKS_PER_NODE).ntasks == 1024
    with pytest.raises(UsageError, match="at most 512"):
        layout(["a", "b"], 1, ntasks=2 * MAX_TASKS_PER_NODE + 1)
