"""Job dependencies, as ``sbatch --dependency`` spells them: parse, store, show, decide.

Supported (``man sbatch``, --dependency; terms joined by ``,`` must all hold):

after:ID[:ID...]       "After the specified jobs start or are cancelled ... this job can begin
                       execution" -- each listed job has left PENDING (running, or ended in any
                       state; as slurmctld, which clears the term once the job is not pending).
afterany:ID[:ID...]    "after the specified jobs have terminated" -- in any state.
afterok:ID[:ID...]     "after the specified jobs have successfully executed (ran to completion
                       with an exit code of zero)" -- COMPLETED; any other end can never do.
afternotok:ID[:ID...]  "after the specified jobs have terminated in some failed state (non-zero
                       exit code, node failure, timed out, etc)" -- any end but COMPLETED, so
                       CANCELLED counts too: slurmctld (``_test_job_dependency_common``) fulfils
                       afternotok for every finished job that is not COMPLETE, and fails it
                       only for COMPLETE. COMPLETED can never do.
singleton              "after any previously launched jobs sharing the same job name and user
                       have terminated" -- as slurmctld's ``_find_singleton_job``: no other job
                       of that name and user is RUNNING, and none submitted earlier (a lower
                       id) is still PENDING. Never unsatisfiable.

On a job array (``sbatch --array``): ``afterok:A`` names the whole array A -- every task, its
state seen as :func:`minihpc.core.arrays.array_state` gives it (afterok: all completed;
afternotok: all ended, one not completed; after: none pending) -- and ``afterok:A_3`` the one
task of index 3, as in Slurm.

Refused with one line: ``?`` (any of), ``after``'s ``+time`` delay, and the kinds minihpc has no
use for (aftercorr, afterburstbuffer, expand). A job that names a job with no record can never
run (``DependencyNeverSatisfied``; the master cancels it, as Slurm with kill_invalid_depend).

Stored form (``Job.dependency``, a JSON list in the job's hash): one string per term and job,
``"afternotok:12"``, ``"afterok:12_3"`` (an array task) or ``"singleton"``. Records written before the other kinds existed hold
plain ints, which mean ``afterok``; both forms are read everywhere, so no record is rewritten.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from dataclasses import dataclass

from minihpc.core.errors import UsageError
from minihpc.core.models import Job, JobState

AFTER, AFTERANY, AFTEROK, AFTERNOTOK, SINGLETON = "after", "afterany", "afterok", "afternotok", "singleton"
KINDS = (AFTER, AFTERANY, AFTEROK, AFTERNOTOK)
"""The kinds that name jobs, as sbatch spells them."""

UNSUPPORTED = ("aftercorr", "afterburstbuffer", "expand")
"""Kinds sbatch knows that minihpc refuses (task-by-task array dependencies, burst buffers, job
expansion)."""

WAITING = "Dependency"
NEVER = "DependencyNeverSatisfied"
"""The reasons :func:`status` gives, as Slurm names them."""

_FORMS = "after, afterany, afterok or afternotok:ID[:ID...] (an ID may be an array task, ID_INDEX), or singleton"


@dataclass(frozen=True)
class Term:
    """One condition: ``kind`` on job ``job`` (None for singleton) -- on the whole array when
    ``job`` is an array's id -- or on its task of index ``task``."""

    kind: str
    job: int | None = None
    task: int | None = None

    @property
    def key(self) -> int | str | None:
        """What the term names, as :func:`status`'s ``states`` holds it: the job id, or
        ``"A_i"`` for an array task."""
        return self.job if self.task is None else f"{self.job}_{self.task}"

    def stored(self) -> str:
        return self.kind if self.job is None else f"{self.kind}:{self.key}"


def parse(text: str) -> list[str]:
    """``--dependency`` text -> the stored form; a UsageError naming the problem otherwise.

    >>> parse("afterok:3:4,afternotok:5,singleton")
    ['afterok:3', 'afterok:4', 'afternotok:5', 'singleton']
    """
    if "?" in text:
        raise UsageError(f"invalid dependency {text!r}: '?' (any of) is not supported; join terms with ',' (all of)")
    out: list[str] = []
    for term in filter(None, (t.strip() for t in text.split(","))):
        out.extend(t.stored() for t in _parse_term(term, text))
    if not out:
        raise UsageError(f"invalid dependency {text!r}: expected {_FORMS}")
    return list(dict.fromkeys(out))


def _parse_term(term: str, text: str) -> list[Term]:
    kind, _, rest = term.partition(":")
    if kind == SINGLETON:
        if rest:
            raise UsageError(f"invalid dependency {text!r}: singleton takes no job ids")
        return [Term(SINGLETON)]
    if kind in UNSUPPORTED:
        raise UsageError(f"invalid dependency {text!r}: {kind} is not supported; expected {_FORMS}")
    if kind not in KINDS:
        raise UsageError(f"invalid dependency {text!r}: unknown type {kind!r}; expected {_FORMS}")
    parts = rest.split(":") if rest else []
    if kind == AFTER and any("+" in p for p in parts):
        raise UsageError(f"invalid dependency {text!r}: after's +time delay is not supported")
    if not parts or not all(_ID.fullmatch(p) and int(p.partition("_")[0]) > 0 for p in parts):
        raise UsageError(f"invalid dependency {text!r}: {kind} needs job ids, {kind}:ID[:ID...] "
                         "(an array task as ID_INDEX)")
    return [_term(kind, p) for p in parts]


_ID = re.compile(r"\d+(?:_\d+)?")


def _term(kind: str, ref: str) -> Term:
    job, _, task = ref.partition("_")
    return Term(kind, int(job), int(task) if task else None)


def terms(stored: Iterable[int | str]) -> list[Term]:
    """The stored form (new strings, or an old record's ints meaning afterok) -> terms."""
    stored = tuple(stored)
    return list(_terms(stored)) if stored else []


@functools.lru_cache(maxsize=4096)
def _terms(stored: tuple[int | str, ...]) -> tuple[Term, ...]:
    """:func:`terms`, parsed once per spelling: a pass reads every pending job's dependency,
    and an array's tasks all have the same one."""
    out = []
    for item in stored:
        if isinstance(item, int):
            out.append(Term(AFTEROK, item))
            continue
        kind, _, ref = str(item).partition(":")
        out.append(_term(kind, ref) if ref else Term(kind))
    return tuple(out)


def job_ids(stored: Iterable[int | str]) -> list[int]:
    """The jobs a dependency names, in order (singleton names none; an array task, its array)."""
    return [t.job for t in terms(stored) if t.job is not None]


def refs(stored: Iterable[int | str]) -> list[int | str]:
    """What :func:`status` needs the states of: each term's :attr:`Term.key`, in order."""
    return [t.key for t in terms(stored) if t.job is not None]


def has_singleton(stored: Iterable[int | str]) -> bool:
    """Whether the dependency has a singleton term (which compares the job with others)."""
    return any(t.kind == SINGLETON for t in terms(stored))


def to_text(stored: Iterable[int | str]) -> str:
    """sbatch's spelling, ids of one kind in a row joined by ``:`` (``afterok:3:4,singleton``);
    ``(null)`` for none, as squeue and scontrol show it."""
    groups: list[tuple[str, list[str]]] = []
    for term in terms(stored):
        if groups and term.job is not None and groups[-1][0] == term.kind:
            groups[-1][1].append(str(term.key))
        else:
            groups.append((term.kind, [] if term.job is None else [str(term.key)]))
    return ",".join(":".join([kind, *ids]) for kind, ids in groups) or "(null)"


def term_verdict(kind: str, state: JobState | None) -> str | None:
    """None when ``kind`` on a job in ``state`` holds; WAITING while it may still; NEVER."""
    if state is None:
        return NEVER  # no record: the id never existed (submit checks) or was forgotten
    if kind == AFTER:
        return WAITING if state is JobState.PENDING else None
    if not state.terminal:
        return WAITING
    if kind == AFTEROK and state is not JobState.COMPLETED:
        return NEVER
    if kind == AFTERNOTOK and state is JobState.COMPLETED:
        return NEVER
    return None


def singleton_blocker(job: Job, others: Iterable[Job]) -> Job | None:
    """The first job keeping a singleton ``job`` waiting: same name and user, and RUNNING, or
    PENDING and submitted earlier (a lower id). ``others`` may hold any jobs; ``job`` itself
    and the rest are skipped."""
    for other in others:
        if other.id == job.id or other.user != job.user or other.name != job.name:
            continue
        if other.state is JobState.RUNNING or (other.state is JobState.PENDING and other.id < job.id):
            return other
    return None


def status(job: Job, states: dict[int | str, JobState | None], others: Iterable[Job] = ()) -> str | None:
    """None when ``job`` may run; WAITING while some term may still hold; NEVER when one never
    can. ``states`` holds the state of everything :func:`refs` names (None: no record; an
    array's id, the state of the whole array, see core.arrays.array_state);
    ``others`` the jobs a singleton term must look at (see :func:`singleton_blocker`)."""
    waiting = False
    for term in terms(job.dependency):
        if term.kind == SINGLETON:
            waiting = waiting or singleton_blocker(job, others) is not None
            continue
        verdict = term_verdict(term.kind, states.get(term.key))
        if verdict == NEVER:
            return NEVER
        waiting = waiting or verdict == WAITING
    return WAITING if waiting else None
