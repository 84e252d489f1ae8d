"""Submitted environments, each kept once however many jobs carry it (issue 38).

A job's ``--export`` environment is the submitter's by default (Slurm's ALL): often a kilobyte
or more, and the same for every task of an array and every job one shell submits. Each distinct
one is stored once under its digest (keys.ENVIRONMENT, core.environment.stored) with a count of
the job records that name it; a record keeps the digest only (``Job.environment_id``). The
count falls as records are forgotten, and the last one takes the environment with it.

Its text never changes under a digest, so a process keeps what it read (:data:`KEPT`).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable

from minihpc.core.environment import stored
from minihpc.core.models import Job
from minihpc.state import keys
from minihpc.state.atomic import atomic
from minihpc.state.connect import text

KEPT = 256
"""Environments a process keeps once read (the master dispatching a user's arrays)."""

_read: dict[str, dict[str, str]] = {}


def keep(pipe, jobs: Iterable[Job]) -> None:
    """In the transaction that records new ``jobs``: each one's environment stored apart (its
    digest set on the job) and counted once for every job that names it."""
    counts: Counter[str] = Counter()
    bodies: dict[str, str] = {}
    for job in jobs:
        digest, body = stored(job.environment)
        job.environment_id = digest
        if digest:
            counts[digest] += 1
            bodies[digest] = body
    for digest, count in counts.items():
        # Written whole each time: a record forgotten meanwhile may have taken it.
        pipe.hset(keys.environment(digest), "data", bodies[digest])
        pipe.hincrby(keys.environment(digest), "refs", count)


def let_go(pipe, digest: str) -> None:
    """In the transaction that forgets a record naming ``digest``: one job fewer names it
    (:meth:`Environments.drop_unused` then removes it if that was the last)."""
    if digest:
        pipe.hincrby(keys.environment(digest), "refs", -1)


class Environments:
    r: object

    def drop_unused(self, digest: str) -> None:
        """Remove environment ``digest`` if no record names it any more. A submit naming it
        meanwhile counts it again first, and then it stays."""
        if not digest:
            return
        key = keys.environment(digest)

        def body(pipe):
            refs = text(pipe.hget(key, "refs"))
            if refs is not None and int(refs) <= 0:
                pipe.multi()
                pipe.delete(key)

        atomic(self.r, [key], body)

    def environments(self, digests: Iterable[str]) -> dict[str, dict[str, str]]:
        """The environments named ``digests``, in one round trip for those not read before; one
        that is gone reads as none."""
        wanted = {d for d in digests if d}
        missing = [d for d in wanted if d not in _read]
        if missing:
            with self.r.pipeline(transaction=False) as pipe:
                for digest in missing:
                    pipe.hget(keys.environment(digest), "data")
                bodies = pipe.execute()
            if len(_read) + len(missing) > KEPT:
                _read.clear()
            for digest, body in zip(missing, bodies):
                if body is not None:
                    _read[digest] = json.loads(text(body))
        return {d: _read.get(d, {}) for d in wanted}

    def with_environments(self, jobs: list[Job]) -> list[Job]:
        """``jobs``, each one's environment read in where its record names it apart."""
        apart = [job for job in jobs if job.environment_id and not job.environment]
        if apart:
            found = self.environments(job.environment_id for job in apart)
            for job in apart:
                job.environment = found[job.environment_id]
        return jobs
