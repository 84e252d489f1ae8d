"""Checkpoints for job scripts: atomic saves, a verified manifest, a LATEST pointer, keep K.

    from minihpc import checkpoint
    found = checkpoint.load_latest(ckpt_dir)          # None on a fresh start
    ...
    if rank == 0 and step % every == 0:
        checkpoint.save(ckpt_dir, step, {"model": ..., "optimizer": ...})

A save never leaves a half-written file where a reader looks: the data goes to a temporary file
in the same directory, is fsynced, renamed into place, and the directory is fsynced; then its
manifest (step, size, sha256) and the LATEST pointer are replaced the same way. Loading walks
from LATEST back through older checkpoints and returns the newest one whose bytes match its
manifest, so a crash at any moment costs at most the checkpoint being written.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

LATEST = "LATEST"
KEEP = 3
_NAME = re.compile(r"^ckpt-(\d{8,})\.pt$")


@dataclass(frozen=True)
class Loaded:
    step: int
    path: Path
    state: Any


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_atomically(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, 0o644)  # mkstemp makes 0600; checkpoints are for every user of the cluster
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    _fsync_dir(path.parent)


def file_name(step: int) -> str:
    return f"ckpt-{step:08d}.pt"


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def save(directory: str | os.PathLike, step: int, state: Any, keep: int = KEEP) -> Path:
    """Save ``state`` (anything torch.save takes) as the checkpoint of ``step``; keep the
    newest ``keep``. Call it from one rank only."""
    import io

    import torch

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    buffer = io.BytesIO()
    torch.save(state, buffer)
    data = buffer.getvalue()
    path = directory / file_name(step)
    _write_atomically(path, data)
    manifest = {
        "step": step,
        "file": path.name,
        "bytes": len(data),
        "sha256": hashlib.sha256(data).hexdigest(),
        "saved_at": time.time(),
    }
    _write_atomically(path.with_suffix(".json"), json.dumps(manifest, sort_keys=True).encode())
    _write_atomically(directory / LATEST, (path.name + "\n").encode())
    prune(directory, keep)
    return path


def steps(directory: str | os.PathLike) -> list[int]:
    """Steps with a checkpoint file in ``directory``, oldest first."""
    directory = Path(directory)
    if not directory.is_dir():
        return []
    return sorted(int(m.group(1)) for p in directory.iterdir() if (m := _NAME.match(p.name)))


def prune(directory: str | os.PathLike, keep: int) -> None:
    directory = Path(directory)
    for step in steps(directory)[:-keep] if keep > 0 else []:
        for path in (directory / file_name(step), (directory / file_name(step)).with_suffix(".json")):
            path.unlink(missing_ok=True)


def verify(path: Path) -> bool:
    """True when ``path`` matches its manifest (size and sha256)."""
    try:
        manifest = json.loads(path.with_suffix(".json").read_text())
        return path.stat().st_size == manifest["bytes"] and _sha256(path) == manifest["sha256"]
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


def load_latest(directory: str | os.PathLike, map_location: str = "cpu") -> Loaded | None:
    """The newest checkpoint that verifies, or None when there is none."""
    import torch

    for path in candidates(directory):
        if verify(path):
            state = torch.load(path, map_location=map_location, weights_only=True)
            return Loaded(step=int(_NAME.match(path.name).group(1)), path=path, state=state)
    return None
