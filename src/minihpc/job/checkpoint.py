"""Checkpoints for job scripts: atomic saves, a verified manifest, a LATEST pointer, keep K.

    from minihpc.job import checkpoint
    found = checkpoint.load_latest(ckpt_dir)          # None on a fresh start
    ...
    if rank == 0 and step % every == 0:
        checkpoint.save(ckpt_dir, step, {"model": ..., "optimizer": ...})

Fencing: every attempt of a job claims the directory when it loads (the attempt number comes
from ``MINIHPC_ATTEMPT``, which the cluster sets), and a save from an older attempt -- one
that was paused or cut off and came back after the job was requeued -- raises
:class:`Fenced` instead of writing. The claim and the check-and-write hold an flock on the
directory, which every container on the shared volume sees (they share one kernel).

A save never leaves a half-written file where a reader looks: the data goes to a temporary file
in the same directory, is fsynced, renamed into place, and the directory is fsynced; then its
manifest (step, size, sha256) and the LATEST pointer are replaced the same way. Loading walks
from LATEST back through older checkpoints and returns the newest one whose bytes match its
manifest, so a crash at any moment costs at most the checkpoint being written.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from minihpc.machine import files

LATEST = "LATEST"
FENCE = "FENCE"
KEEP = 3
_NAME = re.compile(r"^ckpt-(\d{8,})\.pt$")


class Fenced(RuntimeError):
    """This attempt was superseded by a newer one: it must not write checkpoints."""


def current_attempt() -> int | None:
    value = os.environ.get("MINIHPC_ATTEMPT")
    return int(value) if value and value.isdigit() else None


@contextmanager
def _locked(directory: Path) -> Iterator[None]:
    fd = os.open(directory / ".lock", os.O_CREAT | os.O_RDWR, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def fence(directory: str | os.PathLike) -> int:
    """The newest attempt that claimed ``directory`` (0: none)."""
    try:
        return int((Path(directory) / FENCE).read_text().strip() or 0)
    except (FileNotFoundError, ValueError):
        return 0


def claim(directory: str | os.PathLike, attempt: int) -> None:
    """Mark ``directory`` as written by ``attempt`` from now on; older attempts are fenced."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    with _locked(directory):
        if attempt > fence(directory):
            files.replace(directory / FENCE, f"{attempt}\n".encode(), durable=True)


@dataclass(frozen=True)
class Loaded:
    step: int
    path: Path
    state: Any


def file_name(step: int) -> str:
    return f"ckpt-{step:08d}.pt"


def save(
    directory: str | os.PathLike, step: int, state: Any, keep: int = KEEP, attempt: int | None = None
) -> Path:
    """Save ``state`` (anything torch.save takes) as the checkpoint of ``step``; keep the
    newest ``keep``. Call it from one rank only. ``attempt`` (default: this job attempt's,
    from the environment) is checked against the directory's fence."""
    import io

    import torch

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    attempt = current_attempt() if attempt is None else attempt
    buffer = io.BytesIO()
    torch.save(state, buffer)
    data = buffer.getvalue()
    path = directory / file_name(step)
    with _locked(directory):
        newest = fence(directory)
        if attempt is not None and newest > attempt:
            raise Fenced(f"attempt {attempt} may not write {directory}: attempt {newest} has taken over")
        files.replace(path, data, durable=True)
        manifest = {
            "step": step,
            "file": path.name,
            "bytes": len(data),
            "sha256": hashlib.sha256(data).hexdigest(),
            "saved_at": time.time(),
            "attempt": attempt,
        }
        files.replace(path.with_suffix(".json"), json.dumps(manifest, sort_keys=True).encode(), durable=True)
        files.replace(directory / LATEST, (path.name + "\n").encode(), durable=True)
        prune(directory, keep)
    return path


def steps(directory: str | os.PathLike) -> list[int]:
    """Steps with a checkpoint file in ``directory``, oldest first."""
    directory = Path(directory)
    if not directory.is_dir():
        return []
    return sorted(int(m.group(1)) for p in directory.iterdir() if (m := _NAME.match(p.name)))


STALE_TMP = 60.0
"""Seconds after which a temporary file is a dead writer's leftover, not a save in progress."""


def prune(directory: str | os.PathLike, keep: int) -> None:
    """Keep the newest ``keep`` checkpoints, and clear temporary files of writers long gone."""
    directory = Path(directory)
    now = time.time()
    for path in directory.glob(".*.tmp"):
        try:
            if now - path.stat().st_mtime > STALE_TMP:
                path.unlink()
        except FileNotFoundError:
            pass
    for step in steps(directory)[:-keep] if keep > 0 else []:
        for path in (directory / file_name(step), (directory / file_name(step)).with_suffix(".json")):
            path.unlink(missing_ok=True)


def verify(path: Path) -> bool:
    """True when ``path`` matches its manifest (size and sha256)."""
    try:
        manifest = json.loads(path.with_suffix(".json").read_text())
        return path.stat().st_size == manifest["bytes"] and files.sha256(path) == manifest["sha256"]
    except (OSError, ValueError, KeyError):
        return False


def candidates(directory: str | os.PathLike) -> list[Path]:
    """Checkpoints to try, best first: the one LATEST names, then the rest newest first."""
    directory = Path(directory)
    order = [directory / file_name(s) for s in reversed(steps(directory))]
    try:
        named = directory / (directory / LATEST).read_text().strip()
        if named in order:
            order.remove(named)
            order.insert(0, named)
    except OSError:
        pass
    return order


def load_latest(
    directory: str | os.PathLike, map_location: str | None = None, attempt: int | None = None
) -> Loaded | None:
    """The newest checkpoint that verifies, or None when there is none. Claims the directory
    for ``attempt`` (default: this job attempt's, from the environment) first. Its tensors go to
    ``map_location``, by default this rank's current GPU when it uses CUDA and the CPU otherwise
    (:func:`minihpc.job.devices.load_location`): a checkpoint saved on GPUs loads anywhere."""
    import torch

    from minihpc.job import devices

    map_location = devices.load_location() if map_location is None else map_location
    attempt = current_attempt() if attempt is None else attempt
    if attempt is not None:
        claim(directory, attempt)
    for path in candidates(directory):
        if verify(path):
            state = torch.load(path, map_location=map_location, weights_only=True)
            return Loaded(step=int(_NAME.match(path.name).group(1)), path=path, state=state)
    return None


def rng_state() -> dict:
    """Every random generator a training step may draw from (Python's, torch's CPU and CUDA
    ones -- one per visible GPU --, NumPy's when installed), in a form :func:`load_latest` can
    read back safely."""
    import random

    import torch

    state = {"python": random.getstate(), "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    try:
        import numpy
    except ImportError:
        return state
    kind, keys, pos, has_gauss, gauss = numpy.random.get_state()
    state["numpy"] = (kind, keys.tolist(), int(pos), int(has_gauss), float(gauss))
    return state


def cuda_states_to_restore(saved: list, gpus: int) -> list:
    """The saved per-GPU generator states this run can take: the first ``gpus`` of them (a run
    with fewer GPUs than the saved one restores what fits; one with more keeps its own seeds for
    the rest). Pure."""
    return list(saved[:max(0, gpus)])


def set_rng_state(state: dict) -> None:
    """Restore what :func:`rng_state` captured (parts missing from ``state`` are left alone).
    States loaded onto a GPU are brought back to the CPU, where torch's generators take them."""
    import random

    import torch

    if "python" in state:
        version, internal, gauss = state["python"]
        random.setstate((version, tuple(internal), gauss))
    if "torch" in state:
        torch.set_rng_state(state["torch"].cpu())
    if "cuda" in state and torch.cuda.is_available():
        for index, cuda_state in enumerate(cuda_states_to_restore(state["cuda"], torch.cuda.device_count())):
            torch.cuda.set_rng_state(cuda_state.cpu(), index)
    if "numpy" in state:
        import numpy

        kind, keys, pos, has_gauss, gauss = state["numpy"]
        numpy.random.set_state((kind, numpy.array(keys, dtype=numpy.uint32), pos, has_gauss, gauss))
