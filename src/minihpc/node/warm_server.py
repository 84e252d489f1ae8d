"""The warm launcher's process: ``python -m minihpc.node.warm_server FD``, started by a node
agent (minihpc.node.warm), which it serves over the SOCK_SEQPACKET socket FD.

It imports torch and what torchrun and DDP pull in once, checks that no thread has started
(a fork copies only the thread that forks: a pool started here would be half there), says
``{"ready": ...}``, then forks one child per request, which becomes that job's torchrun
(minihpc.node.warm_child). Requests are JSON with two file descriptors: the job's output and a
socket for that child, on which the agent sends the job (argv, environment, cwd, user) to the
child alone -- this process never reads a job's environment, so no job's variables linger in
the memory later jobs are forked from -- and gets the answers: ``{"pid"}`` once forked,
``{"returncode", "at"}`` (as Popen's: -N for signal N; when this process saw it end, Unix time) once it has
ended and been reaped here. It never runs job code, never
holds a credential (the agent starts it without them), and ends when the agent closes FD.
"""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import sys
import threading
import time

MAX_MESSAGE = 1 << 20


def warm_up() -> None:
    """What every torchrun-launched job would import, once (see minihpc.node.torchrun)."""
    import torch._dynamo  # noqa: F401 - DDP imports it in every rank
    import torch.distributed.elastic.multiprocessing.errors  # noqa: F401
    import torch.distributed.launcher.api  # noqa: F401
    import torch.distributed.run  # noqa: F401

    import minihpc.node.rank  # noqa: F401
    from minihpc.node import torchrun, warm_child

    torchrun.parser()  # built once here, not in every job's torchrun
    skip_exit_unregistering()
    warm_child.remember_imports()  # last: after everything the launcher imports


EXIT_SKIPPED = ("torch.library", "_del_library")
"""A ``weakref.finalize`` callback that undoes in-process registrations at exit: torch's ~190
``Library`` objects (operator kernels registered at import) each unregister theirs at
interpreter exit. In a process forked from here that is 30-40 ms of copy-on-write faults
(8,000 pages) at every rank's end, to tidy a dispatcher about to vanish with the process."""


def skip_exit_unregistering() -> int:
    """Mark torch's operator-unregistering finalizers not to run at exit, in this process and
    so in every process forked from it (the job's own ``atexit`` handlers and finalizers still
    run). How many were marked."""
    import weakref

    marked = 0
    for f, info in list(getattr(weakref.finalize, "_registry", {}).items()):
        func = getattr(info, "func", None)
        if (getattr(func, "__module__", None), getattr(func, "__name__", None)) == EXIT_SKIPPED:
            f.atexit = False
            marked += 1
    return marked


def threads() -> int:
    """Threads of this process, Python's and native ones alike."""
    return len(os.listdir("/proc/self/task"))


def fork_aware_threads() -> int:
    """Threads every interpreter that imports torch has, and that survive a fork by design:
    numpy's OpenBLAS starts its pool when it loads and rebuilds it in a forked child
    (pthread_atfork). Counted before anything else is imported."""
    try:
        import numpy  # noqa: F401 - torch imports it too
    except ImportError:
        pass
    return threads()


def readiness() -> dict:
    """Import, then check that nothing started a thread a fork would leave half-copied."""
    try:
        allowed = fork_aware_threads()
        warm_up()
    except Exception as exc:  # noqa: BLE001 - the agent starts jobs cold and says why
        return {"ready": False, "why": f"import failed: {type(exc).__name__}: {exc}"}
    try:
        os.close(os.pidfd_open(os.getpid()))  # how children are watched (Linux 5.3)
    except OSError as exc:
        return {"ready": False, "why": f"no pidfds here ({exc})"}
    running = threads()
    if running > allowed or threading.active_count() != 1:
        return {"ready": False, "why": f"importing torch started {running - allowed} thread(s); a fork copies none of them"}
    return {"ready": True}


class Server:
    def __init__(self, control: socket.socket):
        self.control = control
        self.children: dict[int, tuple[int, socket.socket]] = {}  # pidfd -> (pid, answers)
        self.poller = select.poll()
        self.poller.register(control.fileno(), select.POLLIN)

    def serve(self) -> None:
        while True:
            ready = self.poller.poll()
            seen = time.time()  # when the children among them ended, as near as this process can tell
            for fd, _ in ready:
                if fd == self.control.fileno():
                    if not self.take_request():
                        return
                else:
                    self.reap(fd, seen)

    def take_request(self) -> bool:
        """Fork the child a request asks for; False once the agent has gone."""
        try:
            data, fds, _flags, _addr = socket.recv_fds(self.control, MAX_MESSAGE, 2)
        except OSError:
            return False
        if not data:
            return False
        if len(fds) != 2:
            for fd in fds:
                os.close(fd)
            return True
        out, answers = fds[0], socket.socket(fileno=fds[1])
        try:
            pid = os.fork()
        except OSError as exc:
            os.close(out)
            _send(answers, {"error": f"{type(exc).__name__}: {exc}"})
            answers.close()
            return True
        if pid == 0:
            self._child(out, answers)
        os.close(out)  # the child has it: the job's output ends when the child's tree exits
        _send(answers, {"pid": pid})
        pidfd = os.pidfd_open(pid)
        self.children[pidfd] = (pid, answers)
        self.poller.register(pidfd, select.POLLIN)
        return True

    def _child(self, out: int, answers: socket.socket) -> None:
        from minihpc.node import warm_child

        os.close(self.control.detach())  # no line to the agent, nor to other jobs' answers
        for pidfd, (_, theirs) in self.children.items():
            os.close(pidfd)
            os.close(theirs.detach())
        warm_child.run(out, answers)  # never returns

    def reap(self, pidfd: int, seen: float) -> None:
        """Reap a child that has ended (its pidfd is readable) and answer its status, dated
        ``seen``: here, not when the agent reads it, which a busy agent (threads, the GIL) may do
        late -- the job's cause is the failure seen first, and a killed rank's peers fail a
        moment after it (core.outcome.root_failure)."""
        pid, answers = self.children.pop(pidfd)
        self.poller.unregister(pidfd)
        os.close(pidfd)
        _, status = os.waitpid(pid, 0)
        _send(answers, {"returncode": os.waitstatus_to_exitcode(status), "at": seen})
        answers.close()


def _send(sock: socket.socket, message: dict) -> None:
    try:
        sock.send(json.dumps(message).encode())
    except OSError:
        pass  # the agent stopped listening: the result is nobody's now


def main(argv: list[str]) -> int:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C of a local cluster is the agent's to handle
    control = socket.socket(fileno=int(argv[0]))
    _send(control, readiness())
    Server(control).serve()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
