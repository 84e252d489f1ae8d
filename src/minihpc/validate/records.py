"""What ranks write while they train, and reading it back.

Each rank appends JSON lines to ``rank-R.jsonl`` in the record directory (a ``start`` line, a
``step`` line per step, a ``checksum`` line every K steps, an ``end`` line) and keeps
``heartbeat-R.json`` current: the step and the phase it is in (:data:`PHASES`), replaced
atomically at every phase so the launcher reads a whole one.
"""

from __future__ import annotations

import datetime
import json
import os
import time
from pathlib import Path

from minihpc.machine import files

PHASES = ("start", "data", "compute", "allreduce", "optimizer", "done")
"""A heartbeat's phase: loading the batch, forward+backward, waiting in the gradient
all-reduce (or the parameter server), the optimizer step, finished."""


def rank_file(directory: str | Path, rank: int) -> Path:
    return Path(directory) / f"rank-{rank}.jsonl"


def heartbeat_file(directory: str | Path, rank: int) -> Path:
    return Path(directory) / f"heartbeat-{rank}.json"


class Recorder:
    """One rank's writer: records appended and flushed line by line, heartbeats replaced."""

    def __init__(self, directory: str | Path, rank: int):
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.rank = rank
        self.step = -1
        self._fh = open(rank_file(self.directory, rank), "a", buffering=1)

    def write(self, kind: str, **fields) -> None:
        self._fh.write(json.dumps({"event": kind, "rank": self.rank, **fields}) + "\n")

    def beat(self, phase: str, step: int | None = None) -> None:
        if step is not None:
            self.step = step
        data = json.dumps({"rank": self.rank, "step": self.step, "phase": phase, "time": time.time()})
        files.replace(heartbeat_file(self.directory, self.rank), data.encode())

    def close(self) -> None:
        self._fh.close()


def read_rank_records(directory: str | Path) -> dict[int, list[dict]]:
    """Every rank's records, by rank; a torn last line (a killed rank) is skipped."""
    out: dict[int, list[dict]] = {}
    for path in sorted(Path(directory).glob("rank-*.jsonl")):
        rank = int(path.stem.split("-")[1])
        lines = []
        for line in path.read_text().splitlines():
            try:
                lines.append(json.loads(line))
            except ValueError:
                continue
        out[rank] = lines
    return out


def read_heartbeats(directory: str | Path) -> dict[int, dict]:
    """The latest heartbeat of each rank that wrote one."""
    out = {}
    for path in Path(directory).glob("heartbeat-*.json"):
        try:
            beat = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        out[int(beat["rank"])] = beat
    return out


def iso_utc(seconds: float | None) -> str | None:
    """An epoch time as ISO-8601 UTC to the second, ``2024-01-15T10:30:00Z``: what the spec's
    reports show, and what jq's ``fromdateiso8601`` and Python's ``fromisoformat`` both read.
    Reports keep the exact epoch float beside it (``*_unix``)."""
    if seconds is None:
        return None
    return datetime.datetime.fromtimestamp(seconds, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def write_json(path: str | os.PathLike, data) -> None:
    files.replace(path, (json.dumps(data, indent=2, allow_nan=True) + "\n").encode())
