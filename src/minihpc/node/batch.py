"""One node's share of a batch job (``core.batch``): every node runs the tasks ``srun`` places
on it (node.steprunner); the first node also runs the batch script, as the job's user with
Slurm's batch environment, and serves its ``srun`` (node.stepserver).

The share ends when the script ends (the first node tells the others), when the job ended
(cancelled, timed out, failed elsewhere), or when the node shuts down; nothing it started
outlives it. The job's exit code is the script's, as in Slurm: a failed ``srun`` fails the job
when the script says so (its last command, or ``set -e``).
"""

from __future__ import annotations

import logging
import os
import subprocess
import threading
from collections.abc import Callable

import psutil

from minihpc.core.batch import batch_argv, batch_env
from minihpc.core.config import Settings
from minihpc.core.launch_spec import LaunchSpec, job_env
from minihpc.core.outcome import NodeResult, from_returncode
from minihpc.machine.processes import teardown
from minihpc.node import identity, job_output, jobdir, joblog
from minihpc.node.job_signals import JobSignals
from minihpc.node.stepio import InputPump
from minihpc.node.stepserver import StepServer
from minihpc.node.steprunner import JOB_BIN, StepRunner
from minihpc.job.localnames import PORT_ENV as LOCAL_PORT_ENV
from minihpc.job.srun import SOCKET_ENV
from minihpc.machine.ports import free_listen_port
from minihpc.state.connect import REDIS_ERRORS, retrying
from minihpc.state.steps import END, SIGNAL

log = logging.getLogger(__name__)

LOOPBACK = ("127.0.0.1", "localhost", "::1")
"""A first node addressed so is a process on this machine: local mode, whose node names are not
host names (the job gets job.localnames as its torchrun)."""


def run(spec: LaunchSpec, store, settings: Settings, shutting_down: threading.Event, out,
        who: identity.Identity | None, stop_reason: Callable[[], object | None],
        reap: Callable[[], int]) -> tuple[NodeResult, object | None, int]:
    """Run this node's part of the batch job to its end: (the result, why it was stopped or
    None, how many left-behind processes were killed)."""
    relay = joblog.start(out, settings.job_log_max, f"job {spec.job_id} attempt {spec.attempt} on {spec.node}")
    private = jobdir.create(spec.job_id, spec.attempt, who, local=spec.master_addr in LOOPBACK)
    runner = StepRunner(spec, store, who, relay.input, private.bin, settings.kill_wait, settings.job_log_max)
    server = script = pump = None
    stopped, left = None, 0
    try:
        if spec.node_rank == 0:
            server = StepServer(spec, store, private, who, settings.poll_interval)
            server.start()
            script, pump = _start_script(spec, store, private, relay, who)
        signals = JobSignals(spec, store, lambda line: joblog.note(
            out, f"=== {joblog.stamp()} job {spec.job_id} on {spec.node}: {line} ===\n"),
            tasks=runner.processes, shell=lambda: _alive(script))
        stopped = _loop(spec, store, settings, runner, script, stop_reason, signals)
        if script is not None and spec.nnodes > 1:
            retrying(store.send, spec.job_id, spec.attempt, {n: {"kind": END} for n in spec.nodes[1:]},
                     what=f"job {spec.job_id} end", deadline=30.0)
    finally:
        if script is not None and script.poll() is None:
            teardown([script], settings.kill_wait)
            script.wait()
        if pump is not None:
            pump.stop()
        runner.stop()
        if server is not None:
            server.close()
        try:  # its own inbox only: another node may not have read the END just sent to it
            store.forget_steps(spec.job_id, spec.attempt, [spec.node], server.steps if server else 0)
        except REDIS_ERRORS:
            pass
        left = reap()
        relay.join(settings.kill_wait + 5.0)
        private.remove()
    if script is None:
        return NodeResult(0 if stopped is None else None), stopped, left
    code, sig = from_returncode(script.returncode)
    return NodeResult(code, sig, at=None), stopped, left


def _start_script(spec: LaunchSpec, store, private: jobdir.JobDir, relay: joblog.Relay,
                  who: identity.Identity | None) -> tuple[subprocess.Popen, InputPump | None]:
    """The batch script, started; its stdin is the job's input stream (``minihpc run``'s stdin,
    pumped in: the second value) or /dev/null."""
    env = job_env(spec, 0, dict(os.environ))
    env.update(batch_env(spec.nodes, spec.tasks_per_node, who.user if who else _login(), who.uid if who else None))
    if who is not None:  # the job user's own home and name, as Slurm's batch environment has
        env.update(who.login_env())
    env["PATH"] = os.pathsep.join(p for p in (private.bin, env.get("PATH")) if p)
    env[JOB_BIN] = private.bin
    env[SOCKET_ENV] = private.socket
    if spec.master_addr in LOOPBACK:  # every node on this machine's ports: the job's own (job.localnames)
        env[LOCAL_PORT_ENV] = str(free_listen_port())
    with open(spec.script, encoding="utf-8", errors="replace") as fh:
        text = fh.read()
    argv = batch_argv(text, spec.script, spec.args)
    where = job_output.batch_script(spec)  # -o/-e: opened as the job's user
    stdin_r, stdin_w = os.pipe() if spec.stdin else (None, None)
    try:
        proc = subprocess.Popen(
            where.wrap(argv) if where else argv, env=env, cwd=spec.workdir or None, stdout=relay.input,
            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL if stdin_r is None else stdin_r,
            start_new_session=True, **(who.popen_kwargs() if who else {}),
        )
    except BaseException:
        if stdin_w is not None:
            os.close(stdin_w)
        raise
    finally:
        if stdin_r is not None:
            os.close(stdin_r)
    log.info("job %s attempt %s: batch script pid %s started on %s", spec.job_id, spec.attempt, proc.pid, spec.node)
    if stdin_w is None:
        return proc, None
    pump = InputPump(stdin_w, lambda after, wait: store.read_input(spec.job_id, spec.attempt, None, after, wait),
                     f"job {spec.job_id} stdin")
    pump.start()
    return proc, pump


def _login() -> str:
    import pwd

    return pwd.getpwuid(os.getuid()).pw_name


def _alive(script: subprocess.Popen | None) -> list[psutil.Process]:
    """The batch shell, while it runs here (the first node)."""
    try:
        return [psutil.Process(script.pid)] if script is not None and script.poll() is None else []
    except psutil.NoSuchProcess:
        return []


def _loop(spec: LaunchSpec, store, settings: Settings, runner: StepRunner, script: subprocess.Popen | None,
          stop_reason: Callable[[], object | None], signals: JobSignals):
    """Until the script ends (first node), the first node says it did (the others), or the
    share must stop (the reason, returned). Signals for the job's processes are delivered on
    the way (node.job_signals)."""
    while True:
        try:
            message = store.next_message(spec.job_id, spec.attempt, spec.node, settings.poll_interval)
        except REDIS_ERRORS:
            message = None
        if message is not None and message.get("kind") == END:
            return None
        if message is not None and message.get("kind") == SIGNAL:
            signals.handle(message)
        elif message is not None:
            runner.handle(message)
        runner.poll()
        signals.warn_if_due()
        if script is not None and script.poll() is not None:
            return None
        reason = stop_reason()
        if reason is not None:
            log.info("job %s attempt %s: tearing down on %s (%s)", spec.job_id, spec.attempt, spec.node,
                     getattr(reason, "value", reason))
            return reason
