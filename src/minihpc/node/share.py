"""One node's share of a job: agree on a master port, run torchrun, watch, tear down, report.

Runs inside the node agent (an rq SimpleWorker) for each launch task the master queued.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import subprocess
import sys
import tempfile
import threading
import time
from contextlib import contextmanager
from enum import Enum

from minihpc.core import elastic
from minihpc.core.batch import BATCH
from minihpc.core.config import Settings
from minihpc.core.launch_spec import (TORCHRUN_MODULE, LaunchSpec, direct_rank_env, job_env, path_problem,
                                      script_changed, spool_folder, torchrun_args)
from minihpc.core.models import JobState
from minihpc.core.outcome import NodeResult, from_returncode
from minihpc.core.warm import cold_reason, runs_direct
from minihpc.job import progress
from minihpc.machine import files
from minihpc.machine.ports import free_port
from minihpc.machine.processes import process_tree, teardown
from minihpc.node import batch, identity, job_output, job_signals, joblog, quota, reports, sweep
from minihpc.node.warm import Unavailable, WarmLauncher, WarmProcess
from minihpc.state.connect import REDIS_ERRORS, retrying
from minihpc.state.store import Store

log = logging.getLogger(__name__)

RELAY_WAIT = 5.0
"""Seconds, past the kill wait, a share waits for the end of its job's output once its ranks
have ended, before it writes its own lines in the log and goes on."""


class Stop(str, Enum):
    """Why a node tore its ranks down before they ended by themselves."""

    NODE_SHUTTING_DOWN = "node shutting down"
    JOB_ENDED = "job ended"


def current_or_unknown(store: Store, spec: LaunchSpec) -> bool:
    """Whether the attempt is still current; during a Redis outage, assume it is (the ranks
    keep running, and the next look decides)."""
    try:
        return store.attempt_is_current(spec.job_id, spec.attempt)
    except REDIS_ERRORS:
        return True


def agree_port(store: Store, spec: LaunchSpec, poll: float) -> int | None:
    """Node rank 0 picks a free port and hands one copy to each peer; peers wait for theirs.
    None if the job ended meanwhile."""
    if spec.node_rank == 0:
        port = free_port()
        if spec.nnodes > 1:
            store.publish_port(spec.job_id, spec.attempt, port, spec.nnodes - 1)
        return port
    while True:
        port = store.take_port(spec.job_id, spec.attempt, poll)
        if port is not None:
            return port
        if not current_or_unknown(store, spec):
            return None


class ShareFailed(Exception):
    """This node could not run or watch its ranks (a missing workdir, a full disk...): the job
    ends FAILED with this as its reason."""


class NotTheJobs(ShareFailed):
    """The launch task names a path that is not where the cluster keeps the job's files
    (core.launch_spec.path_problem): nothing is made or opened, its log included."""


@contextmanager
def _failing(what: str):
    try:
        yield
    except Exception as exc:  # noqa: BLE001 - whatever it is, it is the share's failure
        raise ShareFailed(f"{what}: {exc}") from exc


def run_share(spec: LaunchSpec, store: Store, settings: Settings, shutting_down: threading.Event,
              warm: WarmLauncher | None = None) -> NodeResult:
    """Run this node's ranks of ``spec`` to the end and report the result to the store, once,
    whatever fails on the way: the ranks never outlive the share, and a share that breaks ends
    the job FAILED with the reason (its node is freed by the report)."""
    return settle(store, spec, lambda: _share(spec, store, settings, shutting_down, warm))


def settle(store: Store, spec: LaunchSpec, share) -> NodeResult:
    """Run ``share()`` (a node's share: its result, and why it stopped early if it did) and
    report how it ended, once, whatever fails on the way (a real share, a simulated one)."""
    try:
        result, stopped = share()
    except Exception as exc:  # noqa: BLE001 - the node must report, whatever broke
        result, stopped = _broken(store, spec, exc), None
    if stopped is Stop.NODE_SHUTTING_DOWN and not spec.elastic:  # an elastic job: the master shrinks it
        try:
            retrying(
                store.transition, spec.job_id, JobState.NODE_FAIL, f"node {spec.node} shut down",
                attempt=spec.attempt, failed_node=spec.node, what=f"job {spec.job_id} node failure", deadline=10.0,
            )
        except REDIS_ERRORS:
            log.warning("job %s: could not record node %s shutting down; its result says it", spec.job_id, spec.node)
    return _report(store, spec, result)


def _share(spec: LaunchSpec, store: Store, settings: Settings, shutting_down: threading.Event,
           warm: WarmLauncher | None) -> tuple[NodeResult, Stop | None]:
    if not retrying(store.attempt_is_current, spec.job_id, spec.attempt, what=f"job {spec.job_id} launch"):
        log.info("job %s attempt %s: no longer running, not launched", spec.job_id, spec.attempt)
        return NodeResult(None), None
    wrong = path_problem(spec, retrying(store.cluster_info, what=f"job {spec.job_id} launch"))
    if wrong:  # before anything is made or opened as root (not even the job's log)
        raise NotTheJobs(wrong)
    port = 0 if spec.launch == BATCH else retrying(agree_port, store, spec, settings.poll_interval,
                                                   what=f"job {spec.job_id} rendezvous")
    if port is None:
        return NodeResult(None), None
    return _run_ranks(spec, port, store, settings, shutting_down, warm)


def _broken(store: Store, spec: LaunchSpec, exc: Exception) -> NodeResult:
    """The share failed: say why in the job's log (if it can be written) and end the job
    FAILED with the reason; the result to report."""
    reason = f"LaunchFailed ({spec.node}: {exc if isinstance(exc, ShareFailed) else f'{type(exc).__name__}: {exc}'})"
    log.error("job %s attempt %s: %s", spec.job_id, spec.attempt, reason, exc_info=exc)
    if not isinstance(exc, NotTheJobs):  # a launch task naming other paths: its log path too
        try:
            with identity.open_log(spec.log_path) as out:
                out.write(f"=== {joblog.stamp()} job {spec.job_id} on {spec.node}: {reason} ===\n".encode())
        except OSError:
            pass
    try:
        retrying(
            store.transition, spec.job_id, JobState.FAILED, reason[:500], attempt=spec.attempt,
            only_from=[JobState.RUNNING], exit_code=1, failed_node=spec.node, what=f"job {spec.job_id} failure",
            deadline=10.0,
        )
    except Exception:  # noqa: BLE001 - the report below still frees the node
        log.warning("job %s: could not record why it failed on %s", spec.job_id, spec.node, exc_info=True)
    return NodeResult(1, at=time.time())


def _report(store: Store, spec: LaunchSpec, result: NodeResult) -> NodeResult:
    """A job's result must reach Redis: retried through an outage."""
    retrying(store.record_result, spec.job_id, spec.attempt, spec.node, result, what=f"job {spec.job_id} result")
    return result


def _run_ranks(spec: LaunchSpec, port: int, store: Store, settings: Settings, shutting_down: threading.Event,
               warm: WarmLauncher | None) -> tuple[NodeResult, Stop | None]:
    """torchrun for this node's ranks, watched until they end or must be torn down."""
    with _failing(f"cannot write the job log {spec.log_path}"):
        os.makedirs(os.path.dirname(spec.log_path), exist_ok=True)
        # The daemons' folder, their group's to list (the API, a uid of its own on hosts): jobs
        # may pass through to their output/, never list or read it.
        identity.like_parent(os.path.dirname(spec.log_path), 0o751)
        out = identity.open_log(spec.log_path)  # closed below, whatever happens
    try:
        with _failing(f"cannot write the job log {spec.log_path}"):
            out.write(
                f"=== {joblog.stamp()} job {spec.job_id} attempt {spec.attempt - spec.resizes} on {spec.node} "
                f"(node rank {spec.node_rank} of {spec.nnodes}, "
                f"{f'elastic {spec.elastic}, resize {spec.resizes}, ' if spec.elastic else ''}"
                f"{'batch script' if spec.launch == BATCH else f'master {spec.master_addr}:{port}'}) ===\n".encode()
            )
            if job_output.log_line(spec):  # -o/-e: the job's output is not in this log; say where it is
                out.write(f"=== job {spec.job_id} on {spec.node}: {job_output.log_line(spec)} ===\n".encode())
        changed = script_changed(spec, files.sha256(spec.script))
        if changed:  # not what was submitted: it must not run (the job fails with why)
            raise ShareFailed(changed)
        who = identity.ensure_account(identity.for_job(settings.job_user, spec.user, spec.uid, settings.service_user))
        with _failing(f"cannot make the home of {who.user if who else ''}"):
            identity.make_home(who)
        with _failing("cannot hand the job its spooled script"):
            # Its spool folder (script, working tree) is the job's group's to read, no other job's.
            identity.lend(spool_folder(spec), who)
        if spec.output or spec.error:
            with _failing("cannot create the job's output directory"):
                where = job_output.output_dir(spec.log_path)
                os.makedirs(where, exist_ok=True)
                # The user's, and the daemons' group's to read and clean up; no other user's.
                identity.give(where, who, 0o770, identity.parent_group(where))
        if spec.checkpoint_dir:
            with _failing(f"cannot create the checkpoint directory {spec.checkpoint_dir}"):
                os.makedirs(spec.checkpoint_dir, exist_ok=True)
                # The user's, and the daemons' group's to read (make validate-model, the demo);
                # no other user's job's.
                identity.give(spec.checkpoint_dir, who, 0o750, identity.parent_group(spec.checkpoint_dir))
            with _failing("cannot make room for the job's checkpoints"):
                quota.enforce(store, spec, who, settings.job_user, out)
        if spec.launch == BATCH:
            result, stopped, left = batch.run(spec, store, settings, shutting_down, out, who,
                                              lambda: _stop_reason(spec, store, shutting_down),
                                              lambda: _reap(spec, who, settings))
            problems = f"; {left} process(es) the job left running were killed" if left else ""
        else:
            result, stopped, problems = _launch(spec, port, store, settings, shutting_down, out, who, warm)
        if who is not None and (settings.node_owns_host or who.allocated):
            sweep.clean_temp(who.uid)  # after the result file is read: the job's, in /tmp
        joblog.note(out, f"=== {joblog.stamp()} job {spec.job_id} on {spec.node}: exit code {result.exit_code}"
                   f"{', signal ' + result.signal if result.signal else ''}"
                   f"{' (' + stopped.value + ')' if stopped else ''}{problems} ===\n")
        return result, stopped
    finally:
        out.close()


def _launch(spec: LaunchSpec, port: int, store: Store, settings: Settings, shutting_down: threading.Event,
            out, who: identity.Identity | None, warm: WarmLauncher | None) -> tuple[NodeResult, Stop | None, str]:
    """Start torchrun, its output relayed to ``out`` (joblog: capped), and watch it; its ranks
    are torn down if anything fails meanwhile. The result, why it was stopped, and what was
    wrong with its progress."""
    fd, result_file = tempfile.mkstemp(prefix=f"minihpc-{spec.job_id}-", suffix=".json")
    os.close(fd)
    os.unlink(result_file)
    forwarder = reports.Progress(store, spec, result_file.replace(".json", ".progress"))
    env = job_env(spec, port, dict(os.environ))
    if who is not None:  # the job user's own home and name, not the agent's
        env.update(who.login_env())
    env["MINIHPC_RESULT_FILE"] = result_file
    env[progress.ENV] = forwarder.path
    relay = joblog.start(out, settings.job_log_max, f"job {spec.job_id} attempt {spec.attempt} on {spec.node}")
    left, stopped = 0, None
    kill_wait = functools.cache(lambda stop: _kill_wait(spec, store, settings, stop))  # Redis asked once
    try:
        say = lambda line: _say(out, spec, line)  # noqa: E731
        proc, direct = _start(spec, port, env, relay, who, warm, say)
        tasks = process_tree if direct else job_signals.descendants  # the ranks: torchrun's children, or itself
        signals = job_signals.JobSignals(spec, store, say, tasks=lambda: tasks(proc.pid))
        try:
            with _failing("watching its ranks failed"):
                stopped = _watch(proc, spec, store, settings, shutting_down, forwarder, signals, kill_wait)
                returncode = proc.wait()  # dated by the warm launcher, else now: not after the sweep below
                ended_at = getattr(proc, "ended_at", None) or time.time()
                forwarder.forward()  # the steps of its last moments, e.g. the one it stopped at on SIGTERM
        finally:
            if proc.poll() is None:  # something broke while they ran: they must not outlive the share
                log.warning("job %s attempt %s: tearing down on %s after a failure",
                            spec.job_id, spec.attempt, spec.node)
                teardown([proc], settings.kill_wait)
                proc.wait()
                reports.unlink(result_file)
            forwarder.remove()
            left = _reap(spec, who, settings, kill_wait(stopped))
            _forget_inbox(store, spec)
    finally:
        relay.join(settings.kill_wait + RELAY_WAIT)  # its last lines go before the notes that follow
        if left:
            joblog.note(out, f"=== {joblog.stamp()} job {spec.job_id} on {spec.node}: {left} process(es) the job left "
                       f"running after its ranks ended were killed ===\n")
    own_rank = spec.node_rank if direct and not stopped else None  # it failed by itself: that rank did
    return _read_result(result_file, returncode, own_rank, ended_at), stopped, forwarder.summary()


def _start(spec: LaunchSpec, port: int, env: dict, relay: joblog.Relay, who: identity.Identity | None,
           warm: WarmLauncher | None, say) -> tuple[subprocess.Popen | WarmProcess, bool]:
    """torchrun, writing to the relay's pipe, or to -o/-e's files (opened by the job's user):
    forked from the warm launcher, or, when it cannot serve the job, a new interpreter (the
    job's log says why). A share of one rank forked warm is that rank, without torchrun
    (minihpc.core.warm.runs_direct): then True."""
    args = torchrun_args(spec, port)
    argv = [sys.executable, "-m", TORCHRUN_MODULE, *args]
    where = job_output.for_launch(spec)
    try:
        with _failing(f"cannot start torchrun in {spec.workdir or os.getcwd()}"):
            why = cold_reason(spec.cold, where is not None, warm.env, env) if warm is not None else None
            if warm is not None and why is None:
                direct = runs_direct(spec.tasks_per_node, env.get("MINIHPC_START_METHOD", "fork"))
                try:
                    proc = warm.launch(args, direct_rank_env(spec, port, env) if direct else env,
                                       spec.workdir or os.getcwd(), (who.uid, who.gid) if who else None, relay.input,
                                       rank=[spec.script, *spec.args] if direct else None)
                    log.info("job %s attempt %s: %s pid %s forked warm on %s", spec.job_id, spec.attempt,
                             "rank" if direct else "torchrun", proc.pid, spec.node)
                    return proc, direct
                except Unavailable as exc:
                    why = str(exc)
            if why:
                say(f"cold start: {why}")
            proc = subprocess.Popen(
                where.wrap(argv) if where else argv, env=env,
                cwd=spec.workdir or None, stdout=relay.input, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True, **(who.popen_kwargs() if who else {}),
            )
    finally:
        relay.close_input()  # torchrun has its copy: the output ends when it and all it started exit
    log.info("job %s attempt %s: torchrun pid %s started on %s", spec.job_id, spec.attempt, proc.pid, spec.node)
    return proc, False


def _reap(spec: LaunchSpec, who: identity.Identity | None, settings: Settings, grace: float | None = None) -> int:
    """Nothing of a job outlives its share: processes of the job user that left the launcher's
    tree (a double-forked daemon, which may hold the job's output open; one that ignores SIGTERM
    and re-forks) are ended too (node.sweep). How many there were, for the job's log."""
    if who is None:
        return 0
    left = sweep.end(who.uid, settings.kill_wait if grace is None else grace, whole_uid=settings.node_owns_host)
    if left:
        log.warning("job %s attempt %s: %d process(es) left behind on %s were killed",
                    spec.job_id, spec.attempt, left, spec.node)
    return left


def _watch(proc: subprocess.Popen, spec: LaunchSpec, store: Store, settings: Settings,
           shutting_down: threading.Event, forwarder: reports.Progress,
           signals: job_signals.JobSignals, kill_wait) -> Stop | None:
    """Poll the ranks, forwarding progress and delivering signals, until they end (None, or
    JOB_ENDED when the job had ended by then: ranks of a job torn down elsewhere may die of it
    before this share sees it) or must stop (and are: SIGKILL ``kill_wait(stop)`` s after SIGTERM)."""
    while proc.poll() is None:
        try:
            proc.wait(timeout=settings.poll_interval)
            break
        except subprocess.TimeoutExpired:
            pass
        forwarder.forward()
        signals.poll()
        stop = _stop_reason(spec, store, shutting_down)
        if stop is not None:
            grace = kill_wait(stop)
            log.info("job %s attempt %s: tearing down on %s (%s; SIGKILL after %gs)", spec.job_id, spec.attempt,
                     spec.node, stop.value, grace)
            teardown([proc], grace)
            return stop
    return None if current_or_unknown(store, spec) else Stop.JOB_ENDED


def _kill_wait(spec: LaunchSpec, store: Store, settings: Settings, stop: Stop | None) -> float:
    """kill_wait, or less for an elastic job's launch whose gang lost a node (core.elastic)."""
    if stop is not Stop.JOB_ENDED or not spec.elastic or len(spec.nodes) < 2:
        return settings.kill_wait
    try:
        return elastic.teardown_grace(settings.kill_wait, store.all_alive(spec.nodes))
    except REDIS_ERRORS:
        return settings.kill_wait


def _say(out, spec: LaunchSpec, line: str) -> None:
    joblog.note(out, f"=== {joblog.stamp()} job {spec.job_id} on {spec.node}: {line} ===\n")


def _forget_inbox(store: Store, spec: LaunchSpec) -> None:
    """A torchrun share reads its inbox for ``scancel --signal`` only: what is left there goes."""
    try:
        store.forget_steps(spec.job_id, spec.attempt, [spec.node], 0)
    except REDIS_ERRORS:
        pass


def _stop_reason(spec: LaunchSpec, store: Store, shutting_down: threading.Event) -> Stop | None:
    """Why the share must tear its processes down now, or None."""
    if shutting_down.is_set():
        return Stop.NODE_SHUTTING_DOWN
    return Stop.JOB_ENDED if not current_or_unknown(store, spec) else None


RESULT_MAX = 4096
"""Bytes of a launcher's result file (a few small fields): more is not what the launcher wrote."""


def _read_result(path: str, returncode: int, rank: int | None = None, ended_at: float | None = None) -> NodeResult:
    """The launcher's own account of the first failing rank, else its return code (also when
    the file is not what the launcher writes: a job script may have written it), which is
    ``rank``'s own where the share ran that one rank without torchrun, dated ``ended_at`` (when
    the share saw it end: the job's cause is the failure seen first, core.outcome.root_failure,
    and a killed rank's peers fail a moment after it, before its node has swept up)."""
    raw = files.read_job_file(path, RESULT_MAX)
    reports.unlink(path)
    try:
        data = json.loads(raw) if raw is not None and len(raw) <= RESULT_MAX else None
    except ValueError:
        data = None
    if isinstance(data, dict) and _typed(data):
        return NodeResult(data.get("exit_code"), data.get("signal"), data.get("rank"), data.get("at"))
    code, sig = from_returncode(returncode)
    return NodeResult(code, sig, rank if code else None, at=(ended_at or time.time()) if code else None)


def _typed(data: dict) -> bool:
    """Whether a result file's fields have the launcher's types."""
    def whole(v):
        return v is None or (isinstance(v, int) and not isinstance(v, bool))

    at = data.get("at")
    return (whole(data.get("exit_code")) and whole(data.get("rank")) and isinstance(data.get("signal") or "", str)
            and (at is None or (isinstance(at, (int, float)) and not isinstance(at, bool))))
