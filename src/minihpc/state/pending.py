"""The pending queue as a long-lived reader keeps it (issue 38): the master each pass, the API
each request, the cluster exporter each scrape.

Every write to a job record, and every record forgotten, adds the job's id to one stream
(keys.JOBS_CHANGES, in the same transaction as the write: :func:`note_change`). A reader reads
the queue whole once, remembering how far the stream went; after that it reads only the records
the stream names since then. A pass over 100,000 pending jobs then costs what changed, not
100,000 reads. It reads the queue whole again when it cannot tell what changed: the stream was
trimmed past where it stopped, more changed than :data:`CHANGES_READ`, Redis came back from
its files (:meth:`PendingCache.clear`), or some write did not name itself in the stream (a
client older than the stream, during an upgrade; ``reconcile``): every write bumps one counter
too (keys.JOBS_REVISION), and the counter must have moved by as many entries as were read.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable

from minihpc.core.models import Job, JobState
from minihpc.state import keys
from minihpc.state.bulk import bulk_reading
from minihpc.state.connect import text, texts

CHANGES_KEPT = 100_000
"""About how many entries the changes stream keeps (``XADD MAXLEN ~``): a reader further behind
reads the queue whole."""

CHANGES_READ = 20_000
"""The most changes a reader takes from the stream at once; past that reading the queue whole
costs no more. Below CHANGES_KEPT, so a reader that began at an empty stream (:data:`START`) knows
nothing it has not read was trimmed: trimming starts only past CHANGES_KEPT entries."""

START = "0-0"
"""The position before any entry: what a reader has read of an empty or absent stream."""


def note_change(pipe, job_id: int) -> None:
    """Name job ``job_id`` in the changes stream; queued after the write it announces, so a
    reader that sees the entry reads the written record."""
    pipe.xadd(keys.JOBS_CHANGES, {"id": job_id}, maxlen=CHANGES_KEPT, approximate=True)


def changed_since(cursor: str, entries: list[tuple[str, dict]], limit: int, writes: int) -> tuple[str, set[int]] | None:
    """From ``entries`` (the stream from ``cursor`` on, ``cursor`` included when it is still
    there), the new position and the ids of the jobs changed since ``cursor``; None when what
    changed cannot be told -- the entry at ``cursor`` was trimmed (so were some after it), more
    than ``limit`` entries came back, or ``writes`` (how far the write counter moved meanwhile)
    is not the number of new entries -- and the queue must be read whole."""
    if len(entries) > limit:
        return None
    if cursor != START and (not entries or entries[0][0] != cursor):
        return None
    new = [fields for entry, fields in entries if entry != cursor]
    if len(new) != writes:
        return None
    return (entries[-1][0] if entries else cursor), {int(f["id"]) for f in new if str(f.get("id", "")).isdigit()}


def worth_reading(ids: list[int], heads: list[tuple], cache: dict[int, tuple[int, Job]],
                  state: JobState = JobState.PENDING) -> list[int]:
    """Of the changed jobs ``ids``, whose (state, revision) ``heads`` were read first, those
    whose records must be read whole: in ``state`` now and not cached at that revision. The
    others leave ``cache`` here (a job that left ``state``, or is gone). A pass that starts a
    thousand jobs changes a thousand records that the pending jobs' cache has only to drop,
    and the running jobs' cache has nothing to do with a thousand jobs just submitted."""
    wanted = []
    for job_id, (now, revision) in zip(ids, heads):
        if now is None or text(now) != state.value:
            cache.pop(job_id, None)
        elif revision is None or job_id not in cache or cache[job_id][0] != int(revision):
            wanted.append(job_id)
    return wanted


def refreshed(cache: dict[int, tuple[int, Job]], records: dict[int, dict[str, str]], ids: Iterable[int],
              state: JobState = JobState.PENDING) -> None:
    """Bring ``cache`` ({id: (revision, job)}) up to ``records`` (the current records of
    ``ids``; a job without one is gone): jobs in ``state`` in, every other out. A record is
    parsed again only when its revision moved."""
    for job_id in ids:
        record = records.get(job_id)
        if record is None or record.get("state") != state.value:
            cache.pop(job_id, None)
            continue
        revision = int(record.get(keys.JOB_REVISION) or -1)
        if job_id not in cache or cache[job_id][0] != revision or revision < 0:
            cache[job_id] = (revision, Job.from_record(record))


class JobChanges:
    """The changes stream, as a :class:`minihpc.state.store.Store` reads it."""

    r: object

    def latest_change(self) -> tuple[str, int]:
        """How far the changes stream goes now (:data:`START` when it is empty), and the write
        counter (keys.JOBS_REVISION) at that moment."""
        with self.r.pipeline(transaction=True) as pipe:
            pipe.xrevrange(keys.JOBS_CHANGES, count=1)
            pipe.get(keys.JOBS_REVISION)
            last, revision = pipe.execute()
        return (text(last[0][0]) if last else START), int(revision or 0)

    def job_changes(self, cursor: str, count: int) -> tuple[list[tuple[str, dict]], int]:
        """Up to ``count`` entries of the changes stream from ``cursor`` on, ``cursor`` included,
        and the write counter at that moment."""
        with self.r.pipeline(transaction=True) as pipe:
            pipe.xrange(keys.JOBS_CHANGES, min=cursor, count=count)
            pipe.get(keys.JOBS_REVISION)
            entries, revision = pipe.execute()
        return [(text(entry), texts(fields)) for entry, fields in entries], int(revision or 0)

    def refresh_jobs(self, cache: dict[int, tuple[int, Job]], ids: set[int],
                     state: JobState = JobState.PENDING) -> None:
        """Bring ``cache`` (of the jobs in ``state``) up to the records of ``ids``: each one's
        state and revision in one round trip, then, in another (JobRecords._records), the
        records :func:`worth_reading` names."""
        ids = list(ids)
        with self.r.pipeline(transaction=False) as pipe:
            for job_id in ids:
                pipe.hmget(keys.job(job_id), "state", keys.JOB_REVISION)
            heads = pipe.execute()
        wanted = worth_reading(ids, heads, cache, state)
        with bulk_reading():
            refreshed(cache, dict(self._records(wanted)), wanted, state)
        self.with_environments([cache[i][1] for i in wanted if i in cache])  # stored apart (state.environments)


class PendingCache:
    """Pending job records by revision, kept by a long-lived reader from pass to pass or
    request to request (see the module); threads may share it."""

    state = JobState.PENDING

    def __init__(self):
        self.records: dict[int, tuple[int, Job]] = {}
        self.cursor: str | None = None  # how far the stream was read; None: read the queue whole
        self.revision = 0  # the write counter when the stream was read that far
        self._lock = threading.Lock()

    def read(self, store) -> list[Job]:
        """Every pending job, as the store holds it now."""
        with self._lock:
            if self.cursor is not None:
                entries, revision = store.job_changes(self.cursor, CHANGES_READ + 1)
                changed = changed_since(self.cursor, entries, CHANGES_READ, revision - self.revision)
                if changed is not None:
                    (self.cursor, ids), self.revision = changed, revision
                    if ids:
                        store.refresh_jobs(self.records, ids, self.state)
                    return [job for _, job in self.records.values()]
            # Where the stream stands first: a write meanwhile comes after it, and is read next time.
            self.cursor, self.revision = store.latest_change()
            return self.whole(store)

    def whole(self, store) -> list[Job]:
        """Every job in :attr:`state`, read from the set of them (by revision: only the
        records that changed whole)."""
        return store.pending_jobs(self.records)

    def clear(self) -> None:
        """Forget every record (Redis may come back from its files with other contents)."""
        with self._lock:
            self.records.clear()
            self.cursor = None


class RunningCache(PendingCache):
    """:class:`PendingCache` for the running jobs: the master reads them twice a pass (to end
    those that must end, then to plan), a thousand records on a thousand busy nodes."""

    state = JobState.RUNNING

    def whole(self, store) -> list[Job]:
        jobs = store.running_jobs()
        self.records = {job.id: (-1, job) for job in jobs}  # no revision read: parsed again when changed
        return jobs
