"""Which GPUs a node offers, which of them a job gets, and what its tasks see (pure).

A node offers a list of device ordinals: ``MINIHPC_NODE_GPU_DEVICES`` (``0,1``, ``4-7``), else
the first ``MINIHPC_NODE_GPUS`` (``0..N-1``), else one per ``/dev/nvidiaN`` it has. Local mode
splits one machine's GPUs between its nodes (:func:`split`), so a workstation with 8 GPUs run
as 4 nodes gives each node 2 of its own. The master allocates a job the first ``--gres=gpu:N``
of each of its nodes' devices (nodes are allocated whole, so a job has every GPU it asked for
to itself) and the launch spec carries them to the node.

Every task of the job sees its GPUs as Slurm shows them without device cgroups:
``CUDA_VISIBLE_DEVICES`` and ``GPU_DEVICE_ORDINAL`` list the node's ordinals the job holds
(``LOCAL_RANK`` indexes into them: ``torch.cuda.set_device(LOCAL_RANK)``), ``SLURM_JOB_GPUS``
and ``SLURM_STEP_GPUS`` the same, ``SLURM_GPUS_ON_NODE`` their count. With ``--gpus-per-task``
each task sees only its own slice (Slurm's implied ``--gpu-bind=per_task:N``). A job without
GPUs gets ``CUDA_VISIBLE_DEVICES`` empty: it sees none, rather than every GPU of the node.
"""

from __future__ import annotations

from collections.abc import Mapping

from minihpc.core.errors import UsageError

VISIBLE = "CUDA_VISIBLE_DEVICES"
JOB_GPUS = "SLURM_JOB_GPUS"
PER_TASK = "SLURM_GPUS_PER_TASK"


def count(text: str, option: str) -> int:
    """``N``, ``gpu:N`` or ``gpu:TYPE:N`` (Slurm's forms of a GPU count) -> N."""
    parts = text.strip().split(":")
    if parts[-1].isdigit() and (len(parts) == 1 or (parts[0] == "gpu" and len(parts) <= 3)):
        return int(parts[-1])
    raise UsageError(f"invalid {option} {text!r}: expected N or gpu:N")


def parse_devices(text: str) -> list[int]:
    """``0,1,4-5`` -> [0, 1, 4, 5]; UsageError naming what is wrong (a repeat, a bad range)."""
    out: list[int] = []
    for item in (t.strip() for t in text.split(",")):
        if not item:
            continue
        first, dash, last = item.partition("-")
        if not first.isdigit() or (dash and not last.isdigit()):
            raise UsageError(f"invalid GPU device list {text!r}: expected ordinals such as 0,1 or 0-3")
        lo, hi = int(first), int(last) if dash else int(first)
        if hi < lo:
            raise UsageError(f"invalid GPU device list {text!r}: range {item} goes down")
        out.extend(range(lo, hi + 1))
    if len(set(out)) != len(out):
        raise UsageError(f"invalid GPU device list {text!r}: a device is named twice")
    return out


def node_devices(devices_setting: str, count_setting: int, found: int) -> list[int]:
    """The ordinals a node offers: its device list when set, else the first ``count_setting``
    (``MINIHPC_NODE_GPUS``; -1: every GPU ``found``)."""
    if devices_setting.strip():
        return parse_devices(devices_setting)
    return list(range(found if count_setting < 0 else count_setting))


def split(devices: list[int], nodes: int) -> list[list[int]]:
    """One machine's GPUs shared out between ``nodes`` local nodes, in order and as evenly as
    they go (the first nodes get one more when they do not divide); a node gets none when
    there are fewer GPUs than nodes. No two nodes share a device."""
    base, extra = divmod(len(devices), nodes)
    out, first = [], 0
    for i in range(nodes):
        n = base + (1 if i < extra else 0)
        out.append(devices[first:first + n])
        first += n
    return out


def allocate(devices: list[int], count: int) -> list[int]:
    """The devices of a node a job asking ``count`` of them gets (the node is the job's alone).
    ValueError when the node has too few: the scheduler never places such a job there."""
    if count > len(devices):
        raise ValueError(f"a job asks {count} GPUs of a node that has {len(devices)}")
    return list(devices[:count])


def task_devices(devices: list[int], per_task: int, local_rank: int) -> list[int]:
    """What one task sees: all of the node's ``devices`` the job holds, or with
    ``--gpus-per-task`` its own slice (tasks past the devices wrap around, as they share)."""
    if per_task <= 0 or not devices:
        return list(devices)
    start = (local_rank * per_task) % len(devices)
    return [devices[(start + i) % len(devices)] for i in range(min(per_task, len(devices)))]


def _ids(devices: list[int]) -> str:
    return ",".join(str(d) for d in devices)


def job_env(devices: list[int], per_task: int) -> dict[str, str]:
    """The GPU variables of a job's share on a node that holds ``devices`` for it."""
    env = {VISIBLE: _ids(devices), "GPU_DEVICE_ORDINAL": _ids(devices)}
    if devices:
        env.update({JOB_GPUS: _ids(devices), "SLURM_STEP_GPUS": _ids(devices),
                    "SLURM_GPUS_ON_NODE": str(len(devices))})
        if per_task > 0:
            env[PER_TASK] = str(per_task)
    return env


def task_env(job: Mapping[str, str], local_rank: int) -> dict[str, str]:
    """What one task of a share changes of the share's GPU variables (``job``, its environment):
    with ``--gpus-per-task``, its own slice; otherwise nothing."""
    try:
        per_task = int(job.get(PER_TASK) or 0)
        devices = parse_devices(job.get(JOB_GPUS) or "")
    except (ValueError, UsageError):
        return {}
    if per_task <= 0 or not devices:
        return {}
    mine = _ids(task_devices(devices, per_task, local_rank))
    return {VISIBLE: mine, "GPU_DEVICE_ORDINAL": mine, "SLURM_STEP_GPUS": mine}


def local_node_env(env: Mapping[str, str], found: int, nodes: int) -> list[dict[str, str]]:
    """Each local node's GPU settings when one machine runs ``nodes`` of them: its own share of
    the machine's devices (MINIHPC_NODE_GPU_DEVICES of ``env``, else the ``found`` ones), so
    that no two nodes register the same GPU. MINIHPC_NODE_GPUS alone (a count, e.g. GPUs made
    up for tests) is left to each node as it is."""
    listed = (env.get("MINIHPC_NODE_GPU_DEVICES") or "").strip()
    if not listed and (env.get("MINIHPC_NODE_GPUS") or "").strip():
        return [{} for _ in range(nodes)]
    machine = parse_devices(listed) if listed else list(range(found))
    return [{"MINIHPC_NODE_GPU_DEVICES": _ids(share)} if share else
            {"MINIHPC_NODE_GPU_DEVICES": "", "MINIHPC_NODE_GPUS": "0"} for share in split(machine, nodes)]
