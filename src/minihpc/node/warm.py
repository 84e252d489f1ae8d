"""A node agent's warm launcher: a process that has imported torch once (minihpc.node.warm_server)
and forks each job's torchrun from there, so that a job starts in milliseconds instead of the
seconds an interpreter takes to import torch, torch.distributed and what DDP pulls in.

The agent starts it when it starts; it warms up in the background. :meth:`WarmLauncher.launch`
returns a :class:`WarmProcess`, which the share watches, signals and tears down as it does a
Popen. What the warm launcher cannot serve starts cold (minihpc.core.warm.cold_reason); if it
cannot start or has died, jobs start cold, with the reason in their log, until a new one is up.
"""

from __future__ import annotations

import json
import logging
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time

from minihpc.core.launch_spec import DAEMON_ONLY_ENV

log = logging.getLogger(__name__)

SERVER_MODULE = "minihpc.node.warm_server"
READY_WAIT = 120.0
"""Seconds a launch waits for a launcher still importing torch (as long as a cold start would)."""
LOST = 255
"""The return code of a job whose launcher died before it could say how the job ended (said in
the agent's log)."""


class Unavailable(Exception):
    """The warm launcher cannot start this job: it starts cold, and its log says why."""


class Died(Unavailable):
    """The launcher died between the look that found it running and the job's request (killed,
    say): :meth:`WarmLauncher.launch` starts another and asks it once more. ``proc``: the
    launcher that died, when known."""

    def __init__(self, why: str, proc: subprocess.Popen | None = None):
        super().__init__(why)
        self.proc = proc


def server_env(agent_env: dict[str, str]) -> dict[str, str]:
    """The launcher's environment: the agent's less its credentials (job code is forked from
    it), never importing from its working directory."""
    env = {k: v for k, v in agent_env.items() if k not in DAEMON_ONLY_ENV}
    env["PYTHONSAFEPATH"] = "1"
    env["PYTHONUNBUFFERED"] = "1"  # its stdout and stderr become the jobs': unbuffered, as job_env has them
    return env


class WarmLauncher:
    def __init__(self, agent_env: dict[str, str] | None = None):
        self.env = server_env(dict(os.environ if agent_env is None else agent_env))
        self.lock = threading.Lock()
        self.proc: subprocess.Popen | None = None
        self.control: socket.socket | None = None
        self.ready: bool | None = None
        self.ended = False
        self.why = "not started"

    def start(self) -> None:
        """Start the launcher process; it imports in the background."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", SERVER_MODULE, str(theirs.fileno())],
                pass_fds=(theirs.fileno(),), env=self.env, stdin=subprocess.DEVNULL, cwd="/",
            )
        except OSError as exc:
            ours.close()
            self.ready, self.why = False, f"could not start: {exc}"
            log.warning("warm launcher %s", self.why)
            return
        finally:
            theirs.close()
        self.control, self.ready, self.why = ours, None, "warming up"
        log.info("warm launcher: pid %s, importing torch", self.proc.pid)

    def _await_ready(self) -> None:
        if self.ready is not None:
            return
        assert self.control is not None
        self.control.settimeout(READY_WAIT)
        try:
            data = self.control.recv(4096)
            self.ended = not data  # it ended without a word (killed, say), not for a reason it gave
            answer = json.loads(data or b"{}")
        except (OSError, ValueError) as exc:
            answer = {"ready": False, "why": f"no answer in {READY_WAIT:.0f} s ({exc}); a new one starts next time"}
            self.close()  # its late "ready" would never be read: the next launch starts another
        self.ready = bool(answer.get("ready"))
        self.why = "" if self.ready else str(answer.get("why") or "it ended while importing")
        if self.ready:
            log.info("warm launcher: ready (pid %s)", self.proc.pid if self.proc else "?")
        else:
            log.warning("warm launcher: not ready: %s", self.why)

    def _restart_if_gone(self) -> None:
        if self.proc is not None and self.proc.poll() is not None:
            log.warning("warm launcher: pid %s ended (%s); starting another", self.proc.pid, self.proc.returncode)
            self.close()
            self.start()

    def launch(self, argv: list[str], env: dict[str, str], cwd: str, user: tuple[int, int] | None,
               out: int, rank: list[str] | None = None) -> WarmProcess:
        """Fork torchrun ARGV for a job from the warm launcher -- or, given ``rank`` (the
        script and its arguments), that one rank itself, ENV holding what torchrun would add
        (minihpc.core.warm.runs_direct); raises Unavailable when it cannot.

        A launcher that dies under the request is replaced and asked again, once: started cold
        instead, a share of one rank would be torchrun, whose rendezvous the other nodes' warm
        ranks (minihpc.node.gang) never meet, and the job would hang until the gang timed out."""
        try:
            return self._launch(argv, env, cwd, user, out, rank)
        except Died as exc:
            log.warning("warm launcher: %s; asking another", exc)
            if exc.proc is not None:
                try:
                    exc.proc.wait(timeout=2)  # it closes the job's socket a moment before its end
                except subprocess.TimeoutExpired:
                    pass  # still running after all: kept, never killed (its jobs report through it)
            return self._launch(argv, env, cwd, user, out, rank)  # whose look now finds it ended

    def _launch(self, argv: list[str], env: dict[str, str], cwd: str, user: tuple[int, int] | None,
                out: int, rank: list[str] | None) -> WarmProcess:
        with self.lock:
            self._restart_if_gone()
            if self.control is None:
                raise Unavailable(f"the warm launcher is not running ({self.why})")
            self._await_ready()
            if not self.ready:
                why = f"the warm launcher is not ready ({self.why})"
                raise Died(why, self.proc) if self.ended else Unavailable(why)
            request = {"argv": argv, "env": env, "cwd": cwd, "uid": user[0] if user else None,
                       "gid": user[1] if user else None, "rank": rank}
            ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            try:
                socket.send_fds(self.control, [b"fork"], [out, theirs.fileno()])
                ours.send(json.dumps(request).encode())  # read by the forked child alone
            except OSError as exc:
                ours.close()
                raise Died(f"the warm launcher did not take the job ({exc})", self.proc) from exc
            finally:
                theirs.close()
            proc = self.proc
        try:
            return WarmProcess.started(ours, argv)
        except Died as exc:
            raise Died(str(exc), proc) from None

    def close(self) -> None:
        if self.control is not None:
            self.control.close()  # the launcher ends when it sees this
            self.control = None
        if self.proc is not None:
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


class WarmProcess:
    """A job's torchrun forked by the warm launcher, used as the share uses a Popen: its pid,
    poll(), wait(timeout), send_signal/terminate/kill, returncode (-N for signal N)."""

    def __init__(self, answers: socket.socket, args: list[str]):
        self.answers, self.args = answers, args
        self.pid = 0
        self.returncode: int | None = None
        self.ended_at: float | None = None
        """When the warm launcher saw it end (Unix time), once it has."""
        self._pidfd: int | None = None

    @classmethod
    def started(cls, answers: socket.socket, args: list[str]) -> WarmProcess:
        """Once the child has started -- or an OSError as Popen raises when exec fails."""
        proc = cls(answers, args)
        started = error = None
        while started is None and error is None:  # the launcher's and the child's messages, in any order
            message = proc._next(None)
            if message is None:
                proc._close()
                raise Died("the warm launcher ended before the job started")
            if "pid" in message and not proc.pid:
                proc.pid = int(message["pid"])
                proc._pidfd = _pidfd(proc.pid)
            if "started" in message:
                started = True
            elif "cold" in message:  # the job's own path provides a module the launcher imported
                proc.wait()
                raise Unavailable(str(message["cold"]))
            elif "error" in message or "returncode" in message:
                error = message
        if error is not None:
            if proc.pid:
                proc.wait()
            proc._close()
            raise OSError(error.get("errno") or 0, error.get("error") or "the job's torchrun ended before it started",
                          error.get("filename"))
        return proc

    def _next(self, timeout: float | None) -> dict | None:
        """The next answer; None once the launcher has closed the socket or died. Killed with
        the request still unread, it leaves a reset (ECONNRESET) rather than an end of file."""
        self.answers.settimeout(timeout)
        try:
            data = self.answers.recv(4096)
        except ConnectionResetError:
            return None
        return json.loads(data) if data else None

    def poll(self) -> int | None:
        if self.returncode is None:
            try:
                self.wait(timeout=0)
            except subprocess.TimeoutExpired:
                pass
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is not None:
            return self.returncode
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.returncode is None:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            try:
                message = self._next(left)
            except (TimeoutError, BlockingIOError):
                raise subprocess.TimeoutExpired(self.args, timeout) from None
            if message is None:
                self._lost(deadline)
            elif "returncode" in message:
                self.returncode = int(message["returncode"])
                at = message.get("at")
                self.ended_at = float(at) if isinstance(at, (int, float)) and not isinstance(at, bool) else None
        self._close()
        return self.returncode

    def _lost(self, deadline: float | None) -> None:
        """The launcher died: wait for the process itself, whose status nobody can read now."""
        if self._pidfd is not None:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not select.select([self._pidfd], [], [], left)[0]:
                raise subprocess.TimeoutExpired(self.args, left)
        log.error("warm launcher died before job process %s ended; its exit status is lost (reported as %s)",
                  self.pid, LOST)
        self.returncode = LOST

    def send_signal(self, sig: int) -> None:
        if self.returncode is None and self.pid:
            try:
                signal.pidfd_send_signal(self._pidfd, sig) if self._pidfd is not None else os.kill(self.pid, sig)
            except ProcessLookupError:
                pass

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def _close(self) -> None:
        self.answers.close()
        if self._pidfd is not None:
            os.close(self._pidfd)
            self._pidfd = None


def _pidfd(pid: int) -> int | None:
    try:
        return os.pidfd_open(pid)
    except OSError:
        return None
