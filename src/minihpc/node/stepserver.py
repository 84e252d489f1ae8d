"""The first node's step server: ``srun`` in a batch script asks it, over a unix socket in the
job's private directory, to start a step; it places the tasks (core.steps.layout), tells every
node's share in one transaction, waits for each task's end, and answers with srun's exit code.

Gang semantics: the first task to fail, or srun going away (killed, Ctrl-C), kills the step's
other tasks on every node. Only the job's own user may connect (the directory is 0700, and the
peer's uid is checked with SO_PEERCRED); the request is the job's word and is used only to
start processes as that user.

Protocol, one JSON object per line: srun sends ``{"argv", "nodes", "ntasks", "ntasks_per_node",
"env", "cwd", "input", "unbuffered", "gpus_per_task"}``; the server answers ``{"step", "ntasks", "nodes",
"tasks"}`` when the tasks are sent, then the tasks' output as it comes, ``{"o": base64, "t":
task, "f": 1 or 2}``, then ``{"exit_code", "errors"}`` at the end, after all of the output --
or ``{"error"}`` for a step that cannot run. Meanwhile srun sends its stdin, ``{"i": base64}``
and then ``{"eof": true}``, which the server passes on to the tasks (``input``: "all", "none"
or a task id, as ``srun --input``), INPUT_MAX bytes at most (past them, the tasks see the end
and srun gets ``{"warning"}``, a line for its stderr).
"""

from __future__ import annotations

import base64
import json
import logging
import os
import socket
import struct
import threading

from minihpc.core.errors import UsageError
from minihpc.core.launch_spec import LaunchSpec
from minihpc.core.steps import Layout, layout, step_exit
from minihpc.node import identity
from minihpc.node.jobdir import JobDir
from minihpc.state.connect import REDIS_ERRORS, retrying
from minihpc.state.steps import INPUT_MAX, KILL, START

log = logging.getLogger(__name__)

REQUEST_MAX = 1 << 20
"""Bytes a step request may have (its environment included)."""


class StepServer:
    def __init__(self, spec: LaunchSpec, store, jobdir: JobDir, who: identity.Identity | None, poll: float):
        self.spec, self.store, self.poll = spec, store, poll
        self.uid = who.uid if who else os.getuid()
        self.steps = 0
        self._lock = threading.Lock()
        self.closed = threading.Event()
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        # The folder is the job's: between bind() and a chmod or chown by path, the job could
        # swap the socket for a link to any file, which root would then change. So nothing
        # here follows a link: the mode comes with the file (bind() gives it the socket's own,
        # set through the fd), and the owner is changed with lchown.
        os.fchmod(self.sock.fileno(), 0o600)
        self.sock.bind(jobdir.socket)
        if who is not None and os.geteuid() == 0:
            os.chown(jobdir.socket, who.uid, who.gid, follow_symlinks=False)
        self.sock.listen(16)
        self.sock.settimeout(poll)
        self._thread = threading.Thread(target=self._accept, name=f"srun server job {spec.job_id}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def close(self) -> None:
        self.closed.set()
        self._thread.join(self.poll + 1)
        self.sock.close()

    def _accept(self) -> None:
        while not self.closed.is_set():
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _next_step(self) -> int:
        with self._lock:
            step, self.steps = self.steps, self.steps + 1
            return step

    def _serve(self, conn: socket.socket) -> None:
        with conn:
            try:
                if peer_uid(conn) != self.uid:
                    raise UsageError("only the job's own user may start its steps")
                request = read_request(conn)
                lay = layout(self.spec.nodes, self.spec.tasks_per_node, request.get("nodes"),
                             request.get("ntasks"), request.get("ntasks_per_node"))
                which = request.get("input", "none")
                if isinstance(which, int) and which >= lay.ntasks:
                    raise UsageError(f"--input={which}: the step has no task {which} (tasks 0-{lay.ntasks - 1})")
                self._run(conn, self._next_step(), lay, request)
            except UsageError as exc:
                _send(conn, {"error": str(exc)})
            except Exception as exc:  # noqa: BLE001 - srun must hear why, whatever broke
                log.exception("job %s: a step failed to run", self.spec.job_id)
                _send(conn, {"error": f"{type(exc).__name__}: {exc}"})

    def _run(self, conn: socket.socket, step: int, lay: Layout, request: dict) -> None:
        spec = self.spec
        io = {"input": request.get("input", "none"), "unbuffered": bool(request.get("unbuffered"))}
        start = {"kind": START, "step": step, "argv": request["argv"], "env": request.get("env") or {},
                 "cwd": request.get("cwd") or "", "nodes": lay.nodes, "tasks": lay.tasks, "io": io,
                 "gpus_per_task": request.get("gpus_per_task") or 0}
        retrying(self.store.send, spec.job_id, spec.attempt, {n: start for n in lay.nodes},
                 what=f"job {spec.job_id} step {step}", deadline=30.0)
        log.info("job %s step %s: %d task(s) on %s: %s", spec.job_id, step, lay.ntasks, ",".join(lay.nodes),
                 " ".join(request["argv"])[:200])
        srun = Srun(conn)
        srun.send({"step": step, "ntasks": lay.ntasks, "nodes": lay.nodes, "tasks": lay.tasks})
        threading.Thread(target=self._stdin, args=(srun, step), name=f"srun stdin job {spec.job_id} step {step}",
                         daemon=True).start()
        ends, killed, causes = [], False, None
        while len(ends) < lay.ntasks and not self.closed.is_set():
            self._relay(srun, step, self.poll / 2)
            try:
                end = self.store.next_task_end(spec.job_id, spec.attempt, step, 0)
            except REDIS_ERRORS:
                end = None
                self.closed.wait(self.poll)
            if end is not None:
                ends.append(end)
            if not killed and ((end is not None and end.failed) or srun.gone.is_set()):
                killed, causes = True, len(ends)
                retrying(self.store.send, spec.job_id, spec.attempt,
                         {n: {"kind": KILL, "step": step} for n in lay.nodes},
                         what=f"job {spec.job_id} step {step} kill", deadline=30.0)
        if len(ends) == lay.ntasks:
            while self._relay(srun, step, 0):  # a task's output is all written before its end is
                pass
            # srun names the failures that ended the step, not the tasks it killed because of them.
            srun.send({"exit_code": step_exit(ends), "errors": [e.describe() for e in ends[:causes] if e.failed]})

    def _relay(self, srun: Srun, step: int, wait: float) -> bool:
        """The step's output that has come, to srun; whether there was any."""
        try:
            chunks = self.store.read_output(self.spec.job_id, self.spec.attempt, step, wait)
        except REDIS_ERRORS:
            return False
        for procid, fd, data in chunks:
            srun.send({"o": base64.b64encode(data).decode(), "t": procid, "f": fd})
        return bool(chunks)

    def _stdin(self, srun: Srun, step: int) -> None:
        """srun's stdin to the step's input stream, until its end or srun's; INPUT_MAX bytes at
        most (then its end, and srun is told)."""
        spec, sent, ended = self.spec, 0, False
        for message in srun.messages():
            if ended or not ("i" in message or message.get("eof")):
                continue
            data = base64.b64decode(message["i"]) if "i" in message else None
            if data is not None and sent + len(data) > INPUT_MAX:
                srun.send({"warning": f"srun: error: stdin is over {INPUT_MAX >> 20} MiB, what minihpc forwards "
                                      "to a step; the tasks see its end here (read a file instead)"})
                data = None
            sent += len(data or b"")
            ended = data is None
            retrying(self.store.write_input, spec.job_id, spec.attempt, step, data,
                     what=f"job {spec.job_id} step {step} stdin", deadline=30.0)


class Srun:
    """The server's side of one srun connection, after its request: messages to srun (dropped
    once it is gone), and srun's own messages until it goes (then ``gone`` is set)."""

    def __init__(self, conn: socket.socket):
        self.conn, self.gone = conn, threading.Event()
        self._lock = threading.Lock()

    def send(self, message: dict) -> None:
        if self.gone.is_set():
            return
        with self._lock:
            try:
                self.conn.sendall(json.dumps(message).encode() + b"\n")
            except OSError:
                self.gone.set()

    def messages(self):
        """srun's messages, one JSON object per line, until it closes its end."""
        try:
            for line in self.conn.makefile("rb"):
                try:
                    message = json.loads(line)
                except ValueError:
                    continue
                if isinstance(message, dict):
                    yield message
        except OSError:
            pass
        self.gone.set()


def peer_uid(conn: socket.socket) -> int:
    """The uid of the process at the other end of a unix socket (SO_PEERCRED)."""
    creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    return struct.unpack("3i", creds)[1]


def read_request(conn: socket.socket) -> dict:
    """srun's one-line request, checked for the fields and types it must have."""
    data = b""
    conn.settimeout(30)
    while not data.endswith(b"\n"):
        chunk = conn.recv(65536)
        if not chunk:
            break
        data += chunk
        if len(data) > REQUEST_MAX:
            raise UsageError(f"the step request is over {REQUEST_MAX} bytes (its environment is too large)")
    conn.settimeout(None)
    try:
        request = json.loads(data)
    except ValueError:
        raise UsageError("the step request is not JSON") from None
    argv = request.get("argv") if isinstance(request, dict) else None
    if not isinstance(argv, list) or not argv or not all(isinstance(a, str) for a in argv):
        raise UsageError("srun needs a command to run")
    for name in ("nodes", "ntasks", "ntasks_per_node", "gpus_per_task"):
        value = request.get(name)
        if value is not None and (not isinstance(value, int) or isinstance(value, bool)):
            raise UsageError(f"{name} must be a whole number, got {value!r}")
    which = request.get("input", "none")
    if not (which in ("all", "none") or (isinstance(which, int) and not isinstance(which, bool) and which >= 0)):
        raise UsageError(f"--input must be all, none or a task id, got {which!r}")
    env = request.get("env")
    if env is not None and not (isinstance(env, dict) and all(isinstance(v, str) for v in env.values())):
        raise UsageError("the step's environment must map names to strings")
    return request


def _send(conn: socket.socket, message: dict) -> None:
    try:
        conn.sendall(json.dumps(message).encode() + b"\n")
    except OSError:
        pass
