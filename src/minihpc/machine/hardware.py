"""What a node is made of, as its agent registers it: its CPU model, the CPUs and memory it may
really use, and its GPUs.

The host's figures (``os.cpu_count()``, psutil's total memory) overstate a node that is a
container with limits, or a process pinned to a few CPUs: each count here is the least of what
the machine has and what the node is allowed (its CPU affinity, its cgroup's CPU quota and
memory limit, read by :mod:`minihpc.machine.resources`). The rules that combine them are pure
functions; the readers around them never fail, falling back to the host's figures or
:data:`UNKNOWN`.
"""

from __future__ import annotations

import math
import os
import platform
from pathlib import Path

import psutil

from minihpc.machine import resources

CPUINFO = Path("/proc/cpuinfo")

UNKNOWN = "unknown"
"""A model nothing on the machine names."""

ARM_IMPLEMENTERS = {"0x41": "ARM", "0x42": "Broadcom", "0x48": "HiSilicon", "0x4e": "NVIDIA", "0x50": "Ampere",
                    "0x51": "Qualcomm", "0x61": "Apple", "0xc0": "Ampere"}
"""/proc/cpuinfo's ``CPU implementer`` on Arm (arm64 kernels print no model name), as lscpu names them."""

ARM_PARTS = {("0x41", "0xd03"): "Cortex-A53", ("0x41", "0xd08"): "Cortex-A72", ("0x41", "0xd0b"): "Cortex-A76",
             ("0x41", "0xd0c"): "Neoverse-N1", ("0x41", "0xd40"): "Neoverse-V1", ("0x41", "0xd49"): "Neoverse-N2",
             ("0x41", "0xd4f"): "Neoverse-V2", ("0xc0", "0xac3"): "Ampere-1", ("0x48", "0xd01"): "Kunpeng-920"}
"""(implementer, ``CPU part``) -> core name, for the server cores a cluster is likely to have."""


# -- CPU model ---------------------------------------------------------------------------


def cpu_model(cpuinfo: Path = CPUINFO) -> str:
    """The CPU's model as /proc/cpuinfo names it, else what ``platform.processor()`` says, else
    :data:`UNKNOWN`. Never fails."""
    try:
        text = cpuinfo.read_text(errors="replace")
    except OSError:
        text = ""
    return model_from_cpuinfo(text) or " ".join(platform.processor().split()) or UNKNOWN


def model_from_cpuinfo(text: str) -> str | None:
    """The model in /proc/cpuinfo's text: ``model name`` (x86, 32-bit Arm), ``Hardware`` (the
    SoC of older Arm kernels), the ``CPU implementer`` and ``CPU part`` of arm64 decoded
    (``ARM Neoverse-N1``, or ``ARM part 0xd99`` for a part not in :data:`ARM_PARTS`), ``cpu``
    (POWER). None when it names none. Pure."""
    fields = first_values(text)
    for key in ("model name", "Hardware"):
        if fields.get(key):
            return fields[key]
    implementer, part = fields.get("CPU implementer", "").lower(), fields.get("CPU part", "").lower()
    if implementer or part:
        vendor = ARM_IMPLEMENTERS.get(implementer, f"CPU implementer {implementer or '?'}")
        core = ARM_PARTS.get((implementer, part), f"part {part or '?'}")
        return f"{vendor} {core}"
    return fields.get("cpu") or None


def first_values(text: str) -> dict[str, str]:
    """``key: value`` lines of /proc/cpuinfo, the first value of each key (the first CPU's),
    whitespace collapsed. Pure."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        key = key.strip()
        if sep and key and key not in out:
            out[key] = " ".join(value.split())
    return out


# -- CPUs and memory ---------------------------------------------------------------------


def usable_cpus() -> int:
    """The CPUs this node can use: its affinity's, capped by its cgroup's quota (rounded up)."""
    return cpus_usable(affinity_cpus(), resources.cpu_quota())


def affinity_cpus() -> int:
    """The CPUs this process may be scheduled on (all of the machine's where affinity is unknown)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def cpus_usable(affinity: int, quota: float | None) -> int:
    """The whole CPUs a node offers with ``affinity`` CPUs and a cgroup quota of ``quota`` CPUs
    (None: unlimited): the quota rounds up, since 0.25 of a CPU still runs one rank (throttled),
    and a node offers at least one. Pure."""
    cpus = max(1, affinity)
    if quota is not None and quota > 0:
        cpus = min(cpus, math.ceil(round(quota, 6)))  # 2.0000001 from a ratio is 2
    return max(1, cpus)


def cpu_limit() -> float | None:
    """The cgroup's CPU quota in CPUs (``docker run --cpus``), None when unlimited."""
    quota = resources.cpu_quota()
    return quota if quota is not None and quota > 0 else None


def memory_bytes() -> int:
    """The memory this node can use: the machine's, capped by its cgroup's limit."""
    return memory_usable(psutil.virtual_memory().total, resources.cgroup_memory()[1])


def memory_usable(total: int, limit: int | None) -> int:
    """``total`` bytes capped by a cgroup limit (None: unlimited). Pure."""
    return min(total, limit) if limit is not None and limit > 0 else total


# -- GPUs ---------------------------------------------------------------------------------


def gpus(nvml: resources.NVML | None = None, dev: Path = Path("/dev")) -> list[dict]:
    """[{name, memory_total}] of each GPU NVML finds; without NVML, one ``unknown`` GPU per
    ``/dev/nvidiaN`` (a container given the devices but not the driver's library)."""
    found = (nvml if nvml is not None else resources.NVML()).gpus()
    return gpu_list(found, 0 if found else resources.gpu_count(dev))


def gpu_list(nvml_gpus: list[dict], device_files: int) -> list[dict]:
    """[{name, memory_total}] from NVML's list when it has one, else ``device_files`` unknown
    GPUs. Pure."""
    if nvml_gpus:
        return [{"name": g.get("name") or UNKNOWN, "memory_total": g.get("memory_total")} for g in nvml_gpus]
    return [{"name": UNKNOWN, "memory_total": None} for _ in range(device_files)]


def gpu_model(gpus: list[dict], registered: int) -> str:
    """What a node registers as its GPU model: the distinct names, in order, comma-separated;
    empty when it registers no GPU (``MINIHPC_NODE_GPUS=0`` offers none, whatever it has). Pure."""
    if registered <= 0:
        return ""
    return ",".join(dict.fromkeys(g["name"] for g in gpus))
