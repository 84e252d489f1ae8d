"""An srun task's I/O on its node, as Slurm's slurmstepd does it: the task's stdout and stderr
are read to their end and written to the step's output stream for srun (whole lines, unless
``-u``), and srun's stdin, read from the step's input stream, is written to the task's stdin.

Neither ever blocks the task on srun: output is drained as it comes, up to the job log's cap
per task (past it, it is counted and dropped, and one line on stderr says so); input is written
without blocking, so a task that never reads its stdin only leaves it unread.

:func:`lines` is the decision (pure); :class:`OutputPump` and :class:`InputPump` are the
threads around it.
"""

from __future__ import annotations

import errno
import fcntl
import logging
import os
import select
import threading
from collections.abc import Callable

from minihpc.state.connect import REDIS_ERRORS

log = logging.getLogger(__name__)

CHUNK = 64 * 1024
"""Bytes read from a task's pipe at a time, and the longest line held back for its end."""

WAIT = 0.2
"""Seconds an input pump waits for its next chunk or for the task's pipe, between looks at
whether to stop."""


def lines(pending: bytes, chunk: bytes, unbuffered: bool) -> tuple[bytes, bytes]:
    """(what to send now, what to hold) after ``chunk`` arrives behind ``pending``: whole lines
    (a partial line waits for its end, up to CHUNK bytes), or everything with ``-u``."""
    data = pending + chunk
    if unbuffered:
        return data, b""
    cut = data.rfind(b"\n") + 1
    if len(data) - cut >= CHUNK:
        return data, b""
    return data[:cut], data[cut:]


def dropped_line(procid: int, dropped: int, limit: int) -> bytes:
    return (f"srun: {dropped} bytes of task {procid}'s output were dropped: a task's output is capped at "
            f"{limit} bytes (MINIHPC_JOB_LOG_MAX)\n").encode()


class OutputPump(threading.Thread):
    """Reads one of a task's pipes (``fd`` 1 or 2 of the task) to its end; ``write(fd, data)``
    sends each piece on. ``budget`` is the task's cap, shared by its two pumps (0: none)."""

    def __init__(self, pipe: int, fd: int, write: Callable[[int, bytes], None], budget: Budget,
                 unbuffered: bool, name: str):
        super().__init__(name=name, daemon=True)
        self.pipe, self.fd, self.write, self.budget, self.unbuffered = pipe, fd, write, budget, unbuffered

    def run(self) -> None:
        pending = b""
        try:
            while True:
                try:
                    chunk = os.read(self.pipe, CHUNK)
                except OSError:
                    chunk = b""
                if not chunk:
                    break
                now, pending = lines(pending, chunk, self.unbuffered)
                self._send(now)
            self._send(pending)
        finally:
            os.close(self.pipe)

    def _send(self, data: bytes) -> None:
        data = self.budget.take(data)
        if not data:
            return
        try:
            self.write(self.fd, data)
        except REDIS_ERRORS:
            log.warning("%s: %d bytes of output lost: Redis is unreachable", self.name, len(data))


class Budget:
    """A task's output cap: bytes it may still send, and how many it could not."""

    def __init__(self, limit: int):
        self.limit, self.left, self.dropped = limit, limit, 0
        self._lock = threading.Lock()

    def take(self, data: bytes) -> bytes:
        if not self.limit:
            return data
        with self._lock:
            now = data[:self.left]
            self.left -= len(now)
            self.dropped += len(data) - len(now)
            return now


class InputPump(threading.Thread):
    """Writes a step's stdin, from its stream, to one task's stdin pipe, then closes it (at
    the stream's end, when the task stops reading for good, or when told to stop)."""

    def __init__(self, pipe: int, read: Callable[[str, float], tuple[str, list[bytes | None]]], name: str):
        super().__init__(name=name, daemon=True)
        self.pipe, self.read = pipe, read
        self.stopping = threading.Event()
        fcntl.fcntl(pipe, fcntl.F_SETFL, fcntl.fcntl(pipe, fcntl.F_GETFL) | os.O_NONBLOCK)

    def stop(self) -> None:
        self.stopping.set()

    def run(self) -> None:
        cursor = "0-0"
        try:
            while not self.stopping.is_set():
                try:
                    cursor, chunks = self.read(cursor, WAIT)
                except REDIS_ERRORS:
                    self.stopping.wait(WAIT)
                    continue
                for chunk in chunks:
                    if chunk is None or not self._write(chunk):
                        return
        finally:
            os.close(self.pipe)

    def _write(self, data: bytes) -> bool:
        """Whether all of ``data`` was written (False: the task closed its stdin, or stop)."""
        view = memoryview(data)
        while view and not self.stopping.is_set():
            select.select([], [self.pipe], [], WAIT)
            try:
                view = view[os.write(self.pipe, view):]
            except BlockingIOError:
                continue
            except OSError as exc:
                if exc.errno != errno.EPIPE:
                    log.warning("%s: stdin not written: %s", self.name, exc)
                return False
        return not view
