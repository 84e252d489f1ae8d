"""Replacing a file so that a reader sees the old version or the new one, never a mix (and,
when asked, so that it survives a crash); a file's digest; removing a forgotten job's folders."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable
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
    import tempfile  # here, not at the top: every CLI call imports this module

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
    import hashlib  # here, as the imports below: every CLI call imports this module

    digest = hashlib.sha256()
    try:
        with open(path, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                digest.update(block)
    except OSError:
        return None
    return digest.hexdigest()


def remove_job_dirs(roots: Iterable[str | os.PathLike | None], job_id: int) -> list[Path]:
    """Remove ``<root>/job-<id>`` under each root given (the spool, the logs; an empty or None
    root is skipped), whatever is in it; one that is gone or cannot be removed is left as is.
    A job's checkpoints are never among them: they are the user's results. The folders left
    (not removed whole: another uid's, or a file the job alone can remove)."""
    import shutil

    left = []
    for root in roots:
        if root:
            folder = Path(root) / f"job-{job_id}"
            # ignore_errors: a job may have left files that it alone can remove
            shutil.rmtree(folder, ignore_errors=True)
            if os.path.lexists(folder):
                left.append(folder)
    return left


def read_chunks(fd: int, size: int):
    """What ``fd`` gives, ``size`` bytes at most at a time, until its end (a read error ends it
    too: a closed terminal, a vanished pipe)."""
    while True:
        try:
            chunk = os.read(fd, size)
        except OSError:
            return
        if not chunk:
            return
        yield chunk


def read_job_file(path: str | os.PathLike, limit: int) -> bytes | None:
    """Up to ``limit + 1`` bytes of a file a job may have written or replaced (one more than a
    caller takes, so that one too large is seen as such), or None unless it is a regular file.

    Never blocks and never follows a link: a job that puts a FIFO, a device or a symlink where
    the agent reads its progress or result gets None, not a frozen agent (O_NONBLOCK: opening
    a FIFO with no writer returns at once) nor someone else's file (O_NOFOLLOW)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        parts, left = [], limit + 1
        for chunk in read_chunks(fd, min(left, 1 << 16)):
            parts.append(chunk[:left])
            left -= len(parts[-1])
            if left <= 0:
                break
        return b"".join(parts)
    finally:
        os.close(fd)


def closed_to_others(path: str | os.PathLike) -> str | None:
    """The first folder on the way to ``path`` (itself included) that a user who is neither its
    owner nor in its group cannot pass through (no ``o+x``), or None when every one lets them."""
    here = os.path.abspath(path)
    folders = []
    while True:
        folders.append(here)
        parent = os.path.dirname(here)
        if parent == here:
            break
        here = parent
    for folder in reversed(folders):
        try:
            mode = os.stat(folder).st_mode
        except OSError:
            return folder
        if stat.S_ISDIR(mode) and not mode & stat.S_IXOTH:
            return folder
    return None
