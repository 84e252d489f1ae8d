"""Replacing a file so that a reader sees the old version or the new one, never a mix."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def replace(path: str | os.PathLike, data: bytes, durable: bool = False, mode: int = 0o644) -> None:
    """Write ``data`` to a temporary file beside ``path`` and rename it into place (``mode``:
    0644, for every user of the cluster, unless a secret asks for less).
    ``durable`` also fsyncs the file before the rename and the directory after it, so the new
    version survives a crash of the machine, not only of the writer."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, mode)  # mkstemp makes 0600
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            if durable:
                fh.flush()
                os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    if durable:
        _fsync_dir(path.parent)
