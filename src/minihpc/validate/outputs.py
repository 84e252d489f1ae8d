"""Where the validate commands write: every output path is checked -- and its folder made --
before any training starts, so a run is never trained and then lost to a path it could not
write; and a report that still cannot be written is saved somewhere it can be, and said so.

The decision (:func:`problem`) is a pure function of what the file system answered
(:func:`probe`), so the rules are testable without making unwritable folders.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from minihpc.core.errors import MinihpcError, UsageError
from minihpc.validate.records import write_json


@dataclass(frozen=True)
class Probe:
    """What the file system said about an output path: whether it is a folder, whether its
    parent exists or could be made (``made_error``: why not), whether a file could be created
    in it (``write_error``: why not)."""

    is_dir: bool = False
    made_error: str | None = None
    write_error: str | None = None


def problem(flag: str, path: str, probe: Probe, want_dir: bool = False) -> str | None:
    """One line naming what stops ``path`` from being written, or None."""
    if want_dir:
        if probe.made_error:
            return f"{flag} {path}: cannot make that folder ({probe.made_error})"
    elif probe.is_dir:
        return f"{flag} {path} is a folder; give a file name, e.g. {Path(path) / 'report.json'}"
    elif probe.made_error:
        return f"{flag} {path}: cannot make its folder {Path(path).parent} ({probe.made_error})"
    if probe.write_error:
        where = path if want_dir else str(Path(path).parent)
        return f"{flag} {path}: cannot write in {where} ({probe.write_error})"
    return None


def _reason(exc: OSError) -> str:
    return exc.strerror or type(exc).__name__


def probe(path: str | os.PathLike, want_dir: bool = False) -> Probe:
    """Make the folder (``path`` itself, or its parent) and try creating a file there."""
    path = Path(path)
    folder = path if want_dir else path.parent
    is_dir = path.is_dir() and not want_dir
    if is_dir:
        return Probe(is_dir=True)
    blocker = next((p for p in [folder, *folder.parents] if p.exists() and not p.is_dir()), None)
    if blocker is not None:
        return Probe(made_error=f"{blocker} is a file, not a folder")
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        return Probe(made_error=_reason(exc))
    try:
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".minihpc-probe-"):
            pass
    except OSError as exc:
        return Probe(write_error=_reason(exc))
    return Probe()


def prepare(flag: str, path: str | os.PathLike | None, want_dir: bool = False) -> None:
    """UsageError (one line) unless ``path`` can be written; its folder exists afterwards.
    None: nothing to check."""
    if path is None or path == "":
        return
    line = problem(flag, str(path), probe(path, want_dir), want_dir)
    if line:
        raise UsageError(line)


def prepare_all(pairs: list[tuple[str, str | os.PathLike | None]]) -> None:
    """Every (flag, path) of a command, before it does any work."""
    for flag, path in pairs:
        prepare(flag, path)


def write_report(path: str | os.PathLike, data) -> None:
    """The report at ``path``; if that fails now, in a temporary file instead, and one line
    (MinihpcError) saying where it went -- a finished run is never lost."""
    try:
        write_json(path, data)
    except OSError as exc:
        fd, rescue = tempfile.mkstemp(prefix="minihpc-validate-", suffix=".json")
        with os.fdopen(fd, "w") as fh:
            json.dump(data, fh, indent=2, allow_nan=True)
        raise MinihpcError(f"cannot write {path} ({_reason(exc)}); the report was saved to {rescue}") from None
