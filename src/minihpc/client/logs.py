"""A job's output: where each node's log is, and tailing them by byte offset, so a reader
(``minihpc logs -f``, the REST API's stream) resumes exactly where it stopped."""

from __future__ import annotations

from pathlib import Path

from minihpc.core.errors import UsageError
from minihpc.core.models import Job
from minihpc.state.store import Store


def log_files(store: Store, job: Job, node: str | None = None) -> list[tuple[str, Path]]:
    """(node, path) of the job's logs: every node it ran on, or only ``node``."""
    log_dir = Path(store.cluster_info()["log_dir"]) / f"job-{job.id}"
    if node and job.nodes and node not in job.nodes:
        raise UsageError(f"job {job.id} did not run on node {node!r} (nodes: {', '.join(job.nodes)})")
    names = [node] if node else (job.nodes or [])
    return [(n, log_dir / f"{n}.log") for n in names]


class LogTail:
    """What the job's logs gained since the last :meth:`read`, per node."""

    def __init__(self, store: Store, job_id: int, node: str | None = None, offsets: dict[str, int] | None = None):
        self.store, self.job_id, self.node = store, job_id, node
        self.offsets: dict[str, int] = dict(offsets or {})
        self.nodes: list[str] = []
        """The nodes whose logs the last read looked at."""

    def read(self) -> list[tuple[str, str]]:
        """[(node, new text)] for each log that grew; the job's node list is read anew, since a
        requeued job may run on other nodes."""
        out = []
        files = log_files(self.store, self.store.get_job(self.job_id), self.node)
        self.nodes = [name for name, _ in files]
        for name, path in files:
            if not path.exists():
                continue
            with path.open("rb") as fh:
                fh.seek(self.offsets.get(name, 0))
                data = fh.read()
                self.offsets[name] = fh.tell()
            if data:
                out.append((name, data.decode(errors="replace")))
        return out
