"""One node's part of a batch job's steps: start the tasks ``srun`` placed here, report how
each ended, kill a step's tasks when told (gang semantics: one task failed, or srun went away).

Messages come from the node's inbox (state.steps); this class is the thin loop's state. Tasks
run as the job's user, in sessions of their own. Their stdout and stderr go to srun, through the
step's output stream, and srun's stdin comes to them through its input stream (node.stepio), as
Slurm's tasks' do; a task's end is reported once its output has been sent.
"""

from __future__ import annotations

import logging
import os
import subprocess
import time
from dataclasses import dataclass, field

from minihpc.core import gpus
from minihpc.core.launch_spec import DAEMON_ONLY_ENV, LaunchSpec
from minihpc.core.outcome import from_returncode
from minihpc.core.steps import Layout, TaskEnd, task_env
from minihpc.machine.processes import teardown
from minihpc.node import identity
from minihpc.node.job_signals import trees
from minihpc.node.stepio import Budget, InputPump, OutputPump, dropped_line
from minihpc.state.connect import retrying
from minihpc.state.steps import KILL, START

log = logging.getLogger(__name__)

JOB_BIN = "MINIHPC_JOB_BIN"
"""The batch script's ``bin/`` (srun, scontrol) on the first node; each node's tasks get their own."""

EXEC_FAILED = 2
"""A task whose command cannot be started ends with this code, as slurmstepd's execve() error."""

DRAIN_WAIT = 2.0
"""Seconds a task's output may still come after it ended (something it started holds its pipe)
before its end is reported without the rest."""


def gets_input(io: dict, procid: int) -> bool:
    """Whether task ``procid`` reads srun's stdin (``--input``: all, none, or one task's id)."""
    which = io.get("input", "none")
    return which == "all" or (isinstance(which, int) and not isinstance(which, bool) and which == procid)


@dataclass
class Task:
    procid: int
    proc: subprocess.Popen
    pumps: list[OutputPump]
    budget: Budget
    stdin: InputPump | None = None
    ended: float | None = field(default=None)

    def drained(self, now: float) -> bool:
        return all(not p.is_alive() for p in self.pumps) or now - (self.ended or now) >= DRAIN_WAIT


class StepRunner:
    def __init__(self, spec: LaunchSpec, store, who: identity.Identity | None, output, job_bin: str,
                 kill_wait: float, output_max: int = 0):
        self.spec, self.store, self.who = spec, store, who
        self.output, self.job_bin, self.kill_wait, self.output_max = output, job_bin, kill_wait, output_max
        self.running: dict[int, list[Task]] = {}

    def handle(self, message: dict) -> None:
        kind, step = message.get("kind"), message.get("step")
        if not isinstance(step, int):
            return
        if kind == START:
            self._start(step, message)
        elif kind == KILL:
            self.kill(step)

    def _start(self, step: int, message: dict) -> None:
        lay = Layout(list(message["nodes"]), [list(t) for t in message["tasks"]])
        if self.spec.node not in lay.nodes:
            return
        index = lay.nodes.index(self.spec.node)
        cwd = message.get("cwd") or self.spec.workdir or "/"
        if not os.path.isdir(cwd):
            self._note(f"minihpc: step {step} on {self.spec.node}: couldn't chdir to {cwd!r}: going to /tmp instead")
            cwd = "/tmp"
        io = message.get("io") if isinstance(message.get("io"), dict) else {}
        started = []
        # This node's GPUs, not those of srun's node; srun --gpus-per-task, else sbatch's
        # (the step server took only a whole number).
        gpu_env = gpus.job_env(self.spec.gpus, message.get("gpus_per_task") or self.spec.gpus_per_task)
        for procid in lay.tasks[index]:
            env = self._env(message.get("env") or {}, lay, step, index, procid, gpu_env)
            task = self._spawn(step, procid, [str(a) for a in message["argv"]], env, cwd, io)
            if task is not None:
                started.append(task)
        self.running[step] = started
        log.info("job %s step %s: %d task(s) started on %s", self.spec.job_id, step, len(started), self.spec.node)

    def _spawn(self, step: int, procid: int, argv: list[str], env: dict, cwd: str, io: dict) -> Task | None:
        """Start one task, its output piped to srun and its stdin from srun's where ``io`` says
        so; None if it could not start (its end is reported, as slurmstepd's execve() error)."""
        spec = self.spec
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        in_r, in_w = os.pipe() if gets_input(io, procid) else (None, None)
        try:
            proc = subprocess.Popen(
                argv, env=env, cwd=cwd, stdout=out_w, stderr=err_w,
                stdin=in_r if in_r is not None else subprocess.DEVNULL, start_new_session=True,
                **(self.who.popen_kwargs() if self.who else {}),
            )
        except OSError as exc:
            for fd in (out_r, err_r, in_w):
                if fd is not None:
                    os.close(fd)
            self._write(step, procid, 2, f"slurmstepd: error: execve(): {argv[0]}: {exc.strerror}\n".encode())
            self._report(step, TaskEnd(procid, spec.node, EXEC_FAILED))
            return None
        finally:
            for fd in (out_w, err_w, in_r):
                if fd is not None:
                    os.close(fd)
        budget, unbuffered = Budget(self.output_max), bool(io.get("unbuffered"))
        name = f"job {spec.job_id} step {step} task {procid}"
        write = lambda fd, data: self._write(step, procid, fd, data)  # noqa: E731
        pumps = [OutputPump(out_r, 1, write, budget, unbuffered, f"{name} stdout"),
                 OutputPump(err_r, 2, write, budget, unbuffered, f"{name} stderr")]
        stdin = None
        if in_w is not None:
            stdin = InputPump(in_w, lambda after, wait: self.store.read_input(spec.job_id, spec.attempt, step, after,
                                                                              wait), f"{name} stdin")
        for thread in [*pumps, stdin]:
            if thread is not None:
                thread.start()
        return Task(procid, proc, pumps, budget, stdin)

    def _env(self, given: dict, lay: Layout, step: int, index: int, procid: int,
             gpu_env: dict[str, str]) -> dict[str, str]:
        env = {str(k): str(v) for k, v in given.items() if k not in DAEMON_ONLY_ENV}
        env.update(task_env(lay, step, index, procid))
        env.update(gpu_env)
        env.update(gpus.task_env(env, int(env["SLURM_LOCALID"])))
        env["MINIHPC_NODE"] = self.spec.node
        first_bin = env.get(JOB_BIN)
        if first_bin and first_bin != self.job_bin:  # this node's own srun/scontrol, not the first node's
            env["PATH"] = os.pathsep.join(self.job_bin if p == first_bin else p
                                          for p in env.get("PATH", "").split(os.pathsep))
            env[JOB_BIN] = self.job_bin
        return env

    def poll(self, force: bool = False) -> None:
        """Report every task that has ended since the last look, once its output has been sent
        (or DRAIN_WAIT has passed; ``force``: at once)."""
        now = time.monotonic()
        for step, tasks in list(self.running.items()):
            alive = []
            for task in tasks:
                if task.proc.poll() is None:
                    alive.append(task)
                    continue
                if task.ended is None:
                    task.ended = now
                    if task.stdin is not None:
                        task.stdin.stop()
                if not force and not task.drained(now):
                    alive.append(task)
                    continue
                if task.budget.dropped:
                    self._write(step, task.procid, 2, dropped_line(task.procid, task.budget.dropped,
                                                                   task.budget.limit))
                code, sig = from_returncode(task.proc.returncode)
                self._report(step, TaskEnd(task.procid, self.spec.node, code, sig))
            if alive:
                self.running[step] = alive
            else:
                del self.running[step]

    def processes(self) -> list:
        """Every process of every task running here, with what each started (psutil)."""
        return trees([t.proc.pid for tasks in self.running.values() for t in tasks if t.proc.poll() is None])

    def kill(self, step: int, force: bool = False) -> None:
        """SIGTERM a step's tasks here, SIGKILL after the kill wait; their ends are then reported."""
        tasks = self.running.get(step, [])
        if tasks:
            teardown([t.proc for t in tasks], self.kill_wait)
            for task in tasks:
                task.proc.wait()
        self.poll(force)

    def stop(self) -> None:
        """Tear down every task still running (the job ended, or the node is going)."""
        for step in list(self.running):
            self.kill(step, force=True)

    def _write(self, step: int, procid: int, fd: int, data: bytes) -> None:
        """Task ``procid``'s output on ``fd``, for srun (retried through a short outage)."""
        retrying(self.store.write_output, self.spec.job_id, self.spec.attempt, step, procid, fd, data,
                 what=f"job {self.spec.job_id} step {step} output", deadline=10.0)

    def _report(self, step: int, end: TaskEnd) -> None:
        retrying(self.store.report_task_end, self.spec.job_id, self.spec.attempt, step, end,
                 what=f"job {self.spec.job_id} step {step}", deadline=30.0)

    def _note(self, line: str) -> None:
        try:
            os.write(self.output, f"{line}\n".encode())
        except OSError:
            pass
        log.warning("job %s: %s", self.spec.job_id, line)

