"""``scontrol`` for every face: host lists, one job's record, hold / release / requeue /
update -- each change allowed to the job's owner or an admin (:func:`access.may_change`), and
made by one transaction of :mod:`minihpc.state.lifecycle`."""

from __future__ import annotations

import os
from collections.abc import Mapping

from minihpc.client.access import Principal, may_change
from minihpc.core.errors import UsageError
from minihpc.core import job_control
from minihpc.core.job_control import Update
from minihpc.core.models import Job
from minihpc.core.parsing import compress_hostlist, expand_hostlist
from minihpc.state.store import Store

NODELIST_VARIABLE = "SLURM_JOB_NODELIST"
"""Where a job's ranks find their nodes (set by the node agent, see core.launch_spec): what
``scontrol show hostnames`` expands when given no list."""


def hostnames(text: str | None, environ: Mapping[str, str] = os.environ) -> list[str]:
    """The names ``text`` (else $SLURM_JOB_NODELIST) lists; needs no cluster (a job's ranks
    have no Redis access). UsageError for a bad or empty list."""
    if text is None:
        text = environ.get(NODELIST_VARIABLE)
        if not text:
            raise UsageError(f"no host list given and ${NODELIST_VARIABLE} is not set")
    names = expand_hostlist(text)
    if not names:
        raise UsageError(f"host list {text!r} names no host")
    return names


def hostlist(texts: list[str | None]) -> str:
    """The names in ``texts`` (host lists themselves; None: $SLURM_JOB_NODELIST) as one compact list."""
    return compress_hostlist([n for t in texts for n in hostnames(t)])


def parse_job_list(texts: list[str]) -> list[int]:
    """``5 6,7`` -> [5, 6, 7] (scontrol takes job lists space- or comma-separated)."""
    ids = []
    for word in (w.strip() for t in texts for w in t.split(",")):
        if not word:
            continue  # "5," as scontrol reads it: no job after the comma
        if not word.isdigit() or int(word) < 1:
            raise UsageError(f"invalid job id {word!r}: expected a positive number")
        ids.append(int(word))
    if not ids:
        raise UsageError("no job id given")
    return ids


def job(store: Store, job_id: int) -> Job:
    return store.get_job(job_id)



def parse_update(words: list[str]) -> Update:
    """``scontrol update``'s words (``JobId=ID Key=Value ...``) as an Update; UsageError naming
    a bad one. Needs no cluster, so a typo is refused before Redis is asked."""
    return job_control.parse_update(words)


def hold(store: Store, job_id: int, who: Principal) -> Job:
    """Hold a pending job of ``who``'s: it is not started until released."""
    may_change(who, store.get_job(job_id))
    return store.hold(job_id, who.user)


def release(store: Store, job_id: int, who: Principal) -> Job:
    may_change(who, store.get_job(job_id))
    return store.release(job_id)


def requeue(store: Store, job_id: int, who: Principal, hold: bool = False) -> Job:
    """A running or ended job back to the queue (held, for ``requeuehold``)."""
    may_change(who, store.get_job(job_id))
    return store.requeue_job(job_id, who.user if hold else None)


def update(store: Store, request: Update, who: Principal) -> Job:
    """``JobId=ID Key=Value ...`` (see :func:`parse_update`): every change or none (one
    transaction)."""
    may_change(who, store.get_job(request.job_id))
    capacity = len(store.node_statuses()) if request.nodes is not None else 0
    return store.update_job(request.job_id, request, who.admin, capacity)
