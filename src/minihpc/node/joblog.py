"""A job's output, relayed into its log with a bound, so a job that prints without end cannot
fill the shared disk for every job.

torchrun's stdout and stderr go to a pipe; a thread of the agent reads it and writes to the
job's log. The first ``limit - tail`` bytes are written as they come (``minihpc logs -f``
follows them); past that, only the last ``tail`` bytes are kept, in memory, and written at the
end after a line saying how much was dropped, so the traceback a job dies with survives. The
relay never blocks the job: it drains the pipe whatever happens to the log (a full disk...).

The decision is :class:`Cap` (pure); :class:`Relay` is the thread around it.
"""

from __future__ import annotations

import fcntl
import logging
import os
import select
import threading
from dataclasses import dataclass
from datetime import datetime, timezone

log = logging.getLogger(__name__)

CHUNK = 64 * 1024
"""Bytes read from the job's pipe at a time."""

TAIL = 1024 * 1024
"""Bytes of the end of a job's output kept past its cap and written when it ends (where its
traceback is); a quarter of the cap where the cap is below 4 MiB."""

PIPE_SIZE = 1024 * 1024
"""Bytes the job's pipe holds (Linux's most for a user), so a burst of output does not wait on
a slow disk; the kernel's default (64 KiB) where it refuses."""

POLL_INTERVAL = 0.2
"""Seconds between two looks of the relay at whether it was told to stop."""

STOP_WAIT = 2.0
"""Seconds a relay told to stop (something still holds the pipe) has to write its end."""


def tail_for(limit: int) -> int:
    """Bytes kept for the end of the output under a cap of ``limit`` bytes."""
    return min(TAIL, limit // 4)


def dropped_line(dropped: int, limit: int) -> bytes:
    return (f"=== minihpc: {dropped} bytes of output were dropped here: the log of each job is capped "
            f"at {limit} bytes per node (MINIHPC_JOB_LOG_MAX) ===\n").encode()


class Cap:
    """What of a job's output goes in its log: the first ``limit - tail`` bytes as they come,
    then only the last ``tail`` bytes, kept here until :meth:`ending`. ``limit`` 0: everything,
    as it comes. The log never gets more than ``limit`` bytes of output plus one line."""

    def __init__(self, limit: int, tail: int | None = None):
        self.limit = limit
        self.tail = tail_for(limit) if tail is None else tail
        self.head = limit - self.tail if limit else 0
        self.written = 0
        """Bytes given to be written as they came (out of ``head``)."""
        self.dropped = 0
        """Bytes past the cap that are not kept."""
        self.kept = bytearray()
        self.line_open = False
        """Whether what was given to be written so far ends in the middle of a line."""

    def take(self, chunk: bytes) -> bytes:
        """The part of ``chunk`` to write now; the rest joins the kept tail, whose oldest bytes
        are dropped when it grows past ``tail``."""
        if not self.limit:
            now = chunk
        else:
            now = chunk[:max(self.head - self.written, 0)]
            rest = chunk[len(now):]
            if rest:
                self.kept += rest
                over = len(self.kept) - self.tail
                if over > 0:
                    del self.kept[:over]
                    self.dropped += over
        if now:
            self.written += len(now)
            self.line_open = not now.endswith(b"\n")
        return now

    def ending(self) -> bytes:
        """What to write once the output has ended: the line saying how much was dropped (if
        anything was), then the kept tail."""
        tail, self.kept = bytes(self.kept), bytearray()
        if not self.dropped:
            return tail
        return (b"\n" if self.line_open else b"") + dropped_line(self.dropped, self.limit) + tail


@dataclass(frozen=True)
class Summary:
    """How a relay ended: bytes written to the log (the dropped line included), dropped past the
    cap, lost to write errors; ``eof`` False if it was stopped while something held the pipe."""

    written: int
    dropped: int
    unwritten: int
    eof: bool


class Relay:
    """Drains a job's pipe into its log through a :class:`Cap`, in a thread of its own. The
    job gets :attr:`input` as its stdout; :meth:`close_input` once it has its copy; then
    :meth:`join`. The relay owns both ends of the pipe and closes them."""

    def __init__(self, out, limit: int, subject: str):
        self.out, self.subject = out, subject
        self.cap = Cap(limit)
        self.written = self.unwritten = 0
        self.eof = False
        self._stop = threading.Event()
        self._output, self.input = os.pipe()
        _enlarge(self.input)
        self._thread = threading.Thread(target=self._run, name=f"joblog {subject}", daemon=True)

    def close_input(self) -> None:
        """Close the agent's copy of the pipe's write end: the output ends (EOF) when the job
        and whatever it started have closed theirs."""
        if self.input is not None:
            os.close(self.input)
            self.input = None

    def join(self, timeout: float) -> Summary:
        """Wait up to ``timeout`` seconds for the end of the output and its ending to be
        written; past that (something the job left still holds the pipe), stop the relay, which
        writes the ending of what it got, and go on."""
        self.close_input()
        self._thread.join(timeout)
        if self._thread.is_alive():
            log.warning("%s: its output has not ended %.0f s after its ranks did (a process still "
                        "holds it); its log ends here", self.subject, timeout)
            self._stop.set()
            self._thread.join(STOP_WAIT)
        if self.cap.dropped:
            log.info("%s: %d bytes of its output dropped past the cap of %d bytes",
                     self.subject, self.cap.dropped, self.cap.limit)
        return Summary(self.written, self.cap.dropped, self.unwritten, self.eof)

    def _run(self) -> None:
        try:
            poller = select.poll()
            poller.register(self._output, select.POLLIN)
            while not self._stop.is_set():
                if not poller.poll(POLL_INTERVAL * 1000):
                    continue
                chunk = os.read(self._output, CHUNK)
                if not chunk:
                    self.eof = True
                    break
                self._write(self.cap.take(chunk))
            self._write(self.cap.ending())
        except Exception:  # noqa: BLE001 - a thread that raises helps no one; say it, and end
            log.exception("%s: relaying its output to its log failed", self.subject)
        finally:
            os.close(self._output)

    def _write(self, data: bytes) -> None:
        """Write all of ``data``; what cannot be is counted, and the first failure logged, and
        the relay goes on draining (the job must never wait on its log)."""
        view = memoryview(data)
        while view:
            try:
                n = self.out.write(view)
                if n == 0:
                    raise OSError("the log took no bytes")
            except (OSError, ValueError) as exc:  # ValueError: the log was closed under us
                self._lost(len(view), exc)
                return
            n = len(view) if n is None else n  # None: a writer that writes all or raises
            self.written += n
            view = view[n:]

    def _lost(self, n: int, exc: Exception) -> None:
        if not self.unwritten:
            log.warning("%s: cannot write to its log (%s); its output is still drained, and what "
                        "cannot be written is dropped", self.subject, exc)
        self.unwritten += n


def start(out, limit: int, subject: str) -> Relay:
    """A relay of a job's output into ``out`` (a file open for writing) under a cap of ``limit``
    bytes (0: none), already running; ``subject`` names the job in warnings."""
    relay = Relay(out, limit, subject)
    try:
        relay._thread.start()
    except BaseException:
        relay.close_input()
        os.close(relay._output)
        raise
    return relay


def _enlarge(fd: int) -> None:
    try:
        fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, PIPE_SIZE)
    except (OSError, AttributeError):  # over the user's limit, or not Linux: the default will do
        pass


def stamp() -> str:
    """Now, as minihpc's own lines in a job's log date themselves."""
    return datetime.now(timezone.utc).astimezone().isoformat(timespec="seconds")


def note(out, line: str) -> None:
    """A line of minihpc's own in a job's log, if it can be written (a full disk must not
    change the job's result)."""
    try:
        out.write(line.encode())
    except (OSError, ValueError) as exc:  # ValueError: the log is already closed
        log.warning("cannot write to a job log: %s", exc)
