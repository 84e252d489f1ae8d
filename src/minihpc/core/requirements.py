"""What a job needs of each of its nodes, as sbatch says it: ``--mem`` and ``--gres=gpu:N``
(pure parsing; the scheduler matches them against the nodes)."""

from __future__ import annotations

import re

from minihpc.core.errors import UsageError

_UNITS = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def parse_mem(text: str) -> int:
    """``--mem=4G`` -> bytes (K, M, G, T; a bare number is megabytes, as in Slurm; 0 : any)."""
    m = re.fullmatch(r"(\d+)([KMGTkmgt]?)[Bb]?", text.strip())
    if not m:
        raise UsageError(f"invalid --mem {text!r}: expected a size such as 4G, 512M or 2048 (megabytes)")
    return int(m.group(1)) * _UNITS[(m.group(2) or "M").upper()]


def parse_gres(text: str) -> int:
    """``--gres=gpu:2`` (or ``gpu``, ``gpu:TYPE:2``) -> GPUs per node. Other resources have no
    meaning on a minihpc node: a UsageError names them."""
    gpus = 0
    for item in (i.strip() for i in text.split(",") if i.strip()):
        parts = item.split(":")
        if parts[0] != "gpu":
            raise UsageError(f"invalid --gres {text!r}: minihpc nodes offer only gpu (gpu:N)")
        count = parts[-1] if len(parts) > 1 else "1"
        if len(parts) > 3 or not count.isdigit():
            raise UsageError(f"invalid --gres {text!r}: expected gpu:N or gpu:TYPE:N")
        gpus += int(count)
    return gpus
