"""Job and node records, their states, and the legal transitions between states."""

from __future__ import annotations

import functools
import json
import sys
from dataclasses import MISSING, asdict, dataclass, field, fields
from enum import Enum


class JobState(str, Enum):
    """A job's life, with Slurm's names and codes.

    PENDING   -> RUNNING     the scheduler reserved all its nodes in one step and dispatched it
    PENDING   -> CANCELLED   ``minihpc cancel``, or a dependency that can never be satisfied
    RUNNING   -> COMPLETED   every rank on every node exited 0
    RUNNING   -> FAILED      some rank exited non-zero (the first such exit code is kept)
    RUNNING   -> CANCELLED   ``minihpc cancel``
    RUNNING   -> TIMEOUT     it ran past its time limit
    RUNNING   -> NODE_FAIL   one of its nodes stopped heartbeating or lost its allocation
    NODE_FAIL -> PENDING     requeued after a node failure (it keeps its id and counts attempts)

    By a user's request (``minihpc scontrol``; what may change when is decided by
    :mod:`minihpc.core.job_control`, not by :func:`can_transition`):

    RUNNING   -> PENDING     ``scontrol requeue``: torn down, a new attempt later (not counted
                             as a node-failure requeue)
    ended     -> PENDING     ``scontrol requeue`` of a COMPLETED/FAILED/CANCELLED/TIMEOUT/NODE_FAIL job
    PENDING, held            ``scontrol hold``: a sub-state (:attr:`Job.held`) the scheduler skips
                             until ``scontrol release``
    """

    PENDING = "PENDING"
    RUNNING = "RUNNING"
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"
    TIMEOUT = "TIMEOUT"
    NODE_FAIL = "NODE_FAIL"

    @property
    def code(self) -> str:
        return _STATE_CODES[self]

    @property
    def terminal(self) -> bool:
        return self not in (JobState.PENDING, JobState.RUNNING)


_STATE_CODES = {JobState.PENDING: "PD", JobState.RUNNING: "R", JobState.COMPLETED: "CD", JobState.FAILED: "F",
                JobState.CANCELLED: "CA", JobState.TIMEOUT: "TO", JobState.NODE_FAIL: "NF"}

_TRANSITIONS = {
    JobState.PENDING: {JobState.RUNNING, JobState.CANCELLED},
    JobState.RUNNING: {JobState.COMPLETED, JobState.FAILED, JobState.CANCELLED, JobState.TIMEOUT, JobState.NODE_FAIL},
    JobState.NODE_FAIL: {JobState.PENDING},
}


def can_transition(current: JobState, new: JobState) -> bool:
    """Whether a job in ``current`` may move to ``new`` (see JobState's docstring)."""
    return new in _TRANSITIONS.get(current, ())


@functools.lru_cache(maxsize=512)
def _shared_dict(text: str) -> dict:
    """A record's JSON object, parsed once for every record that holds the same text: an
    array's 1,000 tasks carry one --export environment (a kilobyte or more), and the master keeps
    every pending job in memory (issue 38). Shared, so never changed in place."""
    return json.loads(text)


@functools.lru_cache(maxsize=1024)
def _parsed_list(text: str) -> tuple:
    """A record's JSON list, parsed once for every record that holds the same text (an array's
    tasks share their args); each record gets its own copy."""
    return tuple(json.loads(text))


class Priority(str, Enum):
    HIGH = "high"
    NORMAL = "normal"
    LOW = "low"

    @property
    def rank(self) -> int:
        """0 is served first."""
        return _PRIORITY_RANKS[self._value_]  # by value: a member's own hash is Python code


_PRIORITY_RANKS = {Priority.HIGH.value: 0, Priority.NORMAL.value: 1, Priority.LOW.value: 2}


class NodeState(str, Enum):
    IDLE = "idle"
    ALLOC = "alloc"
    DOWN = "down"
    DRAIN = "drain"


@dataclass
class Job:
    """One job record, stored as a Redis hash (lists as JSON, None as an empty string).

    Sub-states that are not states of their own are named here as properties: a PENDING job
    may be :attr:`held` (``scontrol hold``: the scheduler skips it), a RUNNING job
    may be :attr:`failing` (one node's ranks failed; the master holds the verdict until it
    knows whether a node died), and a NODE_FAIL job is final only once the master has decided
    not to requeue it (``Store.job_settled``; see :meth:`ended_for_good`)."""

    id: int
    name: str
    user: str
    script: str  # the spooled copy the ranks run
    script_source: str  # the path the user submitted
    script_sha256: str
    args: list[str] = field(default_factory=list)
    nodes_requested: int = 1  # -N: nodes it needs (a range's minimum)
    max_nodes: int = 0  # -N MIN-MAX: most nodes it may start on (Slurm's range), 0 : exactly nodes_requested
    tasks_per_node: int = 1
    priority: Priority = Priority.NORMAL
    time_limit: float | None = None  # seconds; None is unlimited
    progress_timeout: float | None = None  # watchdog: seconds without a progress report
    dependency: list[int | str] = field(default_factory=list)  # core.dependency's stored form (int: afterok)
    workdir: str = ""
    submit_dir: str = ""  # where it was submitted from (SLURM_SUBMIT_DIR); "" in records before it
    launch: str = "torchrun"  # or "batch": how the script runs (core.batch)
    cpus_per_task: int = 1  # -c: CPUs each task needs (SLURM_CPUS_PER_TASK)
    output: str = ""  # -o: the output file's pattern (core.output_names), "" : the node logs only
    error: str = ""  # -e: the error file's pattern, "" : with the output
    environment: dict[str, str] = field(default_factory=dict)  # --export: variables set in the job
    environment_id: str = ""  # its digest where it is stored apart (state.environments), else ""
    warn_signal: str = ""  # --signal: "[B:]SIG@SECS" (core.signals), "" : none
    begin_at: float | None = None  # --begin: not started before this time
    requeue: bool = True  # --requeue/--no-requeue: whether a node failure may send it back to the queue
    elastic: bool = False  # --elastic (with -N MIN-MAX): it shrinks when a node leaves and grows back (core.elastic)
    cold: bool = False  # --cold: a new interpreter for its torchrun, not a fork of the warm launcher
    mem_bytes: int = 0  # --mem: memory each node must have, 0 : any
    gpus: int = 0  # --gres=gpu:N: GPUs each node must have
    gpus_per_task: int = 0  # --gpus-per-task: each task sees only its own N of them (core.gpus)
    partition: str = ""  # -p: the node group it runs in, "" : the default partition
    nodelist: list[str] = field(default_factory=list)  # -w: nodes it must run on (with others, up to -N)
    exclude: list[str] = field(default_factory=list)  # -x: nodes it must never run on
    constraint: str = ""  # -C/--constraint: the node features it needs (core.features), "" : any node
    stdin: bool = False  # minihpc run: the batch script's stdin is the job's input stream (its caller's stdin)
    array_job_id: int | None = None  # --array: the array's job id (its last task's, as Slurm), None : not in an array
    array_task_id: int | None = None  # --array: this task's index
    array_spec: str = ""  # --array: the indexes as given, without the %limit (for SLURM_ARRAY_TASK_COUNT...)
    array_limit: int = 0  # --array=...%N: at most N of the array's tasks run at once, 0 : no limit
    state: JobState = JobState.PENDING
    reason: str = "None"
    held_by: str | None = None  # who put the job on hold (scontrol hold), None when not held
    attempts: int = 0
    requeues: int = 0  # times a node failure sent it back to the queue
    resizes: int = 0  # times an elastic job went on with other nodes without the queue: each is one of ``attempts``
    resized_at: float | None = None  # when it last did (None: not since it started)
    exit_code: int | None = None
    signal: str | None = None
    failed_node: str | None = None
    first_failure: str | None = None  # the node whose ranks failed first in this attempt
    failing_since: float | None = None  # when that failure was reported (the hold starts)
    nodes: list[str] = field(default_factory=list)
    submitted_at: float = 0.0
    started_at: float | None = None
    ended_at: float | None = None

    _LISTS = ("args", "dependency", "nodes", "nodelist", "exclude")
    _DICTS = ("environment",)
    _INTS = ("id", "nodes_requested", "max_nodes", "tasks_per_node", "attempts", "requeues", "cpus_per_task",
             "resizes", "mem_bytes", "gpus", "gpus_per_task", "array_limit")
    _OPT_INTS = ("exit_code", "array_job_id", "array_task_id")
    _BOOLS = ("requeue", "cold", "stdin", "elastic")
    _OPT_FLOATS = ("time_limit", "progress_timeout", "started_at", "ended_at", "failing_since", "begin_at",
                    "resized_at")
    _OPT_STRS = ("signal", "failed_node", "first_failure", "held_by")
    _ALWAYS_STORED = ("id", "state", "attempts", "reason")
    """Fields a compact record keeps even at their default: what is read alone (HGET)."""
    _STORED_APART = ("environment",)
    """Kept in a record of its own once for every job that carries the same one (the record holds
    ``environment_id``, its digest: state.environments); the record's own field is then empty."""
    _SHARED_STRS = ("name", "user", "script", "script_source", "script_sha256", "workdir", "partition", "reason",
                    "submit_dir", "launch", "constraint", "array_spec")
    """Text that an array's tasks (and a user's jobs) repeat: one copy in memory (sys.intern)."""

    @property
    def array_name(self) -> str:
        """The id users see: ``123_4`` for task 4 of array 123, else the job id."""
        return str(self.id) if self.array_job_id is None else f"{self.array_job_id}_{self.array_task_id}"

    @property
    def node_range(self) -> str:
        """-N as given: ``3``, or ``2-4`` for a range."""
        top = max(self.max_nodes, self.nodes_requested)
        return str(top) if top == self.nodes_requested else f"{self.nodes_requested}-{top}"

    @property
    def queue_attempts(self) -> int:
        """The attempts users see: times the job started from the queue. ``attempts`` counts
        every launch of its gang, an elastic job's resizes too (each one is launched anew, as
        a new attempt is, so a node's ranks of the gang before see it is over and end)."""
        return self.attempts - self.resizes

    @property
    def launched_at(self) -> float | None:
        """When its gang's current launch was queued: its start, or an elastic job's last resize."""
        return self.resized_at if self.resized_at is not None else self.started_at

    @functools.cached_property
    def queue_key(self) -> tuple:
        """Its place in the queue before users take turns (core.scheduler.queue_order_key),
        worked out once a record: a pass orders every waiting job. A key field is never changed
        in place (a change is a new Job: dataclasses.replace, or the record read again)."""
        return (self.priority.rank, 0 if self.requeues else 1, self.submitted_at,
                self.id if self.array_job_id is None else self.array_job_id, self.array_task_id or 0)

    @property
    def held(self) -> bool:
        """PENDING and on hold (``scontrol hold``): never started until released."""
        return self.state is JobState.PENDING and self.held_by is not None

    @property
    def failing(self) -> bool:
        """RUNNING, with a failure held: a node's ranks failed and the verdict waits (see
        outcome.held_failure) to tell the job's own fault from a dead peer's."""
        return self.state is JobState.RUNNING and self.first_failure is not None

    def ended_for_good(self, requeue_undecided: bool) -> bool:
        """Ended and staying so: a NODE_FAIL job may still go back to the queue while the
        master has not decided (``requeue_undecided``)."""
        return self.state.terminal and not requeue_undecided

    def begin_attempt(self, nodes: list[str], now: float) -> None:
        """PENDING -> RUNNING on ``nodes``: a new attempt, with the last one's outcome cleared."""
        self.state = JobState.RUNNING
        self.reason = "None"
        self.nodes = list(nodes)
        self.attempts += 1
        self.held_by = None
        self.started_at = now
        self.ended_at = None
        self.exit_code = None
        self.signal = None
        self.failed_node = None
        self.first_failure = None
        self.failing_since = None
        self.resized_at = None

    def resize(self, nodes: list[str], now: float) -> None:
        """An elastic job, RUNNING, goes on with ``nodes``: a launch of its own, within the same
        attempt as users count them (:attr:`queue_attempts`); its time limit runs on."""
        self.nodes = list(nodes)
        self.attempts += 1
        self.resizes += 1
        self.resized_at = now
        self.first_failure = None
        self.failing_since = None

    def to_record(self, compact: bool = False) -> dict[str, str]:
        """The job as stored, a text a field. ``compact``: without the fields that hold their
        default (a new record: :meth:`from_record` reads a missing field as its default, and
        half of a job's 50 fields are; an ended job kept in Redis is the smaller, issue 38)."""
        apart = self._STORED_APART if self.environment_id else ()
        out = {f.name: "" if f.name in apart else _field_text(f.name, getattr(self, f.name)) for f in fields(self)}
        if compact:
            return {k: v for k, v in out.items()
                    if k in self._ALWAYS_STORED or (k not in apart and v != _DEFAULT_TEXTS.get(k))}
        return out

    @classmethod
    def from_record(cls, data: dict[str, str]) -> Job:
        """The inverse of :meth:`to_record` (keys and values already decoded); a field the
        record leaves out holds its default. What ``Job(**fields)`` would build, without the
        call of a 60-argument ``__init__``: squeue reads 100,000 records (issue 38)."""
        missing = _JOB_REQUIRED.difference(data)
        if missing:
            raise TypeError(f"a job record without {', '.join(sorted(missing))}")
        job = cls.__new__(cls)
        job.__dict__.update(_JOB_PLAIN_DEFAULTS)
        job.__dict__.update((name, factory()) for name, factory in _JOB_FACTORIES)
        job.__dict__.update((name, _JOB_DECODERS[name](text)) for name, text in data.items() if name in _JOB_DECODERS)
        return job

    def to_json(self) -> dict:
        """The public JSON view (``minihpc show --json``)."""
        out = asdict(self)
        out["state"] = self.state.value
        out["state_code"] = self.state.code
        out["priority"] = self.priority.value
        out["held"] = self.held
        out["node_range"] = self.node_range
        out["attempts"] = self.queue_attempts  # a resize is not an attempt (Job.queue_attempts)
        out["environment"] = sorted(self.environment)  # names only: values may be secrets
        del out["environment_id"]  # a digest of those values: nobody's to see
        return out


def _decoder(name: str):
    """How :meth:`Job.from_record` reads field ``name``'s stored text."""
    if name in Job._LISTS:
        return lambda v: list(_parsed_list(v)) if v and v != "[]" else []
    if name in Job._DICTS:
        return lambda v: _shared_dict(v) if v else {}
    if name in Job._BOOLS:
        return lambda v: v != "0"
    if name in Job._INTS or name == "submitted_at":
        return int if name in Job._INTS else float
    if name in Job._OPT_INTS:
        return lambda v: int(v) if v else None
    if name in Job._OPT_FLOATS:
        return lambda v: float(v) if v else None
    if name in ("state", "priority"):
        kind = JobState if name == "state" else Priority
        by_value = {member.value: member for member in kind}
        return lambda v: by_value.get(v) or kind(v)
    if name in Job._OPT_STRS:
        return lambda v: v or None
    return sys.intern if name in Job._SHARED_STRS else str


def _field_text(name: str, value) -> str:
    """How a Job field's ``value`` is stored (the inverse of :func:`_decoder`)."""
    if name in Job._LISTS or name in Job._DICTS:
        return json.dumps(value)
    if name in Job._BOOLS:
        return "1" if value else "0"
    if isinstance(value, Enum):
        return value.value
    return "" if value is None else str(value)


_DEFAULT_TEXTS = {
    f.name: _field_text(f.name, f.default if f.default is not MISSING else f.default_factory())
    for f in fields(Job) if f.default is not MISSING or f.default_factory is not MISSING
}
"""Each Job field's default as stored: what a compact record leaves out."""

_JOB_DECODERS = {f.name: _decoder(f.name) for f in fields(Job)}
"""Each Job field's decoder, worked out once: a pass may read thousands of records."""

_JOB_REQUIRED = frozenset(f.name for f in fields(Job) if f.default is MISSING and f.default_factory is MISSING)
_JOB_PLAIN_DEFAULTS = {f.name: f.default for f in fields(Job) if f.default is not MISSING}
_JOB_FACTORIES = tuple((f.name, f.default_factory) for f in fields(Job) if f.default_factory is not MISSING)
"""What Job.from_record needs: the fields a record must hold, the others' defaults (factories called a job)."""


@dataclass(frozen=True)
class NodeStatus:
    """What the scheduler and ``minihpc nodes`` know of one node at one moment."""

    name: str
    addr: str
    alive: bool
    job: int | None = None
    drain_reason: str | None = None
    cpus: int = 0
    memory_bytes: int = 0
    last_heartbeat: float | None = None
    registered_at: float | None = None  # when its agent last registered (started)
    metrics: str | None = None  # host:port of the node's Prometheus exporter, if it runs one
    gpus: int = 0  # GPUs the node has (--gres=gpu:N)
    gpu_devices: list[int] = field(default_factory=list)  # their ordinals on the node (core.gpus)
    cpu_model: str = ""  # as /proc/cpuinfo names it (machine.hardware); "" before a registration said
    cpu_limit: float | None = None  # its cgroup's CPU quota in CPUs; None: unlimited
    gpu_model: str = ""  # its GPUs' model(s), NVML's names; "" without GPUs
    gflops: float | None = None  # measured compute speed (core.measurements); None: not measured
    allreduce_gbps: float | None = None  # all-reduce bus bandwidth of its last benchmark job
    simulated: bool = False  # a simulated node (core.simulation): it runs only simulated jobs

    @property
    def state(self) -> NodeState:
        if not self.alive:
            return NodeState.DOWN
        if self.job is not None:
            return NodeState.ALLOC
        if self.drain_reason is not None:
            return NodeState.DRAIN
        return NodeState.IDLE

    @property
    def schedulable(self) -> bool:
        """Up and not drained: it counts toward what jobs can ever get."""
        return self.alive and self.drain_reason is None

    def holds(self, job_id: int) -> bool:
        """Up, and still allocated to ``job_id`` (its agent did not restart and free it)."""
        return self.alive and self.job == job_id


def node_state_changes(
    before: dict[str, NodeState], after: dict[str, NodeState]
) -> list[tuple[str, NodeState | None, NodeState | None]]:
    """(node, old, new) for every node whose state differs; None for a node not (yet) known."""
    names = sorted(set(before) | set(after))
    return [(n, before.get(n), after.get(n)) for n in names if before.get(n) != after.get(n)]
