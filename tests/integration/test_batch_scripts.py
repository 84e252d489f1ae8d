"""Slurm batch scripts on the local cluster: a bash script with ``#SBATCH`` lines runs once on
the first node; ``srun`` inside it starts its tasks across the allocation; gang semantics hold
for a step (a failed task kills the others; cancel reaches every task); and a published-style
multi-node DDP sbatch script (``srun torchrun --rdzv-endpoint $head:29500``) runs unchanged."""

import re

import psutil
import pytest

from tests.conftest import wait_until
from tests.integration.conftest import JOBS

pytestmark = pytest.mark.integration

NODES = ["master-node", "worker-node-1", "worker-node-2"]
REPO_JOBS = JOBS.parents[2] / "jobs"


def _sleepers(seconds: str) -> list[psutil.Process]:
    found = []
    for p in psutil.process_iter(["cmdline"]):
        if p.info["cmdline"] and p.info["cmdline"][:2] == ["sleep", seconds]:
            found.append(p)
    return found


def _lines(cluster, job_id: int, pattern: str) -> list[re.Match]:
    text = cluster.cli("logs", job_id).stdout
    return [m for m in (re.search(pattern, line) for line in text.splitlines()) if m]


def test_bash_script_runs_once_and_srun_places_tasks_in_blocks(idle_cluster):
    """man sbatch: the batch script runs on the first allocated node (SLURM_PROCID 0) with
    SLURM_JOB_NODELIST, SLURM_NNODES, SLURM_TASKS_PER_NODE ("2(x3)"); man srun: tasks are
    numbered 0..n-1 in block distribution (-m block, the default) with SLURM_PROCID,
    SLURM_LOCALID, SLURM_NODEID, SLURM_STEP_ID; ``scontrol show hostnames`` lists the nodes."""
    job = idle_cluster.submit(JOBS / "srun_layout.sh")
    info = idle_cluster.wait(job)
    assert info["state"] == "COMPLETED", idle_cluster.cli("logs", job).stdout
    assert info["launch"] == "batch"
    batch = _lines(idle_cluster, job, r"batch: node=(\S+) first=(\S+) nodelist=(\S+) nnodes=(\d+) "
                                      r"tasks_per_node=(\S+) procid=(\d+)")
    assert [m.groups() for m in batch] == [("master-node", "master-node", "master-node,worker-node-[1-2]", "3",
                                            "2(x3)", "0")]
    tasks = _lines(idle_cluster, job, r"step=(\d+) task=(\d+)/(\d+) local=(\d+) nodeid=(\d+) node=(\S+)")
    got = sorted((int(m[1]), int(m[2]), int(m[3]), int(m[4]), int(m[5]), m[6]) for m in tasks)
    step0 = [(0, t, 6, t % 2, t // 2, NODES[t // 2]) for t in range(6)]
    # -N 2 -n 3: block distribution puts tasks 0,1 on the first node and 2 on the second.
    step1 = [(1, 0, 3, 0, 0, NODES[0]), (1, 1, 3, 1, 0, NODES[0]), (1, 2, 3, 0, 1, NODES[1])]
    assert got == step0 + step1
    assert _lines(idle_cluster, job, r"^batch: done$")


def test_a_failed_task_fails_the_step_and_the_job(idle_cluster):
    """man srun: srun's exit status is a failed task's; -K/--kill-on-bad-exit semantics: the
    step's other tasks are killed (minihpc always gangs a step). man sbatch: the job's exit
    code is the batch script's, here srun's, its last command."""
    job = idle_cluster.submit(JOBS / "srun_fails.sh")
    info = idle_cluster.wait(job, timeout=60)
    assert info["state"] == "FAILED" and info["exit_code"] == 3, info
    assert _lines(idle_cluster, job, r"srun: error: worker-node-1: task 1: Exited with exit code 3")
    wait_until(lambda: not _sleepers("317"), timeout=15, message="the step's other tasks to be killed")
    wait_until(idle_cluster.idle, timeout=30, message="every node free")


def test_cancel_reaches_every_task_of_a_step(idle_cluster, tmp_path):
    """man scancel: cancelling a job signals its batch script and all its steps' tasks."""
    workdir = tmp_path / "work"
    workdir.mkdir()
    job = idle_cluster.submit("-D", workdir, JOBS / "srun_sleeps.sh")
    wait_until(lambda: len(list(workdir.glob("started-*"))) == 3, timeout=60, message="three tasks started")
    assert len(_sleepers("319")) == 3
    idle_cluster.cli("cancel", job)
    wait_until(lambda: not _sleepers("319"), timeout=20, message="every task killed by the cancel")
    assert idle_cluster.show(job)["state"] == "CANCELLED"


def test_wrap_runs_a_command_as_a_batch_job(idle_cluster):
    """man sbatch, --wrap: the command is wrapped in a simple sh script and submitted."""
    job = idle_cluster.submit("-N", 3, "--wrap", "srun printenv SLURMD_NODENAME")
    info = idle_cluster.wait(job)
    assert info["state"] == "COMPLETED" and info["name"] == "wrap"
    assert sorted(m[0] for m in _lines(idle_cluster, job, r"^(master-node|worker-node-\d)$")) == NODES


def test_published_ddp_sbatch_script_runs_unchanged(idle_cluster):
    """A multi-node DDP sbatch script as cluster docs publish it: ``srun torchrun --nnodes
    $SLURM_NNODES --rdzv-backend c10d --rdzv-endpoint $head:29500 hello.py`` (man srun: one
    task per node with --ntasks-per-node=1); each rank's all-reduce is checked by hello.py."""
    job = idle_cluster.submit("-D", REPO_JOBS.parent, REPO_JOBS / "ddp_sbatch.sh")
    info = idle_cluster.wait(job, timeout=120)
    assert info["state"] == "COMPLETED", idle_cluster.cli("logs", job).stdout
    ranks = _lines(idle_cluster, job, r"hello from rank (\d) of 2 on node (\S+) .*all-reduce sum 3, expected 3")
    # c10d's rendezvous numbers the nodes in the order they arrive: ranks 0 and 1, one per node.
    assert sorted(m[1] for m in ranks) == ["0", "1"] and sorted(m[2] for m in ranks) == NODES[:2]


def test_run_allocates_streams_and_exits_with_the_tasks_code(idle_cluster):
    """man srun: outside an allocation srun "will first create a resource allocation in which
    to run the parallel job"; its output is the tasks'; its exit status is a failed task's."""
    ok = idle_cluster.cli("run", "-N", 3, "printenv", "SLURMD_NODENAME", timeout=120)
    assert sorted(ok.stdout.split()) == NODES and ok.returncode == 0
    assert "queued and waiting for resources" in ok.stderr
    failed = idle_cluster.cli("run", "-N", 2, "bash", "-c", 'echo "task $SLURM_PROCID"; exit $((SLURM_PROCID + 4))',
                              check=False, timeout=120)
    assert failed.returncode in (4, 5) and "task 0" in failed.stdout, (failed.stdout, failed.stderr)
