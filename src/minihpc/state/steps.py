"""A batch job's steps in Redis: the messages that reach each node's share (start a step's
tasks, kill a step, the batch script has ended, send a signal), the ends of the tasks, which
srun waits on, and a step's I/O: srun's stdin for the tasks, and the tasks' output for srun.

Each node's share of a batch job reads its own inbox (``keys.job_inbox``); srun's server on the
first node writes every node's messages in one transaction, and reads the step's task ends
(``keys.job_step_ends``) and output (``keys.job_step_output``). All of them expire: a job that
vanishes leaves nothing behind for long.

They are streams read from a cursor, never popped: redis-py retries a command whose answer was
lost (a timeout, a reset connection), and a pop whose answer is lost has taken a message nobody
gets; a retried read from the same cursor gets the same entries. Every task reads all of a
step's stdin with a cursor of its own. The other cursors are this client's (:class:`Cursors`),
one per stream it reads. Each node removes its own inbox when its share ends: the first node
removing them all once deleted an END another node had not read yet.
"""

from __future__ import annotations

import json
import threading

from minihpc.core.steps import TaskEnd
from minihpc.state import keys
from minihpc.state.connect import BLOCK_MAX

STEP_TTL = 86400
"""Seconds a step's messages, task ends and I/O outlive their last write."""

INPUT_MAX = 64 << 20
"""Bytes of stdin one step (or one ``minihpc run``) forwards; past them the tasks see its end
and srun says so: Redis holds it all until the step ends (a data set belongs in a file)."""

OUTPUT_ENTRIES = 100_000
"""Chunks a step's output stream keeps (about; older ones are trimmed): the nodes cap what they
write (the job log's cap), this bounds a stream that no srun reads."""

START, KILL, END, SIGNAL = "start", "kill", "end", "signal"
"""What a message to a node's share says (SIGNAL: ``scancel --signal``, to a running job of
either launch mode)."""

STEPS, BATCH_SHELL, FULL = "steps", "batch", "full"
"""Whom a SIGNAL message's signal is for (its ``scope``): every step's tasks (the default), the
batch shell only (``scancel -b``, ``sbatch --signal=B:``), or both with the shell's children
(``scancel -f``)."""


def signal_message(sig: int, scope: str, by: str) -> dict:
    """The message that asks a node's share to send ``sig`` to its processes in ``scope``."""
    return {"kind": SIGNAL, "signal": int(sig), "scope": scope, "by": by}


class Cursors:
    """Where this client has read each stream to: the id of the last entry it took."""

    def __init__(self):
        self._last: dict[str, str] = {}
        self._lock = threading.Lock()

    def get(self, key: str) -> str:
        with self._lock:
            return self._last.get(key, "0-0")

    def advance(self, key: str, entry_id: bytes | str) -> None:
        with self._lock:
            self._last[key] = entry_id.decode() if isinstance(entry_id, bytes) else entry_id

    def forget(self, names: list[str]) -> None:
        with self._lock:
            for name in names:
                self._last.pop(name, None)


def _block_ms(timeout: float) -> int | None:
    """XREAD's BLOCK for a wait of ``timeout`` seconds (BLOCK_MAX at most); None for no wait
    (BLOCK 0 would wait for ever)."""
    ms = int(min(BLOCK_MAX, timeout) * 1000)
    return ms if ms > 0 else None


class Steps:
    @property
    def cursors(self) -> Cursors:
        cursors = self.__dict__.get("_step_cursors")
        if cursors is None:
            cursors = self.__dict__.setdefault("_step_cursors", Cursors())
        return cursors

    def _append(self, pipe, key: str, fields: dict, maxlen: int | None = None) -> None:
        pipe.xadd(key, fields, maxlen=maxlen, approximate=True)
        pipe.expire(key, STEP_TTL)

    def _take(self, key: str, timeout: float, count: int = 1) -> list[tuple[str, dict]]:
        """Up to ``count`` entries of ``key`` past this client's cursor, waiting up to
        ``timeout`` for the first; the cursor moves past what is returned."""
        got = self.r.xread({key: self.cursors.get(key)}, count=count, block=_block_ms(timeout))
        entries = got[0][1] if got else []
        if entries:
            self.cursors.advance(key, entries[-1][0])
        return [(entry_id, fields) for entry_id, fields in entries]

    def send(self, job_id: int, attempt: int, messages: dict[str, dict]) -> None:
        """``messages[node]`` to each node's share, all or none."""
        with self.r.pipeline() as pipe:
            for node, message in messages.items():
                self._append(pipe, keys.job_inbox(job_id, attempt, node), {"m": json.dumps(message)})
            pipe.execute()

    def next_message(self, job_id: int, attempt: int, node: str, timeout: float) -> dict | None:
        """The next message to ``node``'s share, or None if none came within ``timeout``."""
        for _, fields in self._take(keys.job_inbox(job_id, attempt, node), timeout):
            message = json.loads(fields[b"m"])
            return message if isinstance(message, dict) else None
        return None

    def take_message(self, job_id: int, attempt: int, node: str) -> dict | None:
        """The next message to ``node``'s share if one is there, without waiting."""
        return self.next_message(job_id, attempt, node, 0)

    def report_task_end(self, job_id: int, attempt: int, step: int, end: TaskEnd) -> None:
        with self.r.pipeline() as pipe:
            self._append(pipe, keys.job_step_ends(job_id, attempt, step), {"e": json.dumps(end.to_dict())})
            pipe.execute()

    def next_task_end(self, job_id: int, attempt: int, step: int, timeout: float) -> TaskEnd | None:
        for _, fields in self._take(keys.job_step_ends(job_id, attempt, step), timeout):
            return TaskEnd.from_dict(json.loads(fields[b"e"]))
        return None

    def write_input(self, job_id: int, attempt: int, step: int | None, data: bytes | None) -> None:
        """A chunk of srun's stdin for the step's tasks (``step`` None: of ``minihpc run``'s
        stdin for the job's batch script); None: its end."""
        key = keys.job_input(job_id) if step is None else keys.job_step_input(job_id, attempt, step)
        with self.r.pipeline() as pipe:
            self._append(pipe, key, {"d": data} if data is not None else {"eof": 1})
            pipe.execute()

    def read_input(self, job_id: int, attempt: int, step: int | None, after: str,
                   timeout: float) -> tuple[str, list[bytes | None]]:
        """Chunks of a step's stdin (``step`` None: the job's) past ``after`` (None for its
        end), and the new cursor. The cursor is the caller's: every task reading stdin reads
        all of it."""
        key = keys.job_input(job_id) if step is None else keys.job_step_input(job_id, attempt, step)
        got = self.r.xread({key: after}, count=64, block=_block_ms(timeout))
        chunks = []
        for entry_id, fields in got[0][1] if got else []:
            after = entry_id.decode() if isinstance(entry_id, bytes) else entry_id
            chunks.append(fields.get(b"d") if b"eof" not in fields else None)
        return after, chunks

    def write_output(self, job_id: int, attempt: int, step: int, procid: int, fd: int, data: bytes) -> None:
        """What task ``procid`` wrote on ``fd`` (1 or 2), for srun."""
        with self.r.pipeline(transaction=False) as pipe:
            self._append(pipe, keys.job_step_output(job_id, attempt, step), {"t": procid, "f": fd, "d": data},
                         maxlen=OUTPUT_ENTRIES)
            pipe.execute()

    def read_output(self, job_id: int, attempt: int, step: int, timeout: float) -> list[tuple[int, int, bytes]]:
        """The step's output past this client's cursor, as (task, fd, bytes)."""
        return [(int(f[b"t"]), int(f[b"f"]), f[b"d"])
                for _, f in self._take(keys.job_step_output(job_id, attempt, step), timeout, count=256)]

    def forget_steps(self, job_id: int, attempt: int, nodes: list[str], steps: int) -> None:
        """Remove what the attempt's steps left (its end: nothing waits on them any more)."""
        names = [keys.job_inbox(job_id, attempt, n) for n in nodes]
        for s in range(steps):
            names += [keys.job_step_ends(job_id, attempt, s), keys.job_step_input(job_id, attempt, s),
                      keys.job_step_output(job_id, attempt, s)]
        self.cursors.forget(names)
        if names:
            self.r.delete(*names)
