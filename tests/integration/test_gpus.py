"""GPUs on a real local cluster, without a GPU: the machine is said to have six
(MINIHPC_NODE_GPU_DEVICES=0-5), which local mode splits between its three nodes. Each rank of a
job prints what it was given; the variables are what a GPU job reads (CUDA reads
CUDA_VISIBLE_DEVICES when it starts), and whether CUDA was touched before the rank was forked
is what torch itself reports (``torch.cuda._is_in_bad_fork``): a rank forked from a process that
had touched CUDA dies on its first CUDA call."""

import re

import pytest
import torch

from tests.integration.conftest import start_cluster, stop_cluster

pytestmark = pytest.mark.integration

SCRIPT = """\
import os, torch
env = {k: os.environ.get(k) for k in ("CUDA_VISIBLE_DEVICES", "SLURM_JOB_GPUS", "SLURM_GPUS_ON_NODE",
                                      "SLURM_STEP_GPUS", "GPU_DEVICE_ORDINAL")}
line = (f"rank={os.environ['RANK']} local={os.environ['LOCAL_RANK']} node={os.environ['SLURMD_NODENAME']} "
        f"env={env!r} bad_fork={torch.cuda._is_in_bad_fork()}\\n")
os.write(1, line.encode())  # one write: print() under PYTHONUNBUFFERED=1 writes the newline apart,
                            # and two ranks' lines ran together ("bad_fork=Falserank=1 ...")
"""
LINE = re.compile(r"rank=(\d+) local=(\d+) node=(\S+) env=(\{.*\}) bad_fork=(\w+)")
CUDA_BUILD = hasattr(torch._C, "_cuda_getDeviceCount")
"""A torch built with CUDA (PyPI's is): only there can a fork be poisoned, and torch tell."""


@pytest.fixture(scope="module")
def gpu_cluster(tmp_path_factory):
    c = start_cluster(tmp_path_factory.mktemp("gpus"), MINIHPC_NODE_GPU_DEVICES="0-5")
    yield c
    stop_cluster(c)


@pytest.fixture(scope="module")
def script(tmp_path_factory):
    path = tmp_path_factory.mktemp("gpu-job") / "gpu_env.py"
    path.write_text(SCRIPT)
    return path


def ranks(c, job) -> dict[int, tuple[str, dict, str]]:
    """rank -> (node, its GPU variables, whether its fork was poisoned)."""
    assert c.wait(job)["state"] == "COMPLETED", c.cli("logs", job).stdout
    out = c.cli("logs", job).stdout
    return {int(m[1]): (m[3], eval(m[4]), m[5]) for m in LINE.finditer(out)}  # noqa: S307 - our own repr


def test_local_nodes_split_the_machines_gpus(gpu_cluster):
    devices = {n["name"]: (n["gpus"], n["gpu_devices"]) for n in gpu_cluster.nodes()}
    assert devices == {"master-node": (2, [0, 1]), "worker-node-1": (2, [2, 3]), "worker-node-2": (2, [4, 5])}


def test_each_rank_sees_only_its_jobs_gpus_and_cuda_was_untouched_before_the_fork(gpu_cluster, script):
    """Two nodes, two tasks each, one GPU per node: every rank of a node sees that node's first
    GPU, warm (ranks forked from torchrun's agent) and cold (--cold) alike."""
    c = gpu_cluster
    for extra in ((), ("--cold",)):
        job = c.submit("-N", 2, "--ntasks-per-node", 2, "--gres=gpu:1", *extra, script)
        got = ranks(c, job)
        assert sorted(got) == [0, 1, 2, 3], got
        first = {"master-node": "0", "worker-node-1": "2", "worker-node-2": "4"}
        for node, env, bad_fork in got.values():
            mine = first[node]
            assert env == {"CUDA_VISIBLE_DEVICES": mine, "SLURM_JOB_GPUS": mine, "SLURM_GPUS_ON_NODE": "1",
                           "SLURM_STEP_GPUS": mine, "GPU_DEVICE_ORDINAL": mine}, (extra, node, env)
            if CUDA_BUILD:
                assert bad_fork == "False", f"{extra}: a rank on {node} was forked after CUDA was touched"


def test_gpus_per_task_gives_each_task_its_own_and_a_job_without_gpus_sees_none(gpu_cluster, script):
    c = gpu_cluster
    job = c.submit("-N", 1, "--ntasks-per-node", 2, "--gpus-per-task=1", "-w", "worker-node-2", script)
    got = ranks(c, job)
    assert {r: (n, e["CUDA_VISIBLE_DEVICES"], e["SLURM_JOB_GPUS"]) for r, (n, e, _) in got.items()} == \
        {0: ("worker-node-2", "4", "4,5"), 1: ("worker-node-2", "5", "4,5")}
    job = c.submit("-N", 1, script)  # one task: forked straight from the warm launcher
    (node, env, bad_fork), = ranks(c, job).values()
    assert env["CUDA_VISIBLE_DEVICES"] == "" and env["SLURM_JOB_GPUS"] is None, env
    if CUDA_BUILD:
        assert bad_fork == "False"


def test_srun_steps_see_each_nodes_own_gpus_and_more_than_the_job_holds_is_refused(gpu_cluster):
    c = gpu_cluster
    job = c.submit("-N", 2, "--gres=gpu:2", "--wrap",
                   "srun -l -N 2 -n 4 --gpus-per-task=1 bash -c 'echo gpus=$CUDA_VISIBLE_DEVICES on=$SLURMD_NODENAME'"
                   " && srun -n 1 --gres=gpu:3 true")
    state = c.wait(job)
    out = c.cli("logs", job).stdout
    lines = sorted(set(re.findall(r"(\d+): gpus=(\S*) on=(\S+)", out)))
    nodes = state["nodes"]
    devices = {"master-node": ["0", "1"], "worker-node-1": ["2", "3"], "worker-node-2": ["4", "5"]}
    assert lines == [("0", devices[nodes[0]][0], nodes[0]), ("1", devices[nodes[0]][1], nodes[0]),
                     ("2", devices[nodes[1]][0], nodes[1]), ("3", devices[nodes[1]][1], nodes[1])], out
    assert "srun: error: --gres: the job holds 2 GPU(s) on each node; a step cannot ask for 3" in out
    assert state["state"] == "FAILED"


def test_more_gpus_than_any_node_has_is_refused_at_submit(gpu_cluster, script):
    out = gpu_cluster.cli("submit", "--gres=gpu:3", script, check=False)
    assert out.returncode != 0 and "gpu" in out.stderr.lower() and len(out.stderr.strip().splitlines()) == 1, out.stderr
