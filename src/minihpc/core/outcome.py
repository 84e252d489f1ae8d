"""How a job ends, decided from its nodes' results: pure functions."""

from __future__ import annotations

import signal as _signal
from dataclasses import dataclass

from minihpc.core.models import Job, JobState


@dataclass(frozen=True)
class NodeResult:
    """What one node's ranks did: the exit code (128+N when killed by signal N) and signal."""

    exit_code: int | None  # None: the node never started the ranks (job already over)
    signal: str | None = None
    rank: int | None = None
    at: float | None = None
    """When the node's launcher saw its first rank fail (Unix time), for failures."""

    def to_dict(self) -> dict:
        return {"exit_code": self.exit_code, "signal": self.signal, "rank": self.rank, "at": self.at}

    @classmethod
    def from_dict(cls, data: dict) -> NodeResult:
        return cls(data.get("exit_code"), data.get("signal"), data.get("rank"), data.get("at"))

    @property
    def ok(self) -> bool:
        return self.exit_code == 0


def from_returncode(returncode: int) -> tuple[int, str | None]:
    """A Popen-style return code (negative for a signal) as (exit code, signal name)."""
    if returncode < 0:
        return 128 - returncode, signal_name(-returncode)
    return returncode, None


def signal_name(number: int) -> str:
    try:
        return _signal.Signals(number).name
    except ValueError:
        return f"SIG{number}"


@dataclass(frozen=True)
class Outcome:
    state: JobState
    exit_code: int | None = None
    signal: str | None = None
    failed_node: str | None = None


def after_report(job: Job, results: dict[str, NodeResult], node: str) -> Outcome | None:
    """The job's new state once ``node`` has reported (``results`` includes it), or None.

    A job is COMPLETED only when every node's ranks exited 0, and FAILED when every node has
    reported and one failed (with the first failure's exit code). While some nodes have not
    reported, a failure is *held* (see :func:`held_failure`): ranks also die when a peer node
    dies, and that is the node's fault, not the job's.
    """
    if job.state is not JobState.RUNNING or len(results) < len(job.nodes):
        return None
    if all(r.ok for r in results.values()):
        return Outcome(JobState.COMPLETED, 0)
    return _failed(job, results)


def _failed(job: Job, results: dict[str, NodeResult]) -> Outcome:
    """FAILED with the cause among ``results`` (one at least failed): the failure the nodes'
    launchers saw first (:func:`root_failure`), else the first reported, else the first node."""
    first = root_failure(results)
    if first is None:
        first = job.first_failure if job.first_failure in results else None
    if first is None or results[first].ok:
        first = next(n for n in sorted(results) if not results[n].ok)
    failed = results[first]
    return Outcome(JobState.FAILED, failed.exit_code, failed.signal, first)


def root_failure(results: dict[str, NodeResult]) -> str | None:
    """The node whose ranks failed first by the time each launcher saw it, when every failure
    carries one. When one rank is killed, its peers in a collective fail a moment later (exit
    1, a broken connection) and may well *report* first; the job's exit code is the cause's."""
    failed = {n: r for n, r in results.items() if r.exit_code is not None and not r.ok}
    if not failed or any(r.at is None for r in failed.values()):
        return None
    return min(failed, key=lambda n: (failed[n].at, n))


def starts_failure(job: Job, result: NodeResult) -> bool:
    """Whether this report is the job's first failure (it starts the hold)."""
    return job.state is JobState.RUNNING and not job.failing and result.exit_code is not None and not result.ok


def held_failure(job: Job, results: dict[str, NodeResult], now: float, grace: float) -> Outcome | None:
    """FAILED once a failure has been held for ``grace`` seconds with every node still up
    (the master checks for lost nodes first): the job's own fault, so its other ranks,
    likely stuck in a collective, are torn down. The cause is judged as when every node has
    reported: a peer's broken connection reported first is not the cause of a rank killed."""
    if not job.failing or job.failing_since is None:
        return None
    if now - job.failing_since < grace or job.first_failure not in results:
        return None
    return _failed(job, results)  # the cause by then, as when every node has reported


def format_exit(exit_code: int | None, signal: str | None) -> str:
    """Slurm's ExitCode column: ``code:signal``: ``0:0`` for success, ``1:0`` for exit 1,
    ``0:9`` for a task killed by SIGKILL (the code part is the exit() status, which a signalled
    task never set), ``-`` if unknown."""
    if exit_code is None:
        return "-"
    if signal:
        number = getattr(_signal.Signals, signal, None)
        return f"0:{int(number) if number else signal}"
    return f"{exit_code}:0"


def exit_status(state: JobState, exit_code: int | None) -> int:
    """What ``run`` exits with: the tasks' code; 1 for a job that ended without one."""
    if state is JobState.COMPLETED:
        return 0
    return exit_code if exit_code else 1
