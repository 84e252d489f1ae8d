"""Simulated nodes (issue 38): node agents that register, heartbeat, take launches from their
own rq queues and "run" each share as a timer, writing results as a real share does, without
torch or processes, so one process can stand for hundreds of nodes and the control plane's
cost can be measured at a size this machine cannot hold for real.

A simulated node carries the feature ``simulated`` and takes only jobs that ask for it
(``--constraint simulated``); such a job goes only to simulated nodes. A real job never lands
on one, so nothing real is ever faked. How long a share runs, and how it ends, come from the
job's arguments (``--sim-seconds S``, ``--sim-exit N``) or the agent's default.

Decisions only: :mod:`minihpc.node.simulated` runs the nodes.
"""

from __future__ import annotations

import functools
import re

FEATURE = "simulated"
"""The feature every simulated node has, and the constraint a job asks for them with."""

_NAMES = re.compile(r"[^&|()\[\]*\s]+")
"""A constraint's feature names: whatever lies between its operators (core.features)."""


@functools.lru_cache(maxsize=1024)
def wanted(constraint: str) -> bool:
    """Whether a job's ``--constraint`` asks for simulated nodes."""
    return FEATURE in _NAMES.findall(constraint or "")


def takes(constraint: str, simulated: bool) -> bool:
    """Whether a node (simulated or not) may run a job with ``constraint``: a simulated node
    only a job that asks for one, a real node only one that does not."""
    return wanted(constraint) == simulated


PREFIX = "sim-"
"""The names simulated nodes get unless told: sim-0001, sim-0002, ..."""


def node_names(count: int, prefix: str = PREFIX) -> list[str]:
    """``prefix0001`` ... : zero-padded to four digits at least, so they sort as numbers."""
    width = max(4, len(str(count)))
    return [f"{prefix}{i:0{width}d}" for i in range(1, count + 1)]


def _option(args: list[str], name: str) -> str | None:
    for i, arg in enumerate(args):
        if arg == name and i + 1 < len(args):
            return args[i + 1]
        if arg.startswith(name + "="):
            return arg.split("=", 1)[1]
    return None


def duration(args: list[str], default: float) -> float:
    """Seconds a simulated share runs: the job's ``--sim-seconds``, else ``default``; a value
    that is not a number of seconds >= 0 is the default too."""
    raw = _option(args, "--sim-seconds")
    try:
        seconds = float(raw) if raw is not None else default
    except ValueError:
        return default
    return seconds if seconds >= 0 else default


def exit_code(args: list[str]) -> int:
    """How a simulated share ends: the job's ``--sim-exit`` (0 unless said; 0-255)."""
    raw = _option(args, "--sim-exit")
    try:
        code = int(raw) if raw is not None else 0
    except ValueError:
        return 0
    return code if 0 <= code <= 255 else 0
