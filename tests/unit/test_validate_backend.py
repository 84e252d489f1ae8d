"""``validate run --backend auto|gloo|nccl`` (issue 34): the flag, the checks before a run, what
each rank chooses, and where the report says it."""

import shlex

import pytest
import torch

from minihpc.core.errors import UsageError
from minihpc.validate import aggregate, launch, runner, worker


def parse(line: str):
    from minihpc.validate.minicluster import build_parser

    return build_parser().parse_args(shlex.split(line))


def test_the_flag_parses_and_defaults_to_auto():
    assert parse("run --workers 2 --backend nccl").backend == "nccl"
    assert parse("run --workers 2").backend is None  # not given: the table's default
    assert runner.RUN_DEFAULTS["backend"] == "auto"
    with pytest.raises(SystemExit):
        parse("run --backend mpi")


def test_the_ranks_are_told_the_backend():
    args = runner.worker_args(runner.settle({"backend": "nccl"}), None, None)
    assert args[args.index("--backend") + 1] == "nccl"
    assert worker.parse([]).backend == "auto"


def test_a_config_file_may_set_it(tmp_path):
    from minihpc.validate import config

    path = tmp_path / "run.toml"
    path.write_text('backend = "gloo"\n')
    assert config.resolve({}, config.load(path, "run"), runner.RUN_DEFAULTS)["backend"] == "gloo"


def test_nccl_is_for_ddp_only():
    runner.check_backend("nccl", "ddp")
    runner.check_backend("auto", "parameter-server")
    with pytest.raises(UsageError, match="--backend nccl is for --strategy ddp"):
        runner.settle({"backend": "nccl", "strategy": "parameter-server"})
    with pytest.raises(UsageError, match="--backend 'mpi' is not one of auto, gloo, nccl"):
        runner.check_backend("mpi", "ddp")


def test_a_local_nccl_run_needs_a_gpu_per_worker():
    runner.check_local_gpus("nccl", 2, 2)
    runner.check_local_gpus("auto", 4, 0)
    runner.check_local_gpus("gloo", 4, 0)
    with pytest.raises(UsageError, match=r"NCCL moves CUDA tensors only .* \(torch sees 0 GPU\(s\) here; --workers 2\)"):
        runner.check_local_gpus("nccl", 2, 0)
    with pytest.raises(UsageError, match=r"4 ranks on this node share 1 GPU\(s\)"):
        runner.check_local_gpus("nccl", 4, 1)


def test_a_cluster_nccl_run_asks_each_node_for_a_gpu_per_rank(monkeypatch):
    asked = []
    monkeypatch.setattr(launch, "run_cluster", lambda *a, gpus=0, **k: asked.append(gpus) or (None, None))
    for backend in ("nccl", "auto", "gloo"):
        runner._launch(runner.settle({"cluster": True, "workers": 4, "tasks_per_node": 2, "backend": backend}),
                       None, None)
    assert asked == [2, 0, 0]


# --- what each rank chooses ------------------------------------------------------------------

@pytest.fixture
def gpus(monkeypatch):
    """Pretend torch sees ``n`` GPUs; the GPU each rank makes current is recorded."""
    current = []

    def have(n: int):
        monkeypatch.setattr(torch.cuda, "is_available", lambda: n > 0)
        monkeypatch.setattr(torch.cuda, "device_count", lambda: n)
        monkeypatch.setattr(torch.cuda, "set_device", current.append)
        return current

    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    return have


def test_without_cuda_every_rank_runs_the_specs_gloo_on_the_cpu(gpus, monkeypatch):
    current = gpus(0)
    assert worker.placement("auto") == ("gloo", "cpu")
    assert worker.placement("gloo") == ("gloo", "cpu")
    with pytest.raises(ValueError, match="NCCL moves CUDA tensors only"):
        worker.placement("nccl")
    assert current == []


def test_with_a_gpu_per_rank_auto_is_nccl_on_the_ranks_own_gpu(gpus, monkeypatch):
    current = gpus(2)
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")
    monkeypatch.setenv("LOCAL_RANK", "1")
    assert worker.placement("auto") == ("nccl", "cuda:1")
    assert current == [1]


def test_ranks_sharing_a_gpu_stay_on_gloo_and_the_cpu(gpus, monkeypatch):
    current = gpus(1)
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")
    assert worker.placement("auto") == ("gloo", "cpu")
    with pytest.raises(ValueError, match="share 1 GPU"):
        worker.placement("nccl")
    assert current == []


def test_a_job_given_no_gpu_stays_on_the_cpu(gpus, monkeypatch):
    gpus(1)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert worker.placement("auto") == ("gloo", "cpu")


def test_the_parameter_server_has_no_process_group_and_stays_on_the_cpu(gpus):
    gpus(2)
    assert worker.placement("auto", "parameter-server") == ("gloo", "cpu")


# --- the report ----------------------------------------------------------------------------

def start(rank: int, backend: str | None, device: str) -> dict:
    return {"event": "start", "time": 1.0, "hostname": f"n{rank}", "backend": backend, "device": device}


def test_the_report_names_the_backend_the_ranks_chose_and_each_ranks_device():
    records = {0: [start(0, "nccl", "cuda:0")], 1: [start(1, "nccl", "cuda:1")]}
    run = aggregate.merge(records, 2, {"strategy": "ddp", "backend": "auto"})
    assert run["backend"] == "nccl"
    assert run["machine"]["rank_devices"] == {"0": "cuda:0", "1": "cuda:1"}
    assert aggregate.backend({0: [start(0, None, "cpu")]}, {"strategy": "parameter-server"}) is None
    assert aggregate.backend({0: [{"event": "start", "time": 1.0}]}, {"strategy": "ddp"}) is None  # older records
