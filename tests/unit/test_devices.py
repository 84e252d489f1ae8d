"""Where job tensors live and which backend carries them (minihpc.job.devices), and the job
helpers' collectives on the device their process group moves (issue 34: StopRequest.agreed()
all-reduced a CPU tensor, which NCCL refuses)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.distributed as dist

from minihpc.job import balance, devices, preempt, progress

ROOT = Path(__file__).resolve().parents[2]


# --- choose_device: --device auto|cpu|cuda ---------------------------------------------------

@pytest.mark.parametrize("visible, given", [(None, True), ("0", True), ("0,2", True), ("", False), ("  ", False)])
def test_a_job_was_given_gpus_unless_its_visible_devices_are_empty(visible, given):
    assert devices.gpus_given(visible) is given


@pytest.mark.parametrize("cuda, visible, device", [
    (True, None, "cuda"), (True, "1", "cuda"), (True, "", "cpu"), (False, None, "cpu"), (False, "0", "cpu"),
])
def test_auto_takes_cuda_when_torch_has_it_and_the_job_was_given_gpus(cuda, visible, device):
    assert devices.choose_device("auto", cuda, visible) == device


def test_cpu_is_cpu_even_with_gpus():
    assert devices.choose_device("cpu", True, "0") == "cpu"


def test_cuda_without_cuda_names_what_was_seen():
    with pytest.raises(ValueError, match=r"--device cuda: torch finds no CUDA device \(CUDA_VISIBLE_DEVICES=unset\)"):
        devices.choose_device("cuda", False, None)
    with pytest.raises(ValueError, match=r"the job was given no GPU \(CUDA_VISIBLE_DEVICES=\); submit with --gres"):
        devices.choose_device("cuda", True, "")
    assert devices.choose_device("cuda", True, "0") == "cuda"
    with pytest.raises(ValueError, match="--device 'tpu' is not one of auto, cpu, cuda"):
        devices.choose_device("tpu", True, None)


# --- choose_backend: --backend auto|gloo|nccl ------------------------------------------------

@pytest.mark.parametrize("device, gpus, local_ranks, backend", [
    ("cpu", 0, 1, "gloo"), ("cpu", 4, 1, "gloo"),
    ("cuda", 1, 1, "nccl"), ("cuda", 4, 4, "nccl"), ("cuda", 8, 2, "nccl"),
    ("cuda", 1, 2, "gloo"),  # two ranks share one GPU: NCCL would refuse ("Duplicate GPU detected")
    ("cuda", 0, 1, "gloo"),
])
def test_auto_is_nccl_when_every_local_rank_has_a_gpu_of_its_own(device, gpus, local_ranks, backend):
    assert devices.choose_backend("auto", device, gpus, local_ranks) == backend


def test_a_named_backend_is_kept_where_it_can_work():
    assert devices.choose_backend("gloo", "cuda", 1, 2) == "gloo"  # gloo carries shared-GPU ranks' CUDA tensors
    assert devices.choose_backend("gloo", "cpu", 0, 1) == "gloo"
    assert devices.choose_backend("nccl", "cuda", 2, 2) == "nccl"


def test_nccl_where_it_cannot_work_says_why():
    with pytest.raises(ValueError, match="NCCL moves CUDA tensors only and this rank runs on the CPU"):
        devices.choose_backend("nccl", "cpu", 0, 1)
    with pytest.raises(ValueError, match=r"2 ranks on this node share 1 GPU\(s\); NCCL needs one GPU per rank"):
        devices.choose_backend("nccl", "cuda", 1, 2)
    with pytest.raises(ValueError, match="--backend 'mpi' is not one of auto, gloo, nccl"):
        devices.choose_backend("mpi", "cpu", 0, 1)


def test_ranks_beyond_the_gpus_share_them_round_robin():
    assert [devices.local_index(r, 2) for r in range(5)] == [0, 1, 0, 1, 0]
    assert devices.local_index(1, 1) == 0
    with pytest.raises(ValueError, match="no GPU"):
        devices.local_index(0, 0)


# --- the collectives' device -----------------------------------------------------------------

@pytest.mark.parametrize("backend, kind", [("nccl", "cuda"), ("gloo", "cpu"), ("cpu:gloo,cuda:nccl", "cpu"),
                                           ("mpi", "cpu")])
def test_collectives_go_on_cuda_only_under_nccl(backend, kind):
    assert devices.collective_device_type(backend) == kind


def test_without_a_process_group_the_collective_device_is_the_cpu():
    assert devices.collective_device() == torch.device("cpu")


def test_a_rank_that_never_touched_cuda_loads_onto_the_cpu(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: False)
    assert not devices.uses_cuda() and devices.load_location() == "cpu"
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 1)
    assert devices.uses_cuda() and devices.load_location() == "cuda:1"


@pytest.fixture
def gloo_group(tmp_path):
    """A one-rank gloo process group, as a job's."""
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1)
    yield
    dist.destroy_process_group()


def test_the_helpers_collectives_run_in_a_gloo_group_and_return_python_values(gloo_group):
    assert devices.collective_device() == torch.device("cpu")
    stop = preempt.StopRequest(signals=())
    assert stop.agreed() is False
    stop.received = 15
    assert stop.agreed() is True
    # world 1 takes the short way; a two-element group is the GPU suite's (tests/gpu)
    assert balance.all_gather_floats(2.5) == [2.5]


def test_under_nccl_the_helpers_tensors_go_to_the_current_gpu(monkeypatch):
    """What StopRequest.agreed() and all_gather_floats() hand NCCL: tensors on this rank's GPU,
    read back as Python values (checked without a GPU by recording what reaches the collective)."""
    monkeypatch.setattr(devices, "collective_device", lambda: torch.device("meta"))
    monkeypatch.setattr(dist, "is_initialized", lambda: True)
    monkeypatch.setattr(dist, "get_world_size", lambda group=None: 2)
    seen = []

    def all_reduce(tensor, op=None):
        seen.append(tensor.device)

    def all_gather(out, tensor):
        seen.append(tensor.device)
        seen.extend(t.device for t in out)
        raise RuntimeError("stop here: meta tensors hold no values")

    monkeypatch.setattr(dist, "all_reduce", all_reduce)
    monkeypatch.setattr(dist, "all_gather", all_gather)
    with pytest.raises(RuntimeError, match="meta tensors hold no values|Tensor.item\\(\\) cannot be called on meta"):
        preempt.StopRequest(signals=()).agreed()
    with pytest.raises(RuntimeError, match="stop here"):
        balance.all_gather_floats(1.0)
    assert seen == [torch.device("meta")] * 4


def test_a_step_timer_on_a_gpu_waits_for_the_kernels_as_each_phase_ends():
    calls = []
    timer = progress.StepTimer(synchronize=lambda: calls.append("sync"))
    for phase in progress.PHASES:
        with timer.phase(phase):
            calls.append(phase)
    assert calls == [x for p in progress.PHASES for x in (p, "sync")]
    assert timer.lap()["optimizer_seconds"] >= 0 and progress.StepTimer().synchronize is None


def test_the_job_helpers_import_no_torch_and_touch_no_cuda_at_import():
    code = ("import sys\n"
            "from minihpc.job import balance, checkpoint, devices, preempt, profiling, progress\n"
            "print('torch' in sys.modules)")
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"


def test_the_mnist_job_refuses_cuda_without_a_gpu_in_one_line_and_exit_2():
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="", PYTHONPATH=str(ROOT / "src"))
    out = subprocess.run([sys.executable, str(ROOT / "jobs" / "train_mnist_distributed.py"), "--device", "cuda"],
                         capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 2, out.stderr
    assert out.stderr.splitlines() == [
        "train_mnist_distributed.py: error: --device cuda: torch finds no CUDA device (CUDA_VISIBLE_DEVICES=); "
        "submit with --gres=gpu:N, or use --device cpu"]
