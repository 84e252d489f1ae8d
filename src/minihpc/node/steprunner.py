"""One node's part of a batch job's steps: start the tasks ``srun`` placed here, report how
each ended, kill a step's tasks when told (gang semantics: one task failed, or srun went away).

Messages come from the node's inbox (state.steps); this class is the thin loop's state. Tasks
run as the job's user, in sessions of their own, writing to the node's job log (the relay's
pipe, capped like any job output), or to sbatch's ``-o/-e`` files (node.job_output).
"""

from __future__ import annotations

import logging
import os
import subprocess

from minihpc.core.launch_spec import DAEMON_ONLY_ENV, LaunchSpec
from minihpc.core.outcome import from_returncode
from minihpc.core.steps import Layout, TaskEnd, task_env
from minihpc.machine.processes import teardown
from minihpc.node import identity, job_output
from minihpc.node.job_signals import trees
from minihpc.state.connect import retrying
from minihpc.state.steps import KILL, START

log = logging.getLogger(__name__)

JOB_BIN = "MINIHPC_JOB_BIN"
"""The batch script's ``bin/`` (srun, scontrol) on the first node; each node's tasks get their own."""

EXEC_FAILED = 2
"""A task whose command cannot be started ends with this code, as slurmstepd's execve() error."""


class StepRunner:
    def __init__(self, spec: LaunchSpec, store, who: identity.Identity | None, output, job_bin: str,
                 kill_wait: float):
        self.spec, self.store, self.who = spec, store, who
        self.output, self.job_bin, self.kill_wait = output, job_bin, kill_wait
        self.running: dict[int, list[tuple[int, subprocess.Popen]]] = {}

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
        started = []
        for procid in lay.tasks[index]:
            env = self._env(message.get("env") or {}, lay, step, index, procid)
            argv = [str(a) for a in message["argv"]]
            where = job_output.task(self.spec, procid, step)  # -o/-e: opened as the job's user
            try:
                proc = subprocess.Popen(
                    where.wrap(argv) if where else argv, env=env, cwd=cwd, stdout=self.output,
                    stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
                    **(self.who.popen_kwargs() if self.who else {}),
                )
            except OSError as exc:
                self._note(f"minihpc: step {step} task {procid} on {self.spec.node}: execve(): "
                           f"{message['argv'][0]}: {exc.strerror}")
                self._report(step, TaskEnd(procid, self.spec.node, EXEC_FAILED))
                continue
            started.append((procid, proc))
        self.running[step] = started
        log.info("job %s step %s: %d task(s) started on %s", self.spec.job_id, step, len(started), self.spec.node)

    def _env(self, given: dict, lay: Layout, step: int, index: int, procid: int) -> dict[str, str]:
        env = {str(k): str(v) for k, v in given.items() if k not in DAEMON_ONLY_ENV}
        env.update(task_env(lay, step, index, procid))
        env["MINIHPC_NODE"] = self.spec.node
        first_bin = env.get(JOB_BIN)
        if first_bin and first_bin != self.job_bin:  # this node's own srun/scontrol, not the first node's
            env["PATH"] = os.pathsep.join(self.job_bin if p == first_bin else p
                                          for p in env.get("PATH", "").split(os.pathsep))
            env[JOB_BIN] = self.job_bin
        return env

    def poll(self) -> None:
        """Report every task that has ended since the last look."""
        for step, tasks in list(self.running.items()):
            alive = []
            for procid, proc in tasks:
                if proc.poll() is None:
                    alive.append((procid, proc))
                    continue
                code, sig = from_returncode(proc.returncode)
                self._report(step, TaskEnd(procid, self.spec.node, code, sig))
            if alive:
                self.running[step] = alive
            else:
                del self.running[step]

    def processes(self) -> list:
        """Every process of every task running here, with what each started (psutil)."""
        return trees([proc.pid for tasks in self.running.values() for _, proc in tasks if proc.poll() is None])

    def kill(self, step: int) -> None:
        """SIGTERM a step's tasks here, SIGKILL after the kill wait; their ends are then reported."""
        tasks = self.running.get(step, [])
        if tasks:
            teardown([proc for _, proc in tasks], self.kill_wait)
            for _, proc in tasks:
                proc.wait()
        self.poll()

    def stop(self) -> None:
        """Tear down every task still running (the job ended, or the node is going)."""
        for step in list(self.running):
            self.kill(step)

    def _report(self, step: int, end: TaskEnd) -> None:
        retrying(self.store.report_task_end, self.spec.job_id, self.spec.attempt, step, end,
                 what=f"job {self.spec.job_id} step {step}", deadline=30.0)

    def _note(self, line: str) -> None:
        try:
            os.write(self.output, f"{line}\n".encode())
        except OSError:
            pass
        log.warning("job %s: %s", self.spec.job_id, line)

