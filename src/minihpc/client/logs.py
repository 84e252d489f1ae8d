"""A job's output, one rule for every face (``minihpc logs [-f]``, the REST API and its
stream): where each node's log is, reading it safely (jobs write the logs volume: a log may be
a symlink, a FIFO or huge), following it by byte offset in whole lines so a reader resumes
exactly where it stopped, and waiting for the last lines once the job has ended."""

from __future__ import annotations

import os
import re
import stat
import time
from pathlib import Path

from minihpc.core.errors import NotFound
from minihpc.core.models import Job
from minihpc.state.store import Store

NODE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,62}")
"""A node name as it can appear in a log's file name (no path separators, no dot-dots)."""
READ_MAX = 1 << 20
"""Bytes one read takes from a log; a reader comes back for the rest."""
SETTLE = 4.0
"""Seconds to wait, once a job has ended, for every node's ranks to report: a cancelled or
timed-out job's ranks get SIGTERM and a grace before SIGKILL, and write their last lines then."""


def log_dir(store: Store, job_id: int) -> Path:
    return Path(store.cluster_info()["log_dir"]) / f"job-{job_id}"


def log_nodes(job: Job, directory: Path) -> list[str]:
    """The job's current nodes, then any other node that left a log (an earlier attempt's)."""
    try:
        others = sorted(p.stem for p in directory.iterdir() if p.suffix == ".log" and NODE_NAME.fullmatch(p.stem))
    except OSError:
        others = []
    return list(job.nodes) + [n for n in others if n not in job.nodes]


def log_files(store: Store, job: Job, node: str | None = None, directory: Path | None = None) -> list[tuple[str, Path]]:
    """(node, path) of the job's logs: every node it ran on, or only ``node`` (NotFound if the
    job has no log from it)."""
    directory = directory or log_dir(store, job.id)
    names = log_nodes(job, directory)
    if node is not None:
        if node not in names:
            ran = ", ".join(names) or "none yet"
            raise NotFound(f"job {job.id} has no log from node {node!r} (nodes: {ran})")
        names = [node]
    return [(n, directory / f"{n}.log") for n in names]


def read_from(path: Path, offset: int, limit: int = READ_MAX) -> bytes:
    """Up to ``limit`` bytes of a regular file from ``offset``; nothing for a missing file, a
    symlink, a FIFO or anything else a job could put there to stall or mislead a reader."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return b""
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return b""
        return os.pread(fd, limit, offset)
    finally:
        os.close(fd)


def size(path: Path) -> int:
    try:
        info = os.lstat(path)
    except OSError:
        return 0
    return info.st_size if stat.S_ISREG(info.st_mode) else 0


def chunks(path: Path):
    """The whole log, READ_MAX bytes at a time (as they are when each is read)."""
    offset = 0
    while data := read_from(path, offset):
        yield data
        offset += len(data)


def tail_text(path: Path, lines: int | None, limit: int = READ_MAX) -> str:
    """The log's last ``lines`` lines (all of it for None), reading at most ``limit`` bytes from
    its end."""
    end = size(path)
    start = max(0, end - limit)
    data = read_from(path, start, limit)
    if start and b"\n" in data:
        data = data[data.index(b"\n") + 1:]  # a cut first line is not a line
    text = data.decode(errors="replace")
    if lines is None:
        return text
    kept = text.splitlines(keepends=True)
    return "".join(kept[-lines:]) if lines > 0 else ""


def whole_lines(data: bytes, final: bool = False) -> list[bytes]:
    """The complete lines in ``data`` (without their newline); a partial last line waits for its
    end unless ``final`` (the job is over)."""
    lines = data.split(b"\n")
    rest = lines.pop()
    if final and rest:
        lines.append(rest)
    return lines


class LogFollower:
    """A job's logs followed from a cursor (byte offset per node), in whole lines."""

    def __init__(self, store: Store, job: Job, node: str | None = None, cursor: dict[str, int] | None = None):
        self.store, self.node = store, node
        self.directory = log_dir(store, job.id)
        self.offsets: dict[str, int] = dict(cursor or {})
        self.files = log_files(store, job, node, self.directory)

    def refresh(self, job: Job) -> None:
        """The job's nodes may change (a requeued job runs elsewhere); earlier logs stay."""
        self.files = log_files(self.store, job, self.node, self.directory)

    def read(self, final: bool = False) -> list[tuple[str, str, dict[str, int]]]:
        """[(node, line, offsets after it)] of the whole lines written since the last read,
        node by node; ``final`` also takes a last line without its newline."""
        out = []
        for name, path in self.files:
            start = self.offsets.get(name, 0)
            if size(path) <= start:
                continue
            data = read_from(path, start)
            lines = whole_lines(data, final and len(data) < READ_MAX)
            if not lines and len(data) == READ_MAX:  # one line longer than a read: send it in pieces
                lines = [data]
            offset = start
            for line in lines:
                offset = min(offset + len(line) + 1, start + len(data))
                self.offsets[name] = offset
                out.append((name, line.decode(errors="replace"), dict(self.offsets)))
        return out


def settled(job: Job, reported: set[str]) -> bool:
    """Whether every node of the job's last attempt has reported: its ranks are gone and its
    last lines written."""
    return not job.attempts or set(job.nodes) <= reported


def settle(store: Store, job: Job, timeout: float = SETTLE, poll: float = 0.1) -> None:
    """Once ``job`` has ended, wait until it is :func:`settled`, or ``timeout``."""
    deadline = time.monotonic() + timeout
    while not settled(job, set(store.job_results(job.id, job.attempts))) and time.monotonic() < deadline:
        time.sleep(poll)


def follow(store: Store, job_id: int, node: str | None = None, poll: float = 0.3):
    """Every line of the job's logs until it has ended for good: yields (node, line)."""
    follower = LogFollower(store, store.get_job(job_id), node)
    while True:
        job, over = store.job_settled(job_id)
        follower.refresh(job)
        if over:
            settle(store, job)
        while batch := follower.read(final=over):
            for name, line, _ in batch:
                yield name, line
            if not over:
                break  # more comes next round; at the end, read until every log is done
        if over:
            return
        time.sleep(poll)
