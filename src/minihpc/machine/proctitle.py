"""What ``ps`` and /proc show of a process forked without exec: its command line and environment.

A process forked from the warm launcher (minihpc.node.warm) would still show the launcher's
command line and environment in /proc/PID/cmdline and /proc/PID/environ: the kernel reads them
from the memory that held them at exec. :func:`become` points the kernel at new copies
(prctl PR_SET_MM_MAP, which needs no capability when the executable is left alone), so a job's
processes look like the command they run, with their own environment, to ``ps``, psutil, and
whoever looks for a job's processes -- and so do the ranks they fork.
"""

from __future__ import annotations

import ctypes
import os

_PR_SET_MM, _PR_SET_MM_MAP = 35, 14
_KEEP_EXE = 0xFFFFFFFF
_FIELDS = ("start_code", "end_code", "start_data", "end_data", "start_brk", "brk", "start_stack",
           "arg_start", "arg_end", "env_start", "env_end")
_kept: list = []  # the blocks the kernel now reads: they must live as long as the process


class _MMMap(ctypes.Structure):  # struct prctl_mm_map, linux/prctl.h
    _fields_ = [*((name, ctypes.c_uint64) for name in _FIELDS), ("auxv", ctypes.c_uint64),
                ("auxv_size", ctypes.c_uint32), ("exe_fd", ctypes.c_uint32)]


def _stat() -> dict[str, int]:
    """This process's memory layout (proc(5), /proc/self/stat fields 26 to 28 and 45 to 51)."""
    with open("/proc/self/stat", "rb") as fh:
        stat = fh.read()
    fields = stat[stat.rindex(b")") + 2:].split()  # the command name may hold spaces
    number = {"start_code": 26, "end_code": 27, "start_stack": 28, "start_data": 45, "end_data": 46,
              "start_brk": 47}
    return {name: int(fields[n - 3]) for name, n in number.items()}


def block(items: list[str]) -> bytes:
    """NUL-terminated strings, as the kernel keeps argv and the environment."""
    return b"".join(os.fsencode(i) + b"\0" for i in items)


def become(argv: list[str], env: dict[str, str]) -> bool:
    """Show ``argv`` and ``env`` as this process's command line and environment; False (and
    nothing changed) where the kernel refuses."""
    args, envs = block(argv), block([f"{k}={v}" for k, v in env.items()])
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.sbrk.restype = ctypes.c_void_p
        layout = _stat()
    except (OSError, ValueError, AttributeError):
        return False
    buf = ctypes.create_string_buffer(args + envs)
    start = ctypes.addressof(buf)
    mm = _MMMap(**layout, brk=libc.sbrk(0), arg_start=start, arg_end=start + len(args),
                env_start=start + len(args), env_end=start + len(args) + len(envs), auxv=0, auxv_size=0,
                exe_fd=_KEEP_EXE)
    if libc.prctl(_PR_SET_MM, _PR_SET_MM_MAP, ctypes.byref(mm), ctypes.sizeof(mm), 0) != 0:
        return False
    _kept.append(buf)
    return True
