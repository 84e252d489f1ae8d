"""Starting the ranks of a validation run and watching them: locally with real torchrun
(ranks forked from an agent that has imported torch, as the cluster starts them), or as a job
through the cluster's queue. Either way a run whose ranks stop advancing for ``step_timeout``
seconds is ended, not waited on.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from minihpc.core.errors import MinihpcError
from minihpc.core.launch_spec import RANK_MODULE, TORCHRUN_MODULE
from minihpc.validate import worker
from minihpc.validate.records import read_heartbeats

WORKER_SCRIPT = str(Path(worker.__file__).resolve())
STARTUP_TIMEOUT = 120.0
"""Seconds a run may take to write its first heartbeat (torch imports on a busy machine)."""
KILL_GRACE = 2.0


@dataclass
class Launched:
    returncode: int | None
    timed_out: bool = False
    stalled: dict | None = None  # the heartbeats when the run was ended for not advancing
    job_id: int | None = None
    job_state: str | None = None


class Watch:
    """Whether any rank advanced (its heartbeat's step or phase changed) within ``timeout``
    seconds; before the first heartbeat, ``startup`` seconds are allowed."""

    def __init__(self, timeout: float, started: float, startup: float = STARTUP_TIMEOUT):
        self.timeout, self.startup = timeout, startup
        self.last_change, self.seen = started, {}

    def stalled(self, beats: dict[int, dict], now: float) -> bool:
        state = {r: (b.get("step"), b.get("phase")) for r, b in beats.items()}
        if state != self.seen:
            self.seen, self.last_change = state, now
        if any(phase == "done" for _step, phase in state.values()):
            return False  # finishing: the others are at their last all-reduce or exiting
        limit = self.timeout if state else self.startup
        return now - self.last_change > limit


def torchrun_command(workers: int, worker_args: list[str]) -> list[str]:
    """``torchrun --standalone`` through minihpc's wrapper, which forks the ranks from an agent
    that has imported torch and reports real exit codes, as the nodes run jobs."""
    return [sys.executable, "-m", TORCHRUN_MODULE, "--standalone", "--nproc-per-node", str(workers),
            "--max-restarts", "0", "--monitor-interval", "0.05",
            "--module", RANK_MODULE, WORKER_SCRIPT, *worker_args]


def run_local(workers: int, worker_args: list[str], record_dir: Path, step_timeout: float) -> Launched:
    """torchrun with ``workers`` ranks; its output goes to record_dir/torchrun.log."""
    from minihpc.machine.processes import process_tree, terminate  # psutil: minihpc[node], not the CLI's --help

    env = dict(os.environ, MINIHPC_START_METHOD="fork", PYTHONUNBUFFERED="1")
    env.pop("MINIHPC_RESULT_FILE", None)
    with open(record_dir / "torchrun.log", "wb") as log:
        proc = subprocess.Popen(torchrun_command(workers, worker_args), env=env, stdout=log,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        watch = Watch(step_timeout, time.time())
        while proc.poll() is None:
            beats = read_heartbeats(record_dir)
            if watch.stalled(beats, time.time()):
                terminate(process_tree(proc.pid), KILL_GRACE)
                proc.wait()
                return Launched(proc.returncode, timed_out=True, stalled=beats)
            time.sleep(0.05)
    return Launched(proc.returncode)


def log_tail(record_dir: Path, lines: int = 15) -> str:
    path = record_dir / "torchrun.log"
    if not path.is_file():
        return ""
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])


def run_cluster(settings, nodes: int, tasks_per_node: int, worker_args: list[str], step_timeout: float,
                wait_timeout: float = 600.0, gpus: int = 0) -> tuple[Launched, Path]:
    """Submit the worker as a job of ``nodes`` x ``tasks_per_node`` ranks (``gpus`` per node,
    ``--gres=gpu:N``); wait for its end (cancelling it if its ranks stop advancing). The records
    are in the job's checkpoint directory, which is returned with the outcome."""
    from minihpc.client.jobs import cancel
    from minihpc.client.session import open_store
    from minihpc.client.submit import Request, submit

    store = open_store(settings)
    job = submit(store, Request(script=WORKER_SCRIPT, args=worker_args, nodes=nodes,
                                tasks_per_node=tasks_per_node, name="validate", workdir=os.getcwd(), gpus=gpus))
    record_dir = Path(store.cluster_info()["checkpoint_dir"]) / f"job-{job.id}" / "validate"
    watch = Watch(step_timeout, time.time(), startup=max(STARTUP_TIMEOUT, wait_timeout / 2))
    deadline = time.time() + wait_timeout
    stalled = None
    while True:
        if store.job_settled(job.id)[1]:
            break
        beats = read_heartbeats(record_dir) if record_dir.is_dir() else {}
        if stalled is None and (watch.stalled(beats, time.time()) or time.time() > deadline):
            stalled = beats
            try:
                cancel(store, job.id, "validate (no rank advanced)")
            except MinihpcError:
                pass  # it ended meanwhile
        time.sleep(0.2)
    final = store.get_job(job.id)
    code = 0 if final.state.value == "COMPLETED" else 1
    return Launched(code, timed_out=stalled is not None, stalled=stalled, job_id=job.id,
                    job_state=final.state.value), record_dir
