"""Replacing a file so that a reader sees the old version or the new one, never a mix (and,
when asked, so that it survives a crash); a file's digest."""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path


def fsync_dir(directory: str | os.PathLike) -> None:
    """Make a directory's entries (a file renamed or created in it) survive a crash."""
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
        fsync_dir(path.parent)


def sha256(path: str | os.PathLike) -> str | None:
    """The hex sha256 of a file's bytes; None when it cannot be read (gone, not a file)."""
    digest = hashlib.sha256()
    try:
        with open(path, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                digest.update(block)
    except OSError:
        return None
    return digest.hexdigest()
