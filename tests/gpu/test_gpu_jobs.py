"""GPU jobs on a real local cluster (issue 34): NCCL DDP on one node's GPUs, two ranks sharing a
GPU over gloo, the job helpers under NCCL, the MNIST job on CUDA, and a job without ``--gres``
that sees no GPU. Skipped where torch finds no CUDA device; passes with a single GPU.

Local nodes split the machine's GPUs between them (minihpc.core.gpus.split), so the one-node
jobs here take every GPU of the node that has the most (on a one-GPU machine: that GPU).
"""

import json
import subprocess
import sys

import pytest
import torch

from tests.gpu.conftest import JOBS, PREPARE, TRAIN

# Each test is collected and skipped (pytest then exits 0, where a module skipped whole exits 5).
pytestmark = pytest.mark.skipif(not torch.cuda.is_available(),
                                reason="no CUDA device: the GPU suite needs one (make test-gpu on a GPU machine)")

WAIT = 240
"""Seconds a job may take: CUDA and NCCL start in a few seconds each, on a busy machine more."""


def completed(cluster, job_id: int) -> dict:
    job = cluster.wait(job_id, timeout=WAIT)
    assert job["state"] == "COMPLETED", (job, cluster.cli("logs", job_id, check=False).stdout[-3000:])
    return job


def test_nccl_ddp_on_every_gpu_of_a_node(idle_cluster, gpu_node, tmp_path):
    c, n = idle_cluster, gpu_node.gpus
    report = tmp_path / "ranks.json"
    job_id = c.submit("-N", 1, "--ntasks-per-node", n, f"--gres=gpu:{n}", JOBS / "gpu_ddp.py", "nccl", report)
    completed(c, job_id)
    ranks = json.loads(report.read_text())
    assert [r["rank"] for r in ranks] == list(range(n))
    for r in ranks:
        assert r["backend"] == "nccl" and r["sum"] == n * (n + 1) / 2, r
        assert len(r["visible"].split(",")) == n and r["device_count"] == n, r
        assert r["job_gpus"] == r["visible"] and r["gpus_on_node"] == str(n), r
        assert r["current_device"] == r["local_rank"] and r["tensor_device"] == f"cuda:{r['local_rank']}", r
        assert r["grad"] == ranks[0]["grad"], "DDP left the ranks with different gradients"
    assert len({r["uuid"] for r in ranks}) == n, "two NCCL ranks on one GPU"
    logs = c.cli("logs", job_id).stdout
    for r in ranks:
        assert f"rank {r['rank']}/{n}: CUDA_VISIBLE_DEVICES='{r['visible']}' current_device={r['local_rank']}" in logs


def test_two_tasks_share_one_gpu_over_gloo(idle_cluster, gpu_node, tmp_path):
    c = idle_cluster
    report = tmp_path / "ranks.json"
    job_id = c.submit("-N", 1, "--ntasks-per-node", 2, "--gres=gpu:1", JOBS / "gpu_ddp.py", "gloo", report)
    completed(c, job_id)
    ranks = json.loads(report.read_text())
    assert [r["sum"] for r in ranks] == [3.0, 3.0]
    assert {r["backend"] for r in ranks} == {"gloo"}
    assert {r["tensor_device"] for r in ranks} == {"cuda:0"} and {r["device_count"] for r in ranks} == {1}
    assert ranks[0]["visible"] == ranks[1]["visible"] and len(ranks[0]["visible"].split(",")) == 1
    assert ranks[0]["uuid"] == ranks[1]["uuid"] and ranks[0]["grad"] == ranks[1]["grad"]


def test_checkpoint_preempt_balance_progress_and_profiler_under_nccl(idle_cluster, gpu_node, tmp_path):
    c, n = idle_cluster, gpu_node.gpus
    job_id = c.submit("-N", 1, "--ntasks-per-node", n, f"--gres=gpu:{n}", JOBS / "helpers_nccl.py", tmp_path)
    completed(c, job_id)
    ranks = json.loads((tmp_path / "report.json").read_text())
    assert len(ranks) == n
    for r in ranks:
        assert r["backend"] == "nccl"
        assert (r["agreed_before"], r["agreed_after"]) == (False, True), r  # SIGTERM reached rank 0 only
        assert r["gathered"] == [float(i) for i in range(n)]
        assert r["loaded_device"] == f"cuda:{r['rank']}" and r["loaded_equal"], r
        assert set(r["lap"]) >= {f"{p}_seconds" for p in ("data", "forward", "backward", "allreduce", "optimizer")}
        assert r["profiled_cuda"] and r["trace_has_kernels"], r
    zero = ranks[0]
    assert zero["saved_cuda_states"] == n
    assert zero["draw"] == zero["expected_draw"]  # the CUDA generator came back from the checkpoint


def test_the_mnist_job_trains_and_resumes_on_cuda(idle_cluster, gpu_node, tmp_path):
    c, n = idle_cluster, gpu_node.gpus
    subprocess.run([sys.executable, str(PREPARE), "--root", str(c.state_dir / "shared" / "data"), "--source", "digits"],
                   check=True, capture_output=True)
    args = ["--device", "cuda", "--checkpoint-dir", tmp_path / "ckpt", "--loss-log", tmp_path / "loss.txt",
            "--checkpoint-every", 10]
    first = c.submit("-N", 1, "--ntasks-per-node", n, f"--gres=gpu:{n}", TRAIN, "--epochs", 1, *args)
    completed(c, first)
    assert "training on cuda:0 over nccl" in c.cli("logs", first).stdout
    steps = [int(line.split()[1]) for line in (tmp_path / "loss.txt").read_text().splitlines()]
    assert steps and steps == list(range(1, len(steps) + 1))

    again = c.submit("-N", 1, "--ntasks-per-node", n, f"--gres=gpu:{n}", TRAIN, "--epochs", 2, *args)
    completed(c, again)
    logs = c.cli("logs", again).stdout
    assert f"resumed from {tmp_path / 'ckpt'}" in logs and f"at step {len(steps)} of {2 * len(steps)}" in logs
    lines = (tmp_path / "loss.txt").read_text().splitlines()
    losses = [float(line.split()[2]) for line in lines]
    assert [int(line.split()[1]) for line in lines] == list(range(1, 2 * len(steps) + 1))
    assert all(loss == loss for loss in losses) and losses[-1] < losses[0]  # finite, and it learned


def test_a_job_without_gres_sees_no_gpu(idle_cluster, gpu_node, tmp_path):
    c = idle_cluster
    seen = tmp_path / "seen.json"
    completed(c, c.submit("-N", 1, "-w", gpu_node.name, JOBS / "no_gpu.py", seen))
    found = json.loads(seen.read_text())
    assert found["node"] == gpu_node.name
    assert found["visible"] == "" and found["device_count"] == 0 and found["available"] is False, found

    refused = c.submit("-N", 1, "-w", gpu_node.name, TRAIN, "--device", "cuda")
    job = c.wait(refused, timeout=WAIT)
    assert (job["state"], job["exit_code"]) == ("FAILED", 2), job
    assert "error: --device cuda: torch finds no CUDA device (CUDA_VISIBLE_DEVICES=)" in c.cli("logs", refused).stdout
