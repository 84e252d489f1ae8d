"""What a node uses, read where it is true: the container's cgroup when the node is a container
(every container shares one kernel, so /proc and psutil's system figures are the host's), the
agent's process tree in local mode, and the host through psutil. GPUs through NVML, when the
driver's library is there.

Each reader returns plain numbers or None for "not available here"; minihpc.metrics.node turns them
into metrics.
"""

from __future__ import annotations

import ctypes
import os
import re
from pathlib import Path

import psutil

from minihpc.machine.processes import process_tree

CGROUP = Path("/sys/fs/cgroup")


def in_container() -> bool:
    return os.path.exists("/.dockerenv") or os.environ.get("MINIHPC_IN_CONTAINER") == "1"


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def _int(text: str | None) -> int | None:
    return int(text) if text is not None and text.isdigit() else None


def cgroup_cpu_seconds(root: Path = CGROUP) -> float | None:
    """CPU time the cgroup has used (v2 cpu.stat usage_usec, v1 cpuacct.usage in ns)."""
    stat = _read(root / "cpu.stat")
    if stat is not None and (root / "cgroup.controllers").exists():
        for line in stat.splitlines():
            name, _, value = line.partition(" ")
            if name == "usage_usec":
                return int(value) / 1e6
    for sub in ("cpuacct", "cpu,cpuacct"):
        ns = _int(_read(root / sub / "cpuacct.usage"))
        if ns is not None:
            return ns / 1e9
    return None


def cgroup_memory(root: Path = CGROUP) -> tuple[int | None, int | None]:
    """(bytes in use, limit or None when unlimited). v1's usage counts page cache; like
    `docker stats`, we subtract the inactive file cache."""
    current = _int(_read(root / "memory.current"))
    if current is not None:
        limit = _int(_read(root / "memory.max"))
        inactive = _stat_field(root / "memory.stat", "inactive_file")
        return current - (inactive or 0), limit
    usage = _int(_read(root / "memory" / "memory.usage_in_bytes"))
    if usage is None:
        return None, None
    limit = _int(_read(root / "memory" / "memory.limit_in_bytes"))
    inactive = _stat_field(root / "memory" / "memory.stat", "total_inactive_file")
    if limit is not None and limit >= 1 << 60:  # v1's "unlimited"
        limit = None
    return usage - (inactive or 0), limit


def _stat_field(path: Path, name: str) -> int | None:
    for line in (_read(path) or "").splitlines():
        key, _, value = line.partition(" ")
        if key == name:
            return _int(value)
    return None


def cpu_quota(root: Path = CGROUP) -> float | None:
    """CPUs the cgroup may use (cpu.max / cfs quota), None when unlimited."""
    text = _read(root / "cpu.max")
    if text:
        quota, _, period = text.partition(" ")
        return None if quota == "max" else int(quota) / int(period)
    quota = _int(_read(root / "cpu" / "cpu.cfs_quota_us"))
    period = _int(_read(root / "cpu" / "cpu.cfs_period_us"))
    return quota / period if quota and period else None


def tree_usage(pid: int) -> tuple[float, int]:
    """(CPU seconds, resident bytes) of a process and its live descendants (local mode)."""
    cpu, rss = 0.0, 0
    for p in process_tree(pid):
        try:
            times = p.cpu_times()
            cpu += times.user + times.system
            rss += p.memory_info().rss
        except psutil.NoSuchProcess:
            pass
    return cpu, rss


def gpu_count(dev: Path = Path("/dev")) -> int:
    """GPUs this node offers for ``--gres=gpu:N``: its ``/dev/nvidiaN`` device files (what a
    container given GPUs sees too; no driver library or torch needed). 0 without any."""
    try:
        return sum(1 for name in os.listdir(dev) if re.fullmatch(r"nvidia[0-9]+", name))
    except OSError:
        return 0


class NVML:
    """GPU models, utilisation and memory through the driver's libnvidia-ml (no Python binding needed)."""

    class _Util(ctypes.Structure):
        _fields_ = [("gpu", ctypes.c_uint), ("memory", ctypes.c_uint)]

    class _Mem(ctypes.Structure):
        _fields_ = [("total", ctypes.c_ulonglong), ("free", ctypes.c_ulonglong), ("used", ctypes.c_ulonglong)]

    NAME_BUFFER = 96
    """Bytes for a device name (NVML_DEVICE_NAME_V2_BUFFER_SIZE)."""

    def __init__(self):
        self.lib = None
        try:
            lib = ctypes.CDLL("libnvidia-ml.so.1")
            if lib.nvmlInit_v2() == 0:
                self.lib = lib
        except (OSError, AttributeError):
            self.lib = None

    def gpus(self) -> list[dict]:
        """[{index, name, utilization (0-1), memory_used, memory_total}], empty without a GPU."""
        if self.lib is None:
            return []
        count = ctypes.c_uint()
        if self.lib.nvmlDeviceGetCount_v2(ctypes.byref(count)) != 0:
            return []
        out = []
        for i in range(count.value):
            handle = ctypes.c_void_p()
            util, mem = self._Util(), self._Mem()
            if self.lib.nvmlDeviceGetHandleByIndex_v2(i, ctypes.byref(handle)) != 0:
                continue
            ok_util = self.lib.nvmlDeviceGetUtilizationRates(handle, ctypes.byref(util)) == 0
            ok_mem = self.lib.nvmlDeviceGetMemoryInfo(handle, ctypes.byref(mem)) == 0
            out.append({
                "index": i,
                "name": self._name(handle),
                "utilization": util.gpu / 100.0 if ok_util else None,
                "memory_used": mem.used if ok_mem else None,
                "memory_total": mem.total if ok_mem else None,
            })
        return out

    def _name(self, handle: ctypes.c_void_p) -> str | None:
        """The device's model (``NVIDIA H100 80GB HBM3``), None when NVML will not say."""
        buffer = ctypes.create_string_buffer(self.NAME_BUFFER)
        if self.lib.nvmlDeviceGetName(handle, buffer, ctypes.c_uint(self.NAME_BUFFER)) != 0:
            return None
        return buffer.value.decode(errors="replace").strip() or None
