"""A job's progress reports on their way to Redis: the ranks write their newest record to a
file (job.progress); the node's share forwards it while they run (see node.share). A benchmark's
report also updates what the node's record says was measured of it (core.measurements)."""

from __future__ import annotations

import logging
import os
import time

import redis

from minihpc.core import measurements
from minihpc.core.launch_spec import LaunchSpec
from minihpc.core.telemetry import MAX_BYTES, Checked, check_record
from minihpc.job import progress
from minihpc.machine import files
from minihpc.state.store import Store

log = logging.getLogger(__name__)


class Progress:
    """Forwards the ranks' progress files to Redis: the attempt's first report (once; its file
    goes once sent), then the newest whenever it changed. Each record is checked first
    (core.telemetry.check_record): a bad one is skipped, an unknown key dropped; the first
    problem of the attempt is logged, and the count goes in the job's log at the end."""

    def __init__(self, store: Store, spec: LaunchSpec, path: str):
        self.store, self.spec = store, spec
        self.path, self.first = path, progress.first_path(path)
        self.forwarded: dict[str, bytes] = {}
        self.bad = 0
        self.first_problem: str | None = None

    def forward(self) -> None:
        for path in (self.first, self.path):
            raw = read_record(path)
            if raw is None or self.forwarded.get(path) == raw:
                continue
            checked = check_record(raw, time.time())
            if checked.problems:
                self._complain(checked)
            if checked.record is not None:
                try:
                    self.store.record_progress(self.spec.job_id, self.spec.attempt, self.spec.node, checked.record)
                except redis.RedisError:  # best effort: a refused write never fails the job
                    continue
                self._measured(checked.record)
            self.forwarded[path] = raw
            if path == self.first:
                unlink(self.first)

    def _measured(self, record: dict) -> None:
        """Copy what a benchmark's report measured to the node's record; once, even if that fails."""
        measured = measurements.node_updates(record, self.spec.job_id)
        try:
            self.store.record_measures(self.spec.node, measured)
        except redis.RedisError as exc:
            log.warning("job %s on %s: could not record the node's measures: %s", self.spec.job_id, self.spec.node, exc)

    def _complain(self, checked: Checked) -> None:
        self.bad += 1
        if self.first_problem is not None:
            return
        what = "rejected" if checked.record is None else "kept without what is wrong"
        self.first_problem = f"{'; '.join(checked.problems)} ({what})"
        log.warning("job %s attempt %s on %s: malformed progress record: %s; later problems are only counted",
                    self.spec.job_id, self.spec.attempt, self.spec.node, self.first_problem)

    def summary(self) -> str:
        """For the job's log: how many records were malformed, and the first problem."""
        if not self.bad:
            return ""
        return f"; {self.bad} malformed progress record(s), the first: {self.first_problem}"

    def remove(self) -> None:
        for path in (self.path, self.first):
            unlink(path)


def read_record(path: str) -> bytes | None:
    """A progress file's bytes (one more than a record may have, so a huge one is seen as such);
    None for anything but a regular file (a FIFO a job put there must not freeze the agent)."""
    return files.read_job_file(path, MAX_BYTES)


def unlink(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass
