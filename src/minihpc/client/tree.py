"""A job's working tree brought along at submit (``minihpc submit --tree DIR``): the directory
a script lives in -- its modules, configs, small inputs -- packed as a tar archive on the
submitting side, capped, and unpacked read-only into the job's spool directory, where every
node reads it (the cluster's nodes need not see the submitter's files: Compose, real hosts).

Only directories and regular files travel; symbolic links, devices and FIFOs are left out (a
link could point anywhere on the cluster), and an archive naming a path outside its root, or
growing past the cap when unpacked, is refused as a whole.
"""

from __future__ import annotations

import io
import os
import stat
from pathlib import PurePosixPath

from minihpc.core.errors import UsageError

TREE_MAX = 64 << 20
"""Bytes a working tree may hold, unpacked: code and configs, not a data set (bring data through
the data volume)."""
TREE_FILES_MAX = 10_000
"""Files and directories a working tree may hold."""
SKIPPED = frozenset({".git", "__pycache__", ".venv", ".mypy_cache", ".pytest_cache"})
"""Directories ``pack`` leaves out: history, caches and virtualenvs are not the job's code."""


def pack(directory: str) -> bytes:
    """``directory`` as a gzip'd tar archive, its paths relative to it; UsageError when it is not
    a directory or holds more than the caps allow."""
    import tarfile  # here: only a submit with --tree, and a node unpacking one, needs it

    if not os.path.isdir(directory):
        raise UsageError(f"--tree {directory!r} is not a directory")
    buffer = io.BytesIO()
    total = count = 0
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for root, dirs, names in os.walk(directory):
            dirs[:] = sorted(d for d in dirs if d not in SKIPPED and not os.path.islink(os.path.join(root, d)))
            for name in sorted(dirs) + sorted(names):
                path = os.path.join(root, name)
                info = os.lstat(path)
                if not (stat.S_ISREG(info.st_mode) or stat.S_ISDIR(info.st_mode)):
                    continue
                total += info.st_size if stat.S_ISREG(info.st_mode) else 0
                count += 1
                _check_caps(directory, total, count)
                tar.add(path, arcname=os.path.relpath(path, directory), recursive=False)
    return buffer.getvalue()


def read_archive(stream) -> bytes:
    """A tar archive from ``stream`` (standard input), refused past the cap."""
    data = stream.read(TREE_MAX + 1)
    if len(data) > TREE_MAX:
        raise UsageError(f"the working tree on standard input is over {TREE_MAX >> 20} MiB")
    if not data:
        raise UsageError("the working tree on standard input is empty (expected a tar archive)")
    return data


def _check_caps(what: str, total: int, count: int) -> None:
    if total > TREE_MAX:
        raise UsageError(f"working tree {what!r} holds over {TREE_MAX >> 20} MiB; bring data through the "
                         "data volume, or name a smaller directory")
    if count > TREE_FILES_MAX:
        raise UsageError(f"working tree {what!r} holds over {TREE_FILES_MAX} files")


def _members(data: bytes) -> list[tuple]:
    """The archive's directories and regular files with their safe relative paths; UsageError
    for an archive that is not one, names a path outside its root, or is over the caps."""
    import tarfile

    try:
        tar = tarfile.open(fileobj=io.BytesIO(data), mode="r:*")
        members = tar.getmembers()
    except (tarfile.TarError, EOFError, OSError) as exc:
        raise UsageError(f"the working tree is not a tar archive ({exc})") from None
    out, total = [], 0
    for member in members:
        if not (member.isfile() or member.isdir()):
            continue
        path = PurePosixPath(member.name)
        if path.is_absolute() or ".." in path.parts:
            raise UsageError(f"the working tree names {member.name!r}, outside its root")
        parts = [p for p in path.parts if p != "."]
        if not parts:
            continue
        total += member.size if member.isfile() else 0
        _check_caps("(archive)", total, len(out) + 1)
        out.append((member, "/".join(parts)))
    return out


def read_member(data: bytes, name: str) -> str:
    """The text of file ``name`` inside the archive (the job script); UsageError if it is not
    there or not text."""
    import tarfile

    wanted = "/".join(p for p in PurePosixPath(name).parts if p != ".")
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:*") as tar:
        for member, path in _members(data):
            if path == wanted and member.isfile():
                try:
                    return tar.extractfile(member).read().decode("utf-8")
                except UnicodeDecodeError:
                    raise UsageError(f"script {name!r} in the working tree is not a text file") from None
    raise UsageError(f"script {name!r} is not a file in the working tree (give its path inside it)")


TREE_DIR_MODE = 0o775
"""A working tree's folders: others may list them (the job's user, once its node lends the spool
folder to its group) and the daemons' group may remove what is in them (the master removes
what the API unpacked, on hosts where the two are uids of one group)."""


def unpack(data: bytes, dest: str) -> None:
    """Unpack into the new directory ``dest``: read-only files (executable bits kept), directories
    others can list; nothing outside ``dest`` is touched."""
    import tarfile

    members = _members(data)
    os.makedirs(dest, mode=0o755)
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:*") as tar:
        for member, path in sorted(members, key=lambda m: m[1]):
            target = os.path.join(dest, *path.split("/"))
            if member.isdir():
                os.makedirs(target, mode=0o755, exist_ok=True)
                continue
            os.makedirs(os.path.dirname(target), mode=0o755, exist_ok=True)
            mode = 0o555 if member.mode & 0o111 else 0o444
            fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode)
            with os.fdopen(fd, "wb") as out, tar.extractfile(member) as src:
                while chunk := src.read(1 << 20):
                    out.write(chunk)
    for root, dirs, _ in os.walk(dest):  # umask may have narrowed them
        for d in dirs:
            os.chmod(os.path.join(root, d), TREE_DIR_MODE)
    os.chmod(dest, TREE_DIR_MODE)
