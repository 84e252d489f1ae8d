"""Where srun writes its tasks' output, as ``man srun`` (IO Redirection) says: srun's own
stdout and stderr by default; ``-o/-e`` ``none`` (discarded), a task id (only that task's), or a
file name pattern (``%t`` task id, ``%n`` node id in the step, ``%N`` node name, ``%j`` job id,
``%s`` step id, ``%u`` user, ``%x`` job name, ``%%``), stderr going with ``-o`` when ``-e`` is not
given; ``-l`` puts ``TASK: `` before every line.

The decisions are pure (:func:`expand`, :func:`target`, :class:`Labeller`); :class:`Sink` writes.
"""

from __future__ import annotations

import os
import re

from minihpc.core.errors import UsageError

_FIELD = re.compile(r"%(\d*)([tnNjsuxA-Za-z%])")

SUPPORTED = "tnNjsux%"
"""The pattern letters srun expands here."""


def check_pattern(option: str, pattern: str) -> None:
    """UsageError naming the first letter of ``pattern`` that srun cannot expand here."""
    for m in _FIELD.finditer(pattern):
        if m[2] not in SUPPORTED:
            raise UsageError(f"{option}={pattern}: %{m[2]} is not supported (only %t %n %N %j %s %u %x %%)")


def expand(pattern: str, values: dict[str, str]) -> str:
    """``pattern`` with each ``%X`` (``%5t``: zero-padded to 5) replaced by ``values[X]``."""
    def one(m: re.Match) -> str:
        if m[2] == "%":
            return "%"
        value = values[m[2]]
        return value.zfill(int(m[1])) if m[1] and value.isdigit() else value

    return _FIELD.sub(one, pattern)


def target(option: str | None, procid: int) -> str | None:
    """Where task ``procid``'s stream goes under ``option`` (``-o``/``-e``'s value): "" for
    srun's own stream, None for nowhere, else a file name pattern."""
    if option is None or option == "all":
        return ""
    if option == "none":
        return None
    if option.isdigit():
        return "" if int(option) == procid else None
    return option


class Labeller:
    """``-l``: ``N: `` before each line, N right-aligned to the widest task id, as srun does."""

    def __init__(self, ntasks: int):
        self.width = len(str(max(ntasks - 1, 0)))
        self.at_start: dict[tuple[int, int], bool] = {}

    def __call__(self, procid: int, fd: int, data: bytes) -> bytes:
        prefix = f"{procid:>{self.width}}: ".encode()
        start = self.at_start.get((procid, fd), True)
        lines = data.split(b"\n")
        out = []
        for i, line in enumerate(lines):
            last = i == len(lines) - 1
            if last and not line:
                break
            out.append((prefix if (start if i == 0 else True) else b"") + line + (b"" if last else b"\n"))
        self.at_start[(procid, fd)] = data.endswith(b"\n")
        return b"".join(out)


class Sink:
    """Writes the tasks' output where ``-o``/``-e`` send it (files opened once, truncated, as
    srun's own user; relative names from srun's working directory)."""

    def __init__(self, output: str | None, error: str | None, label: bool, values: dict[str, str],
                 layout: tuple[list[str], list[list[int]]]):
        self.output, self.error = output, error if error is not None else output
        self.label, self.values = label, values
        nodes, tasks = layout
        self.where = {t: (i, nodes[i]) for i, ts in enumerate(tasks) for t in ts}
        self.labeller = Labeller(sum(len(ts) for ts in tasks))
        self.files: dict[str, int] = {}

    def write(self, procid: int, fd: int, data: bytes) -> None:
        place = target(self.output if fd == 1 else self.error, procid)
        if place is None:
            return
        if self.label:
            data = self.labeller(procid, fd, data)
        if place == "":
            _write_all(fd, data)
            return
        node_id, node = self.where.get(procid, (0, ""))
        name = expand(place, {**self.values, "t": str(procid), "n": str(node_id), "N": node})
        if name not in self.files:
            self.files[name] = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o644)
        _write_all(self.files[name], data)

    def close(self) -> None:
        for fd in self.files.values():
            os.close(fd)
        self.files.clear()


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]
