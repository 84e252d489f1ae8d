"""Where a job's tensors live and which backend carries its collectives: a GPU or the CPU.

    from minihpc.job import devices
    device = devices.choose_device(args.device, torch.cuda.is_available(),
                                   os.environ.get("CUDA_VISIBLE_DEVICES"))        # ValueError: no CUDA
    backend = devices.choose_backend(args.backend, device, torch.cuda.device_count(),
                                     int(os.environ.get("LOCAL_WORLD_SIZE", "1")))
    flag = torch.tensor([1], device=devices.collective_device())                   # after init_process_group

NCCL moves CUDA tensors only: a collective on a CPU tensor fails with ``No backend type
associated with device type cpu``. Gloo moves CPU tensors (and CUDA ones, through the host). So
the job helpers' own small collectives (:mod:`minihpc.job.preempt`, :mod:`minihpc.job.balance`)
put their tensor on :func:`collective_device` and read the result back as a Python value.

NCCL also wants a GPU per rank: ranks that share one (``--gres=gpu:1 --ntasks-per-node=2``) fail
with ``Duplicate GPU detected``. ``auto`` therefore picks NCCL only when every rank of the node
has a GPU of its own, and gloo over the CUDA tensors otherwise.

The decisions are pure functions of what they are given; the few that ask torch do so when
called, never at import (importing torch.cuda state early would fix the device set before a
job script had a say).
"""

from __future__ import annotations

DEVICES = ("auto", "cpu", "cuda")
BACKENDS = ("auto", "gloo", "nccl")


def gpus_given(visible: str | None) -> bool:
    """Whether the job was given GPUs, from its ``CUDA_VISIBLE_DEVICES``: unset (a machine
    outside the cluster: all of them) or a list of devices, yes; the empty string, no."""
    return visible is None or visible.strip() != ""


def choose_device(requested: str, cuda_available: bool, visible: str | None) -> str:
    """``"cuda"`` or ``"cpu"`` for ``--device``: ``auto`` takes CUDA when torch has it and the job
    was given GPUs; ``cuda`` without CUDA is a ValueError naming what was seen."""
    if requested not in DEVICES:
        raise ValueError(f"--device {requested!r} is not one of {', '.join(DEVICES)}")
    if requested == "cpu":
        return "cpu"
    usable = cuda_available and gpus_given(visible)
    if requested == "cuda" and not usable:
        seen = "the job was given no GPU" if cuda_available else "torch finds no CUDA device"
        raise ValueError(f"--device cuda: {seen} (CUDA_VISIBLE_DEVICES={visible if visible is not None else 'unset'}); "
                         "submit with --gres=gpu:N, or use --device cpu")
    return "cuda" if usable else "cpu"


def choose_backend(requested: str, device: str, gpus: int, local_ranks: int) -> str:
    """``"nccl"`` or ``"gloo"`` for ``--backend`` on ``device`` with ``gpus`` GPUs visible and
    ``local_ranks`` ranks on this node. ``auto``: NCCL on CUDA when each local rank has a GPU of
    its own, else gloo. ``nccl`` where it cannot work is a ValueError saying why."""
    if requested not in BACKENDS:
        raise ValueError(f"--backend {requested!r} is not one of {', '.join(BACKENDS)}")
    own_gpu = device == "cuda" and gpus >= max(1, local_ranks)
    if requested == "auto":
        return "nccl" if own_gpu else "gloo"
    if requested == "nccl" and device != "cuda":
        raise ValueError("--backend nccl: NCCL moves CUDA tensors only and this rank runs on the CPU")
    if requested == "nccl" and not own_gpu:
        raise ValueError(f"--backend nccl: {local_ranks} ranks on this node share {gpus} GPU(s); NCCL needs "
                         "one GPU per rank (use --backend gloo, or ask for as many GPUs as tasks)")
    return requested


def local_index(local_rank: int, gpus: int) -> int:
    """The GPU (of those visible) local rank ``local_rank`` uses: ranks beyond the GPUs share them
    round-robin."""
    if gpus < 1:
        raise ValueError(f"local rank {local_rank}: no GPU to place it on")
    return local_rank % gpus


def collective_device_type(backend: str) -> str:
    """The device type a collective's tensors must be on under ``backend``: ``cuda`` for NCCL;
    ``cpu`` for gloo and mixed groups (``cpu:gloo,cuda:nccl`` carries CPU tensors over gloo)."""
    return "cuda" if backend == "nccl" else "cpu"


def collective_device():
    """The torch.device for a collective in the default process group: this rank's current GPU
    under NCCL, else the CPU (also when no group is up)."""
    import torch
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()):
        return torch.device("cpu")
    if collective_device_type(str(dist.get_backend())) == "cuda":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def uses_cuda() -> bool:
    """Whether this process has started using CUDA (torch initialised it): a rank on the CPU of
    a GPU machine says no, so it neither profiles nor loads onto a GPU it never touched."""
    import torch

    return torch.cuda.is_available() and torch.cuda.is_initialized()


def load_location() -> str:
    """Where a checkpoint's tensors go when loaded: this rank's current GPU when it uses CUDA,
    else the CPU (a checkpoint saved on GPUs loads on a machine without any)."""
    if uses_cuda():
        import torch

        return f"cuda:{torch.cuda.current_device()}"
    return "cpu"
