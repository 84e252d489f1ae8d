"""One node's share of a job: agree on a master port, run torchrun, watch, tear down, report.

Runs inside the node agent (an rq SimpleWorker) for each launch task the master queued.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from datetime import datetime, timezone

import psutil

from . import keys, progress
from .config import Settings
from .launcher import LaunchSpec, job_env, torchrun_args
from .models import JobState
from .outcome import NodeResult, from_returncode
from .store import REDIS_ERRORS, Store

log = logging.getLogger(__name__)

RENDEZVOUS_TTL = 3600
"""Seconds the chosen master port stays readable in Redis."""


def free_port() -> int:
    """A TCP port free on this host right now (the kernel's choice)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("", 0))
        return sock.getsockname()[1]


def job_is_current(store: Store, spec: LaunchSpec) -> bool:
    state, attempts = store.r.hmget(keys.job(spec.job_id), "state", "attempts")
    return (
        state is not None
        and state.decode() == JobState.RUNNING.value
        and int(attempts) == spec.attempt
    )


REDIS_RETRY = 120.0
"""Seconds a node keeps retrying a write that must not be lost (its job's result) while
Redis is unreachable, e.g. restarting."""


def retrying(call, *args, what: str, deadline: float = REDIS_RETRY, **kwargs):
    """``call(*args, **kwargs)``, retried through a Redis outage of up to ``deadline`` s."""
    give_up = time.monotonic() + deadline
    while True:
        try:
            return call(*args, **kwargs)
        except REDIS_ERRORS as exc:
            if time.monotonic() >= give_up:
                raise
            log.warning("%s: Redis unreachable (%s); retrying", what, exc)
            time.sleep(0.5)


def current_or_unknown(store: Store, spec: LaunchSpec) -> bool:
    """Whether the attempt is still current; during a Redis outage, assume it is (the ranks
    keep running, and the next look decides)."""
    try:
        return job_is_current(store, spec)
    except REDIS_ERRORS:
        return True


def agree_port(store: Store, spec: LaunchSpec, poll: float) -> int | None:
    """Node rank 0 picks a free port and hands one copy to each peer; peers wait for theirs.
    None if the job ended meanwhile."""
    key = keys.job_rendezvous(spec.job_id, spec.attempt)
    if spec.node_rank == 0:
        port = free_port()
        if spec.nnodes > 1:
            with store.r.pipeline() as pipe:
                pipe.rpush(key, *([port] * (spec.nnodes - 1)))
                pipe.expire(key, RENDEZVOUS_TTL)
                pipe.execute()
        return port
    while True:
        got = store.r.blpop([key], timeout=poll)
        if got:
            return int(got[1])
        if not current_or_unknown(store, spec):
            return None


def teardown(proc: subprocess.Popen, kill_wait: float) -> None:
    """SIGTERM the launcher and every rank (ranks run in sessions of their own), then SIGKILL
    whatever is left after ``kill_wait`` seconds."""
    try:
        root = psutil.Process(proc.pid)
        victims = [root] + root.children(recursive=True)
    except psutil.NoSuchProcess:
        return
    for p in victims:
        try:
            p.send_signal(signal.SIGTERM)
        except psutil.NoSuchProcess:
            pass
    _, alive = psutil.wait_procs(victims, timeout=kill_wait)
    for p in alive + _late_children(victims):
        try:
            p.kill()
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(alive, timeout=kill_wait)


def _late_children(victims: list[psutil.Process]) -> list[psutil.Process]:
    """Children started after the first snapshot (a rank spawning a worker while dying)."""
    found = []
    for p in victims:
        try:
            found.extend(p.children(recursive=True))
        except psutil.NoSuchProcess:
            pass
    return found


def _stamp() -> str:
    return datetime.now(timezone.utc).astimezone().isoformat(timespec="seconds")


def run_share(
    spec: LaunchSpec,
    store: Store,
    settings: Settings,
    shutting_down: threading.Event,
) -> NodeResult:
    """Run this node's ranks of ``spec`` to the end and report the result to the store."""
    report = lambda result: retrying(  # noqa: E731 - a job's result must reach Redis
        store.report, spec.job_id, spec.attempt, spec.node, result, what=f"job {spec.job_id} result"
    )
    if not retrying(job_is_current, store, spec, what=f"job {spec.job_id} launch"):
        log.info("job %s attempt %s: no longer running, not launched", spec.job_id, spec.attempt)
        report(NodeResult(None))
        return NodeResult(None)

    port = retrying(agree_port, store, spec, settings.poll_interval, what=f"job {spec.job_id} rendezvous")
    if port is None:
        report(NodeResult(None))
        return NodeResult(None)

    os.makedirs(os.path.dirname(spec.log_path), exist_ok=True)
    if spec.checkpoint_dir:
        os.makedirs(spec.checkpoint_dir, exist_ok=True)
    fd, result_file = tempfile.mkstemp(prefix=f"minihpc-{spec.job_id}-", suffix=".json")
    os.close(fd)
    os.unlink(result_file)
    env = job_env(spec, port, dict(os.environ))
    env["MINIHPC_RESULT_FILE"] = result_file
    progress_file = result_file.replace(".json", ".progress")
    env[progress.ENV] = progress_file
    first_file = progress.first_path(progress_file)
    forwarded: dict[str, dict] = {}

    def forward_progress() -> None:
        """The attempt's first report (once; its file goes once sent), then the newest."""
        for path in (first_file, progress_file):
            report = progress.read(path)
            if report is None or forwarded.get(path) == report:
                continue
            try:
                store.record_progress(spec.job_id, spec.attempt, spec.node, report)
            except REDIS_ERRORS:
                continue
            forwarded[path] = report
            if path == first_file:
                os.unlink(first_file)

    argv = [sys.executable, "-m", "minihpc.torchrun", *torchrun_args(spec, port)]

    with open(spec.log_path, "ab", buffering=0) as out:
        out.write(
            f"=== {_stamp()} job {spec.job_id} attempt {spec.attempt} on {spec.node} "
            f"(node rank {spec.node_rank} of {spec.nnodes}, master "
            f"{spec.master_addr}:{port}) ===\n".encode()
        )
        proc = subprocess.Popen(
            argv,
            env=env,
            cwd=spec.workdir or None,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        try:
            store.r.hset(keys.node(spec.node), mapping={"launcher_pid": proc.pid})
        except REDIS_ERRORS:
            pass
        log.info("job %s attempt %s: torchrun pid %s started on %s", spec.job_id, spec.attempt, proc.pid, spec.node)
        why_stopped = None
        while proc.poll() is None:
            try:
                proc.wait(timeout=settings.poll_interval)
                break
            except subprocess.TimeoutExpired:
                pass
            forward_progress()
            if shutting_down.is_set():
                why_stopped = "node shutting down"
            elif not current_or_unknown(store, spec):
                why_stopped = "job ended"
            if why_stopped:
                log.info("job %s attempt %s: tearing down on %s (%s)", spec.job_id, spec.attempt, spec.node, why_stopped)
                teardown(proc, settings.kill_wait)
                break
        returncode = proc.wait()
        forward_progress()  # the steps of its last moments, e.g. the one it stopped at on SIGTERM
        for path in (progress_file, first_file):
            if os.path.exists(path):
                os.unlink(path)
        result = _read_result(result_file, returncode)
        out.write(
            f"=== {_stamp()} job {spec.job_id} on {spec.node}: exit code {result.exit_code}"
            f"{', signal ' + result.signal if result.signal else ''}"
            f"{' (' + why_stopped + ')' if why_stopped else ''} ===\n".encode()
        )
    if why_stopped == "node shutting down":
        retrying(
            store.transition,
            spec.job_id,
            JobState.NODE_FAIL,
            f"node {spec.node} shut down",
            attempt=spec.attempt,
            failed_node=spec.node,
            what=f"job {spec.job_id} node failure",
            deadline=10.0,
        )
    report(result)
    return result


def _read_result(path: str, returncode: int) -> NodeResult:
    """The launcher's own account of the first failing rank, else its return code."""
    try:
        with open(path) as fh:
            data = json.load(fh)
        os.unlink(path)
        return NodeResult(data.get("exit_code"), data.get("signal"), data.get("rank"), data.get("at"))
    except (OSError, ValueError):
        code, sig = from_returncode(returncode)
        return NodeResult(code, sig, at=time.time() if code else None)
